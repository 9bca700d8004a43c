"""numbers inventory: every number in one of four states (docs/numbers.md)

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-02 05:00:00

A number now lives in the provider's inventory before a customer has it and after a customer
gives it back. Every number has one row in `numbers`, whatever its state; the DDIs table keeps
the in-service ones' company and extension, as before. Every existing DDI becomes an
in-service number; nothing else changes, and the reports, which read only the history, do not
change by a single figure.
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "numbers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dialcode", sa.String(length=7), nullable=False),
        sa.Column("number", sa.String(length=15), nullable=False),
        sa.Column("state", sa.String(length=12), nullable=False),
        sa.Column("held_for", sa.String(length=64), nullable=True),
        sa.Column("previous_company", sa.String(length=64), nullable=True),
        sa.Column("held_until", sa.Date(), nullable=True),
        sa.Column("since", sa.DateTime(), nullable=True),
        sa.Column("description", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            ["held_for"], ["companies.id"], name=op.f("fk_numbers_held_for_companies")
        ),
        sa.ForeignKeyConstraint(
            ["previous_company"],
            ["companies.id"],
            name=op.f("fk_numbers_previous_company_companies"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_numbers")),
        sa.UniqueConstraint("dialcode", "number", name="uq_numbers_dialcode_number"),
    )
    # Before the indexes: one pass of a million rows instead of a million index updates.
    op.execute(
        "INSERT INTO numbers (dialcode, number, state, description) "
        "SELECT dialcode, number, 'in_service', '' FROM ddis ORDER BY dialcode, number"
    )
    op.create_index(
        "ix_numbers_state", "numbers", ["state", "dialcode", "number", "held_until"]
    )
    op.create_index("ix_numbers_held_for", "numbers", ["held_for", "dialcode", "number"])


def downgrade():
    op.drop_index("ix_numbers_held_for", table_name="numbers")
    op.drop_index("ix_numbers_state", table_name="numbers")
    op.drop_table("numbers")
