"""second factors: authenticator apps, recovery codes, passkeys, and what a session knows

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-02 11:00:00

Sign-in as decisions §15 asks (docs/security.md): the account's authenticator-app secret
(sealed) and the time step of the last code it accepted; its recovery codes (SHA-256 of each);
its passkeys; and on each sign-in session how it was signed in, from where, with which browser
and when its holder last confirmed who they are. Existing sessions count as password sign-ins
confirmed at their start.
"""

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("accounts") as batch:
        batch.add_column(sa.Column("totp_secret", sa.String(400), nullable=True))
        batch.add_column(sa.Column("totp_added_at", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("totp_last_step", sa.BigInteger(), nullable=True))
    with op.batch_alter_table("account_sessions") as batch:
        batch.add_column(
            sa.Column("via", sa.String(16), nullable=False, server_default="password")
        )
        batch.add_column(sa.Column("address", sa.String(64), nullable=True))
        batch.add_column(sa.Column("browser", sa.String(300), nullable=True))
        batch.add_column(sa.Column("confirmed_at", sa.DateTime(), nullable=True))
    op.execute("UPDATE account_sessions SET confirmed_at = created_at")
    op.create_table(
        "recovery_codes",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "account_id",
            sa.Integer(),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("used_at", sa.DateTime(), nullable=True),
    )
    op.create_index("ix_recovery_codes_account_id", "recovery_codes", ["account_id"])
    op.create_table(
        "passkeys",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "account_id",
            sa.Integer(),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("credential_id", sa.String(1400), nullable=False, unique=True),
        sa.Column("public_key", sa.LargeBinary(), nullable=False),
        sa.Column("sign_count", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("transports", sa.String(200), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("last_used_at", sa.DateTime(), nullable=True),
    )
    op.create_index("ix_passkeys_account_id", "passkeys", ["account_id"])


def downgrade():
    op.drop_index("ix_passkeys_account_id", table_name="passkeys")
    op.drop_table("passkeys")
    op.drop_index("ix_recovery_codes_account_id", table_name="recovery_codes")
    op.drop_table("recovery_codes")
    with op.batch_alter_table("account_sessions") as batch:
        batch.drop_column("confirmed_at")
        batch.drop_column("browser")
        batch.drop_column("address")
        batch.drop_column("via")
    with op.batch_alter_table("accounts") as batch:
        batch.drop_column("totp_last_step")
        batch.drop_column("totp_added_at")
        batch.drop_column("totp_secret")
