"""rollup sums: per day and per company-month, for the many-company report page

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23 20:10:00

The report page for every company ranked companies by month total and summed each day over
all of them by reading every daily_peaks row of the month (175,000 at 10,000 companies: over
half a second). rollup_days and rollup_months (services/billing/rollup_sums.py) keep those sums as
the rollup changes; this migration derives them from the daily_peaks already there, in one
pass in company and day order (the derivation is written out here, frozen, so later changes
to the app cannot change what this migration did).
"""

import itertools

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "rollup_days",
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("rise", sa.BigInteger(), nullable=False),
        sa.Column("change", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "day"),
    )
    op.create_table(
        "rollup_months",
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("month", sa.Date(), nullable=False),
        sa.Column("company", sa.String(length=64), nullable=False),
        sa.Column("through", sa.BigInteger(), nullable=False),
        sa.Column("last_day", sa.Date(), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["company"], ["companies.id"]),
        sa.PrimaryKeyConstraint("kind", "month", "company"),
    )
    # A month without rows: the level its company carries in, from its latest earlier month.
    op.create_index(
        "ix_rollup_months_company",
        "rollup_months",
        ["kind", "company", "month", "level"],
        unique=False,
    )
    _derive(op.get_bind())


def _derive(conn) -> None:
    """The sums of every daily_peaks row there is (none on a new database)."""
    peaks = sa.table(
        "daily_peaks",
        sa.column("kind"),
        sa.column("company"),
        sa.column("day", sa.Date),
        sa.column("peak"),
        sa.column("level"),
    )
    days_table = sa.table(
        "rollup_days", sa.column("kind"), sa.column("day"), sa.column("rise"), sa.column("change")
    )
    months_table = sa.table(
        "rollup_months",
        sa.column("kind"),
        sa.column("month"),
        sa.column("company"),
        sa.column("through"),
        sa.column("last_day"),
        sa.column("level"),
    )
    rows = conn.execute(
        sa.select(peaks.c.kind, peaks.c.company, peaks.c.day, peaks.c.peak, peaks.c.level).order_by(
            peaks.c.kind, peaks.c.company, peaks.c.day
        )
    ).all()
    days: dict[tuple[str, object], list[int]] = {}
    months: list[dict] = []
    for (kind, company), group in itertools.groupby(rows, key=lambda r: (r[0], r[1])):
        carried = 0
        month = None
        for _, _, day, peak, level in group:
            part = days.setdefault((kind, day), [0, 0])
            part[0] += peak - carried
            part[1] += level - carried
            if month is None or day.replace(day=1) != month["month"]:
                month = {
                    "kind": kind,
                    "month": day.replace(day=1),
                    "company": company,
                    "through": 0,
                    "last_day": None,
                    "level": 0,
                }
                months.append(month)
                previous = 0
            else:
                previous = month["last_day"].day
            month["through"] += carried * (day.day - previous - 1) + peak
            month["last_day"], month["level"] = day, level
            carried = level
    for i in range(0, len(months), 5000):
        conn.execute(months_table.insert(), months[i : i + 5000])
    values = [
        {"kind": kind, "day": day, "rise": rise, "change": change}
        for (kind, day), (rise, change) in sorted(days.items())
    ]
    for i in range(0, len(values), 5000):
        conn.execute(days_table.insert(), values[i : i + 5000])


def downgrade():
    op.drop_index("ix_rollup_months_company", table_name="rollup_months")
    op.drop_table("rollup_months")
    op.drop_table("rollup_days")
