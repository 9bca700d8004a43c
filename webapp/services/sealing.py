"""Secrets the app must read back, at rest: webhook signing secrets (docs/events.md#signing-
secrets) and authenticator-app secrets (docs/security.md#second-factors). Sealed with Fernet,
the authenticated encryption of the `cryptography` package, so a copy of the database (a backup,
a dump) holds no secret a receiver or an authenticator app trusts.

The keys: each of WEBHOOK_SECRET_KEYS (Fernet keys, newest first), then one derived from
SECRET_KEY by HKDF-SHA256 with the fixed label `INFO`. A secret is sealed with the first of
these and opened with any (MultiFernet), so an operator can bring in a new key, re-seal every
secret with it (`flask webhooks rekey`, which re-seals both kinds) and only then drop the old
one. A secret no key opens is `Unreadable`: its webhook's deliveries fail with that reason
until it is rotated; its account's authenticator app is refused until an admin resets it.
"""

from __future__ import annotations

import base64
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from flask import current_app

# Fixed and documented (docs/configuration.md): changing it loses every secret sealed with a
# key derived from SECRET_KEY. Migration 0015 holds its own copy.
INFO = b"telephony-admin webhook secrets v1"


class Unreadable(Exception):
    """A sealed secret that none of the configured keys opens (a changed SECRET_KEY, a key
    dropped from WEBHOOK_SECRET_KEYS too soon)."""


def derived_key(secret_key: str) -> bytes:
    """The Fernet key derived from SECRET_KEY: HKDF-SHA256, no salt, info `INFO`, 32 bytes."""
    raw = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=INFO).derive(
        secret_key.encode()
    )
    return base64.urlsafe_b64encode(raw)


@lru_cache(maxsize=8)
def _box(keys: tuple[str, ...], secret_key: str) -> MultiFernet:
    return MultiFernet([*(Fernet(k) for k in keys), Fernet(derived_key(secret_key))])


def _current() -> MultiFernet:
    config = current_app.config
    return _box(tuple(config.get("WEBHOOK_SECRET_KEYS") or ()), str(config["SECRET_KEY"]))


def seal(secret: str) -> str:
    """`secret` encrypted and authenticated with the first key (a Fernet token, ASCII)."""
    return _current().encrypt(secret.encode()).decode("ascii")


def unseal(token: str) -> str:
    """The secret a token holds; Unreadable if no configured key opens it."""
    try:
        return _current().decrypt(token.encode("ascii")).decode()
    except (InvalidToken, UnicodeError):
        raise Unreadable from None


def reseal(token: str) -> str:
    """The same secret sealed with the first key; Unreadable if no configured key opens it."""
    try:
        return _current().rotate(token.encode("ascii")).decode("ascii")
    except (InvalidToken, UnicodeError):
        raise Unreadable from None
