"""Drill-down of a report day: which DDIs or phone users of one company were active during one
calendar day, and when the day's peak was reached (docs/reports.md).

It reads the same history intervals as the report (services/reports.py) with the same rules:
days begin at local midnight in REPORT_TIMEZONE, intervals are half-open, zero-length ones are
ignored. So the peak found here is the report's value for that day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from flask import current_app
from sqlalchemy import and_, or_, select

from ..access import Principal
from ..extensions import db
from ..models import Company, HistoryInterval
from . import companies as company_service
from . import day_peak, periods
from .errors import Invalid, NotFound
from .fields import ISO_DATE, check_format
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
    return company_service.listed(principal.reportable_companies())


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
    principal.require_report()
    if kind not in ANSWER_KEYS:
        raise ValueError(f"unknown report kind {kind!r}")
    if (why := check_format("company", company)) is not None:
        raise Invalid(f"The company identifier {why}.", {"company": why})
    assert isinstance(company, str)  # check_format passes nothing else
    day = _parse_day(day)
    tz = periods.zone(current_app.config["REPORT_TIMEZONE"])
    today = today or periods.today_in(tz)
    if day > today:
        raise Invalid("The requested day is in the future.", {"date": "in the future"})
    if not principal.may_report_on(company):
        raise NotFound("No such company.")
    row = db.session.get(Company, company)
    if row is None:
        raise NotFound("No such company.")

    start = periods.local_midnight_utc(day, tz)
    end = periods.local_midnight_utc(day + timedelta(days=1), tz)
    h = HistoryInterval
    query = select(h.key, h.start_at, h.end_at).where(
        h.kind == kind,
        h.company == company,
        h.start_at < end,
        or_(h.end_at.is_(None), and_(h.end_at > start, h.end_at > h.start_at)),
    )
    clipped = [
        (key, max(s, start), end if e is None else min(e, end), s < start, e is None or e > end)
        for key, s, e in db.session.execute(query)
    ]
    peak, peak_at = _peak(clipped, end, tz)

    def local(moment: datetime) -> datetime:
        return moment.replace(tzinfo=UTC).astimezone(tz)

    records = tuple(
        ActiveRecord(
            key=key,
            start=local(s),
            end=local(e),
            from_before=before,
            continues=after,
            at_peak=peak_at is not None and s <= peak_at < e,
        )
        for key, s, e, before, after in sorted(clipped, key=lambda r: (r[1], r[0], r[2]))
    )
    return DayDetail(
        kind=kind,
        company=row.id,
        company_name=row.name,
        day=day,
        start=local(start),
        end=local(end),
        records=records,
        peak=peak,
        peak_at=None if peak_at is None else local(peak_at),
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
    found = next(day_peak.sweep(events, tz), None)
    if found is None or found.peak == 0:
        return 0, None
    return found.peak, found.peak_at
