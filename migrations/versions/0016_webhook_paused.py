"""webhooks can be paused

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27 20:00:00

`webhooks.paused_at`: when a System-Admin paused the webhook (NULL: active). The delivery
worker sends nothing to a paused webhook; its cursor stays where it is, so the events recorded
meanwhile go out, in order, once it is resumed (docs/events.md#pausing-a-webhook). A nullable
column with no default: both databases add it without rewriting the table.
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("webhooks") as batch:
        batch.add_column(sa.Column("paused_at", sa.DateTime(), nullable=True))


def downgrade():
    with op.batch_alter_table("webhooks") as batch:
        batch.drop_column("paused_at")
