"""The number inventory's rows and rules (docs/numbers.md): which state a number is in, and
the two moves every DDI writer makes, into service and out of it.

Every number has one row in `numbers` whatever its state (models.Number). A writer of DDIs
locks the numbers it touches here first (`lock`), then writes the DDI rows, inside the change
path's step (services/changes.py): so two writers of one number take turns on that row, in key
order, and its unique key keeps the number in the inventory once, whichever door brought it.

A state is what the dates say at the moment of the request: a reservation or an aging period
ends after its `held_until` day (a local day in REPORT_TIMEZONE), and nothing needs to run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from flask import current_app
from sqlalchemy import ColumnElement, and_, bindparam, delete, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..database import insert_rows, one_of
from ..errors import Conflict, Invalid, NotFound
from ..models import Number, NumberWord
from . import fields
from .billing import periods
from .history import intervals
from .history.audit import AuditData

IN_SERVICE, RESERVED, AVAILABLE, AGING = "in_service", "reserved", "available", "aging"
STATES = (IN_SERVICE, RESERVED, AVAILABLE, AGING)
HELD = (RESERVED, AGING)  # the states that end on their own, after `held_until`

Key = tuple[str, str]  # (dialcode, number)


def today() -> date:
    """Today in REPORT_TIMEZONE: the day a reservation's or aging period's end is read
    against."""
    return periods.today_in(periods.zone(current_app.config["REPORT_TIMEZONE"]))


def state_of(row: Any, on: date) -> str:
    """The state `row` (a Number, or anything with its columns) is in on day `on`: its stored
    state, except that a hold whose last day has passed is available."""
    if row.state in HELD and row.held_until is not None and row.held_until < on:
        return AVAILABLE
    return str(row.state)


def in_state(state: str, on: date) -> ColumnElement[bool]:
    """The SQL condition `state_of(row, on) == state`."""
    n = Number
    expired = and_(n.state.in_(HELD), n.held_until < on)
    if state == AVAILABLE:
        return or_(n.state == AVAILABLE, expired)
    if state in HELD:
        return and_(n.state == state, or_(n.held_until.is_(None), n.held_until >= on))
    return n.state == state


FORCE_ASKED = "say why a number held for another company is taken"


def parse_override(force: Any, reason: Any) -> str | None:
    """A System-Admin's override of a hold (docs/numbers.md, "Override"): `force` true with a
    `reason` (fields.parse_reason) gives the reason; neither gives None; one without the other,
    or a `force` that is not a boolean, is Invalid. Who may override is the caller's check."""
    if force is None and reason is None:
        return None
    if force is not None and not isinstance(force, bool):
        raise Invalid("'force' must be true or false.", {"force": "must be true or false"})
    if not force:
        if reason is None:
            return None
        raise Invalid(
            "'reason' is given only with \"force\": true.", {"force": "required with reason"}
        )
    return fields.parse_reason(reason, FORCE_ASKED)


@dataclass(frozen=True)
class Taking:
    """A number going into service for `company` (a create, a link, an import row)."""

    key: Key
    company: str
    # Only a number reserved for `company` may be taken (a Company-Admin's link): anything
    # else is NotFound, as a DDI that does not exist.
    reserved_only: bool = False
    # Its new description; None keeps the one it has (a stocked number's), or '' if new.
    description: str | None = None


def lock(session: Session, keys: Iterable[Key]) -> dict[Key, Number]:
    """The inventory rows of `keys` that exist, locked until commit (PostgreSQL), locked in
    key order so two writers of overlapping numbers do not deadlock."""
    found: dict[Key, Number] = {}
    for dialcode, numbers in _by_dialcode(set(keys)):
        for chunk in intervals.chunks(numbers):
            query = (
                select(Number)
                .where(*key_conditions(session, dialcode, chunk))
                .order_by(Number.dialcode, Number.number)
                .with_for_update()
            )
            for row in session.scalars(query):
                found[(row.dialcode, row.number)] = row
    return found


