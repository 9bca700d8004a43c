"""list page indexes: one company's DDIs and phone users in every order the list page offers

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 10:30:00

Keyset paging reads the first, last and every other page of one company's list as a single
range of an index on (company, order fields); (company, dialcode, number) and the phone users'
unique (company, username) already serve the default orders.
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("ddis", schema=None) as batch_op:
        batch_op.create_index(
            "ix_ddis_company_number_dialcode", ["company", "number", "dialcode"], unique=False
        )
        batch_op.create_index(
            "ix_ddis_company_virt_exten",
            ["company", "virt_exten", "dialcode", "number"],
            unique=False,
        )
    with op.batch_alter_table("phone_users", schema=None) as batch_op:
        batch_op.create_index(
            "ix_phone_users_company_virt_exten", ["company", "virt_exten", "username"], unique=False
        )


def downgrade():
    with op.batch_alter_table("phone_users", schema=None) as batch_op:
        batch_op.drop_index("ix_phone_users_company_virt_exten")
    with op.batch_alter_table("ddis", schema=None) as batch_op:
        batch_op.drop_index("ix_ddis_company_virt_exten")
        batch_op.drop_index("ix_ddis_company_number_dialcode")
