"""phone user username index: a username's start one index range, across every company

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02 00:10:00

The top bar's search (/search) looks phone users up by the start of the username in every
company a System-Admin sees, as /users?username=… does. The only index holding usernames led
with the company, so a start with few or no matches was a pass over every phone user (half a
million at the bench size). This one is a range of it: on SQLite the list's own range, on
PostgreSQL the LIKE prefix itself (text_pattern_ops, so whatever the database's collation).
"""

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index(
        "ix_phone_users_username",
        "phone_users",
        ["username", "company"],
        unique=False,
        postgresql_ops={"username": "text_pattern_ops"},
    )


def downgrade():
    op.drop_index("ix_phone_users_username", table_name="phone_users")
