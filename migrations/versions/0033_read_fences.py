"""read fences: each account's count of writes, for reading its own writes from replicas

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-04 03:20:00

With DATABASE_REPLICA_URLS set, each write transaction of a request adds one to its account's
count, and an account's reads go to a replica only once it shows the primary's count: it has
replayed the account's last write (webapp/replicas.py, docs/replicas.md). The table stays empty
without replicas.
"""

import sqlalchemy as sa
from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "read_fences",
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("writes", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name="fk_read_fences_account_id_accounts",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("account_id", name="pk_read_fences"),
    )


def downgrade():
    op.drop_table("read_fences")
