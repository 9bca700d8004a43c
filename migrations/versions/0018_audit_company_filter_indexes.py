"""audit company filter indexes: a company's entries of one action or actor one index range

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27 20:40:00

A Company-Admin's audit log is one range per company (ix_audit_log_company), and so is a
company filter. Filtered by action or actor as well, that range was read entry by entry for
the few of the action or actor, or the planner took the action's range of the whole log and
read it for the few of the company: at 3 million entries, /audit?action=ddi.delete took 6 s
for the Company-Admin of a company of 181 entries, and ?actor=cli 0.2 s for one of 112,000
entries. A company's entries of one action, or of one actor, are now one range of an index
ending in (at, id) (services/history/audit_query.py). A move away (other_company) needs none:
moves are rare, and each company's are a short range of ix_audit_log_other_company.

Building the two indexes over 3 million entries took 11 s on SQLite (2 cores, the whole
`flask db upgrade`), the log locked for writes meanwhile.
"""

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

NEW = {
    "ix_audit_log_company_action": ["company", "action", "at", "id"],
    "ix_audit_log_company_actor": ["company", "actor", "at", "id"],
}


def upgrade():
    for name, columns in NEW.items():
        op.create_index(name, "audit_log", columns, unique=False)


def downgrade():
    for name in NEW:
        op.drop_index(name, table_name="audit_log")