def set_state(
    session: Session,
    ids: Sequence[int],
    state: str,
    held_for: str | None,
    held_until: date | None,
    since: datetime | None,
) -> None:
    """The numbers of `ids` in `state`, held for `held_for` through `held_until` (None: not
    held), since `since`: one update per chunk of ids, in the caller's transaction (the
    rows already loaded are not refreshed)."""
    for chunk in intervals.chunks(list(ids)):
        session.execute(
            update(Number)
            .where(Number.id.in_(chunk))
            .values(state=state, held_for=held_for, held_until=held_until, since=since)
            .execution_options(synchronize_session=False)
        )


def key_conditions(
    session: Session, dialcode: str, numbers: Sequence[str]
) -> list[ColumnElement[bool]]:
    """The numbers of one dialcode, as conditions: the list, and its span as a key range, so
    that the index is searched by range whatever the planner's statistics say (just after a
    large stock PostgreSQL's know nothing of its numbers and may scan the dialcode's whole
    range for the list: 170 ms for 100 numbers among a million)."""
    return [
        Number.dialcode == dialcode,
        Number.number >= min(numbers),
        Number.number <= max(numbers),
        one_of(session, Number.number, list(numbers)),
    ]


def locked_rows(session: Session, keys: list[Key]) -> list[Number]:
    """The inventory rows of `keys`, locked in key order; NotFound naming the first missing
    one."""
    found = lock(session, keys)
    for key in keys:
        if key not in found:
            raise NotFound(
                f"The number {key[0]}:{key[1]} is no longer in the ",
                {"number": "not in the inventory"},
            )
    return [found[key] for key in keys]


def described(row: Number, on: date) -> str:
    """What a number is now, in words: 'in service', 'available', 'reserved for acme until
    2027-01-31', 'aging until 2026-12-31'."""
    state = state_of(row, on)
    if state == RESERVED:
        return f"reserved for {row.held_for} until {row.held_until}"
    if state == AGING:
        return f"aging until {row.held_until}"
    return state.replace("_", " ")


def held_against(session: Session, taking: Sequence[Taking]) -> dict[Key, Conflict]:
    """The numbers of `taking` held for another company than the one taking them (unlocked: a
    check before a write, which enter_service repeats under its locks), each with its 409."""
    on = today()
    wanted = {t.key: t.company for t in taking}
    found: dict[Key, Conflict] = {}
    for dialcode, numbers in _by_dialcode(wanted):
        for chunk in intervals.chunks(numbers):
            query = select(Number).where(
                *key_conditions(session, dialcode, chunk),
                Number.state.in_(HELD),
                Number.held_until >= on,
            )
            for row in session.scalars(query):
                key = (row.dialcode, row.number)
                if (problem := held_conflict(row, wanted[key], on)) is not None:
                    found[key] = problem
    return found


def held_conflict(row: Number, company: str, on: date) -> Conflict | None:
    """The 409 that keeps a number held for another company out of `company`'s service
    (docs/numbers.md, "Known numbers"), or None when `company` may take it."""
    state = state_of(row, on)
    if state == RESERVED and row.held_for != company:
        return Conflict(
            f"The number {row.dialcode}:{row.number} is reserved for another company until "
            f"{row.held_until}.",
            {"number": f"reserved until {row.held_until}"},
            code="number_reserved",
        )
    if state == AGING and row.previous_company != company:
        return Conflict(
            f"The number {row.dialcode}:{row.number} is aging after its release until "
            f"{row.held_until}.",
            {"number": f"aging until {row.held_until}"},
            code="number_aging",
        )
    return None


