"""Sign-in: passwords (their rules and hashing), checking a username and password, and the
sign-in sessions that a session cookie names (SECURITY.md#sessions).

Each password sign-in starts a row in `account_sessions`, named by a random key of which only
the SHA-256 is stored. The session cookie carries "<account id>:<session epoch>:<key>"
(Account.get_id), and every request signed in by cookie is checked in one query against both:
the account is active with that epoch (raising the epoch, on a password change or when the
account is disabled, ends every session signed in before), and the row has not been ended by
signing out nor gone past the idle or absolute limit (SESSION_IDLE_MINUTES, SESSION_MAX_HOURS).
A copy of the cookie kept after any of these is refused from then on.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import current_app
from sqlalchemy import delete, or_, select, update
from sqlalchemy.exc import DBAPIError
from werkzeug.security import check_password_hash, generate_password_hash

from ...access import Principal
from ...database import SQLITE_BUSY_TIMEOUT_MS, utcnow, write_transaction
from ...errors import Invalid
from ...extensions import db
from ...models import Account, AccountSession
from ..history import audit

log = logging.getLogger(__name__)

MIN_PASSWORD = 10
MAX_PASSWORD = 512
# A session's last_seen_at is written at most this often: writing it on every request would
# make every page and API read a write as well (on SQLite one writer at a time, behind any
# import). The idle limit is then counted from a time up to this much before the last request.
TOUCH_EVERY = timedelta(minutes=1)
# How long the touch waits for SQLite's write lock before giving up (it is retried on the next
# request): a long write (a DDI import holds the lock for a minute) must not stall reads.
TOUCH_WAIT_MS = 100
_MAX_INT = 2**31 - 1  # the id and epoch columns are 32-bit integers


@dataclass(frozen=True)
class SessionLimits:
    idle: timedelta  # without a request
    lifetime: timedelta  # since sign-in, however busy


def session_limits() -> SessionLimits:
    """The configured session limits (SESSION_IDLE_MINUTES, SESSION_MAX_HOURS)."""
    config = current_app.config
    return SessionLimits(
        idle=timedelta(minutes=int(config["SESSION_IDLE_MINUTES"])),
        lifetime=timedelta(hours=int(config["SESSION_MAX_HOURS"])),
    )


def check_new_password(password: object) -> str:
    """`password` if it may become an account's password; Invalid otherwise."""
    if not isinstance(password, str) or not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise Invalid(
            f"A password must be {MIN_PASSWORD} to {MAX_PASSWORD} characters.",
            {"password": f"{MIN_PASSWORD} to {MAX_PASSWORD} characters"},
        )
    return password


def hash_password(password: str) -> str:
    """What is stored of a password."""
    # scrypt by default; the test suite configures a cheap method to stay fast.
    return generate_password_hash(password, method=current_app.config["PASSWORD_HASH_METHOD"])


def _digest(key: str) -> str:
    # The key is random (256 bits), so a fast hash is enough: the stored id cannot be turned
    # back into a cookie that works.
    return hashlib.sha256(key.encode()).hexdigest()


@functools.cache
def _dummy_hash(method: str) -> str:
    """Compared against when the username is unknown, so both failures take the same time: a
    hash by the method real passwords are hashed with. Made on first use, not at import, where
    it cost every process start (each command, each worker) a tenth of a second of scrypt."""
    return generate_password_hash("not a real password", method=method)


def check_password(username: str, password: str) -> Account | None:
    """The active account with this username and password; None otherwise, at the same cost
    either way (an unknown username is checked against a dummy hash). Opens no session: the
    caller goes on to the second step, if the account has a second factor, or to
    `open_session`."""
    account = db.session.scalars(select(Account).where(Account.username == username)).first()
    if account is None:
        check_password_hash(_dummy_hash(current_app.config["PASSWORD_HASH_METHOD"]), password)
        return None
    if not check_password_hash(account.password_hash, password) or not account.active:
        return None
    return account


@dataclass(frozen=True)
class Client:
    """Where a sign-in comes from, as the account's list of its sessions shows it."""

    address: str | None
    browser: str | None


