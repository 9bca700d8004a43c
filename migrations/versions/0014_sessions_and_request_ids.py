"""server-side sign-in sessions, and the request id of each audit entry

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-24 08:20:00

A signed session cookie alone cannot be ended: a copy saved before sign-out kept working until
its 31 days ran out. Each sign-in now gets a row in `account_sessions`, named in the cookie by
a random key of which only the SHA-256 is stored; signing out (or the idle and absolute
limits) ends the row, and a cookie whose row has ended is refused (SECURITY.md, Sessions).
`audit_log.request_id` ties an audit entry to the request's log lines (X-Request-ID).
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "account_sessions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(), nullable=False),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name="fk_account_sessions_account_id_accounts",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_account_sessions"),
    )
    op.create_index("ix_account_sessions_account_id", "account_sessions", ["account_id"])
    with op.batch_alter_table("audit_log") as batch:
        batch.add_column(sa.Column("request_id", sa.String(length=64), nullable=True))


def downgrade():
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_column("request_id")
    op.drop_index("ix_account_sessions_account_id", table_name="account_sessions")
    op.drop_table("account_sessions")