def enter_service(
    session: Session,
    taking: Sequence[Taking],
    force: bool = False,
    exists_message: str = "A DDI with this dialcode and number already exists.",
) -> dict[Key, str | None]:
    """Put the numbers of `taking` in service, in the caller's transaction, before it writes
    their DDI rows; return each key's state before (None: a number new to the inventory).

    Guarantees: a number already in service is a Conflict with `exists_message` (the §4
    conflict); one held for another company is the 409 of `held_conflict` unless `force`; an
    available one, one reserved for the same company and one aging after leaving it go in
    service; an unknown one joins the inventory in service. A number a racing writer added
    meanwhile is the same Conflict (its unique key). Nothing is written when one fails.

    Lock order: the inventory rows first, then the DDI rows. A number found in service ends
    the call before its DDI row is touched, and one not in service has no DDI row, so a
    writer holding a DDI row (a delete, a move) is never waited for while holding these."""
    on = today()
    known = lock(session, (t.key for t in taking))
    before: dict[Key, str | None] = {}
    taken: list[int] = []
    new: list[dict[str, Any]] = []
    for t in taking:
        row = known.get(t.key)
        if t.reserved_only and (
            row is None or state_of(row, on) != RESERVED or row.held_for != t.company
        ):
            raise NotFound("No such DDI.")
        if row is None:
            before[t.key] = None
            new.append(_row(t.key, IN_SERVICE, None))
            continue
        state = state_of(row, on)
        if state == IN_SERVICE:
            raise Conflict(exists_message)
        if not force and (problem := held_conflict(row, t.company, on)) is not None:
            raise problem
        before[t.key] = state
        taken.append(row.id)
    described = {t.key: t.description for t in taking if t.description is not None}
    # An in-service number's `since` is its history's: its open interval's start.
    set_state(session, taken, IN_SERVICE, None, None, None)
    if new:
        for fresh in new:
            fresh["description"] = described.get((fresh["dialcode"], fresh["number"]), "")
        try:
            insert_rows(session, Number.__table__, new)
        except IntegrityError as exc:
            raise Conflict(exists_message) from exc
    set_descriptions(session, described, known=[k for k in described if before[k] is not None])
    return before


def set_descriptions(
    session: Session, descriptions: dict[Key, str], known: Iterable[Key] | None = None
) -> None:
    """Give numbers their descriptions, in the caller's transaction, and keep their words
    (models.NumberWord) the same as the descriptions' (fields.words_of).

    `known`: the numbers whose inventory rows exist and whose description is written here,
    by default all of `descriptions`; the others were just inserted with theirs, and only
    their words are added. A number keeps no words of an earlier description."""
    if not descriptions:
        return
    known = list(descriptions if known is None else known)
    if known:
        numbers = Number.__table__  # a Core executemany: one statement, a row of values each
        session.execute(
            update(numbers)
            .where(numbers.c.dialcode == bindparam("k_dialcode"))
            .where(numbers.c.number == bindparam("k_number"))
            .values(description=bindparam("k_description")),
            [
                {"k_dialcode": d, "k_number": n, "k_description": descriptions[(d, n)]}
                for d, n in known
            ],
        )
        forget_words(session, known)
    add_words(session, descriptions)


def add_words(session: Session, descriptions: dict[Key, str]) -> None:
    """The words of `descriptions`, added for numbers that have none yet (a new number, or
    one whose words forget_words has just removed)."""
    rows = [
        {"word": word, "dialcode": dialcode, "number": number}
        for (dialcode, number), text in descriptions.items()
        for word in fields.words_of(text)
    ]
    if rows:
        insert_rows(session, NumberWord.__table__, rows)


def forget_words(session: Session, keys: Iterable[Key]) -> None:
    """Remove every word of the numbers `keys` (a new description replaces them; a retired
    number leaves the inventory): one range of ix_number_words_number each."""
    for dialcode, numbers in _by_dialcode(keys):
        for chunk in intervals.chunks(numbers):
            session.execute(
                delete(NumberWord)
                .where(NumberWord.dialcode == dialcode, NumberWord.number.in_(chunk))
                .execution_options(synchronize_session=False)
            )


