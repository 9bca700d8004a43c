"""An account's second factors (docs/security.md#second-factors): which it has. The
authenticator app and recovery codes are kept here, passkeys in passkeys.py."""

from __future__ import annotations

from sqlalchemy import exists, select

from ...extensions import db
from ...models import Account, Passkey


def has_second_factor(account: Account) -> bool:
    """Whether signing in as `account` asks for a second factor after the password: it has an
    authenticator app or at least one passkey (recovery codes alone are no factor: they only
    stand in for one)."""
    if account.totp_secret is not None:
        return True
    return bool(db.session.scalar(select(exists().where(Passkey.account_id == account.id))))
