"""The audit log read whole, for the audit CSV: every entry of a filtered view, newest first,
a chunk a query, with the same access rules and redaction as the audit pages (audit.search).

The log grows to millions of entries, and a download must stream at least 100,000 of them a
second (docs/deploy.md, Downloads): each entry goes through every step at once (a chunk
step by step was slower: each step's list no longer in the processor's cache for the next),
the instant's text is cut from SQLite's stored text rather than parsed and formatted again,
and on PostgreSQL the next chunk is read while the caller writes the one before (`_chunks`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import date, datetime
from itertools import chain
from typing import Any

from pydantic_core import from_json
from sqlalchemy import ColumnElement, Text, cast, select

from ...access import CompanyScope, Principal, redact
from ...database import driver_rows
from ...extensions import db
from ...models import AuditEntry
from . import audit_query
from .audit import Shown, filter_conditions

EXPORT_CHUNK = 2000  # entries a query: fewer round trips, a few MB held at once


def export(
    principal: Principal,
    *,
    actor: str | None = None,
    target: str | None = None,
    company: str | None = None,
    date_from: date | str | None = None,
    date_to: date | str | None = None,
    action: str | None = None,
    chunk: int = EXPORT_CHUNK,
) -> Iterator[Shown]:
    """Every entry `audit.search` would page through with these filters (the same access
    rules and redaction), newest first, read `chunk` at a time.

    Access and filters are checked now (Forbidden, Invalid); the rows are read as the
    iterator is consumed, each chunk after the last entry of the one before (at, id), so the
    log is never held in memory and each chunk is one range of the `at` index."""
    filters = (actor, target, company, date_from, date_to, action)
    batches, scope, at_of = _export_source(principal, filters, chunk)
    return _shown_rows(chain.from_iterable(batches), scope, at_of)


_Side = Mapping[str, Any] | None
Exported = tuple[str, str, str, str, str, str, _Side, _Side, str | None]
"""An entry as the audit CSV reads it: at (as `instant_text` writes it), actor, via, action,
target, company_text, before, after, detail (the attributes of `Shown` of the same names)."""


def instant_text(at: datetime) -> str:
    """An entry's instant as the CSV writes it, 'yyyy-mm-dd hh:mm:ss' (strftime's
    '%Y-%m-%d %H:%M:%S': isoformat is the same text for these, in a fifth of the time)."""
    if at.tzinfo is None and at.year >= 1000:
        return at.isoformat(" ", "seconds")
    return at.strftime("%Y-%m-%d %H:%M:%S")


def export_rows(
    principal: Principal,
    *,
    actor: str | None = None,
    target: str | None = None,
    company: str | None = None,
    date_from: date | str | None = None,
    date_to: date | str | None = None,
    action: str | None = None,
    chunk: int = EXPORT_CHUNK,
) -> Iterator[Exported]:
    """`export` with the same arguments and guarantees (access and filters checked now, the
    rows read `chunk` at a time as consumed, the same redaction), each entry as the tuple of
    the attributes the audit CSV reads (`Exported`): equal to `(instant_text(e.at), e.actor,
    e.via, e.action, e.target, e.company_text, e.before, e.after, e.detail)` of each `e` of
    `export`. No `Shown` per entry, and a System-Admin's entries not through `redact`, which
    leaves every entry of scope None as it is: a million entries' objects were a tenth of the
    download's time."""
    filters = (actor, target, company, date_from, date_to, action)
    batches, scope, at_of = _export_source(principal, filters, chunk)
    rows = chain.from_iterable(batches)
    text_of = _instant_texts(at_of)
    return _all_rows(rows, text_of) if scope is None else _redacted_rows(rows, scope, text_of)


