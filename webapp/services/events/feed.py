"""Reading the change events: POST /rest/events/read and the webhook deliveries (docs/events.md).

Events are read in id order after a given id. Ids follow commit order (services/events/journal.py),
so a reader that asks for what follows the last id it has seen never misses an event.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import ColumnElement, Row, and_, func, or_, select

from ...access import CompanyScope, Principal, within
from ...errors import Invalid
from ...extensions import db
from ...models import Event, EventTxn
from ..fields import check_format
from . import journal
from .journal import TYPES

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_WAIT = 30
MAX_ID = 2**63 - 1  # the largest id the database holds (BIGINT): a larger `after` is refused
POLL_SECONDS = 0.2  # how often a waiting read looks for a new commit
FIELDS = ("after", "limit", "scope", "wait")


@dataclass(frozen=True)
class Query:
    """A checked read: events after `after`, at most `limit`, of `companies` (None: any) and
    `types` (None: any), waiting up to `wait` seconds for the first one."""

    after: int = 0
    limit: int = DEFAULT_LIMIT
    companies: frozenset[str] | None = None
    types: frozenset[str] | None = None
    wait: float = 0


def _integer(body: Mapping[str, Any], field: str, default: int, low: int, high: int | None) -> int:
    value = body.get(field)
    if value is None:  # absent or null: the default (docs/api.md, field formats)
        value = default
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)  # JSON has one number type: 5.0 is the integer 5 (fields.parse_int)
    span = f"from {low} to {high}" if high is not None else f"of at least {low}"
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise Invalid(f"'{field}' must be a whole number {span}.", {field: f"must be {span}"})
    if high is not None and value > high:
        raise Invalid(f"'{field}' must be a whole number {span}.", {field: f"must be {span}"})
    return value


def _names(
    scope: Mapping[str, Any], field: str, check: Callable[[Any], str | None]
) -> frozenset[str] | None:
    if field not in scope:
        return None
    values = scope[field]
    where = f"scope.{field}"
    if not isinstance(values, list):
        raise Invalid(f"'{where}' must be an array.", {where: "must be an array"})
    for i, value in enumerate(values):
        if (why := check(value)) is not None:
            raise Invalid(f"'{where}[{i}]' {why}.", {f"{where}[{i}]": why})
    return frozenset(values)


def _type_problem(value: Any) -> str | None:
    return (
        None if isinstance(value, str) and value in TYPES else f"must be one of {', '.join(TYPES)}"
    )


def parse(body: Mapping[str, Any]) -> Query:
    """The read's fields checked (docs/events.md#reading-them-post-resteventsread): Invalid naming
    the first one at fault, or an unknown one."""
    for key in body:
        if key not in FIELDS:
            raise Invalid(f"Unknown field '{key}'.", {key: "unknown field"})
    scope = body.get("scope")
    if scope is None:  # absent or null: no narrowing ([], "", 0 or false are refused below)
        scope = {}
    if not isinstance(scope, Mapping):
        raise Invalid("'scope' must be an object.", {"scope": "must be an object"})
    for key in scope:
        if key not in ("company", "type"):
            raise Invalid(f"Unknown field 'scope.{key}'.", {f"scope.{key}": "unknown field"})
    wait = 0 if body.get("wait") is None else body["wait"]
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait <= MAX_WAIT:
        raise Invalid(
            f"'wait' must be a number of seconds from 0 to {MAX_WAIT}.",
            {"wait": f"must be 0 to {MAX_WAIT}"},
        )
    return Query(
        after=_integer(body, "after", 0, 0, MAX_ID),
        limit=_integer(body, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT),
        companies=_names(scope, "company", lambda v: check_format("company", v)),
        types=_names(scope, "type", _type_problem),
        wait=float(wait),
    )


@dataclass(frozen=True)
class Feed:
    values: list[dict[str, Any]]
    last: int


def read(principal: Principal, query: Query) -> Feed:
    """The events after `query.after` that the principal may read and the query selects, in id
    order, at most `query.limit`; with none yet, wait up to `query.wait` seconds for one.

    Guarantees: a System-Admin reads every event, a Company-Admin only those about a company
    it administers (either side of a move), silently; a company it may not see is given as
    null wherever the event names it. `last` is the id of the last event returned, or
    `query.after`. No database transaction is held while waiting."""
    principal.require_events()
    visible = principal.event_companies()
    companies = _narrowed(visible, query.companies)
    deadline = time.monotonic() + query.wait
    while True:
        # Before the read: a commit after it wakes the wait below (no wait: not needed).
        newest = journal.newest() if query.wait else 0
        rows = select_rows(query.after, query.limit, companies, query.types)
        if rows or time.monotonic() >= deadline:
            break
        db.session.rollback()  # end the read's transaction: nothing held while waiting
        if not _wait_for_commit(newest, deadline):
            break
    values = [shape(row, visible) for row in rows]
    return Feed(values, values[-1]["id"] if values else query.after)


def _narrowed(visible: CompanyScope, asked: frozenset[str] | None) -> CompanyScope:
    if asked is None:
        return visible
    return asked if visible is None else asked & visible


def _wait_for_commit(newest: int, deadline: float) -> bool:
    """Sleep until an event newer than `newest` is committed (True) or the deadline (False)."""
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(POLL_SECONDS, left))
        found = journal.newest()
        db.session.rollback()
        if found > newest:
            return True
    return False


EVENT_ID = (EventTxn.first_id + Event.seq).label("id")
COLUMNS = (
    EVENT_ID,
    EventTxn.at,
    EventTxn.actor,
    Event.type,
    Event.company,
    Event.other_company,
    Event.dialcode,
    Event.number,
    Event.username,
    Event.before_exten,
    Event.after_exten,
)


def select_rows(
    after: int,
    limit: int,
    companies: CompanyScope,
    types: frozenset[str] | None = None,
) -> list[Row[Any]]:
    """The committed events after id `after` of `companies` (either side of a move; None:
    every company) and `types`, at most `limit`, in id order: rows of COLUMNS."""
    conditions: list[ColumnElement[bool]] = [
        EventTxn.last_id > after,
        (EventTxn.first_id + Event.seq) > after,
    ]
    if companies is not None:
        conditions.append(_about(companies, after, bounded=_near(after)))
    if types is not None:
        conditions.append(Event.type.in_(sorted(types)))
    query = (
        select(*COLUMNS)
        .join(Event, Event.txn_id == EventTxn.id)
        .where(*conditions)
        .order_by(EventTxn.last_id, Event.seq)
        .limit(limit)
    )
    return cast(list[Row[Any]], db.session.execute(query).all())


# How far behind the newest event a company-filtered read may start for its plan to begin from
# the transactions committed since (below): within it, that costs a few index entries per
# transaction; beyond it, the companies' own events are read in their index's order instead.
NEAR = 100_000


def _near(after: int) -> bool:
    # The newest event kept, not the counter: what lies between it and `after` is what such a
    # read may walk (the counter also counts events deleted since, by a bench's clean-up say).
    newest = db.session.scalar(select(func.max(EventTxn.last_id))) or 0
    return newest - after <= NEAR


def _about(companies: frozenset[str], after: int, bounded: bool) -> ColumnElement[bool]:
    """Events about `companies`: their own company, or a move away from one. `bounded`: only
    in the transactions from the oldest one committed after `after` on (none older can hold an
    event after it), a bound on each side's index (company, txn_id), so a reader that is up to
    date reads a few entries instead of every event of its companies. The bound is a subquery
    of the same statement, so of the same snapshot: a commit in between cannot slip past it.
    Either way the same events; only the cost differs."""
    own, moved = within(Event.company, companies), within(Event.other_company, companies)
    if not bounded:
        return or_(own, moved)
    # `id + 0`: a minimum SQLite and PostgreSQL find from the index on last_id (the recent
    # entries); min(id) they would find by walking the primary key from its start.
    oldest = select(func.min(EventTxn.id + 0)).where(EventTxn.last_id > after).scalar_subquery()
    return or_(and_(own, Event.txn_id >= oldest), and_(moved, Event.txn_id >= oldest))


def _hide(company: str | None, visible: CompanyScope) -> str | None:
    return company if visible is None or company in visible else None


def shape(row: Row[Any], visible: CompanyScope = None) -> dict[str, Any]:
    """One event as the API and the webhooks send it (models.Event's columns given back as
    the record's fields before and after); companies outside `visible` as null."""
    company = _hide(row.company, visible)
    kind, _, verb = row.type.partition(".")
    if kind == "ddi":
        key = {"dialcode": row.dialcode, "number": row.number}
    else:
        key = {"company": company, "username": row.username}

    def record(exten: str | None, owner: str | None) -> dict[str, Any]:
        if kind == "ddi":
            return {**key, "virt_exten": exten, "company": owner}
        return {"username": row.username, "virt_exten": exten, "company": owner}

    before_company = _hide(row.other_company, visible) if row.other_company else company
    return {
        "id": row.id,
        "at": row.at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "type": row.type,
        "actor": row.actor,
        "company": company,
        "key": key,
        "before": None if verb == "created" else record(row.before_exten, before_company),
        "after": None if verb == "deleted" else record(row.after_exten, company),
    }
