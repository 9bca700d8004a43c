"""The rollup's full rebuild as it was before it became set-based: every company's events read
in company order and swept in Python (day_peak.sweep, the definition of a day's peak), the
rows inserted in batches and their sums derived in Python.

Kept as the reference the set-based rebuild (rollups.rebuild with starts None) is held to row
for row (tests/test_rollup_build.py) and timed against in `make bench` (bench/rollup.py).
"""

from __future__ import annotations

import itertools
from datetime import date, datetime
from zoneinfo import ZoneInfo

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from webapp.database import utcnow
from webapp.models import (
    Company,
    DailyPeak,
    HistoryInterval,
    RollupDay,
    RollupLatest,
    RollupMonth,
    RollupState,
)
from webapp.services.billing import day_peak, rollups


def rebuild_row_by_row(session: Session, kind: str, tz: ZoneInfo) -> int:
    """Replace kind's daily_peaks and sums by a sweep of the whole history in `tz`, as
    `flask history rollup` did; returns rows written."""
    h = HistoryInterval
    real = h.end_at.is_(None) | (h.end_at > h.start_at)  # zero-length intervals never count
    session.execute(delete(DailyPeak).where(DailyPeak.kind == kind))
    query = select(h.company, h.start_at, h.end_at).where(h.kind == kind, real).order_by(h.company)
    local_days = day_peak.LocalDays(tz)
    out: list[tuple[str, date, int, int, datetime]] = []
    for company, events in _by_company(session.execute(query)):
        events.sort(key=lambda e: (e[0], e[1]))
        out += [
            (company, r.day, r.peak, r.level, r.last_at)
            for r in day_peak.sweep(events, tz, local_days)
        ]
    for i in range(0, len(out), 5000):
        session.execute(
            insert(DailyPeak),
            [
                {"kind": kind, "company": c, "day": d, "peak": p, "level": lv, "last_at": at}
                for c, d, p, lv, at in out[i : i + 5000]
            ],
        )
    _derive(session, kind, [(c, d, p, lv) for c, d, p, lv, _ in out])
    state = session.get(RollupState, kind)
    if state is None:
        session.add(RollupState(kind=kind, timezone=tz.key, built_at=utcnow()))
    else:
        state.timezone, state.built_at = tz.key, utcnow()
    session.flush()
    return len(out)


def rebuild_all_row_by_row(session: Session, tz: ZoneInfo) -> dict[str, int]:
    """Every kind, as rollups.rebuild_all did."""
    return {kind: rebuild_row_by_row(session, kind, tz) for kind in rollups.KINDS}


def _by_company(result):
    """Group (company, start, end) rows, in company order, into per-company event lists."""
    company: str | None = None
    events: list[tuple[datetime, int, bool]] = []
    for c, start, end in result:
        if c != company:
            if company is not None:
                yield company, events
            company, events = c, []
        events.append((start, 1, True))
        if end is not None:
            events.append((end, -1, True))
    if company is not None:
        yield company, events


def _derive(session: Session, kind: str, rows: list[tuple[str, date, int, int]]) -> None:
    """rollup_days, rollup_months and rollup_latest of `rows` (company, day, peak, level) in
    company and day order, as _rollup_sums.derive computed them."""
    session.execute(delete(RollupDay).where(RollupDay.kind == kind))
    session.execute(delete(RollupMonth).where(RollupMonth.kind == kind))
    session.execute(delete(RollupLatest).where(RollupLatest.kind == kind))
    days: dict[date, tuple[int, int]] = {}
    months: list[dict] = []
    for company, group in itertools.groupby(rows, key=lambda r: r[0]):
        company_rows = [(d, p, lv) for _, d, p, lv in group]
        carried = 0
        for day, peak, level in company_rows:
            rise, change = days.get(day, (0, 0))
            days[day] = (rise + peak - carried, change + level - carried)
            carried = level
        carried = 0
        for month, month_rows in itertools.groupby(company_rows, key=lambda r: r[0].replace(day=1)):
            through, last, previous = 0, month, 0
            for day, peak, level in month_rows:
                through += carried * (day.day - previous - 1) + peak
                previous, carried, last = day.day, level, day
            months.append(
                {
                    "kind": kind,
                    "month": month,
                    "company": company,
                    "through": through,
                    "last_day": last,
                    "level": carried,
                }
            )
    for i in range(0, len(months), 5000):
        session.execute(insert(RollupMonth), months[i : i + 5000])
    # Each company's last month row (months are in company and month order); level 0 and no
    # month for a company without any (models.RollupLatest).
    latest = {m["company"]: m for m in months}
    values = [
        {"kind": kind, "company": c, "month": m["month"], "level": m["level"]}
        for c, m in latest.items()
    ] + [
        {"kind": kind, "company": c, "month": None, "level": 0}
        for c in session.scalars(select(Company.id).order_by(Company.id))
        if c not in latest
    ]
    for i in range(0, len(values), 5000):
        session.execute(insert(RollupLatest), values[i : i + 5000])
    if days:
        session.execute(
            insert(RollupDay),
            [
                {"kind": kind, "day": d, "rise": r, "change": c}
                for d, (r, c) in sorted(days.items())
            ],
        )
