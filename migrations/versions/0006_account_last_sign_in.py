"""account last sign-in: when each account last signed in with its password

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 17:30:00

The accounts page shows it (docs/pages.md). Nullable: accounts that never signed in since
(or at all) have none. API token use does not set it; a token's own last use is on the token.
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("accounts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("last_sign_in_at", sa.DateTime(), nullable=True))


def downgrade():
    with op.batch_alter_table("accounts", schema=None) as batch_op:
        batch_op.drop_column("last_sign_in_at")
