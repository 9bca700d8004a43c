"""history company index: one company's intervals, for the report day drill-down

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23 17:35:00

The drill-down of a day (/reports/ddis/day) reads the intervals of one company that touch the
day; without an index on company that was a scan of every interval of the kind begun before
the day's end (seconds at 2.65M intervals). (kind, company, start_at, end_at) answers the
day's count and peak from the index alone, and its order is the drill-down's page order.
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("history_intervals", schema=None) as batch_op:
        batch_op.create_index(
            "ix_history_kind_company_start",
            ["kind", "company", "start_at", "end_at"],
            unique=False,
        )


def downgrade():
    with op.batch_alter_table("history_intervals", schema=None) as batch_op:
        batch_op.drop_index("ix_history_kind_company_start")
