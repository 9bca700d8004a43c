"""audit other company: a move between companies is in the audit of the company it left too

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 17:20:00

`audit_log.other_company` holds the company a DDI or phone user moved away from (an update or
link that changed its company; `company` is the one it moved to), indexed, so the audit log of
either company finds the entry (services/history/audit.py). Existing moves are backfilled from their
before/after JSON: one pass over the update and link entries, in SQL.
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# The entries that may be moves: records.apply_changes writes them (update, link).
MOVE_ACTIONS = ("ddi.update", "ddi.link", "user.update")


def backfill(connection) -> int:
    """Set other_company on the stored moves that lack it; return how many rows changed."""
    if connection.dialect.name == "postgresql":
        old, new = "(\"before\"->>'company')", "(\"after\"->>'company')"
    else:
        old, new = "json_extract(\"before\", '$.company')", "json_extract(\"after\", '$.company')"
    statement = sa.text(
        f"UPDATE audit_log SET other_company = {old} "
        "WHERE other_company IS NULL AND action IN :actions "
        f"AND {old} IS NOT NULL AND {new} IS NOT NULL AND {old} <> {new}"
    ).bindparams(sa.bindparam("actions", expanding=True))
    return connection.execute(statement, {"actions": list(MOVE_ACTIONS)}).rowcount


def upgrade():
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.add_column(sa.Column("other_company", sa.String(length=64), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_audit_log_other_company"), ["other_company"], unique=False
        )
    backfill(op.get_bind())


def downgrade():
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_log_other_company"))
        batch_op.drop_column("other_company")
