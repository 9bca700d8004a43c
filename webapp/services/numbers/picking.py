"""Picking the lowest free numbers of a range (docs/numbers.md, "Reserve"): for reserve by
prefix and count now, and for allocation, which takes the numbers reserved for a company and
then the available ones.

Safe when several pickers run at once. On PostgreSQL each picked row is locked FOR UPDATE SKIP
LOCKED: a row another picker holds is passed over instead of waited for, so concurrent
reservers neither queue behind each other nor take the same number; the condition is checked
again on the locked row (a number taken and committed meanwhile is not available any more).
On SQLite writers are serial, and the same statements take no locks.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from sqlalchemy import ColumnElement, and_, func, select
from sqlalchemy.orm import Session

from ...database import one_of, upper_bound
from ...models import Number
from .. import inventory


def pick(
    session: Session,
    dialcode: str,
    prefix: str,
    count: int,
    on: date,
    reserved_for: str | None = None,
) -> list[Number]:
    """Up to `count` numbers of `dialcode` whose number starts with `prefix` ("" for any), the
    lowest first (dialcode, then number), locked until commit (PostgreSQL): the available ones
    on day `on` (a hold past its last day included, inventory.in_state), or with
    `reserved_for` those reserved for that company on `on`.

    Guarantees: fewer than `count` only when no more such numbers are free (a number another
    transaction holds locked is left to it); the caller checks the count and writes nothing
    when it is short. No row is locked that is not returned.

    How: each round finds the lowest candidates without locking, from the ordered ranges of
    ix_numbers_state (state, dialcode, number, held_until), one per state a free number may
    be stored in, then locks those that are still free, skipping locked ones; a round that
    lost some to other pickers looks again after the last candidate it saw."""
    ranges = _ranges(dialcode, prefix, on, reserved_for)
    free = and_(*_free(on, reserved_for))
    picked: list[Number] = []
    after: str | None = None
    while len(picked) < count:
        candidates = _candidates(session, ranges, count - len(picked), after)
        if not candidates:
            break
        after = candidates[-1][1]
        # The candidates' span beside their ids: an index range however stale the planner's
        # statistics (just after a large stock they know nothing of its numbers, and a plan
        # that scans the dialcode's whole range for the ids took 260 ms).
        span = [
            Number.dialcode == dialcode,
            Number.number >= candidates[0][1],
            Number.number <= after,
        ]
        query = (
            select(Number)
            .where(one_of(session, Number.id, [i for i, _ in candidates]), *span, free)
            .order_by(Number.dialcode, Number.number)
            .with_for_update(skip_locked=True)
        )
        picked += session.scalars(query)
    return picked


def in_range(dialcode: str, prefix: str) -> list[ColumnElement[bool]]:
    """The numbers of `dialcode` starting with `prefix` ("" for all of them), as conditions an
    index on (…, dialcode, number) seeks: the prefix as a range, which digits make exact in
    every collation."""
    where: list[ColumnElement[bool]] = [Number.dialcode == dialcode]
    if prefix:
        where += [Number.number >= prefix, Number.number < upper_bound(prefix)]
    return where


def _ranges(
    dialcode: str, prefix: str, on: date, reserved_for: str | None
) -> list[ColumnElement[bool]]:
    """The conditions of one index range each: a stored state, the dialcode, the prefix."""
    n = Number
    where = in_range(dialcode, prefix)
    if reserved_for is not None:
        return [and_(n.state == inventory.RESERVED, *where, *_free(on, reserved_for))]
    expired = [and_(n.state == held, *where, n.held_until < on) for held in inventory.HELD]
    return [and_(n.state == inventory.AVAILABLE, *where), *expired]


def _free(on: date, reserved_for: str | None) -> list[ColumnElement[bool]]:
    if reserved_for is None:
        return [inventory.in_state(inventory.AVAILABLE, on)]
    return [inventory.in_state(inventory.RESERVED, on), Number.held_for == reserved_for]


def _candidates(
    session: Session, ranges: Sequence[ColumnElement[bool]], need: int, after: str | None
) -> list[tuple[int, str]]:
    """The `need` lowest (id, number) of the ranges after number `after`, unlocked: each range
    read in its index's order up to `need`, then merged."""
    found: list[tuple[int, str]] = []
    for condition in ranges:
        query = (
            select(Number.id, Number.number)
            .where(condition, *([Number.number > after] if after is not None else []))
            .order_by(Number.state, Number.dialcode, Number.number)
            .limit(need)
        )
        found += [(i, number) for i, number in session.execute(query)]
    return sorted(found, key=lambda c: c[1])[:need]


def count_free(session: Session, dialcode: str, prefix: str, on: date, at_most: int) -> int:
    """How many numbers of `dialcode` starting with `prefix` are available on day `on` (a hold
    past its last day included), counted up to `at_most` (a count of `at_most` means at
    least that many): each of the ranges `pick` reads, stopped there, so a large stock costs
    no more than `at_most` index entries per range. Read only, nothing locked."""
    total = 0
    for condition in _ranges(dialcode, prefix, on, None):
        # The number, not the id: a column of the index, so PostgreSQL counts from it alone.
        ids = select(Number.number).where(condition).limit(at_most - total).subquery()
        total += int(session.scalar(select(func.count()).select_from(ids)) or 0)
        if total >= at_most:
            return at_most
    return total


def lowest_free(session: Session, dialcode: str, prefix: str, count: int, on: date) -> list[str]:
    """The `count` lowest numbers `pick` would take now (fewer when fewer are free), without
    locking them: what a page shows before a reserve or an allocation picks for itself."""
    return [
        number
        for _, number in _candidates(session, _ranges(dialcode, prefix, on, None), count, None)
    ]
