"""audit page indexes: every page of /audit a few index ranges, whatever the log's size

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23 20:40:00

A provider's audit log holds millions of entries. /audit read a page as an offset into every
matching entry and counted them all, and its target filter was a substring scan of the whole
log (5 s at 3 million entries). The page is now a few ranges in (at, id) order, newest first
(services/history/audit_query.py): of the whole log, of one company's entries or of its moves away, of
one actor's, of one target's. Each range needs an index ending in (at, id); the company and
other_company indexes become such indexes, and the time index gains the id that breaks ties.
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

NEW = {
    "ix_audit_log_at": ["at", "id"],
    "ix_audit_log_company": ["company", "at", "id"],
    "ix_audit_log_other_company": ["other_company", "at", "id"],
    "ix_audit_log_actor": ["actor", "at", "id"],
    "ix_audit_log_target": ["target", "at", "id"],
}
OLD = {
    "ix_audit_log_at": ["at"],
    "ix_audit_log_company": ["company"],
    "ix_audit_log_other_company": ["other_company"],
}


def upgrade():
    for name in OLD:
        op.drop_index(name, table_name="audit_log")
    for name, columns in NEW.items():
        op.create_index(name, "audit_log", columns, unique=False)


def downgrade():
    for name in NEW:
        op.drop_index(name, table_name="audit_log")
    for name, columns in OLD.items():
        op.create_index(name, "audit_log", columns, unique=False)
