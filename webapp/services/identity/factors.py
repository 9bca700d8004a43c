"""An account's second factors (docs/security.md#second-factors): which it has, and checking a
code typed instead of a passkey — one from the authenticator app (TOTP, RFC 6238: SHA-1, 6
digits, 30-second steps, one step of drift either way) or a recovery code. Passkeys are
passkeys.py.

A TOTP code is accepted at most once: the step of the last accepted code is kept on the account
(`totp_last_step`), and a code of that step or an earlier one is refused, so a code seen over a
shoulder or in a log is no use once it was used.

Enrolment (the account's own, on its security page): an authenticator app is stored only once a
code of it is right (`add_totp`), and removed by `remove_totp`. Recovery codes come with the
first factor (`add_totp` makes them itself; the passkeys call `first_factor_codes`) and are
remade by `regenerate_codes`; each is shown once and only its SHA-256 is kept.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

import pyotp
from sqlalchemy import delete, exists, func, select, update
from sqlalchemy.orm import Session

from ...access import Principal
from ...database import utcnow, write_transaction
from ...errors import Conflict, Invalid, NotFound
from ...extensions import db
from ...models import Account, Passkey, RecoveryCode
from .. import sealing
from ..history import audit
from . import signin

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
        audit.record(session, [signin.own_entry(account, "account.second-factor-failed", None)])
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
            [
                signin.own_entry(
                    account, "account.recovery-code-used", f"{left} recovery codes left"
                )
            ],
        )
    return "recovery"


# --- enrolment: authenticator app and recovery codes ------------------------------------------

RECOVERY_CODES = 10  # made at once, each usable once
_CODE_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"  # base32's letters, lower case
ISSUER = "Telephony admin"  # what the authenticator app names the entry (with the username)


def new_totp_secret() -> str:
    """A new random authenticator-app secret: 32 base32 characters (160 bits, RFC 4226's
    recommended length)."""
    return pyotp.random_base32()


def provisioning_uri(account: Account, secret: str) -> str:
    """The otpauth:// address an authenticator app reads from the QR code: issuer ISSUER, the
    account's username, SHA-1, 6 digits, 30-second steps (what totp_step checks)."""
    return pyotp.TOTP(secret, digits=DIGITS, interval=STEP).provisioning_uri(
        name=account.username, issuer_name=ISSUER
    )


def add_totp(account: Account, secret: str, code: str) -> list[str] | None:
    """Give `account` (the signed-in account, acting on itself) the authenticator app with
    `secret`, if `code` is that app's code now (within one step of drift): Invalid, and nothing
    stored, otherwise; Conflict if the account has an app already (replacing one is removing
    it first).

    On success, in one write transaction that locks the account: the secret is stored sealed,
    with the time it was added and the code's step as the last one used (so the code typed to
    enrol is not accepted again to sign in), the addition is audited, and, if the account had
    no unused recovery codes, RECOVERY_CODES new ones are made and returned, to be shown once
    (None otherwise)."""
    step = totp_step(secret, normalized(code))
    if step is None:
        raise Invalid(
            "That code is not the app's current code: check the app's clock and type the "
            "6 digits it shows now.",
            {"code": "not the app's current code"},
        )
    with write_transaction() as session:
        locked = _locked(session, account)
        if locked.totp_secret is not None:
            raise Conflict("An authenticator app is set up already: remove it first.")
        locked.totp_secret = sealing.seal(secret)
        locked.totp_added_at = utcnow()
        locked.totp_last_step = step
        audit.record(
            session, [signin.own_entry(locked, "account.factor-added", "authenticator app")]
        )
        codes = _issue_codes(session, locked, only_if_none=True)
    return codes


def remove_totp(account: Account) -> bool:
    """Remove the authenticator app of `account` (the signed-in account, acting on itself):
    False if it had none. Audited. If no passkey is left either, its recovery codes go too
    (they stand in for a factor it no longer has; adding a factor again shows new ones)."""
    with write_transaction() as session:
        locked = _locked(session, account)
        if locked.totp_secret is None:
            return False
        locked.totp_secret = None
        locked.totp_added_at = None
        locked.totp_last_step = None
        audit.record(
            session, [signin.own_entry(locked, "account.factor-removed", "authenticator app")]
        )
        _drop_codes_without_factor(session, locked)
    return True


