"""daily peaks rollup for reports

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 10:00:00

The tables start empty and without a rollup_state row, so reports keep computing from the
history until `flask history rollup` builds them (an empty history is built on the spot).
"""

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op
from flask import current_app

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "daily_peaks",
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("company", sa.String(length=64), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("peak", sa.Integer(), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        sa.Column("last_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["company"], ["companies.id"]),
        sa.PrimaryKeyConstraint("kind", "company", "day"),
    )
    op.create_table(
        "rollup_state",
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("built_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("kind"),
    )
    # Reports: one month's rows for every company, read from the index alone.
    op.create_index(
        "ix_daily_peaks_kind_day",
        "daily_peaks",
        ["kind", "day", "company", "peak", "level"],
        unique=False,
    )
    # An empty history has an empty rollup in any zone: mark it built now. Otherwise reports
    # compute from the history until `flask history rollup` has built it.
    bind = op.get_bind()
    if bind.execute(sa.text("SELECT count(*) FROM history_intervals")).scalar() == 0:
        zone = current_app.config["REPORT_TIMEZONE"]
        now = datetime.now(UTC).replace(tzinfo=None)
        state = sa.table(
            "rollup_state",
            sa.column("kind", sa.String),
            sa.column("timezone", sa.String),
            sa.column("built_at", sa.DateTime),
        )
        op.bulk_insert(
            state, [{"kind": k, "timezone": zone, "built_at": now} for k in ("ddi", "user")]
        )


def downgrade():
    op.drop_index("ix_daily_peaks_kind_day", table_name="daily_peaks")
    op.drop_table("rollup_state")
    op.drop_table("daily_peaks")
