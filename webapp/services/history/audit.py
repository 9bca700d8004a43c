"""The audit log: who did what, when, before and after, in the same transaction as the change."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from pydantic_core import from_json
from sqlalchemy import ColumnElement, Text, cast, false, or_, select
from sqlalchemy.orm import Session

from ...access import TARGET_COMPANY, CompanyScope, Principal, Seen, redact, within
from ...database import insert_rows, utcnow
from ...errors import Invalid
from ...extensions import db
from ...models import AuditEntry
from ...observability.context import current_request_id
from ..fields import ISO_DATE
from . import actions, audit_query


@dataclass(frozen=True, slots=True)
class AuditData:
    """One audit entry without its instant and actor, which the change path adds."""

    action: str
    target: str
    company: str | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    detail: str | None = None
    other_company: str | None = None  # a move's old company: the entry shows in its audit too

    def entry(self, principal: Principal, at: datetime) -> dict[str, Any]:
        """The audit row of this change, made by `principal` at `at` (for `record`)."""
        return entry(
            principal,
            self.action,
            self.target,
            company=self.company,
            before=self.before,
            after=self.after,
            detail=self.detail,
            other_company=self.other_company,
            at=at,
        )


@dataclass(frozen=True, slots=True)
class Shown:
    """An audit entry as one reader may see it: its columns, with `company`, `other_company`,
    `before` and `after` passed through access.redact (`seen` keeps what was hidden)."""

    id: int
    at: datetime
    actor: str
    via: str
    action: str
    detail: str | None
    request_id: str | None
    seen: Seen

    @property
    def company(self) -> str | None:
        return self.seen.company

    @property
    def other_company(self) -> str | None:
        return self.seen.other_company

    @property
    def before(self) -> Mapping[str, Any] | None:
        return self.seen.before

    @property
    def after(self) -> Mapping[str, Any] | None:
        return self.seen.after

    @property
    def company_text(self) -> str:
        return self.seen.company_text

    @property
    def target(self) -> str:
        return self.seen.target or ""


def shown(row: Any, scope: CompanyScope) -> Shown:
    """An entry (an AuditEntry or a row of its columns) as a reader of the companies `scope`
    may see it (access.redact): nothing of a company outside them."""
    return Shown(
        id=row.id,
        at=row.at,
        actor=row.actor,
        via=row.via,
        action=row.action,
        detail=row.detail,
        request_id=row.request_id,
        seen=redact(scope, row.company, row.other_company, row.before, row.after, row.target),
    )


def entry(
    principal: Principal,
    action: str,
    target: str,
    *,
    company: str | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    detail: str | None = None,
    other_company: str | None = None,
    at: datetime | None = None,
) -> dict[str, Any]:
    """One audit row as a dict, for `record`. `other_company`: the company a record moved
    away from (`company` is the one it moved to); the entry is in the audit of both."""
    return {
        "at": at or utcnow(),
        "actor": principal.username,
        "via": principal.via,
        "action": action,
        "target": target,
        "company": company,
        "other_company": other_company,
        "before": before,
        "after": after,
        "detail": detail,
    }


def record(session: Session, entries: list[dict[str, Any]]) -> None:
    """Add audit rows to the caller's transaction: they commit or roll back with the change.
    Written during a request, each carries the request's id (X-Request-ID, the id of its log
    lines); from the command line none (NULL)."""
    if (request_id := current_request_id()) is not None:
        # Here rather than in entry(): one look-up for the batch, not one per row (an import
        # writes hundreds of thousands).
        for row in entries:
            row["request_id"] = request_id
    # Core (COPY on PostgreSQL): the ORM's bulk path costs a third of a 1,000-row batch create.
    insert_rows(session, AuditEntry.__table__, entries)


def _day(value: date | str | None, field: str) -> date | None:
    """A filter date: a `date`, or 'yyyy-mm-dd' text ('' or None: no filter)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):  # a datetime is a date too; keep only its day
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str) and ISO_DATE.fullmatch(value.strip()):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise Invalid(f"'{field}' must be a date as yyyy-mm-dd.", {field: "must be yyyy-mm-dd"})


def _text(value: str | None) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def about(scope: CompanyScope) -> ColumnElement[bool]:
    """Entries about a company in `scope`: its own (`company`), or a move away from it
    (`other_company`). Each side is one indexed column, so each is an index range (SQLite's
    multi-index OR, PostgreSQL's BitmapOr)."""
    return or_(within(AuditEntry.company, scope), within(AuditEntry.other_company, scope))