def first_factor_codes(account: Account) -> list[str] | None:
    """Called after a factor was added to `account` (the signed-in account, acting on itself):
    if it has no unused recovery codes, RECOVERY_CODES new ones, stored hashed and audited, to
    be shown once; None if it still has unused ones (they stay valid, nothing is made).

    One write transaction locking the account, so two additions at once make one set."""
    with write_transaction() as session:
        codes = _issue_codes(session, _locked(session, account), only_if_none=True)
    return codes


def regenerate_codes(account: Account) -> list[str]:
    """Void every recovery code of `account` (the signed-in account, acting on itself) and make
    RECOVERY_CODES new ones, returned to be shown once; audited as "recovery codes
    regenerated". Conflict if the account has no second factor (codes only stand in for one)."""
    with write_transaction() as session:
        locked = _locked(session, account)
        if not has_second_factor(locked):
            raise Conflict("Recovery codes stand in for a second factor: add one first.")
        codes = _issue_codes(session, locked, only_if_none=False)
        assert codes is not None
    return codes


def clear_codes_if_no_factor(account: Account) -> bool:
    """For the removal of a passkey: delete the recovery codes of `account` if it has no
    second factor left (True then). Removing the authenticator app does this itself."""
    with write_transaction() as session:
        return _drop_codes_without_factor(session, _locked(session, account))


def codes_left(account: Account) -> int:
    """How many unused recovery codes `account` has."""
    return (
        db.session.scalar(
            select(func.count())
            .select_from(RecoveryCode)
            .where(RecoveryCode.account_id == account.id, RecoveryCode.used_at.is_(None))
        )
        or 0
    )


def takes_codes(account: Account) -> bool:
    """Whether the second step offers a code field to `account`: it has an authenticator app
    or unused recovery codes (an account with passkeys alone and every code used has only its
    passkeys to offer)."""
    return account.totp_secret is not None or codes_left(account) > 0


def required_for(account: Account, setting: str) -> bool:
    """Whether MFA_REQUIRED `setting` covers `account` (docs/security.md#required-second-
    factors): "none" nobody, "system-admin" System-Admins, "admins" System-Admins and
    Company-Admins of any company, "all" every account."""
    if setting == "all":
        return True
    if setting == "system-admin":
        return account.system_admin
    if setting == "admins":
        return account.system_admin or bool(account.admin_of)
    return False


def _new_code() -> str:
    raw = "".join(secrets.choice(_CODE_ALPHABET) for _ in range(10))
    return f"{raw[:5]}-{raw[5:]}"


def _issue_codes(session: Session, account: Account, *, only_if_none: bool) -> list[str] | None:
    """Inside a write transaction holding the account's lock: RECOVERY_CODES new codes
    replacing every old one (audited), or None when `only_if_none` and unused ones exist."""
    if only_if_none and codes_left(account) > 0:
        return None
    session.execute(delete(RecoveryCode).where(RecoveryCode.account_id == account.id))
    codes = [_new_code() for _ in range(RECOVERY_CODES)]
    now = utcnow()
    session.add_all(
        RecoveryCode(account_id=account.id, digest=recovery_digest(code), created_at=now)
        for code in codes
    )
    detail = "recovery codes generated" if only_if_none else "recovery codes regenerated"
    audit.record(session, [signin.own_entry(account, "account.factor-added", detail)])
    return codes


def _drop_codes_without_factor(session: Session, account: Account) -> bool:
    session.flush()
    if has_second_factor(account):
        return False
    session.execute(delete(RecoveryCode).where(RecoveryCode.account_id == account.id))
    return True


def _locked(session: Session, account: Account) -> Account:
    locked = session.get(Account, account.id, with_for_update=True, populate_existing=True)
    if locked is None:
        raise NotFound("There is no such account.")
    return locked


def rekey(principal: Principal) -> tuple[int, list[str]]:
    """Seal every authenticator-app secret again with the first configured key (after a key
    was added to WEBHOOK_SECRET_KEYS, as `flask webhooks rekey` does for webhook secrets);
    return how many were re-sealed and the usernames whose secret no key opens (left as they
    are: reset their factors). System-Admin only; one transaction."""
    principal.require_system_admin("re-seal authenticator-app secrets")
    done, unreadable = 0, []
    with write_transaction() as session:
        rows = session.scalars(
            select(Account)
            .where(Account.totp_secret.is_not(None))
            .order_by(Account.id)
            .with_for_update()
        )
        for account in rows:
            try:
                account.totp_secret = sealing.reseal(account.totp_secret or "")
            except sealing.Unreadable:
                unreadable.append(account.username)
                continue
            done += 1
    return done, unreadable
