"""form_once: a one-time key per create/rotate form, so a reload does not repeat the action

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27 20:30:00

Adding a webhook, making an API token and rotating a webhook's secret answer with the secret,
shown once. A browser reload re-POSTs such a form: it made a second webhook or token, or rotated
again (dropping at once the secret the receiver still used). Each form now carries a one-time key;
the first POST that acts records it here, a repeat finds it and does nothing
(webapp/views/once.py, docs/pages.md#one-time-forms).
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "form_once",
        sa.Column("key", sa.String(length=32), nullable=False),
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("used_at", sa.DateTime(), nullable=False),
        sa.Column("what", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index("ix_form_once_used_at", "form_once", ["used_at"], unique=False)


def downgrade():
    op.drop_index("ix_form_once_used_at", table_name="form_once")
    op.drop_table("form_once")
