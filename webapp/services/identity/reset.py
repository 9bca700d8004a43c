"""Recovery by an admin (docs/security.md#recovery-by-an-admin): a System-Admin removes another
account's second factors, for someone who lost their phone and their recovery codes."""

from __future__ import annotations

from sqlalchemy import delete, func, select

from ...access import Principal
from ...database import write_transaction
from ...errors import Invalid
from ...models import Account, Passkey, RecoveryCode
from ...wording import counted
from ..history import audit
from . import accounts, sessions


def reset_factors(principal: Principal, username: str) -> str:
    """Remove every second factor of the account `username` (System-Admin): its authenticator
    app, its passkeys and its recovery codes, and end all its sessions (a session opened with
    the lost factor, or by whoever holds it, must not outlive the reset). It then signs in with
    its password alone, until it adds a factor again (or is sent to enrol by MFA_REQUIRED).

    One write transaction locks the account, removes all of it and records account.mfa-reset
    with what was removed, which is also returned ("authenticator app, 2 passkeys, 10 recovery
    codes"). NotFound for an unknown account; Invalid for the caller's own account (its own
    factors are removed on its security page, where the password is asked again)."""
    principal.require_system_admin("reset another account's second factors")
    if username == principal.username:
        raise Invalid(
            "Remove your own second factors on your security page.",
            {"username": "your own account"},
        )
    with write_transaction() as session:
        account = accounts.get_for_update(session, username)
        removed = _removed(session, account)
        session.execute(delete(Passkey).where(Passkey.account_id == account.id))
        session.execute(delete(RecoveryCode).where(RecoveryCode.account_id == account.id))
        account.totp_secret = account.totp_added_at = account.totp_last_step = None
        account.session_epoch += 1  # a half-done sign-in (the second step) ends too
        sessions.end_all_but(session, account.id, None)
        entry = audit.entry(
            principal,
            "account.mfa-reset",
            f"account {username}",
            detail=f"removed: {removed}; sessions ended",
        )
        audit.record(session, [entry])
    return removed


def _removed(session, account: Account) -> str:
    """What the account has of its second factors, as the audit entry names it."""

    def count(model: type[Passkey] | type[RecoveryCode]) -> int:
        query = select(func.count()).select_from(model).where(model.account_id == account.id)
        return int(session.scalar(query) or 0)

    parts = ["authenticator app"] if account.totp_secret is not None else []
    if passkeys := count(Passkey):
        parts.append(counted(passkeys, "passkey"))
    if codes := count(RecoveryCode):
        parts.append(counted(codes, "recovery code"))
    return ", ".join(parts) or "nothing"
