"""What a month close stored, and whether a month is closed (docs/month-close.md).

A month is closed while its latest close (the highest `version` in month_closes) has not been
reopened. Its reports then answer the figures stored by that close: one closed_figures row per
kind and company with a non-zero day (every other company answers zeros) and the totals row in
the close itself. Readers here take no access decision: the report services ask the Principal
first. services/billing/month_close.py writes what is read here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Select, select, tuple_
from sqlalchemy.orm import Session

from ...database import driver_rows, utcnow
from ...models import ClosedFigures, Company, MonthClose
from . import periods


@dataclass(frozen=True)
class Close:
    """One close of a month, as read (a plain value: safe after its session ends)."""

    id: int
    year: int
    month: int
    version: int
    timezone: str
    closed_at: datetime  # naive UTC
    closed_by: str
    reopened_at: datetime | None
    reopened_by: str | None
    reopen_reason: str | None
    day_totals: dict[str, list[int]]  # kind: each day's sum over every company
    with_marks: bool  # the rollup marks of every company were stored (rollups.month_marks)
    # close_writes names every company written to since the close (else: compare the marks)
    writes_kept: bool = False

    @property
    def closed(self) -> bool:
        return self.reopened_at is None

    @property
    def label(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"


def timestamp(moment: datetime) -> str:
    """A stored naive-UTC instant as the API writes it: 2026-11-02T08:00:00Z."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def period_json(year: int, month: int, close: Close | None) -> dict[str, Any]:
    """The `period` object of a report answer: with the close's version, time and account while
    the month is closed, else only `closed: false`."""
    if close is None or not close.closed:
        return {"year": year, "month": month, "closed": False}
    return {
        "year": year,
        "month": month,
        "closed": True,
        "version": close.version,
        "closed_at": timestamp(close.closed_at),
        "closed_by": close.closed_by,
    }


def encode(values: list[int]) -> str:
    return ",".join(map(str, values))


def decode(text: str) -> list[int]:
    return list(map(int, text.split(","))) if text else []


def from_row(row: MonthClose) -> Close:
    """A close as read, from its row (flushed: it has its id)."""
    return _close(row)


def _close(row: MonthClose) -> Close:
    return Close(
        id=row.id,
        year=row.year,
        month=row.month,
        version=row.version,
        timezone=row.timezone,
        closed_at=row.closed_at,
        closed_by=row.closed_by,
        reopened_at=row.reopened_at,
        reopened_by=row.reopened_by,
        reopen_reason=row.reopen_reason,
        day_totals={"ddi": decode(row.ddi_days), "user": decode(row.user_days)},
        with_marks=row.with_marks,
        writes_kept=row.writes_kept,
    )


def latest(session: Session, year: int, month: int) -> Close | None:
    """The month's latest close, reopened or not (None: never closed)."""
    query = (
        select(MonthClose)
        .where(MonthClose.year == year, MonthClose.month == month)
        .order_by(MonthClose.version.desc())
        .limit(1)
    )
    row = session.scalars(query).first()
    return _close(row) if row is not None else None


def latest_of(session: Session, months: list[tuple[int, int]]) -> dict[tuple[int, int], Close]:
    """{(year, month): its latest close} for those of `months` ever closed, in one query."""
    if not months:
        return {}
    query = select(MonthClose).where(
        tuple_(MonthClose.year, MonthClose.month).in_(sorted(set(months)))
    )
    return _latest_per_month(session.scalars(query))


def every_latest(session: Session) -> list[Close]:
    """Every month ever closed, its latest close each, newest month first."""
    found = _latest_per_month(session.scalars(select(MonthClose)))
    return [found[key] for key in sorted(found, reverse=True)]


def _latest_per_month(rows: Iterable[MonthClose]) -> dict[tuple[int, int], Close]:
    found: dict[tuple[int, int], Close] = {}
    for row in rows:
        key = (row.year, row.month)
        if key not in found or found[key].version < row.version:
            found[key] = _close(row)
    return found


def serves(close: Close | None, days: Sequence[periods.Day]) -> bool:
    """Whether the close's stored figures answer for these days of its month: it is closed,
    they are the whole month, and the last of them is over. A part of the month (the month to
    date, when a change of REPORT_TIMEZONE makes a closed month current again) computes from
    the history."""
    return (
        close is not None
        and close.closed
        and len(close.day_totals["ddi"]) == len(days)
        and days[-1].end <= utcnow()
    )