# How a sign-in proved who signed in, as its audit entry says it.
PROOFS = {
    "password": "password",
    "totp": "password and authenticator app",
    "passkey": "password and passkey",
    "recovery": "password and recovery code",
    "oidc": "single sign-on",
}


def open_session(account: Account, proof: str, client: Client) -> Account | None:
    """Sign `account` in with a new session, proved by `proof` (a key of PROOFS: "oidc" for
    single sign-on, else the password with the second factor used, if any); None if the
    account changed since it was checked.

    On success the account's `session_key` names its new `account_sessions` row, which
    `get_id()` (what flask-login puts in the session cookie) carries, its last sign-in
    (`Account.last_sign_in_at`) is stamped and the sign-in is in the audit log. One write
    transaction locks the account, checks that it is still active with the same password and
    session epoch as when it was checked (a disable or password change may have committed
    meanwhile), stamps it, deletes the account's sessions that can no longer be used (ended,
    idle or too old: pruning at sign-in keeps each account's rows to the sessions it has
    open), inserts the new one (confirmed now) and records the sign-in, so a refused sign-in
    leaves neither stamp nor session."""
    checked = (account.id, account.password_hash, account.session_epoch)
    limits = session_limits()
    key = secrets.token_urlsafe(32)
    with write_transaction() as session:
        locked = session.get(Account, checked[0], with_for_update=True, populate_existing=True)
        if locked is None or not locked.active:
            return None
        if (locked.id, locked.password_hash, locked.session_epoch) != checked:
            return None
        # The app's clock, not the change path's write clock: a sign-in changes no record and
        # needs no ordering against other writers, only a time to show and to count from.
        now = utcnow()
        locked.last_sign_in_at = now
        session.execute(
            delete(AccountSession).where(
                AccountSession.account_id == locked.id,
                or_(
                    AccountSession.ended_at.is_not(None),
                    AccountSession.last_seen_at <= now - limits.idle,
                    AccountSession.created_at <= now - limits.lifetime,
                ),
            )
        )
        session.add(
            AccountSession(
                id=_digest(key),
                account_id=locked.id,
                created_at=now,
                last_seen_at=now,
                confirmed_at=now,
                via="oidc" if proof == "oidc" else "password",
                address=(client.address or "")[:64] or None,
                browser=(client.browser or "")[:300] or None,
            )
        )
        audit.record(
            session,
            [
                audit.entry(
                    Principal(username=locked.username, via="ui", account_id=locked.id),
                    "account.sign-in",
                    f"account {locked.username}",
                    detail=f"signed in with {PROOFS[proof]}"
                    + (f" from {client.address}" if client.address else ""),
                    at=now,
                )
            ],
        )
    locked.session_key = key
    locked.session_via = "oidc" if proof == "oidc" else "password"
    locked.session_confirmed_at = now
    return locked


def _parse(session_id: str) -> tuple[int, int, str] | None:
    """(account id, epoch, key) of a session cookie's id, None if it is not one."""
    parts = session_id.split(":")
    if len(parts) != 3:
        return None
    account_id, epoch, key = parts
    if not (account_id.isdigit() and epoch.isdigit() and key):
        return None
    if int(account_id) > _MAX_INT or int(epoch) > _MAX_INT:
        return None
    return int(account_id), int(epoch), key


def session_account(session_id: str) -> Account | None:
    """The account a session cookie names, if it is active with the same session epoch and its
    session is open: not signed out, used within the idle limit, begun within the absolute one.

    One query checks all of it. The session's last_seen_at is refreshed when it is older than
    TOUCH_EVERY, never waiting behind another writer (see _touch)."""
    parsed = _parse(session_id)
    if parsed is None:
        return None
    account_id, epoch, key = parsed
    limits = session_limits()
    now = utcnow()
    digest = _digest(key)
    row = db.session.execute(
        select(
            Account,
            AccountSession.last_seen_at,
            AccountSession.via,
            AccountSession.confirmed_at,
        )
        .join(AccountSession, AccountSession.account_id == Account.id)
        .where(
            AccountSession.id == digest,
            Account.id == account_id,
            Account.session_epoch == epoch,
            Account.active.is_(True),
            AccountSession.ended_at.is_(None),
            AccountSession.last_seen_at > now - limits.idle,
            AccountSession.created_at > now - limits.lifetime,
        )
    ).first()
    if row is None:
        return None
    account, last_seen, via, confirmed_at = row
    account.session_key = key
    account.session_via = via
    account.session_confirmed_at = confirmed_at
    if now - last_seen >= TOUCH_EVERY:
        _touch(digest, now)
    return account


