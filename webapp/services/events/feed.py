"""Reading the change events: POST /rest/events/read and the webhook deliveries (docs/events.md).

Events are read in id order after a given id. Ids follow commit order (services/events/journal.py),
so a reader that asks for what follows the last id it has seen never misses an event.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, cast

from pydantic import Field, TypeAdapter, with_config
from sqlalchemy import ColumnElement, Row, and_, func, or_, select
from typing_extensions import TypeAliasType, TypedDict

from ...access import CompanyScope, Principal, redact, within
from ...errors import Invalid
from ...extensions import db
from ...models import Event, EventTxn
from ..fields import STRICT, Bounded, CompanyList, validated
from . import journal, wait_slots
from .journal import TYPES

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_WAIT = 30
MAX_ID = 2**63 - 1  # the largest id the database holds (BIGINT): a larger `after` is refused
# Event types one read may list: every type many times over (a longer list is a 400).
MAX_TYPES = 100
POLL_SECONDS = 0.2  # how often a waiting read looks for a new commit
AFTER = Bounded(0, MAX_ID, 0, why=f"must be from 0 to {MAX_ID}")
LIMIT = Bounded(1, MAX_LIMIT, DEFAULT_LIMIT, why=f"must be from 1 to {MAX_LIMIT}")
WAIT = Bounded(0, MAX_WAIT, 0, integer=False, why=f"must be 0 to {MAX_WAIT}")
EventType = TypeAliasType(
    "EventType",
    Annotated[
        Literal[TYPES],  # type: ignore[valid-type]
        Field(description="What happened to which kind of record."),
    ],
)


@with_config(STRICT)
class EventScope(TypedDict, total=False):
    """Only the events of these companies and types."""

    company: CompanyList
    type: Annotated[list[EventType], Field(max_length=MAX_TYPES)]


@with_config(STRICT)
class ReadEventsRequest(TypedDict, total=False):
    """The body of readEvents: every member optional."""

    # In the order the read has always checked them.
    wait: (
        Annotated[
            float, WAIT, Field(description="Seconds to wait for an event when none is there yet.")
        ]
        | None
    )
    after: Annotated[int, AFTER, Field(description="The last id already read.")] | None
    limit: Annotated[int, LIMIT] | None
    scope: EventScope | None


READ = TypeAdapter(ReadEventsRequest)


@dataclass(frozen=True)
class Query:
    """A checked read: events after `after`, at most `limit`, of `companies` (None: any) and
    `types` (None: any), waiting up to `wait` seconds for the first one."""

    after: int = 0
    limit: int = DEFAULT_LIMIT
    companies: frozenset[str] | None = None
    types: frozenset[str] | None = None
    wait: float = 0


def parse(body: Mapping[str, Any]) -> Query:
    """The read's fields checked (ReadEventsRequest, docs/events.md): Invalid naming the first
    one at fault, or an unknown one. Null is the default, as absent."""
    values = validated(READ, body, _invalid)
    scope = values.get("scope") or {}
    companies, types = scope.get("company"), scope.get("type")
    return Query(
        after=AFTER.parse(values.get("after"), "after"),
        limit=LIMIT.parse(values.get("limit"), "limit"),
        companies=None if companies is None else frozenset(companies),
        types=None if types is None else frozenset(types),
        wait=float(WAIT.parse(values.get("wait"), "wait")),
    )


def _invalid(where: tuple[str | int, ...], why: str) -> Invalid:
    path = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in where)[1:]
    if why == "unknown field":
        message = f"Unknown field '{path}'."
    elif path == "wait":
        message = f"'wait' must be a number of seconds from 0 to {MAX_WAIT}."
    elif path in ("after", "limit"):
        message = f"'{path}' must be a whole number {why.removeprefix('must be ')}."
    else:
        message = f"'{path}' {why}."
    return Invalid(message, {path: why})


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
    `query.after`. No database transaction is held while waiting.

    A read that finds no event and may wait (`wait` above 0) holds one of its account's
    EVENTS_MAX_WAITING slots while it waits (wait_slots.slot), until it returns or raises; with
    every slot taken it raises TooManyRequests at once instead of waiting. A read with `wait`
    0, or that finds events at once, takes no slot and is never refused for one."""
    principal.require_events()
    visible = principal.event_companies()
    companies = _narrowed(visible, query.companies)
    deadline = time.monotonic() + query.wait
    # Before the read: a commit after it wakes the wait below (no wait: not needed).
    newest = journal.newest() if query.wait else 0
    rows = select_rows(query.after, query.limit, companies, query.types)
    if not rows and query.wait:
        db.session.rollback()  # end the read's transaction: nothing held while waiting
        with wait_slots.slot(principal.account_id):
            rows = _wait_for_rows(query, companies, newest, deadline)
    values = [shape(row, visible) for row in rows]
    return Feed(values, values[-1]["id"] if values else query.after)


def _wait_for_rows(
    query: Query, companies: CompanyScope, newest: int, deadline: float
) -> list[Row[Any]]:
    """The query's rows once a commit after event `newest` brings some, or none at the
    deadline; no transaction held between looks."""
    while _wait_for_commit(newest, deadline):
        newest = journal.newest()
        rows = select_rows(query.after, query.limit, companies, query.types)
        if rows:
            return rows
        db.session.rollback()
    return []


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
    Event.before_state,
    Event.after_state,
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


def shape(row: Row[Any], visible: CompanyScope = None) -> dict[str, Any]:
    """One event as the API and the webhooks send it (models.Event's columns given back as
    the record's fields before and after), as a reader of the companies `visible` (None: every
    company) may see it: access.redact drops the side of a move in a company outside them,
    values and identifier (null)."""
    kind, _, verb = row.type.partition(".")

    def record(exten: str | None, owner: str | None, state: str | None) -> dict[str, Any]:
        if kind == "number":  # only a reservation names a company: the one it is for
            return {
                "dialcode": row.dialcode,
                "number": row.number,
                "state": state,
                # The side's own company: a forced reservation's before is the other's.
                "company": owner if state == "reserved" else None,
            }
        if kind == "ddi":
            return {
                "dialcode": row.dialcode,
                "number": row.number,
                "virt_exten": exten,
                "company": owner,
            }
        return {"username": row.username, "virt_exten": exten, "company": owner}

    seen = redact(
        visible,
        row.company,
        row.other_company,
        None
        if verb in ("created", "stocked")
        else record(row.before_exten, row.other_company or row.company, row.before_state),
        None
        if verb in ("deleted", "retired")
        else record(row.after_exten, row.company, row.after_state),
    )
    if kind in ("ddi", "number"):
        key = {"dialcode": row.dialcode, "number": row.number}
    else:
        key = {"company": seen.company, "username": row.username}
    return {
        "id": row.id,
        "at": row.at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "type": row.type,
        "actor": row.actor,
        "company": seen.company,
        "key": key,
        "before": seen.before,
        "after": seen.after,
    }
