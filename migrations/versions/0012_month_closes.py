"""month closes: the figures stored when a report month is closed, and its reopenings

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-24 01:30:00

A closed month's reports answer the figures stored at its close (docs/month-close.md): one row
per close in month_closes, and per close, kind and company with a non-zero day (or rollup
marks), its days and the rollup marks they came from.
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "month_closes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("year", sa.Integer(), nullable=False),
        sa.Column("month", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("closed_at", sa.DateTime(), nullable=False),
        sa.Column("closed_by", sa.String(length=64), nullable=False),
        sa.Column("reopened_at", sa.DateTime(), nullable=True),
        sa.Column("reopened_by", sa.String(length=64), nullable=True),
        sa.Column("reopen_reason", sa.String(length=500), nullable=True),
        sa.Column("ddi_days", sa.Text(), nullable=False),
        sa.Column("user_days", sa.Text(), nullable=False),
        sa.Column("with_marks", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("year", "month", "version", name="uq_month_closes_version"),
    )
    op.create_table(
        "closed_figures",
        sa.Column("close_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("company", sa.String(length=64), nullable=False),
        sa.Column("total", sa.BigInteger(), nullable=False),
        sa.Column("days", sa.Text(), nullable=False),
        sa.Column("marks", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["close_id"], ["month_closes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("close_id", "kind", "company"),
    )


def downgrade():
    op.drop_table("closed_figures")
    op.drop_table("month_closes")
