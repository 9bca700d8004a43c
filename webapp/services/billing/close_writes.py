"""The record of writes into closed months: which (kind, company) had rollup rows written since a
month's close, so what changed since the close recomputes those companies only
(docs/month-close.md, "How the changes stay fast and exact").

A closed month's figures are a function of its rollup marks (rollups.month_marks): the company's
daily_peaks rows of the month and the level its latest earlier row carries in. So a company whose
figures differ from the closed ones has had a daily_peaks row on or before the month's last day
written since the close. Every such write goes through rollups (record_changes, the partial
rebuild of an import or of an out-of-order change, the full rebuild), and each calls `note` (or
`forget_all`) in its own transaction: a write that rolls back leaves no row, one that commits
leaves its rows.

Concurrency (PostgreSQL): a close takes SHARE on daily_peaks before its snapshot (`hold_writers`),
and `note` takes ROW EXCLUSIVE on it before it looks for closed months. A rollup writer is
therefore either wholly before the close (committed before its snapshot: in the closed figures)
or it waits for the close to commit and then sees it, and notes its companies. On SQLite one
writer at a time holds the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any

from sqlalchemy import Select, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from ...models import CloseWrite, MonthClose
from ..history import intervals


def hold_writers(session: Session, wait_seconds: int) -> None:
    """For a close, before the first read of its snapshot (PostgreSQL): wait for the rollup
    writers in flight to commit and keep new ones waiting until the close commits, so each is
    in the closed figures or sees the close (`note`). Reads of the rollup go on. Waiting longer
    than `wait_seconds` fails with a lock timeout (write_transaction: a Conflict, try again)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text(f"SET LOCAL lock_timeout = '{int(wait_seconds)}s'"))
        session.execute(text("LOCK TABLE daily_peaks IN SHARE MODE"))
        session.execute(text("SET LOCAL lock_timeout = 0"))


def note(
    session: Session, kind: str, since: Mapping[str, date], rows_written: bool = False
) -> None:
    """Record, for every month closed now (and kept by this record), the companies of `since`
    whose rollup rows are written from their day on, when that day is on or before the month's
    last day. Call in the transaction that writes those rows. One query of month_closes, and
    nothing more when no such month is closed (a live change writes today's row: none is).
    `rows_written`: the transaction has already written daily_peaks, so it holds the lock a
    close waits for (PostgreSQL takes it at the first write): no statement to take it."""
    if not since:
        return
    if not rows_written and session.get_bind().dialect.name == "postgresql":
        session.execute(text("LOCK TABLE daily_peaks IN ROW EXCLUSIVE MODE"))
    first = min(since.values())
    m = MonthClose
    closes = session.execute(
        select(m.id, m.year, m.month).where(
            m.reopened_at.is_(None),
            m.writes_kept.is_(True),
            m.year * 12 + m.month >= first.year * 12 + first.month,
        )
    ).all()
    rows = [
        {"close_id": close_id, "kind": kind, "company": company}
        for close_id, year, month in closes
        for company, day in sorted(since.items())
        if (day.year, day.month) <= (year, month)
    ]
    if not rows:
        return
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    for chunk in intervals.chunks(rows, intervals.CHUNK // 3):
        session.execute(dialect.insert(CloseWrite).values(list(chunk)).on_conflict_do_nothing())


def forget_all(session: Session) -> None:
    """A full rollup rebuild rewrote every row: no close's record covers it any more, so what
    changed since each close is found by the full comparison from now on."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("LOCK TABLE daily_peaks IN ROW EXCLUSIVE MODE"))
    session.execute(
        update(MonthClose).where(MonthClose.writes_kept.is_(True)).values(writes_kept=False)
    )


def written(session: Session, close_id: int, kind: str) -> set[str]:
    """The companies of `kind` noted for the close: a seek of close_writes' primary key."""
    return set(session.scalars(written_query(close_id, kind)))


def written_query(close_id: int, kind: str) -> Select[Any]:
    """The companies of `kind` noted for the close, as a query: a reader's `company IN (...)`
    of it lets the database join the record (a seek per company of each table's primary key)
    instead of taking a thousand companies as as many parameters."""
    return select(CloseWrite.company).where(
        CloseWrite.close_id == close_id, CloseWrite.kind == kind
    )