def descriptions(session: Session, keys: Iterable[Key]) -> dict[Key, str]:
    """The descriptions of the numbers `keys` that are in the inventory."""
    found: dict[Key, str] = {}
    for dialcode, numbers in _by_dialcode(keys):
        for chunk in intervals.chunks(numbers):
            query = select(Number.number, Number.description).where(
                Number.dialcode == dialcode, Number.number.in_(chunk)
            )
            found.update(((dialcode, n), d) for n, d in session.execute(query))
    return found


@dataclass(frozen=True)
class Leaving:
    """A number leaving service: its key and the company it leaves."""

    key: Key
    company: str


def leave_service(session: Session, leaving: Sequence[Leaving], now: datetime) -> str:
    """Take the numbers of `leaving` out of service, in the caller's transaction (their DDI
    rows are deleted by the caller); return the state they are left in.

    Guarantees: each is `aging` for NUMBER_AGING_DAYS local days, the day of release counting
    as the first, with the company it left as `previous_company`; with 0 days it is
    `available` at once (a provider that does not age numbers sees no difference)."""
    days = int(current_app.config["NUMBER_AGING_DAYS"])
    state = AGING if days else AVAILABLE
    held_until = today() + timedelta(days=days - 1) if days else None
    by_company: dict[str, list[Key]] = {}
    for item in leaving:
        by_company.setdefault(item.company, []).append(item.key)
    for company, keys in by_company.items():
        for dialcode, numbers in _by_dialcode(keys):
            for chunk in intervals.chunks(numbers):
                session.execute(
                    update(Number)
                    .where(Number.dialcode == dialcode, Number.number.in_(chunk))
                    .values(
                        state=state,
                        held_for=None,
                        held_until=held_until,
                        previous_company=company,
                        since=now,
                    )
                    .execution_options(synchronize_session=False)
                )
    return state


def number_change(
    action: str,
    key: Key,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    detail: str | None = None,
) -> AuditData:
    """One number's move between states outside service (`action`: stock, reserve, release,
    retire) as the change path records it: an audit entry `number.<action>` and its change
    event. `before` and `after` (None for a stock and a retire) hold at least `state`, and
    `company` for a reservation (the company it is for; None otherwise): the entry and the
    event are that company's, so its Company-Admin sees its reservations and nothing about
    stock or aging numbers. A reservation taken over from another company is a move between
    them, as a DDI's: that company is the entry's `other_company`, so the entry is in both
    audits and each reader sees only its own side (access.redact), as the change event does.
    The target is the DDI's ('ddi 44:2071230000'), so the number's page shows its whole life
    in one timeline."""
    ident = {"dialcode": key[0], "number": key[1]}
    then, now = (before or {}).get("company"), (after or {}).get("company")
    return AuditData(
        f"number.{action}",
        f"ddi {key[0]}:{key[1]}",
        company=now or then,
        before=None if before is None else {**ident, **before},
        after=None if after is None else {**ident, **after},
        detail=detail,
        other_company=then if now and then and then != now else None,
    )


def in_service_rows(keys: Iterable[Key]) -> list[dict[str, Any]]:
    """The inventory rows of numbers put in service outside the change path, for a loader
    that writes DDI rows directly (the demo seed): one per key, in service."""
    return [_row(key, IN_SERVICE, None) for key in keys]


def _by_dialcode(keys: Iterable[Key]) -> list[tuple[str, list[str]]]:
    grouped: dict[str, list[str]] = {}
    for dialcode, number in sorted(keys):
        grouped.setdefault(dialcode, []).append(number)
    return list(grouped.items())


def _row(key: Key, state: str, now: datetime | None, description: str = "") -> dict[str, Any]:
    return {
        "dialcode": key[0],
        "number": key[1],
        "state": state,
        "held_for": None,
        "previous_company": None,
        "held_until": None,
        "since": now,
        "description": description,
    }
