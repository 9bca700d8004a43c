"""close writes: which companies' rollup rows of a closed month were written since its close

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-02 15:00:00

What changed since a close (readAdjustments, the changes page, `billing status`) recomputes
only the companies written to since the close (docs/month-close.md), instead of comparing every
company's rollup marks. Closes made before this record existed are not covered by it
(writes_kept false): for them the full comparison stays.
"""

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("month_closes") as batch:
        batch.add_column(
            sa.Column("writes_kept", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_table(
        "close_writes",
        sa.Column("close_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("company", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(["close_id"], ["month_closes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("close_id", "kind", "company"),
    )


def downgrade():
    op.drop_table("close_writes")
    with op.batch_alter_table("month_closes") as batch:
        batch.drop_column("writes_kept")
