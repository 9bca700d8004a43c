"""numbers held for: the index of a company's held numbers holds only held numbers

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-02 09:00:00

ix_numbers_held_for (held_for, dialcode, number) held every number of the inventory, nearly
all with no company (in service, in stock). SQLite's planner, whose statistics count those as
one value, judged `held_for = 'acme'` to match most of the table and counted a company's
reservations by reading the whole table (60 ms with a million in stock, growing with it). Only
the numbers held for a company are in the index now (`WHERE held_for IS NOT NULL`): it is as
small as the reservations and aging numbers, and both databases use it for `held_for = …`,
which implies the condition.
"""

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

HELD = sa.text("held_for IS NOT NULL")


def upgrade():
    op.drop_index("ix_numbers_held_for", table_name="numbers")
    op.create_index(
        "ix_numbers_held_for",
        "numbers",
        ["held_for", "dialcode", "number"],
        sqlite_where=HELD,
        postgresql_where=HELD,
    )


def downgrade():
    op.drop_index("ix_numbers_held_for", table_name="numbers")
    op.create_index("ix_numbers_held_for", "numbers", ["held_for", "dialcode", "number"])
