"""import previews: uploaded DDI imports waiting for their confirmation

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-23 23:00:00

The /ddis/import page previews a file before it is applied (docs/import.md). The file waits
here, in the database every worker shares, until the account confirms it (then it is deleted)
or it is a day old (then it is purged).
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "import_previews",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("filename", sa.String(length=200), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_import_previews_created_at", "import_previews", ["created_at"])


def downgrade():
    op.drop_index("ix_import_previews_created_at", table_name="import_previews")
    op.drop_table("import_previews")