def _export_source(
    principal: Principal, filters: tuple[Any, ...], chunk: int
) -> tuple[Iterator[list[Any]], CompanyScope, AtOf]:
    """What both exports read: access and filters checked now (Forbidden, Invalid), then the
    rows (`_chunks`, read as consumed), the reader's scope, and what makes a row's `at` a
    datetime. `filters`: actor, target, company, date_from, date_to, action."""
    actor, target, company, date_from, date_to, action = filters
    conditions = filter_conditions(
        principal, actor, target, company, date_from, date_to, action=action
    )
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError("chunk must be a positive integer")
    return _chunks(conditions, chunk), principal.auditable_companies(), _instant_reader()


def _json(text: str | None) -> Any:
    """A JSON column's value from its stored text, as SQLAlchemy's JSON type decodes it
    (json.loads): pydantic_core's parser gives the same values (ints of any size, floats to
    the last bit, NaN and Infinity, the last of a repeated key) in a third of the time, and
    what it refuses (a lone surrogate escape, '\\ud800'; nesting past 200 levels) json.loads
    reads."""
    if text is None or text == "null":  # no side, stored as SQL NULL or as JSON null
        return None
    try:
        return from_json(text)
    except ValueError:
        return json.loads(text)


# The columns the rows of `_chunks` hold, in this order.
_EXPORTED = ("id", "at", "actor", "via", "action", "detail", "request_id")
_REDACTED = ("company", "other_company", "before", "after", "target")
_JSON_COLUMNS = frozenset({"before", "after"})


def _shown_rows(rows: Iterable[Sequence[Any]], scope: CompanyScope, at_of: AtOf) -> Iterator[Shown]:
    """`shown` of each row of `_chunks`, by position: a million rows' attribute look-ups by
    name were a tenth of the audit CSV's time."""
    for id_, at, actor, via, action, detail, request_id, company, other, old, new, target in rows:
        seen = redact(scope, company, other, _json(old), _json(new), target)
        yield Shown(id_, at_of(at), actor, via, action, detail, request_id, seen)


def _all_rows(rows: Iterable[Sequence[Any]], text_of: TextOf) -> Iterator[Exported]:
    """Every row as scope None sees it. redact(None, ...) is Seen(company, other_company,
    before, after, target=target), nothing hidden; so Seen.company_text is the company ('' for
    none), then ' (from <other>)' for a move, and Shown.target the target or ''."""
    for _, at, actor, via, action, detail, _, company, other, old, new, target in rows:
        shown_company = f"{company or ''} (from {other})" if other else company or ""
        yield (
            text_of(at), actor, via, action, target or "", shown_company, _json(old), _json(new),
            detail,
        )  # fmt: skip


def _redacted_rows(
    rows: Iterable[Sequence[Any]], scope: frozenset[str], text_of: TextOf
) -> Iterator[Exported]:
    """Every row through `redact`, as `shown` passes it."""
    for _, at, actor, via, action, detail, _, company, other, old, new, target in rows:
        seen = redact(scope, company, other, _json(old), _json(new), target)
        yield (
            text_of(at), actor, via, action, seen.target or "", seen.company_text, seen.before,
            seen.after, detail,
        )  # fmt: skip


def _columns() -> list[ColumnElement[Any]]:
    """The columns `_chunks` reads, in the order of _EXPORTED and _REDACTED. `before` and
    `after` as their stored JSON text (`_json` decodes it): SQLAlchemy's JSON type decoding
    them was a quarter of the audit CSV's time. A cast to text on both databases: the
    PostgreSQL column is `json` (migrations 0001), whose text is the text stored."""
    table = AuditEntry.__table__
    return [
        cast(table.c[name], Text).label(name) if name in _JSON_COLUMNS else table.c[name]
        for name in (*_EXPORTED, *_REDACTED)
    ]


AtOf = Callable[[Any], Any]  # the driver's `at` to a datetime
TextOf = Callable[[Any], str]  # the driver's `at` to its `instant_text`


def _same(value: Any) -> Any:
    return value


