"""history company end index: one company's intervals ending within a day, one index range

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-02 04:40:00

The report's day drill-down (services/billing/day_view.py) reads the day's changes of one
company: the intervals starting within the day (a range of ix_history_kind_company_start) and
those begun before it that end within it. Without an index on the end, the second was a pass
over every interval the company began before the day (about 98,000 index entries for the
largest company at the bench size); with this one it is a range of the day's ends.
"""

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index(
        "ix_history_kind_company_end",
        "history_intervals",
        ["kind", "company", "end_at", "start_at"],
        unique=False,
    )


def downgrade():
    op.drop_index("ix_history_kind_company_end", table_name="history_intervals")
