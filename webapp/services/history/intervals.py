"""History intervals: the storage steps of the change path (services/changes.py), which is
their only caller, so every interval is written in the transaction of the change it records."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from sqlalchemy import bindparam, text, update
from sqlalchemy.orm import Session

from ...database import insert_rows, unnest_rows
from ...models import HistoryInterval

# Keeps every statement well under SQLite's bound-parameter limit.
CHUNK = 400

T = TypeVar("T")


@dataclass(frozen=True)
class ClosedInterval:
    """An interval already over when it is recorded (a history import's row)."""

    kind: str
    company: str
    key: str
    start: datetime  # naive UTC
    end: datetime


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """`items` in slices of at most `size`: one statement's worth of bound parameters."""
    for i in range(0, len(items), size):
        yield items[i : i + size]


def lock_table(session: Session) -> None:
    """On PostgreSQL, hold the whole history table until commit against every other writer:
    live writers wait (they need it), readers do not. For work that must see a history no
    one changes meanwhile (an import's overlap check, a full rollup rebuild)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("LOCK TABLE history_intervals IN SHARE ROW EXCLUSIVE MODE"))


def exclude_table_lockers(session: Session, wait_seconds: int) -> None:
    """On PostgreSQL, wait for and then keep out `lock_table`'s holders (imports, rebuilds)
    until commit, while live writers go on: SHARE UPDATE EXCLUSIVE conflicts with SHARE ROW
    EXCLUSIVE and with itself, not with the ROW EXCLUSIVE of inserts and updates. A month
    close takes it as its first statement, so its snapshot is taken after any import commits
    and an import that waits for it sees the close (and warns). Waiting longer than
    `wait_seconds` (a long import running) fails with a lock timeout, which write_transaction
    answers as a Conflict: try again."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text(f"SET LOCAL lock_timeout = '{int(wait_seconds)}s'"))
        session.execute(text("LOCK TABLE history_intervals IN SHARE UPDATE EXCLUSIVE MODE"))
        session.execute(text("SET LOCAL lock_timeout = 0"))


def open_intervals(
    session: Session, kind: str, members: Iterable[tuple[str, str]], at: datetime
) -> None:
    """Start an interval at `at` for each (company, key): the record is active from then on."""
    rows = [
        {"kind": kind, "company": c, "key": k, "start_at": at, "end_at": None, "source": "live"}
        for c, k in members
    ]
    insert_rows(session, HistoryInterval.__table__, rows)  # Core (COPY on PostgreSQL)


def close_intervals(
    session: Session, kind: str, members: Iterable[tuple[str, str]], at: datetime
) -> None:
    """End at `at` the open interval of each (company, key): the record is inactive from then on.

    Half-open intervals make a move exact: the old company's interval ends at the same instant
    the new one's starts, so at no moment does the record count twice.
    """
    pairs = list(dict.fromkeys(members))
    if not pairs:
        return
    if session.get_bind().dialect.name == "postgresql":
        # One statement per slice, joining the pairs as a derived table: each pair a seek on
        # (kind, key) as below, without a statement's own cost on the server per record.
        for part in chunks(pairs, _CLOSE_SLICE):
            v = unnest_rows(
                {
                    "company": (_H.company.type, [c for c, _ in part]),
                    "key": (_H.key.type, [k for _, k in part]),
                }
            )
            session.execute(
                update(HistoryInterval.__table__)
                .where(_H.kind == kind, _H.key == v.c.key, _H.company == v.c.company)
                .where(_H.end_at.is_(None))
                .values(end_at=at)
            )
        return
    # One statement per record, sent as one executemany: each is a seek on (kind, key)
    # (ix_history_kind_key_start), where an IN over (company, key) pairs made SQLite scan.
    session.execute(
        _CLOSE.values(end_at=at),
        [{"close_kind": kind, "close_company": c, "close_key": k} for c, k in pairs],
    )


_H = HistoryInterval.__table__.c
# Pairs closed by one statement on PostgreSQL: well below the count at which the planner
# would rather scan the whole table than seek each pair.
_CLOSE_SLICE = 2000
_CLOSE = update(HistoryInterval.__table__).where(
    _H.kind == bindparam("close_kind"),
    _H.key == bindparam("close_key"),
    _H.company == bindparam("close_company"),
    _H.end_at.is_(None),
)


def add_closed(session: Session, intervals: Sequence[ClosedInterval]) -> None:
    """Record intervals that are already over, marked as imported."""
    if intervals:
        session.execute(
            HistoryInterval.__table__.insert(),
            [
                {
                    "kind": r.kind,
                    "company": r.company,
                    "key": r.key,
                    "start_at": r.start,
                    "end_at": r.end,
                    "source": "import",
                }
                for r in intervals
            ],
        )
