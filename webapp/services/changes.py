"""The change path: the one place where a change to DDIs or phone users reaches the history, the
daily rollup, the audit log and the change events.

Create, update, link and delete (records/crud.py), the bulk actions, the DDI import and the
history import (imports/) all call `write` or `write_chunks`; nothing else writes history
intervals or daily peaks (the full rollup rebuild, rollups.build, recomputes them from the
history). tests/test_changes.py checks that.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from ..access import Principal
from ..database import write_clock
from .billing import rollups
from .events import journal
from .history import audit, intervals
from .history.intervals import ClosedInterval

Member = tuple[str, str]  # (company, key): one record as the history names it


@dataclass(frozen=True)
class Lock:
    """What a change locks before it reads the clock (PostgreSQL; SQLite writers are serial).

    `companies`: the companies whose rollup rows the change moves (rollups.lock_companies).
    `history`: the whole history table instead, for a change that must first check the
    recorded history (an import's overlap check): live writers wait for it to commit."""

    companies: Iterable[str] = ()
    history: bool = False
    # What runs once the locks are held and before the clock: a create's own rows (its
    # numbers taken into service, then its rows inserted), so a create that waited there for
    # a racing delete of the same key is stamped after it, and every writer takes the
    # company locks before any number's (no two writers wait for each other across them).
    then: Callable[[], None] | None = None


@dataclass(frozen=True)
class Change:
    """What a change does to the history at its instant, as its caller's step reports it.

    `starts` become active and `ends` inactive at the change's instant (records of `kind`);
    `closed` are past intervals recorded as they were (an import; each names its kind).
    """

    starts: Sequence[Member] = ()
    ends: Sequence[Member] = ()
    closed: Sequence[ClosedInterval] = ()
    audit: Sequence[audit.AuditData] = ()


def write(
    session: Session,
    principal: Principal,
    kind: str | None,
    lock: Lock,
    step: Callable[[datetime], Change],
) -> Change:
    """Carry out one change in the caller's write transaction; return what `step` reported.

    `kind` ('ddi' or 'user') is the kind of the records that start and end; None for an
    import, whose closed intervals each name their own. The steps, always in this order:

    1. Lock: `lock.companies` in identifier order, or the whole history table. Before the
       clock, so a writer that waited for another one is stamped after it, and one company's
       changes reach the rollup in timestamp order (the rollup's arithmetic relies on it). The
       table lock makes every live writer wait (they all write the table), so it covers the
       companies an import rebuilds too. Then `lock.then`, if given.
    2. Clock: the change's instant `now` (database.write_clock), read once.
    3. The caller's `step(now)`: its own table rows (update, delete; a create inserts in
       `lock.then`, so it is stamped after a racing delete of the same key that it waited for),
       and any check that must see the locked history; it reports the Change. Raising here
       writes nothing (the transaction rolls back).
    4. Intervals: ends closed, then starts opened, at `now` (half-open: a move never counts
       twice); `closed` intervals added as imported.
    5. Audit: one entry per AuditData, stamped `now` and by `principal`, in the same
       transaction, so it commits or rolls back with the change. Events: one per AuditData
       that changes a DDI or phone user (journal.record), in the same transaction too; their
       ids are given at its commit.
    6. Rollup: the daily peaks of the companies changed, after the intervals they are
       computed from (rollups.record_changes, or for imports rollups.rebuild_from from each
       company's earliest new start). No query when nothing started or ended.

    A new per-record step goes beside 5, with the same `now` and Change.
    """
    reported: list[Change] = []

    def one(now: datetime) -> Iterator[Change]:
        reported.append(step(now))
        yield reported[0]

    write_chunks(session, principal, kind, lock, one)
    return reported[0]


@dataclass
class Tally:
    """What a chunked change did: records started and ended per company, audit entries."""

    starts: Counter[str] = field(default_factory=Counter)
    ends: Counter[str] = field(default_factory=Counter)
    audited: int = 0


def write_chunks(
    session: Session,
    principal: Principal,
    kind: str | None,
    lock: Lock,
    steps: Callable[[datetime], Iterable[Change]],
) -> Tally:
    """`write` for a change too large to hold at once (a DDI import of a million rows): one
    instant, one transaction, the same steps in the same order, with step 3 yielding the
    Change in chunks. Steps 4 and 5 run for each chunk as it comes, so only one chunk's
    records are held at a time; step 6 runs once, after the last chunk, from per-company
    counts (the rollup needs nothing more), so a company named in many chunks is rolled up
    once, at the one instant."""
    # 1. Lock
    if lock.history:
        intervals.lock_table(session)
    rollups.lock_companies(session, lock.companies)
    if lock.then is not None:
        lock.then()
    # 2. Clock
    now = write_clock(session)
    tally = Tally()
    closed: list[ClosedInterval] = []
    # 3. The caller's own rows and checks, chunk by chunk
    for change in steps(now):
        # 4. Intervals
        if kind is not None:
            intervals.close_intervals(session, kind, change.ends, now)
            intervals.open_intervals(session, kind, change.starts, now)
        intervals.add_closed(session, change.closed)
        # 5. Audit
        audit.record(session, [a.entry(principal, now) for a in change.audit])
        journal.record(session, principal, now, change.audit)
        tally.starts.update(c for c, _ in change.starts)
        tally.ends.update(c for c, _ in change.ends)
        tally.audited += len(change.audit)
        closed += change.closed
    # 6. Rollup
    if kind is not None and (tally.starts or tally.ends):
        rollups.record_changes(session, kind, now, ends=tally.ends, starts=tally.starts)
    if closed:
        _rebuild_imported(session, closed)
    return tally


def _rebuild_imported(session: Session, closed: Sequence[ClosedInterval]) -> None:
    """Recompute the daily rollup of each company the new intervals touch, from the day of its
    earliest new start on (the history before it is unchanged)."""
    for kind in rollups.KINDS:
        first: dict[str, datetime] = {}
        for r in closed:
            if r.kind == kind and (r.company not in first or r.start < first[r.company]):
                first[r.company] = r.start
        rollups.rebuild_from(session, kind, first)
