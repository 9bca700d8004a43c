"""An account's own sign-in sessions as /account/security lists them (docs/security.md#sessions):
which are open, ending one of them, ending every other one.

A session is named on the page and in its Sign out form by a *handle*: the first 16 hex
characters of its stored id (the SHA-256 of the cookie's key). The stored id cannot be turned
back into a cookie, but it is the table's key and need not leave the server whole; 64 bits
tell an account's few sessions apart. Every function takes the signed-in account and touches
only that account's rows, whatever handle it is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, and_, select, update
from sqlalchemy.orm import Session

from ...database import utcnow, write_transaction
from ...errors import Invalid, NotFound
from ...extensions import db
from ...models import Account, AccountSession
from ..history import audit
from . import signin

HANDLE = 16  # hex characters of the stored id that name a session on the page
_HANDLE_SHAPE = re.compile(r"[0-9a-f]{16}")


@dataclass(frozen=True)
class OpenSession:
    handle: str
    created_at: datetime
    last_seen_at: datetime
    address: str | None
    browser: str  # short: "Firefox on Linux"
    via: str  # "password" or "oidc"
    current: bool  # the session this request came with


def _open(account_id: int, now: datetime) -> ColumnElement[bool]:
    """The account's sessions still usable: not ended, within the idle and absolute limits."""
    limits = signin.session_limits()
    return and_(
        AccountSession.account_id == account_id,
        AccountSession.ended_at.is_(None),
        AccountSession.last_seen_at > now - limits.idle,
        AccountSession.created_at > now - limits.lifetime,
    )


def open_sessions(account: Account) -> list[OpenSession]:
    """The open sessions of `account` (the signed-in one), the most recently used first, the
    one this request came with marked `current`. One query."""
    current = signin.session_row_id(account)
    rows = db.session.scalars(
        select(AccountSession)
        .where(_open(account.id, utcnow()))
        .order_by(AccountSession.last_seen_at.desc(), AccountSession.id)
    )
    return [
        OpenSession(
            handle=row.id[:HANDLE],
            created_at=row.created_at,
            last_seen_at=row.last_seen_at,
            address=row.address,
            browser=short_browser(row.browser),
            via=row.via,
            current=row.id == current,
        )
        for row in rows
    ]


def end(account: Account, handle: str) -> None:
    """End one of `account`'s other open sessions, named by its handle: its cookie, and every
    copy of it, is refused from the next request on. NotFound for a handle that names no open
    session of this account (another account's sessions are never touched); Invalid for the
    session of this request (that is Sign out). Audited as account.session-ended, "ended from
    another session", in the same transaction."""
    if not isinstance(handle, str) or not _HANDLE_SHAPE.fullmatch(handle):
        raise NotFound("No such session.")
    current = signin.session_row_id(account)
    if current is not None and current.startswith(handle):
        raise Invalid("This is the session you are using: sign out instead.")
    with write_transaction() as session:
        now = utcnow()
        ended = _end_where(
            session, now, _open(account.id, now), AccountSession.id.startswith(handle)
        )
        if not ended:
            raise NotFound("No such session.")
        detail = "ended from another session"
        audit.record(session, [signin.own_entry(account, "account.session-ended", detail)])


def end_others(account: Account) -> int:
    """End every open session of `account` but the one this request came with ("Sign out
    everywhere else"); how many were ended. Audited as account.session-ended, "every other
    session ended", when any was."""
    current = signin.session_row_id(account) or ""
    with write_transaction() as session:
        now = utcnow()
        ended = _end_where(session, now, _open(account.id, now), AccountSession.id != current)
        if ended:
            detail = "every other session ended"
            audit.record(session, [signin.own_entry(account, "account.session-ended", detail)])
    return ended


def end_all_but(session: Session, account_id: int, keep: str | None) -> int:
    """Inside the caller's transaction: end every session of the account but `keep` (a stored
    id; None ends them all), open or not yet pruned; how many were ended."""
    where = AccountSession.id != keep if keep else AccountSession.id.is_not(None)
    return _end_where(session, utcnow(), AccountSession.account_id == account_id, where)


def _end_where(session: Session, now: datetime, *where: ColumnElement[bool]) -> int:
    result = session.execute(
        update(AccountSession)
        .where(*where, AccountSession.ended_at.is_(None))
        .values(ended_at=now)
        .execution_options(synchronize_session=False)
    )
    return int(getattr(result, "rowcount", 0) or 0)


# The User-Agent's words that name a browser and a system, most specific first (Edge and
# Opera also say Chrome, Chrome also says Safari, Android also says Linux).
_BROWSERS = (
    ("Edg/", "Edge"),
    ("OPR/", "Opera"),
    ("Firefox/", "Firefox"),
    ("Chrome/", "Chrome"),
    ("Chromium/", "Chromium"),
    ("Safari/", "Safari"),
    ("curl/", "curl"),
)
_SYSTEMS = (
    ("Android", "Android"),
    ("iPhone", "iOS"),
    ("iPad", "iPadOS"),
    ("Windows", "Windows"),
    ("Mac OS X", "macOS"),
    ("CrOS", "ChromeOS"),
    ("Linux", "Linux"),
)


def short_browser(user_agent: str | None) -> str:
    """A User-Agent as a person names it: "Chrome on Linux", "Firefox", "unknown browser".
    Matched on a few words only: it is a hint for recognising one's own sessions, not an
    identification (any client can send any User-Agent)."""
    text = user_agent or ""
    browser = next((name for word, name in _BROWSERS if word in text), None)
    system = next((name for word, name in _SYSTEMS if word in text), None)
    if browser and system:
        return f"{browser} on {system}"
    return browser or (f"a browser on {system}" if system else "unknown browser")
