"""Reserve and release (docs/numbers.md, "Reserve" and "Release"): hold numbers for a company
until a day, and give reservations back to the stock at once. System-Admin only.

Both go through the change path (services/changes.py) with no history to write: a reservation
is not time in service. Each number moved gets its audit entry and its number.reserved or
number.released event there (inventory.number_change). The rows are locked after the change
path's company locks, as every writer of numbers does (inventory.py), so a reserve and a
create of one number take turns without deadlock.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ...access import Principal
from ...database import write_transaction
from ...errors import Conflict, Invalid, NotFound
from ...models import Number
from ...wording import counted
from .. import changes, inventory
from ..history.audit import AuditData
from ..records.crud import require_companies_exist
from . import answers, picking, requests
from .requests import Override, Target

DEFAULT_DAYS = 30  # a reservation without `until` is held through today + 30 days
MAX_DAYS = 365  # `until` at most this many days ahead


def reserve(principal: Principal, body: Any) -> list[dict[str, Any]]:
    """Reserve one number, or the `count` lowest available numbers of a prefix, for a
    company through `until`; return them as answers.answer gives them, in dialcode and number
    order.

    Guarantees: all or nothing. By number: an available one (a hold past its last day
    included) is reserved, one already reserved for the same company gets the new `until`,
    one in service is a Conflict, one held for another company the 409 of
    inventory.held_conflict unless forced with a reason (kept as the audit entry's detail);
    one not in the inventory is NotFound. By prefix: fewer available numbers than `count` is
    a Conflict `not_enough_numbers` with fields.count saying how many there are; two
    reservers running at once never take the same number (picking.pick)."""
    principal.require_system_admin("reserve numbers")
    request = requests.parse_reserve(body)
    on = inventory.today()
    until = _until(request.until, on)
    company = request.company
    reserved: list[Any] = []
    with write_transaction() as session:
        require_companies_exist(session, [company])

        def step(now: datetime) -> changes.Change:
            target = request.target
            taken = (
                _by_number(session, target, company, request.override, on)
                if target.number is not None
                else _by_prefix(session, target, on)
            )
            inventory.set_state(
                session, [t[0].id for t in taken], inventory.RESERVED, company, until, now
            )
            reserved.extend(_as_reserved(t[0], company, until) for t in taken)
            return changes.Change(audit=[_reserved(*t, company, until) for t in taken])

        changes.write(session, principal, None, changes.Lock(companies=[company]), step)
    return [answers.answer(principal, row, on) for row in reserved]


def release(principal: Principal, body: Any) -> int:
    """Give reserved numbers back to the stock at once (available, held for no one); return
    how many.

    Guarantees: by number, one that is not reserved today (a reservation past its last day
    included) is a Conflict and one not in the inventory NotFound; by prefix, every number
    reserved today that starts with it, none being a success with 0. Each is audited and
    records a number.released event, the company it was reserved for as the event's."""
    principal.require_system_admin("release numbers")
    target = requests.parse_release(body)
    on = inventory.today()
    with write_transaction() as session:

        def step(now: datetime) -> changes.Change:
            rows = _releasable(session, target, on)
            inventory.set_state(
                session, [row.id for row in rows], inventory.AVAILABLE, None, None, now
            )
            return changes.Change(audit=[_released(row) for row in rows])

        change = changes.write(session, principal, None, changes.Lock(), step)
    return len(change.audit)


def reserve_numbers(
    principal: Principal, keys: Sequence[inventory.Key], company: str, until: date | None
) -> int:
    """Reserve the numbers `keys` (a list's ticks or all it matched: the bulk action of
    /ddis) for `company` through `until` (None: DEFAULT_DAYS ahead); return how many.

    Guarantees: all or nothing, as `reserve` by number but stricter: every number must be
    available now (a hold past its last day included); one that is anything else is a
    Conflict naming it and what it is now, one not in the inventory NotFound, and nothing
    is reserved. No override: a number held for another company is taken by number
    (`reserve` with force), never by a list."""
    principal.require_system_admin("reserve numbers")
    wanted = _wanted(keys)
    on = inventory.today()
    last = until_day(until, on)
    with write_transaction() as session:
        require_companies_exist(session, [company])

        def step(now: datetime) -> changes.Change:
            rows = inventory.locked_rows(session, wanted)
            for row in rows:
                if inventory.state_of(row, on) != inventory.AVAILABLE:
                    raise _not_available(row, on)
            inventory.set_state(
                session, [row.id for row in rows], inventory.RESERVED, company, last, now
            )
            return changes.Change(
                audit=[_reserved(row, inventory.AVAILABLE, None, company, last) for row in rows]
            )

        changes.write(session, principal, None, changes.Lock(companies=[company]), step)
    return len(wanted)


def release_numbers(principal: Principal, keys: Sequence[inventory.Key]) -> int:
    """Give the reservations of the numbers `keys` back to the stock (the bulk action of
    /ddis); return how many.

    Guarantees: all or nothing: every number must be reserved today; one that is not (a
    reservation past its last day included) is the Conflict `release` by number answers, one
    not in the inventory NotFound, and nothing is released. Audited and evented as
    `release`."""
    principal.require_system_admin("release numbers")
    wanted = _wanted(keys)
    on = inventory.today()
    with write_transaction() as session:

        def step(now: datetime) -> changes.Change:
            rows = inventory.locked_rows(session, wanted)
            for row in rows:
                if inventory.state_of(row, on) != inventory.RESERVED:
                    raise _not_reserved(row, on)
            inventory.set_state(
                session, [row.id for row in rows], inventory.AVAILABLE, None, None, now
            )
            return changes.Change(audit=[_released(row) for row in rows])

        changes.write(session, principal, None, changes.Lock(), step)
    return len(wanted)


def _wanted(keys: Sequence[inventory.Key]) -> list[inventory.Key]:
    wanted = sorted(set(keys))
    if not wanted:
        raise Invalid("Name at least one number.", {"number": "required"})
    return wanted


def _not_available(row: Number, on: date) -> Conflict:
    now = inventory.described(row, on)
    return Conflict(
        f"The number {row.dialcode}:{row.number} is no longer available: it is {now}. "
        "Nothing was reserved.",
        {"number": now},
    )


def until_day(asked: date | None, on: date) -> date:
    """A reservation's last day as reserve checks it: `asked`, from today to MAX_DAYS ahead,
    else Invalid on `until`; DEFAULT_DAYS ahead when None."""
    return _until(asked, on)


def _until(asked: date | None, on: date) -> date:
    """The reservation's last day: `asked`, from today to MAX_DAYS ahead; DEFAULT_DAYS ahead
    when not given."""
    if asked is None:
        return on + timedelta(days=DEFAULT_DAYS)
    if asked < on:
        raise Invalid(f"'values.until' must not be before today ({on}).", {"until": "before today"})
    if asked > on + timedelta(days=MAX_DAYS):
        last = on + timedelta(days=MAX_DAYS)
        raise Invalid(
            f"'values.until' must be at most {MAX_DAYS} days ahead ({last}).",
            {"until": f"at most {MAX_DAYS} days ahead"},
        )
    return asked


# A number to reserve, its state before, and the reason when forced over another's hold.
Taken = tuple[Number, str, str | None]


def _by_number(
    session: Session, target: Target, company: str, override: Override, on: date
) -> list[Taken]:
    row = _locked(session, target)
    state = inventory.state_of(row, on)
    if state == inventory.IN_SERVICE:
        raise Conflict(
            f"The number {target.dialcode}:{target.number} is in service.",
            {"number": "in service"},
        )
    problem = inventory.held_conflict(row, company, on)
    if problem is not None and not override.force:
        raise problem
    # Forced over another company's hold: the reason goes to the entry (docs/numbers.md).
    return [(row, state, override.reason if problem is not None else None)]


def _by_prefix(session: Session, target: Target, on: date) -> list[Taken]:
    assert target.prefix is not None and target.count is not None
    rows = picking.pick(session, target.dialcode, target.prefix, target.count, on)
    if len(rows) < target.count:
        available = counted(len(rows), "number")
        raise Conflict(
            f"Only {available} with dialcode {target.dialcode} and prefix {target.prefix} "
            f"{'is' if len(rows) == 1 else 'are'} available; nothing was reserved.",
            {"count": f"{len(rows)} available"},
            code="not_enough_numbers",
        )
    return [(row, inventory.AVAILABLE, None) for row in rows]


def _locked(session: Session, target: Target) -> Number:
    """The inventory row of the scope's one number, locked; NotFound when it has none."""
    row = inventory.lock(session, [target.key]).get(target.key)
    if row is None:
        raise NotFound(
            f"The number {target.dialcode}:{target.number} is not in the inventory.",
            {"number": "not in the inventory"},
        )
    return row


def _releasable(session: Session, target: Target, on: date) -> list[Number]:
    if target.number is not None:
        row = _locked(session, target)
        if inventory.state_of(row, on) != inventory.RESERVED:
            raise _not_reserved(row, on)
        return [row]
    assert target.prefix is not None
    query = (
        select(Number)
        .where(
            *picking.in_range(target.dialcode, target.prefix),
            inventory.in_state(inventory.RESERVED, on),
        )
        .order_by(Number.dialcode, Number.number)
        .with_for_update()
    )
    return list(session.scalars(query))


def _not_reserved(row: Number, on: date) -> Conflict:
    name = f"{row.dialcode}:{row.number}"
    if row.state == inventory.RESERVED:  # its last day has passed: it is available
        return Conflict(
            f"The number {name} is not reserved: its reservation ended on {row.held_until}.",
            {"number": f"reservation ended on {row.held_until}"},
        )
    state = inventory.state_of(row, on).replace("_", " ")
    return Conflict(f"The number {name} is not reserved: it is {state}.", {"number": state})


def _as_reserved(row: Number, company: str, until: date) -> SimpleNamespace:
    """The row as the reservation left it (the update bypassed the loaded object)."""
    return answers.moved(row, inventory.RESERVED, company, until)


def _reserved(row: Number, state: str, reason: str | None, company: str, until: date) -> AuditData:
    before: dict[str, Any] = {"state": state, "company": None}
    if state == inventory.RESERVED:  # a reservation renewed or taken over: what it was
        before = {"state": state, "company": row.held_for, "until": _day(row.held_until)}
    return inventory.number_change(
        "reserve",
        (row.dialcode, row.number),
        before,
        {"state": inventory.RESERVED, "company": company, "until": until.isoformat()},
        detail=reason,
    )


def _released(row: Number) -> AuditData:
    return inventory.number_change(
        "release",
        (row.dialcode, row.number),
        {"state": inventory.RESERVED, "company": row.held_for, "until": _day(row.held_until)},
        {"state": inventory.AVAILABLE, "company": None},
    )


def _day(day: date | None) -> str | None:
    return None if day is None else day.isoformat()
