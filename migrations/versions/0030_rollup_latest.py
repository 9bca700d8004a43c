"""rollup latest: each company's current level, and a month's rows by last day and through

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-02 19:40:00

The report page for every company ranked the current month by computing every company's month
total from rollup_months: 100,000 rows at the largest provider size (docs/operations.md). With
rollup_latest (each company's latest rollup_months row's month and level, indexed by level) and
a month's rollup_months rows by last day in `through` order, it reads companies from the largest down only as far as its
page needs (services/billing/ranks.py). Filled here from the rollup_months already there.
"""

import sqlalchemy as sa
from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None

# Each (kind, company)'s latest rollup_months row (tests/test_migrations.py runs it).
BACKFILL = """
INSERT INTO rollup_latest (kind, company, month, level)
SELECT kind, company, month, level FROM (
  SELECT kind, company, month, level,
         ROW_NUMBER() OVER (PARTITION BY kind, company ORDER BY month DESC) AS n
  FROM rollup_months
) AS r
WHERE n = 1
"""


def upgrade():
    op.create_table(
        "rollup_latest",
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("company", sa.String(length=64), nullable=False),
        sa.Column("month", sa.Date(), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["company"], ["companies.id"]),
        sa.PrimaryKeyConstraint("kind", "company"),
    )
    op.create_index("ix_rollup_latest_level", "rollup_latest", ["kind", "level", "company"])
    op.create_index(
        "ix_rollup_months_last_day", "rollup_months", ["kind", "month", "last_day", "through"]
    )
    op.execute(BACKFILL)


def downgrade():
    op.drop_index("ix_rollup_months_last_day", table_name="rollup_months")
    op.drop_table("rollup_latest")
