"""closed figures rank: a close's companies in total order, for the report page's ranking

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-02 15:15:00

The report page for every company shows 50 of them, largest month total first. For a closed
month it read every company's stored total to rank them: 100,000 rows at the largest provider
size (docs/operations.md). With (close_id, kind, total, company) both databases read the page's
rows in total order from the index, LIMIT and OFFSET stopping the scan (the ties' order by
identifier is an incremental sort on PostgreSQL, SQLite's sort of the right part of the order).
"""

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index(
        "ix_closed_figures_rank", "closed_figures", ["close_id", "kind", "total", "company"]
    )


def downgrade():
    op.drop_index("ix_closed_figures_rank", table_name="closed_figures")