def record_forms(target: str, scope: CompanyScope) -> tuple[str, ...]:
    """The forms of the record filter (audit_query.targets) a reader of `scope` may look for:
    one naming a company outside it (`user umbrella/ana`) finds nothing, as finding a move
    filed under it would say where the record went (access.redact hides it on the rows)."""
    forms = audit_query.targets(target)
    if scope is None:
        return forms
    return tuple(f for f in forms if (m := TARGET_COMPANY.match(f)) is None or m[1] in scope)


def _action(value: str | None) -> str | None:
    """The action filter: an action code ('ddi.delete', actions.NAMES), or None for none;
    Invalid for text that is no action code."""
    text = _text(value)
    if text is not None and not actions.is_code(text):
        raise Invalid("Action: not an action of the log.", {"action": "not an action of the log"})
    return text


def _conditions(
    principal: Principal,
    actor: str | None,
    target: str | None,
    company: str | None,
    date_from: date | str | None,
    date_to: date | str | None,
    implied: frozenset[str] = frozenset(),
    action: str | None = None,
) -> list[ColumnElement[bool]]:
    """The filters of `search` and `export` as SQL conditions, access included; Forbidden or
    Invalid before anything is read. `implied` names conditions left out because the caller's
    branches hold them already ('scope', 'company', 'actor', 'action')."""
    principal.require_audit()
    start, end = _day(date_from, "date_from"), _day(date_to, "date_to")
    if start and end and end < start:
        raise Invalid(
            "The 'to' date is before the 'from' date.", {"date_to": "must not be before 'from'"}
        )
    scope = principal.auditable_companies()
    conditions = [] if "scope" in implied else [about(scope)]
    if (actor := _text(actor)) and "actor" not in implied:
        conditions.append(AuditEntry.actor == actor)
    if (action := _action(action)) and "action" not in implied:
        conditions.append(AuditEntry.action == action)
    if target := _text(target):
        conditions.append(AuditEntry.target.in_(record_forms(target, scope)))
    if (company := _text(company)) and scope is not None and company not in scope:
        # The entries about a company the reader may not see are about the reader's too only
        # when a record moved between them: finding them would say where it went.
        conditions.append(false())
    elif company and "company" not in implied:
        conditions.append(about(frozenset({company})))
    if start:
        conditions.append(AuditEntry.at >= datetime.combine(start, time.min))
    if end and end < date.max:  # 9999-12-31 has no next day: no upper bound
        conditions.append(AuditEntry.at < datetime.combine(end + timedelta(days=1), time.min))
    return conditions


def search(
    principal: Principal,
    *,
    actor: str | None = None,
    target: str | None = None,
    company: str | None = None,
    date_from: date | str | None = None,
    date_to: date | str | None = None,
    action: str | None = None,
    after: Any = None,
    before: Any = None,
    oldest: bool = False,
    page: int | None = None,
    per_page: int = 50,
) -> audit_query.AuditPage[Shown]:
    """One page of the audit log, newest first, and how many entries match (up to
    audit_query.COUNT_CAP), at any size of the log (audit_query).

    A System-Admin reads every entry; a Company-Admin only entries about a company it
    administers (silently: others are not counted); anyone else gets Forbidden. An entry is
    about its `company` and, for a move between companies, the company the record left
    (`other_company`); of a move, the side in a company the reader may not see is absent, its
    company and its values (access.redact). Filters: `actor` exact username; `target` a record,
    matched exactly in any form the log may name it (audit_query.targets: '+44 20 7123 4567',
    '44:2071234567', 'acme/ana', 'bob', or the target as stored, any case; a form naming a
    company the reader may not see finds nothing); `company` exact (either side of a move; one
    the reader may not see finds nothing); `date_from` and `date_to` whole UTC days, both
    inclusive; `action` an action code, exact ('ddi.delete'; actions.NAMES names them).
    Position: at most one of `after` or `before` an entry id (Older, Newer), `oldest`, or a
    1-based `page` (an offset, for old addresses). Invalid for a bad filter or position, before
    anything is read.
    """
    principal.require_audit()
    positions = {"after": after is not None, "before": before is not None}
    audit_query.check_position(
        per_page, page, {**positions, "last": oldest, "page": page is not None}
    )
    scope = principal.auditable_companies()
    record = record_forms(target, scope) if (target := _text(target)) else ()
    parts = audit_query.branches(scope, record, _text(company), _text(actor), _action(action))
    # What the branches hold by themselves is no condition of its own: an OR over two columns
    # would lead PostgreSQL's planner to read both indexes whole (100 ms at 3M entries).
    implied = audit_query.implied(scope, record, _text(company))
    conditions = _conditions(
        principal, actor, target, company, date_from, date_to, implied, action=action
    )
    if target and not record:  # every form named a company the reader may not see
        return audit_query.AuditPage([], 0, False, False, False)
    found = audit_query.read_page(
        conditions,
        parts,
        after=None if after is None else audit_query.anchor(after, "after"),
        before=None if before is None else audit_query.anchor(before, "before"),
        oldest=oldest,
        number=page,
        per_page=per_page,
    )
    rows = [shown(row, scope) for row in found.rows]
    return audit_query.AuditPage(rows, found.total, found.more, found.has_newer, found.has_older)


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
    """Every entry `search` would page through with these filters (the same access rules and
    redaction), newest first, read `chunk` at a time.

    Access and filters are checked now (Forbidden, Invalid); the rows are read as the
    iterator is consumed, each chunk after the last entry of the one before (at, id), so the
    log is never held in memory and each chunk is one range of the `at` index."""
    filters = (actor, target, company, date_from, date_to, action)
    rows, scope, at_of = _export_source(principal, filters, chunk)
    return _shown_rows(rows, scope, at_of)


