"""Webhook signing secrets at rest (services/sealing.py, docs/configuration.md#webhook-
secret-keys): never stored in clear, opened by any configured key, sealed with the first; a
key brought in with WEBHOOK_SECRET_KEYS and `rekey` frees the secrets from SECRET_KEY; a secret
no key opens is Unreadable, never a crash."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from webapp.database import utcnow
from webapp.extensions import db
from webapp.models import Webhook
from webapp.services import sealing
from webapp.services.events import webhooks

from .factories import OPERATOR

URL = "http://127.0.0.1:9/hook"
pytestmark = pytest.mark.usefixtures("allow_loopback_webhooks")


def stored(hook_id: int) -> Webhook:
    db.session.rollback()
    return db.session.scalars(select(Webhook).where(Webhook.id == hook_id)).one()


def test_a_secret_is_stored_sealed_and_opens_again(app):
    hook, secret = webhooks.create(OPERATOR, URL)
    row = stored(hook.id)
    assert "whsec_" not in row.secret_sealed
    assert secret.removeprefix("whsec_") not in row.secret_sealed
    assert sealing.unseal(row.secret_sealed) == secret
    assert sealing.seal(secret) != sealing.seal(secret)  # a fresh IV each time
    derived = Fernet(sealing.derived_key(app.config["SECRET_KEY"]))
    assert derived.decrypt(row.secret_sealed.encode()).decode() == secret


def test_the_derived_key_is_hkdf_sha256_with_the_documented_label():
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    key = sealing.derived_key("some secret key value")
    raw = HKDF(
        algorithm=hashes.SHA256(),
        length=32,
        salt=None,
        info=b"telephony-admin webhook secrets v1",
    ).derive(b"some secret key value")
    assert Fernet(key)._signing_key + Fernet(key)._encryption_key == raw
    assert sealing.derived_key("another secret key value") != key


def test_a_new_key_and_rekey_free_the_secrets_from_secret_key(app, monkeypatch):
    hook, secret = webhooks.create(OPERATOR, URL)
    _, other_secret = webhooks.create(OPERATOR, URL)
    first, second = Fernet.generate_key().decode(), Fernet.generate_key().decode()

    # A new key first: what is sealed under the derived key still opens (tried last).
    monkeypatch.setitem(app.config, "WEBHOOK_SECRET_KEYS", (first,))
    assert webhooks.signing_secrets(stored(hook.id), utcnow()) == [secret]
    assert webhooks.rekey(OPERATOR) == (2, [])
    assert Fernet(first).decrypt(stored(hook.id).secret_sealed.encode()).decode() == secret

    # SECRET_KEY may now change: the secrets do not depend on it any more.
    monkeypatch.setitem(app.config, "SECRET_KEY", "a-completely-different-secret-key")
    assert webhooks.signing_secrets(stored(hook.id), utcnow()) == [secret]

    # Newest first: sealed with the first, opened with any.
    monkeypatch.setitem(app.config, "WEBHOOK_SECRET_KEYS", (second, first))
    assert webhooks.rekey(OPERATOR) == (2, [])
    assert Fernet(second).decrypt(stored(hook.id).secret_sealed.encode()).decode() == secret

    # The key that sealed them dropped too soon: unreadable, reported, left as it was.
    monkeypatch.setitem(app.config, "WEBHOOK_SECRET_KEYS", (first,))
    before = stored(hook.id).secret_sealed
    with pytest.raises(sealing.Unreadable):
        webhooks.signing_secrets(stored(hook.id), utcnow())
    assert webhooks.rekey(OPERATOR) == (0, sorted([hook.id, hook.id + 1]))
    assert stored(hook.id).secret_sealed == before
    monkeypatch.setitem(app.config, "WEBHOOK_SECRET_KEYS", (second,))
    assert webhooks.signing_secrets(stored(hook.id + 1), utcnow()) == [other_secret]


def test_rekey_is_for_a_system_admin_only(world):
    from webapp.access import Principal
    from webapp.errors import Forbidden
    from webapp.models import Account

    account = db.session.scalars(select(Account).where(Account.username == "cadmin")).one()
    with pytest.raises(Forbidden):
        webhooks.rekey(Principal.from_account(account, "api"))
