"""A report day as the drill-down page tells it (docs/reports.md, "A day's drill-down"): the
summary first (the records at the start of the day, added, removed, at its end, the peak and
when it was first reached), then the day's changes in time order, then the records active all
day, the two lists a page at a time.

The checks and the peak are report_days' (the report's own definition, day_peak.sweep); the
counts here read the same history intervals with the same rules: days from local midnight to
local midnight in REPORT_TIMEZONE, half-open intervals, zero-length ones ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from flask import current_app
from sqlalchemy import ColumnElement, and_, func, or_, select

from ...access import Principal
from ...extensions import db
from ...models import DailyPeak, HistoryInterval
from . import periods, rollups
from .report_days import DayPage, _checked, _first_peak, _local, day_heading

PAGE_SIZE = 100  # changes a page, and records active all day a page


@dataclass(frozen=True)
class DaySummary:
    """The day's counts. `at_start + added - removed == at_end` always holds."""

    at_start: int  # active at the end of the day before: begun before midnight, not ended
    added: int  # intervals that start within the day
    removed: int  # intervals that end within the day
    all_day: int  # begun before the day and not ended before its end: no change within it

    @property
    def at_end(self) -> int:
        """Active at the day's last instant (the next day's `at_start`)."""
        return self.at_start + self.added - self.removed


@dataclass(frozen=True)
class Change:
    at: datetime  # aware, in REPORT_TIMEZONE
    added: bool  # the record's interval starts here (else it ends here)
    key: str  # 'dialcode:number' for a DDI, the username for a phone user


@dataclass(frozen=True)
class AllDayRecord:
    key: str
    since: datetime  # aware, in REPORT_TIMEZONE: the interval's start (before the day)
    until: datetime | None  # aware, in REPORT_TIMEZONE: its end (at or after the day's end);
    # None while still open


@dataclass(frozen=True)
class DayView:
    day: DayPage  # the checked day, its peak and when it was first reached (no records)
    summary: DaySummary
    changes: tuple[Change, ...]  # a page of the day's changes, in time order
    changes_offset: int  # the first change's position, from 0
    all_day: tuple[AllDayRecord, ...]  # a page of the records active all day
    all_day_offset: int


def day_view(
    principal: Principal,
    kind: str,
    company: object,
    day: object,
    changes_offset: int = 0,
    all_day_offset: int = 0,
    limit: int = PAGE_SIZE,
    today: date | None = None,
) -> DayView:
    """One company's day: its summary, `limit` of its changes from `changes_offset` and
    `limit` of its records active all day from `all_day_offset` (an offset past the end moves
    back to the last page's start).

    Guarantees:
    - The checks of report_days.day_detail, in its order (Forbidden, Invalid, NotFound), and
      its `peak` and `peak_at` (the report's value for the day, by day_peak.sweep).
    - Every change of the day belongs to the local day its instant falls in: `added` counts the
      intervals (of that company and kind, zero-length ones ignored) starting at or after the
      day's first instant and before the next day's, `removed` those ending so (an end at
      midnight is a removal at 00:00 of the day it reaches); an interval that starts and ends
      within the day counts in both. `at_start` counts those begun before the day and not
      ended before it began, so `at_start + added - removed` is the number active at the
      day's last instant, the next day's `at_start`.
    - `changes` lists each such start and end with its instant, in time order (at one instant
      the ends first, as the peak's sweep counts them, then by record); their total is
      `added + removed`.
    - `all_day` lists the records begun before the day and not ended before its end (at_start
      less those removed within the day), by start (then end, then history row); their total
      is `summary.all_day`. Every record active during the day is in it or has a change.

    Cost: the intervals with a change that day, read whole for the peak and the changes'
    order (two index ranges: those starting within the day, those ending within it); the
    level carried in, one row of the daily rollup (while it is built in REPORT_TIMEZONE; else
    counted from the history); and one page of the records active all day.
    """
    row, parsed, tz = _checked(principal, kind, company, day, today)
    start = periods.local_midnight_utc(parsed, tz)
    end = periods.local_midnight_utc(parsed + timedelta(days=1), tz)
    h = HistoryInterval
    reaching = _reaching(kind, row.id, start, end)
    changing = _changing(kind, row.id, start, end)
    # Begun before the day, and active at its first instant or removed at it.
    carried_in = _carried(kind, row.id, parsed, start)
    all_day_total = carried_in - sum(1 for _, s, _, _ in changing if s < start)
    events = sorted(
        [(s, 1, key, n) for key, s, _, n in changing if s >= start]
        + [(e, 0, key, n) for key, _, e, n in changing if e is not None and e < end]
    )
    added = sum(step for _, step, _, _ in events)
    carried = carried_in
    summary = DaySummary(carried, added, len(events) - added, all_day_total)
    # The level carried in is one step at midnight, with that instant's own changes.
    peak, peak_at = _first_peak(
        sorted([(start, carried, True)] + [(at, step or -1, True) for at, step, _, _ in events]),
        tz,
    )
    changes_offset = _clamp(changes_offset, len(events), limit)
    changes = tuple(
        Change(_local(at, tz), bool(step), key)
        for at, step, key, _ in events[changes_offset : changes_offset + limit]
    )
    all_day_offset = _clamp(all_day_offset, summary.all_day, limit)
    whole = db.session.execute(
        select(h.key, h.start_at, h.end_at)
        .where(reaching, _all_day(start, end))
        .order_by(h.start_at, h.end_at, h.id)
        .offset(all_day_offset)
        .limit(limit)
    )
    all_day = tuple(
        AllDayRecord(key, _local(s, tz), None if e is None else _local(e, tz))
        for key, s, e in whole
    )
    # Active during the day: not those whose end at midnight is its only change.
    total = summary.all_day + sum(1 for _, _, e, _ in changing if e is None or e > start)
    day_of = day_heading(kind, row, parsed, (start, end), peak, peak_at, total, tz)
    return DayView(day_of, summary, changes, changes_offset, all_day, all_day_offset)