def _instant_reader() -> AtOf:
    """What makes the driver's value of `at` the datetime SQLAlchemy reads (SQLite: its
    text, through the DATETIME type's own result processor; PostgreSQL: a datetime already).
    The other columns `_chunks` reads need nothing: a dialect where one would is refused
    here, rather than read differently."""
    dialect = db.session.get_bind().dialect
    processors = [
        column.type.dialect_impl(dialect).result_processor(dialect, None) for column in _columns()
    ]
    if any(p is not None for i, p in enumerate(processors) if i != _EXPORTED.index("at")):
        raise RuntimeError(f"audit export: the {dialect.name} driver's rows need converting")
    return processors[_EXPORTED.index("at")] or _same


def _instant_texts(at_of: AtOf) -> TextOf:
    """What makes the driver's `at` its `instant_text`. SQLite's driver gives the text
    SQLAlchemy stored, 'yyyy-mm-dd hh:mm:ss.ffffff' (its DATETIME type's storage format): for
    a year from 1000 on, its first 19 characters are that text already, without parsing a
    datetime to write it again (a sixth of a download's time); any other text goes the long
    way, through the datetime SQLAlchemy would read."""
    if db.session.get_bind().dialect.name != "sqlite":
        # PostgreSQL's driver gives the datetime itself (at_of is _same): no call between.
        return instant_text if at_of is _same else lambda at: instant_text(at_of(at))

    def cut(at: str) -> str:
        if len(at) == 26 and at[10] == " " and at[0] != "0":
            return at[:19]
        return instant_text(at_of(at))

    return cut


def _chunks(conditions: list[ColumnElement[bool]], chunk: int) -> Iterator[list[Any]]:
    """The rows of `conditions` (`_columns`), newest first, as lists of `chunk` rows (the
    last one shorter, or empty), as the driver returns them: `at` needs `_instant_reader` to
    be the datetime SQLAlchemy would read.

    On PostgreSQL the next chunk is read while the caller handles this one: the query runs in
    a second thread, on the session's connection and in its transaction, which nothing else
    uses in the meantime (the caller only formats and writes rows). psycopg leaves Python's
    lock while the server works and the rows travel, then decodes them all at once, so that
    part of a download overlaps the formatting. SQLite's driver takes the lock back after
    every row: a second thread would wait for it row by row, and read no sooner (measured:
    no gain), so there each chunk is read when it is needed. Leaving early (the client gone,
    an error) waits for a read under way before the connection goes back.

    Every statement goes through SQLAlchemy (its parameters, events, the transaction); only
    SQLAlchemy's Row per row is left out: it cost a third of the rows' reading."""
    table = AuditEntry.__table__
    query = select(*_columns()).order_by(table.c.at.desc(), table.c.id.desc()).limit(chunk)
    at_of = _instant_reader()  # for each chunk's last entry, where the next one starts
    # The session's connection: a Core statement needs none of the ORM's result handling,
    # which cost as much as reading the rows.
    connection = db.session.connection()
    ahead = connection.dialect.name == "postgresql"
    with ThreadPoolExecutor(1, "audit-export") if ahead else _Now() as reader:
        pending = reader.submit(driver_rows, connection, query.where(*conditions))
        try:
            while True:
                rows = pending.result()
                if len(rows) < chunk:
                    yield rows
                    return
                after = audit_query.older_than((at_of(rows[-1][1]), rows[-1][0]))
                pending = reader.submit(driver_rows, connection, query.where(*conditions, after))
                yield rows
        finally:
            # A read still under way ends before the connection is given back (its error,
            # if any, no longer matters: the download ended without it).
            if not pending.cancel():
                pending.exception()


class _Now(contextlib.AbstractContextManager["_Now"]):
    """An executor that runs each read when it is submitted, in the caller's thread."""

    def __exit__(self, *_exc: object) -> None:
        return None

    def submit(self, read: Callable[..., list[Any]], *args: Any) -> Future[list[Any]]:
        done: Future[list[Any]] = Future()
        done.set_result(read(*args))
        return done
