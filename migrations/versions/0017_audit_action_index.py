"""audit action index: the audit log's action filter one index range, whatever the log's size

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27 19:40:00

/audit gained a filter by action ("DDI deleted"). Filtered by nothing else, its page would read
the whole log in (at, id) order until a page of that action turned up: at 3 million entries, a
rare action (a month closed) is a pass over all of them, and so is its count. Like the actor's,
the action's entries are one range of an index ending in (at, id)
(services/history/audit_query.py).
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index("ix_audit_log_action", "audit_log", ["action", "at", "id"], unique=False)


def downgrade():
    op.drop_index("ix_audit_log_action", table_name="audit_log")