def _clamp(offset: int, total: int, limit: int) -> int:
    return offset if offset < total else max(0, (total - 1) // limit * limit)


def _changing(kind: str, company: str, start: datetime, end: datetime) -> list[Any]:
    """The company's intervals of `kind` that start or end within the day (an end at its
    first instant included), zero-length ones left out, as (key, start, end, id) rows: those
    starting within it (a range of ix_history_kind_company_start) and those begun before it
    ending within it (a range of ix_history_kind_company_end)."""
    h = HistoryInterval
    columns = (h.key, h.start_at, h.end_at, h.id)
    mine = (h.kind == kind, h.company == company)
    starting = select(*columns).where(
        *mine,
        h.start_at >= start,
        h.start_at < end,
        or_(h.end_at.is_(None), h.end_at > h.start_at),
    )
    ending = select(*columns).where(*mine, h.end_at >= start, h.end_at < end, h.start_at < start)
    return [*db.session.execute(starting), *db.session.execute(ending)]


def _carried(kind: str, company: str, day: date, start: datetime) -> int:
    """How many of the company's records of `kind` were active at the end of the day before
    (an end at `start` counts: it is a removal at the day's first instant). The daily rollup's
    level at the end of the company's latest row before the day, read from one row, when the
    rollup is built in REPORT_TIMEZONE; else counted from the history."""
    if rollups.built_zone(db.session(), kind) == current_app.config["REPORT_TIMEZONE"]:
        level = db.session.scalar(
            select(DailyPeak.level)
            .where(DailyPeak.kind == kind, DailyPeak.company == company, DailyPeak.day < day)
            .order_by(DailyPeak.day.desc())
            .limit(1)
        )
        return int(level or 0)
    h = HistoryInterval
    began = (h.kind == kind, h.company == company, h.start_at < start)
    return int(
        db.session.scalar(
            select(func.count()).where(
                *began, or_(h.end_at.is_(None), and_(h.end_at >= start, h.end_at > h.start_at))
            )
        )
        or 0
    )


def _reaching(kind: str, company: str, start: datetime, end: datetime) -> ColumnElement[bool]:
    """The company's intervals of `kind` begun before the day's end and not ended before its
    start (an end at its first instant included: a removal at 00:00), zero-length ones left
    out: an index range of ix_history_kind_company_start."""
    h = HistoryInterval
    return and_(
        h.kind == kind,
        h.company == company,
        h.start_at < end,
        or_(h.end_at.is_(None), and_(h.end_at >= start, h.end_at > h.start_at)),
    )


def _all_day(start: datetime, end: datetime) -> ColumnElement[bool]:
    h = HistoryInterval
    return and_(h.start_at < start, or_(h.end_at.is_(None), h.end_at >= end))
