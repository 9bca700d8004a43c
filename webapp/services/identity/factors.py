"""An account's second factors (docs/security.md#second-factors): which it has, and checking a
code typed instead of a passkey — one from the authenticator app (TOTP, RFC 6238: SHA-1, 6
digits, 30-second steps, one step of drift either way) or a recovery code. Passkeys are
passkeys.py.

A TOTP code is accepted at most once: the step of the last accepted code is kept on the account
(`totp_last_step`), and a code of that step or an earlier one is refused, so a code seen over a
shoulder or in a log is no use once it was used.
"""

from __future__ import annotations

import hashlib
import hmac
import time

import pyotp
from sqlalchemy import exists, func, select, update

from ...access import Principal
from ...database import utcnow, write_transaction
from ...extensions import db
from ...models import Account, Passkey, RecoveryCode
from .. import sealing
from ..history import audit

STEP = 30  # seconds (RFC 6238's default, what every authenticator app uses)
DIGITS = 6
DRIFT = 1  # steps either way: a phone's clock a little off, a code typed as it turned


def has_second_factor(account: Account) -> bool:
    """Whether signing in as `account` asks for a second factor after the password: it has an
    authenticator app or at least one passkey (recovery codes alone are no factor: they only
    stand in for one)."""
    if account.totp_secret is not None:
        return True
    return bool(db.session.scalar(select(exists().where(Passkey.account_id == account.id))))


def normalized(code: str) -> str:
    """A typed code without the spaces and dashes people type or paste with it, lower case."""
    return "".join(ch for ch in code if ch not in " -\t").lower()


def recovery_digest(code: str) -> str:
    """What is stored of a recovery code: the SHA-256 of its normalized form."""
    return hashlib.sha256(normalized(code).encode()).hexdigest()


def totp_step(secret: str, code: str, now: float | None = None) -> int | None:
    """The time step (Unix time // STEP) within DRIFT of `now` whose code `code` is for `secret`,
    the latest if several; None if none."""
    if len(code) != DIGITS or not code.isdigit():
        return None
    totp = pyotp.TOTP(secret, digits=DIGITS, interval=STEP)
    current = int((time.time() if now is None else now) // STEP)
    for step in range(current + DRIFT, current - DRIFT - 1, -1):
        if hmac.compare_digest(totp.at(step * STEP), code):
            return step
    return None


def check_code(account: Account, code: str) -> str | None:
    """Accept `code` as `account`'s second factor: "totp" for a code of its authenticator app
    not used before, "recovery" for one of its unused recovery codes (now used up); None for
    anything else, recorded in the audit log as a failed second factor.

    Either acceptance is one write transaction that locks the account and marks what was used
    (the TOTP step, the recovery code), so two requests racing with one code cannot both be
    accepted."""
    typed = normalized(code)
    if typed:
        accepted = _accept_totp(account, typed) or _accept_recovery(account, typed)
        if accepted is not None:
            return accepted
    with write_transaction() as session:
        audit.record(session, [_entry(account, "account.second-factor-failed", None)])
    return None


def _accept_totp(account: Account, typed: str) -> str | None:
    if account.totp_secret is None or not typed.isdigit():
        return None
    try:
        secret = sealing.unseal(account.totp_secret)
    except sealing.Unreadable:
        return None
    step = totp_step(secret, typed)
    if step is None:
        return None
    with write_transaction() as session:
        locked = session.get(Account, account.id, with_for_update=True, populate_existing=True)
        if locked is None or locked.totp_secret != account.totp_secret:
            return None
        if locked.totp_last_step is not None and step <= locked.totp_last_step:
            return None  # used already, or older than one that was
        locked.totp_last_step = step
    return "totp"


def _accept_recovery(account: Account, typed: str) -> str | None:
    digest = hashlib.sha256(typed.encode()).hexdigest()
    now = utcnow()
    with write_transaction() as session:
        result = session.execute(
            update(RecoveryCode)
            .where(
                RecoveryCode.account_id == account.id,
                RecoveryCode.digest == digest,
                RecoveryCode.used_at.is_(None),
            )
            .values(used_at=now)
        )
        if not getattr(result, "rowcount", 0):
            return None
        left = session.scalar(
            select(func.count())
            .select_from(RecoveryCode)
            .where(RecoveryCode.account_id == account.id, RecoveryCode.used_at.is_(None))
        )
        audit.record(
            session,
            [_entry(account, "account.recovery-code-used", f"{left} recovery codes left")],
        )
    return "recovery"


def _entry(account: Account, action: str, detail: str | None) -> dict:
    actor = Principal(username=account.username, via="ui", account_id=account.id)
    return audit.entry(actor, action, f"account {account.username}", detail=detail)
