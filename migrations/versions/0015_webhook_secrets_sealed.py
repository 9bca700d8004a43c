"""webhook signing secrets encrypted at rest, and the columns their rotation needs

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-24 10:00:00

A webhook's signing secret was stored in clear, and so was in every backup. It is now sealed
with Fernet (services/sealing.py): `webhooks.secret` becomes `secret_sealed`, and every
clear secret is encrypted in place with the first configured key (WEBHOOK_SECRET_KEYS, else the
key derived from SECRET_KEY). `previous_secret_sealed` and `previous_secret_until` hold the
secret a rotation replaced, which signs too for 24 h (docs/events.md#signing-secrets).

Downgrade decrypts the current secrets back into `secret` (a previous one is dropped: the old
schema signs with one); it stops, changing nothing, if a secret cannot be decrypted with the
keys configured, naming the webhook to rotate or delete first.

The key derivation is this migration's own frozen copy of sealing.derived_key: the app must
keep opening what it sealed (tests/test_migrations.py holds the two to it).
"""

import base64

import sqlalchemy as sa
from alembic import op
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from flask import current_app

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

INFO = b"telephony-admin webhook secrets v1"


def _box() -> MultiFernet:
    config = current_app.config
    keys = [Fernet(k) for k in (config.get("WEBHOOK_SECRET_KEYS") or ())]
    raw = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=INFO).derive(
        str(config["SECRET_KEY"]).encode()
    )
    keys.append(Fernet(base64.urlsafe_b64encode(raw)))
    return MultiFernet(keys)


def upgrade():
    connection = op.get_bind()
    if connection.dialect.name == "sqlite":
        # The rebuilt table and the UPDATEs free pages that held the clear secrets; SQLite
        # keeps freed pages as they were (and `db backup` copies them) unless told to zero
        # them. PostgreSQL's dead rows never reach pg_dump's output.
        connection.exec_driver_sql("PRAGMA secure_delete = ON")
    with op.batch_alter_table("webhooks") as batch:
        batch.alter_column(
            "secret",
            new_column_name="secret_sealed",
            existing_type=sa.String(length=100),
            type_=sa.Text(),
            existing_nullable=False,
        )
        batch.add_column(sa.Column("previous_secret_sealed", sa.Text(), nullable=True))
        batch.add_column(sa.Column("previous_secret_until", sa.DateTime(), nullable=True))
    webhooks = sa.table("webhooks", sa.column("id", sa.Integer()), sa.column("secret_sealed"))
    rows = connection.execute(sa.select(webhooks.c.id, webhooks.c.secret_sealed)).all()
    box = _box() if rows else None
    for webhook_id, secret in rows:
        if secret.startswith("whsec_"):  # in clear: every secret the app made starts so
            sealed = box.encrypt(secret.encode()).decode("ascii")
            connection.execute(
                webhooks.update().where(webhooks.c.id == webhook_id).values(secret_sealed=sealed)
            )


def downgrade():
    webhooks = sa.table("webhooks", sa.column("id", sa.Integer()), sa.column("secret_sealed"))
    connection = op.get_bind()
    rows = connection.execute(sa.select(webhooks.c.id, webhooks.c.secret_sealed)).all()
    box = _box() if rows else None
    clear = {}
    for webhook_id, sealed in rows:
        try:
            clear[webhook_id] = box.decrypt(sealed.encode("ascii")).decode()
        except (InvalidToken, UnicodeError):
            raise RuntimeError(
                f"webhook {webhook_id}: its signing secret cannot be decrypted with the keys "
                "configured (SECRET_KEY, WEBHOOK_SECRET_KEYS); rotate it (flask webhooks "
                "rotate-secret) or delete the webhook, then downgrade"
            ) from None
    for webhook_id, secret in clear.items():
        connection.execute(
            webhooks.update().where(webhooks.c.id == webhook_id).values(secret_sealed=secret)
        )
    with op.batch_alter_table("webhooks") as batch:
        batch.drop_column("previous_secret_until")
        batch.drop_column("previous_secret_sealed")
        batch.alter_column(
            "secret_sealed",
            new_column_name="secret",
            existing_type=sa.Text(),
            type_=sa.String(length=100),
            existing_nullable=False,
        )
