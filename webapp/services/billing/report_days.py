"""Drill-down of a report day: which DDIs or phone users of one company were active during one
calendar day, and when the day's peak was reached (docs/reports.md).

It reads the same history intervals as the report (services/billing/reports.py) with the same rules:
days begin at local midnight in REPORT_TIMEZONE, intervals are half-open, zero-length ones are
ignored. So the peak found here is the report's value for that day.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from flask import current_app
from sqlalchemy import ColumnElement, Select, and_, case, func, or_, select

from ...access import Principal, within
from ...errors import Invalid, NotFound
from ...extensions import db
from ...models import Company, HistoryInterval
from ..fields import ISO_DATE, check_format
from . import day_peak, periods
from .reports import ANSWER_KEYS, MIN_YEAR


@dataclass(frozen=True)
class ActiveRecord:
    key: str  # 'dialcode:number' for a DDI, the username for a phone user
    start: datetime  # aware, in REPORT_TIMEZONE; clipped to the day's start
    end: datetime  # aware, in REPORT_TIMEZONE; clipped to the day's end (exclusive)
    from_before: bool  # the interval began before the day
    continues: bool  # the interval goes on past the day (or is still open)
    at_peak: bool  # active at the instant the peak was first reached


@dataclass(frozen=True)
class DayDetail:
    kind: str
    company: str
    company_name: str
    day: date
    start: datetime  # aware, in REPORT_TIMEZONE: the day's first instant
    end: datetime  # aware, in REPORT_TIMEZONE: the next day's first instant
    records: tuple[ActiveRecord, ...]  # ordered by start, then key
    peak: int
    peak_at: datetime | None  # aware, in REPORT_TIMEZONE; None when nothing was active


def reportable_companies(principal: Principal) -> list[Company]:
    """The companies the principal may pick on a report page, by identifier.

    Forbidden when the principal has no report permission at all.
    """
    principal.require_report()
    scope = principal.reportable_companies()
    return list(
        db.session.scalars(select(Company).where(within(Company.id, scope)).order_by(Company.id))
    )


def day_detail(
    principal: Principal, kind: str, company: object, day: object, today: date | None = None
) -> DayDetail:
    """The records of `kind` ('ddi' or 'user') that `company` had during the calendar `day`
    (a date or 'YYYY-MM-DD') in REPORT_TIMEZONE, and the day's peak.

    Guarantees:
    - Forbidden without report permission (checked first); Invalid for a malformed company
      identifier or date, or a day after today; NotFound for a company that does not exist or
      lies outside the principal's report scope (the two are indistinguishable).
    - `records` holds one entry per history interval of that company and kind overlapping the
      day (half-open, zero-length intervals ignored), clipped to the day's bounds.
    - `peak` is the largest number of records active at the same instant during the day, equal
      to the report's value for that company and day; `peak_at` is the first instant at which
      that number was active (None when the peak is 0).
    """
    row, day, tz = _checked(principal, kind, company, day, today)
    start = periods.local_midnight_utc(day, tz)
    end = periods.local_midnight_utc(day + timedelta(days=1), tz)
    h = HistoryInterval
    query = select(h.key, h.start_at, h.end_at).where(_touching(kind, row.id, start, end))
    raw = db.session.execute(query).all()
    clipped = [
        (key, max(s, start), end if e is None else min(e, end), s < start, e is None or e > end)
        for key, s, e in raw
    ]
    peak, peak_at = _peak(clipped, end, tz)
    records = tuple(
        _record(key, s, e, start, end, peak_at, tz)
        for key, s, e in sorted(raw, key=lambda r: (max(r[1], start), r[0], _until(r[2], end)))
    )
    return DayDetail(
        kind=kind,
        company=row.id,
        company_name=row.name,
        day=day,
        start=_local(start, tz),
        end=_local(end, tz),
        records=records,
        peak=peak,
        peak_at=None if peak_at is None else _local(peak_at, tz),
    )


@dataclass(frozen=True)
class DayPage:
    """A drill-down day with one page of its records (day_page)."""

    kind: str
    company: str
    company_name: str
    day: date
    start: datetime  # aware, in REPORT_TIMEZONE: the day's first instant
    end: datetime  # aware, in REPORT_TIMEZONE: the next day's first instant
    peak: int
    peak_at: datetime | None  # aware, in REPORT_TIMEZONE; None when nothing was active
    total: int  # the records active during the day
    offset: int  # the page's first record's position among them, from 0
    records: tuple[ActiveRecord, ...]  # the page's, in ORDER


PAGE_SIZE = 100


def day_page(
    principal: Principal,
    kind: str,
    company: object,
    day: object,
    offset: int = 0,
    limit: int = PAGE_SIZE,
    today: date | None = None,
) -> DayPage:
    """day_detail's day with `limit` of its records from `offset` (moved back to the last
    page's start when past the end), without reading every record of a large company.

    Guarantees: the checks, `peak` and `peak_at` of day_detail; `total` is the number of its
    records; `records` are in the order of `day_records`: by start (records begun on an earlier
    day first, earliest first), then end, then their history row. The peak needs the day's
    events only: records active all day count as one step at midnight."""
    day_of, start, end, peak_at, tz = _day(principal, kind, company, day, today)
    if offset >= day_of.total:
        offset = max(0, (day_of.total - 1) // limit * limit)
    query = _ordered(kind, day_of.company, start, end).offset(offset).limit(limit)
    records = tuple(
        _record(key, s, e, start, end, peak_at, tz) for key, s, e in db.session.execute(query)
    )
    return replace(day_of, offset=offset, records=records)


def day_records(
    principal: Principal, kind: str, company: object, day: object, today: date | None = None
) -> tuple[DayPage, Iterator[ActiveRecord]]:
    """The day (day_page without records) and every record of it, lazily, in day_page's
    order, read from the database a thousand at a time: for a download that streams. The
    checks are made before it returns; the records need the request's database session."""
    day_of, start, end, peak_at, tz = _day(principal, kind, company, day, today)
    query = _ordered(kind, day_of.company, start, end).execution_options(yield_per=1000)

    def records() -> Iterator[ActiveRecord]:
        for key, s, e in db.session.execute(query):
            yield _record(key, s, e, start, end, peak_at, tz)

    return day_of, records()


