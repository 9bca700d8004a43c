"""Report periods: which calendar days a month covers, and where each begins in UTC.

Days begin at local midnight in REPORT_TIMEZONE, so a day is 23 or 25 hours long across a
daylight-saving change; every boundary is converted to the naive UTC the history stores.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ...errors import Invalid


@dataclass(frozen=True)
class Day:
    day: date
    start: datetime  # naive UTC, inclusive
    end: datetime  # naive UTC, exclusive


@dataclass(frozen=True)
class Period:
    year: int
    month: int
    days: tuple[Day, ...]  # every day of the month, or the 1st to today for the current month

    @property
    def start(self) -> datetime:
        return self.days[0].start

    @property
    def end(self) -> datetime:
        return self.days[-1].end


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise RuntimeError(f"REPORT_TIMEZONE {name!r} is not a known IANA time zone") from exc


def local_midnight_utc(day: date, tz: ZoneInfo) -> datetime:
    """The UTC instant at which `day` begins in `tz`, as a naive datetime."""
    return datetime.combine(day, time(0), tzinfo=tz).astimezone(UTC).replace(tzinfo=None)


def today_in(tz: ZoneInfo, now: datetime | None = None) -> date:
    """Today's date in `tz`; `now` is a naive UTC datetime (defaults to the real now)."""
    moment = (now or datetime.now(UTC).replace(tzinfo=None)).replace(tzinfo=UTC)
    return moment.astimezone(tz).date()


def resolve(month: int | None, year: int | None, tz: ZoneInfo, today: date) -> Period:
    """The period a report covers (docs/reports.md#the-report-request).

    No month: the current month to date. A month without a year: its most recent occurrence
    that is not in the future. A month of a future year or later in this year is refused.
    """
    if month is None:
        if year is not None:
            raise Invalid("'scope.year' needs 'scope.month'.", {"month": "required with year"})
        month = today.month
    if year is None:
        year = today.year if month <= today.month else today.year - 1
    if (year, month) > (today.year, today.month):
        raise Invalid("The requested month is in the future.", {"month": "in the future"})
    last = (
        today.day
        if (year, month) == (today.year, today.month)
        else calendar.monthrange(year, month)[1]
    )
    days = []
    for n in range(1, last + 1):
        day = date(year, month, n)
        days.append(
            Day(day, local_midnight_utc(day, tz), local_midnight_utc(day + timedelta(days=1), tz))
        )
    return Period(year, month, tuple(days))