_Side = Mapping[str, Any] | None
Exported = tuple[datetime, str, str, str, str, str, _Side, _Side, str | None]
"""An entry as the audit CSV reads it: at, actor, via, action, target, company_text, before,
after, detail (the attributes of `Shown` of the same names)."""


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
    the attributes the audit CSV reads (`Exported`): equal to `(e.at, e.actor, e.via,
    e.action, e.target, e.company_text, e.before, e.after, e.detail)` of each `e` of `export`.
    No `Shown` per entry, and a System-Admin's entries not through `redact`, which leaves
    every entry of scope None as it is: a million entries' objects were a tenth of the
    download's time."""
    filters = (actor, target, company, date_from, date_to, action)
    rows, scope, at_of = _export_source(principal, filters, chunk)
    return _all_rows(rows, at_of) if scope is None else _redacted_rows(rows, scope, at_of)


def _export_source(
    principal: Principal, filters: tuple[Any, ...], chunk: int
) -> tuple[Iterator[Sequence[Any]], CompanyScope, AtOf]:
    """What both exports read: access and filters checked now (Forbidden, Invalid), then the
    rows (`_chunks`, read as consumed), the reader's scope, and what makes a row's `at` a
    datetime. `filters`: actor, target, company, date_from, date_to, action."""
    actor, target, company, date_from, date_to, action = filters
    conditions = _conditions(principal, actor, target, company, date_from, date_to, action=action)
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


def _all_rows(rows: Iterable[Sequence[Any]], at_of: AtOf) -> Iterator[Exported]:
    """Every row as scope None sees it. redact(None, ...) is Seen(company, other_company,
    before, after, target=target), nothing hidden; so Seen.company_text is the company ('' for
    none), then ' (from <other>)' for a move, and Shown.target the target or ''."""
    for _, at, actor, via, action, detail, _, company, other, old, new, target in rows:
        shown_company = f"{company or ''} (from {other})" if other else company or ""
        yield (
            at_of(at), actor, via, action, target or "", shown_company, _json(old), _json(new),
            detail,
        )  # fmt: skip


def _redacted_rows(
    rows: Iterable[Sequence[Any]], scope: frozenset[str], at_of: AtOf
) -> Iterator[Exported]:
    """Every row through `redact`, as `shown` passes it."""
    for _, at, actor, via, action, detail, _, company, other, old, new, target in rows:
        seen = redact(scope, company, other, _json(old), _json(new), target)
        yield (
            at_of(at), actor, via, action, seen.target or "", seen.company_text, seen.before,
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


def _chunks(conditions: list[ColumnElement[bool]], chunk: int) -> Iterator[Sequence[Any]]:
    """The rows of `conditions` (`_columns`), newest first, `chunk` a query, as the driver
    returns them: `at` needs `_instant_reader` to be the datetime SQLAlchemy would read.
    Every statement goes through SQLAlchemy (its parameters, events, the session's
    transaction); only SQLAlchemy's Row per row is left out: it cost a third of the rows'
    reading, more than anything else the export does per row."""
    table = AuditEntry.__table__
    query = select(*_columns()).order_by(table.c.at.desc(), table.c.id.desc()).limit(chunk)
    at_of = _instant_reader()  # for each chunk's last entry, where the next one starts
    last: tuple[datetime, int] | None = None
    while True:
        where = list(conditions)
        if last is not None:
            where.append(audit_query.older_than(last))
        # The session's connection, in its transaction: a Core statement needs none of the
        # ORM's result handling, which cost as much as reading the rows.
        result = db.session.connection().execute(query.where(*where))
        rows = result.cursor.fetchall()
        result.close()
        yield from rows
        if len(rows) < chunk:
            return
        last = (at_of(rows[-1][1]), rows[-1][0])