def _day(
    principal: Principal, kind: str, company: object, day: object, today: date | None
) -> tuple[DayPage, datetime, datetime, datetime | None, ZoneInfo]:
    """The checked day without its records, with what reading them needs: the day's bounds
    (naive UTC), the instant the peak was first reached and the zone."""
    row, parsed, tz = _checked(principal, kind, company, day, today)
    start, end, total, peak, peak_at = _day_peak(kind, row.id, parsed, tz)
    return (
        day_heading(kind, row, parsed, (start, end), peak, peak_at, total, tz),
        start,
        end,
        peak_at,
        tz,
    )


def day_heading(
    kind: str,
    row: Company,
    day: date,
    bounds: tuple[datetime, datetime],
    peak: int,
    peak_at: datetime | None,
    total: int,
    tz: ZoneInfo,
) -> DayPage:
    """The day without records: its company, its bounds (naive UTC in, local out), its peak
    and when it was first reached, and how many records were active during it."""
    start, end = bounds
    return DayPage(
        kind=kind,
        company=row.id,
        company_name=row.name,
        day=day,
        start=_local(start, tz),
        end=_local(end, tz),
        peak=peak,
        peak_at=None if peak_at is None else _local(peak_at, tz),
        total=total,
        offset=0,
        records=(),
    )


def _ordered(kind: str, company: str, start: datetime, end: datetime) -> Select:
    """The day's intervals in ORDER: an index range of ix_history_kind_company_start."""
    h = HistoryInterval
    return (
        select(h.key, h.start_at, h.end_at)
        .where(_touching(kind, company, start, end))
        .order_by(h.start_at, h.end_at, h.id)
    )


def _day_peak(
    kind: str, company: str, day: date, tz: ZoneInfo
) -> tuple[datetime, datetime, int, int, datetime | None]:
    """(day start, day end as naive UTC, records active, peak, its first instant): the
    records active all day are counted, not read; the others' events are swept."""
    start = periods.local_midnight_utc(day, tz)
    end = periods.local_midnight_utc(day + timedelta(days=1), tz)
    h = HistoryInterval
    touching = _touching(kind, company, start, end)
    all_day = and_(h.start_at <= start, or_(h.end_at.is_(None), h.end_at >= end))
    total, whole = db.session.execute(
        select(func.count(), func.coalesce(func.sum(case((all_day, 1), else_=0)), 0)).where(
            touching
        )
    ).one()
    # Those active all day start at midnight as one step; the rest as day_detail's events.
    events: list[tuple[datetime, int, bool]] = [(start, int(whole), True)] if whole else []
    for s, e in db.session.execute(select(h.start_at, h.end_at).where(touching, ~all_day)):
        events.append((max(s, start), 1, True))
        if e is not None and e < end:
            events.append((e, -1, True))
    events.sort()
    peak, peak_at = _first_peak(events, tz)
    return start, end, int(total), peak, peak_at