def _touch(digest: str, now: datetime) -> None:
    """Record that the session was used now: a short write transaction of its own on the
    request's session (no second connection, so a busy pool cannot make the touch wait for
    one). Best effort: if the write cannot be had at once (SQLite's write lock held by a long
    import, say) or fails, it is skipped and the next request tries again; the session then
    ends at most TOUCH_EVERY earlier than it would have."""
    session = db.session()
    if session.new or session.dirty or session.deleted:
        return  # the request has changes of its own under way: not ours to commit
    if session.in_transaction() and session.connection().get_execution_options().get("write_lock"):
        return  # loaded inside a write transaction (database.write_transaction): ditto
    session.commit()  # ends the loader's read; nothing was written
    connection = session.connection()
    raw = connection.connection.driver_connection if connection.dialect.name == "sqlite" else None
    try:
        try:
            if raw is not None:
                raw.execute(f"PRAGMA busy_timeout = {TOUCH_WAIT_MS}")
            session.execute(
                update(AccountSession)
                .where(AccountSession.id == digest, AccountSession.last_seen_at < now)
                .values(last_seen_at=now)
            )
        finally:
            # Put back before the connection returns to the pool (at commit or rollback).
            if raw is not None:
                raw.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        session.commit()
    except DBAPIError as exc:
        session.rollback()
        log.info("session last-seen time not recorded this time: %s", exc.orig)


# A sensitive action asks for the password (and second factor) again when the session's last
# confirmation is older than this (docs/security.md#confirmation).
CONFIRM_FOR = timedelta(minutes=10)


def confirmation_fresh(account: Account) -> bool:
    """Whether the session `account` was loaded for (by its cookie) was signed in or confirmed
    within CONFIRM_FOR; False for an account not loaded by a session."""
    confirmed = account.session_confirmed_at
    return confirmed is not None and utcnow() - confirmed <= CONFIRM_FOR


def session_row_id(account: Account) -> str | None:
    """The stored id (`account_sessions.id`) of the session `account` was loaded for by its
    cookie or signed in with; None for an account not loaded by a session."""
    return _digest(account.session_key) if account.session_key else None


def own_entry(account: Account, action: str, detail: str | None = None) -> dict:
    """An audit entry of something `account` did to itself in a browser (its sessions, its
    factors): the actor is the account, the target `account <username>`."""
    actor = Principal(username=account.username, via="ui", account_id=account.id)
    return audit.entry(actor, action, f"account {account.username}", detail=detail)


def confirm_session(account: Account, proof: str = "password") -> None:
    """Record that the holder of the session `account` was loaded for proved again who they are
    (`proof`, a key of PROOFS: the password and second factor, a passkey, or the identity
    provider): sensitive actions are allowed for CONFIRM_FOR from now. Audited as
    account.confirmed in the same transaction."""
    if not account.session_key:
        return
    now = utcnow()
    with write_transaction() as session:
        session.execute(
            update(AccountSession)
            .where(AccountSession.id == _digest(account.session_key))
            .values(confirmed_at=now)
        )
        detail = f"confirmed with {PROOFS.get(proof, proof)}"
        audit.record(session, [own_entry(account, "account.confirmed", detail)])
    account.session_confirmed_at = now


def end_session(account: Account) -> None:
    """End the session `account` was loaded for (`session_key`), so its cookie, and every copy
    of it, is refused from now on; audited as account.session-ended, "signed out". Other
    sessions of the account stay open."""
    if not account.session_key:
        return
    with write_transaction() as session:
        ended = session.execute(
            update(AccountSession)
            .where(
                AccountSession.id == _digest(account.session_key), AccountSession.ended_at.is_(None)
            )
            .values(ended_at=utcnow())
        )
        if getattr(ended, "rowcount", 0):
            audit.record(session, [own_entry(account, "account.session-ended", "signed out")])
