"""The definition of a day's peak, in one function: `sweep`.

The daily rollup's rebuild (rollups.py) and the report day drill-down (report_days.py) both run
it. Two faster forms must agree with it and are held to it by tests/test_rollups.py and
tests/test_report_exactness.py: the rollup's per-change arithmetic (rollups.record_changes) and
the from-scratch SQL the reports fall back on while the rollup is unbuilt
(reports.peaks_query).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from . import periods


@dataclass
class DayPeak:
    """One local day with events, as `sweep` finds it."""

    day: date
    peak: int
    level: int  # after the day's last event
    last_at: datetime  # the day's last event
    peak_at: datetime  # the first instant at which `peak` was active (the day's start if it
    # was active from the day's first instant on)

    def reach(self, level: int, at: datetime) -> None:
        if level > self.peak:
            self.peak, self.peak_at = level, at


class LocalDays:
    """Local dates of naive UTC instants, remembering the last day's bounds: a company's events
    come in time order, so most lookups need no time-zone conversion."""

    def __init__(self, tz: ZoneInfo) -> None:
        self.tz = tz
        self.start = self.end = datetime.max
        self.day = date.min

    def of(self, at: datetime) -> tuple[date, datetime]:
        if not (self.start <= at < self.end):
            self.day = at.replace(tzinfo=UTC).astimezone(self.tz).date()
            self.start = periods.local_midnight_utc(self.day, self.tz)
            self.end = periods.local_midnight_utc(self.day + timedelta(days=1), self.tz)
        return self.day, self.start


def sweep(
    events: list[tuple[datetime, int, bool]], tz: ZoneInfo, days: LocalDays | None = None
) -> Iterator[DayPeak]:
    """The definition of a day's peak: the largest number of records active at one instant
    of the local day in `tz`, found by sweeping one company's events.

    `events` are (naive UTC instant, +1 start / -1 end, real), sorted by instant with ends
    first (intervals are half-open). The level after all of an instant's events is the number
    active from that instant on; the level before a day's first event held from its midnight.
    Yields one DayPeak per local day with a real event, in order. Unreal events are the clamped
    starts of intervals open at a rebuild's first instant: they set the level carried into it
    without making that day a day with events."""
    days = days or LocalDays(tz)
    level = 0
    current: DayPeak | None = None
    i, n = 0, len(events)
    while i < n:
        at = events[i][0]
        before = level
        real = False
        while i < n and events[i][0] == at:
            level += events[i][1]
            real = real or events[i][2]
            i += 1
        if not real:
            continue
        day, day_start = days.of(at)
        if current is None or current.day != day:
            if current is not None:
                yield current
            # The level before this instant held from midnight on, unless this is midnight.
            if at > day_start:
                current = DayPeak(day, before, level, at, day_start)
            else:
                current = DayPeak(day, level, level, at, at)
        current.reach(level, at)
        current.level = level
        current.last_at = at
    if current is not None:
        yield current