def _checked(
    principal: Principal, kind: str, company: object, day: object, today: date | None
) -> tuple[Company, date, ZoneInfo]:
    """The company and day of a drill-down request, in the order of day_detail's guarantees:
    Forbidden, then Invalid parameters, then NotFound."""
    principal.require_report()
    if kind not in ANSWER_KEYS:
        raise ValueError(f"unknown report kind {kind!r}")
    if (why := check_format("company", company)) is not None:
        raise Invalid(f"The company identifier {why}.", {"company": why})
    assert isinstance(company, str)  # check_format passes nothing else
    parsed = _parse_day(day)
    tz = periods.zone(current_app.config["REPORT_TIMEZONE"])
    if parsed > (today or periods.today_in(tz)):
        raise Invalid("The requested day is in the future.", {"date": "in the future"})
    if not principal.may_report_on(company):
        raise NotFound("No such company.")
    row = db.session.get(Company, company)
    if row is None:
        raise NotFound("No such company.")
    return row, parsed, tz


def _touching(kind: str, company: str, start: datetime, end: datetime) -> ColumnElement[bool]:
    """The company's intervals of `kind` overlapping [start, end), zero-length ones left out."""
    h = HistoryInterval
    return and_(
        h.kind == kind,
        h.company == company,
        h.start_at < end,
        or_(h.end_at.is_(None), and_(h.end_at > start, h.end_at > h.start_at)),
    )


def _until(e: datetime | None, end: datetime) -> datetime:
    return end if e is None else min(e, end)


def _local(moment: datetime, tz: ZoneInfo) -> datetime:
    return moment.replace(tzinfo=UTC).astimezone(tz)


def _record(
    key: str,
    s: datetime,
    e: datetime | None,
    start: datetime,
    end: datetime,
    peak_at: datetime | None,
    tz: ZoneInfo,
) -> ActiveRecord:
    """One interval as the day shows it (naive UTC in, clipped to [start, end))."""
    clipped_start = max(s, start)
    clipped_end = _until(e, end)
    return ActiveRecord(
        key=key,
        start=_local(clipped_start, tz),
        end=_local(clipped_end, tz),
        from_before=s < start,
        continues=e is None or e > end,
        at_peak=peak_at is not None and clipped_start <= peak_at < clipped_end,
    )


def _parse_day(value: object) -> date:
    if isinstance(value, datetime):
        raise Invalid("The date must be a calendar day.", {"date": "must be YYYY-MM-DD"})
    if isinstance(value, date):
        parsed = value
    elif isinstance(value, str) and ISO_DATE.fullmatch(value):
        try:
            parsed = date.fromisoformat(value)
        except ValueError:
            raise Invalid(
                "The date is not a real calendar day.", {"date": "not a real day"}
            ) from None
    else:
        raise Invalid("The date must be given as YYYY-MM-DD.", {"date": "must be YYYY-MM-DD"})
    if parsed.year < MIN_YEAR:
        raise Invalid(f"The date is before {MIN_YEAR}.", {"date": f"before {MIN_YEAR}"})
    return parsed


def _peak(
    clipped: list[tuple[str, datetime, datetime, bool, bool]], day_end: datetime, tz: ZoneInfo
) -> tuple[int, datetime | None]:
    """The day's peak and the first instant it was reached, by day_peak.sweep (the definition
    the report's numbers follow) over the clipped intervals' starts and the ends inside the
    day: every event falls within the one day, so it yields that day at most."""
    events = sorted(
        [(s, 1, True) for _, s, _, _, _ in clipped]
        + [(e, -1, True) for _, _, e, _, _ in clipped if e < day_end]
    )
    return _first_peak(events, tz)


def _first_peak(
    events: list[tuple[datetime, int, bool]], tz: ZoneInfo
) -> tuple[int, datetime | None]:
    """The peak and its first instant of one day's sorted events (naive UTC), by sweep."""
    found = next(day_peak.sweep(events, tz), None)
    if found is None or found.peak == 0:
        return 0, None
    return found.peak, found.peak_at