def closing(session: Session, period: periods.Period) -> Close | None:
    """The close whose figures answer for `period` (`serves`), if any."""
    close = latest(session, period.year, period.month)
    return close if serves(close, period.days) else None


def lists(
    session: Session, close: Close, kind: str, companies: list[str] | Select[Any] | None
) -> dict[str, list[int]]:
    """{company: each day's stored peak} for the companies named (or a query naming them;
    None: every company) that have a non-zero day in the close; every other company's figures
    are zeros."""
    query = select(ClosedFigures.company, ClosedFigures.days).where(
        ClosedFigures.close_id == close.id, ClosedFigures.kind == kind
    )
    if companies is not None:
        query = query.where(ClosedFigures.company.in_(companies))
    return {company: decode(days) for company, days in session.connection().execute(query)}


def lists_among(
    session: Session, close: Close, kind: str, companies: Select[Any]
) -> dict[str, list[int]]:
    """`lists` for the companies a query names (those noted since the close: up to every
    one), each read by a seek of the close's primary key: as many as are named, however many
    companies the close holds. A scalar subquery per company named, not `company IN (...)`,
    which PostgreSQL plans from statistics that know nothing of a close's new rows (one scan
    of the close's rows per company named)."""
    named = companies.subquery()
    stored = (
        select(ClosedFigures.days)
        .where(
            ClosedFigures.close_id == close.id,
            ClosedFigures.kind == kind,
            ClosedFigures.company == named.c[0],
        )
        .scalar_subquery()
    )
    # The driver's rows (two strings each), a company without a row none (all zeros).
    rows = driver_rows(session.connection(), select(named.c[0], stored))
    return {company: decode(days) for company, days in rows if days is not None}


def marks(session: Session, close: Close, kind: str) -> dict[str, str]:
    """{company: the rollup marks stored by the close} (only for a close `with_marks`; a
    company without one had no rollup row in the month and carried nothing into it)."""
    query = select(ClosedFigures.company, ClosedFigures.marks).where(
        ClosedFigures.close_id == close.id,
        ClosedFigures.kind == kind,
        ClosedFigures.marks.is_not(None),
    )
    return {company: text for company, text in session.connection().execute(query) if text}


def month_figures(
    session: Session, close: Close, kind: str, companies: list[str] | None
) -> tuple[dict[str, int], list[int]]:
    """({company: stored month total}, [each day's sum over those companies]) as
    reports._month_figures answers it, from the close: every company named (None: every
    company there is) is a key, zeros included."""
    if companies is None:
        connection = session.connection()
        totals = dict.fromkeys(connection.execute(select(Company.id)).scalars(), 0)
        query = select(ClosedFigures.company, ClosedFigures.total).where(
            ClosedFigures.close_id == close.id, ClosedFigures.kind == kind
        )
        totals.update((c, int(t)) for c, t in connection.execute(query))
        return totals, list(close.day_totals[kind])
    stored = lists(session, close, kind, companies)
    days = len(close.day_totals[kind])
    day_totals = [0] * days
    for values in stored.values():
        day_totals = [a + b for a, b in zip(day_totals, values, strict=True)]
    totals = dict.fromkeys(companies, 0)
    totals.update((c, sum(values)) for c, values in stored.items())
    return totals, day_totals


def closed_months_touched(
    session: Session, spans: Iterable[tuple[datetime, datetime]], tz: ZoneInfo
) -> list[str]:
    """The closed months ("YYYY-MM", in order) that any of the naive-UTC intervals
    [start, end) overlaps in `tz`: those whose figures the intervals may change."""
    months: set[tuple[int, int]] = set()
    for start, end in spans:
        first = start.replace(tzinfo=UTC).astimezone(tz)
        last = end - timedelta(microseconds=1) if end > start else start
        last_local = last.replace(tzinfo=UTC).astimezone(tz)
        index, stop = first.year * 12 + first.month - 1, last_local.year * 12 + last_local.month - 1
        months.update(divmod(i, 12) for i in range(index, stop + 1))
    wanted = [(year, month + 1) for year, month in months]
    closes = latest_of(session, wanted)
    return sorted(c.label for c in closes.values() if c.closed)
