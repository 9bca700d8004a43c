"""number event states: a number's state before and after each number.* change event

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-02 05:00:00

The change events gain the inventory's moves (number.stocked, number.reserved,
number.released, number.retired; docs/events.md), each carrying the number's state before and
after. Two nullable columns: NULL for every event recorded before, and for DDI and phone-user
events.
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("events") as batch_op:
        batch_op.add_column(sa.Column("before_state", sa.String(length=12), nullable=True))
        batch_op.add_column(sa.Column("after_state", sa.String(length=12), nullable=True))


def downgrade():
    with op.batch_alter_table("events") as batch_op:
        batch_op.drop_column("after_state")
        batch_op.drop_column("before_state")
