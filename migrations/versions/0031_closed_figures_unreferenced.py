"""closed figures unreferenced: a close's stored rows without a foreign-key check each

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-03 19:20:00

A close writes one closed_figures row per kind and company with figures: 198,000 rows at the
largest provider size (docs/operations.md), in the transaction that creates their month_closes
row. PostgreSQL checked the foreign key to month_closes once per row, 1.6 s of the 5 s a close
has (bench/README.md). The rows are written by the close alone, with the id of the close it has
just created, and never changed; no close is ever deleted by the app (a reopening keeps them).
Whoever deletes a close by hand deletes its closed_figures rows too (docs/month-close.md).
"""

import sqlalchemy as sa
from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None

FOREIGN_KEY = "fk_closed_figures_close_id_month_closes"


def upgrade():
    with op.batch_alter_table("closed_figures") as batch:
        batch.drop_constraint(FOREIGN_KEY, type_="foreignkey")


def downgrade():
    # Rows whose close was deleted by hand since would fail the key: they answer nothing.
    op.execute(
        sa.text("DELETE FROM closed_figures WHERE close_id NOT IN (SELECT id FROM month_closes)")
    )
    with op.batch_alter_table("closed_figures") as batch:
        batch.create_foreign_key(
            FOREIGN_KEY, "month_closes", ["close_id"], ["id"], ondelete="CASCADE"
        )
