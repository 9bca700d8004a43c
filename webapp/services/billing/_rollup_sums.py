"""Sums kept beside the daily rollup, so the many-company report page reads one row per company
and one per day instead of every company-day row of the month (the page budget, docs/pages.md).

Both tables are pure functions of daily_peaks (models.RollupDay, models.RollupMonth):

- rollup_days (kind, day): `rise` and `change`, the sums over the day's rows of peak - carried
  and level - carried, `carried` being the level of the row's company before the row. The sum
  of every company's peak on a day is then the sum of `change` over the days before it plus
  its `rise` (0 on a day without rows).
- rollup_months (kind, month, company): `through`, the company's month total from the 1st to
  `last_day` (its last row in the month), and that row's `level`. Its month total over a
  period of n days is through + level x (n - last_day's day of the month).
- rollup_latest (kind, company): the month and `level` of the company's latest rollup_months
  row, for every company (level 0 and no month without one), for the current month's ranking
  (ranks.py) and the companies list's count orders (services/companies.py).

They change only where daily_peaks change, in the same transaction: `record_changes`' fast path
applies `Extend` deltas (each its company's latest row, so its rollup_latest row too); a
company's rows rewritten from a day on (rollups.rebuild) apply the difference of its old and new
rows (`replace`, which reads its latest month row again); a full rebuild derives them anew
(_rollup_build). A new company gets its level-0 rows with it (`start_company`).
tests/invariants.py holds them to a rebuild after every write sequence, and the ranking tests
hold the figures read from them to the report's.

A day's sums are spread over a few rollup_days rows, one per writer slot (migration 0029): on
PostgreSQL a connection keeps one slot, drawn at random, so a writer holds the lock of its own
slot's row of the day until it commits and writers on other slots do not wait for it (with
one row per day, every write of a kind ran after the one before, whatever its companies).
Within a transaction rows are always updated in day order on one slot, so two writers cannot
deadlock on them. SQLite has one writer at a time: slot 0, as the full rebuild writes.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from sqlalchemy import Select, and_, bindparam, delete, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, aliased

from ...database import driver_rows
from ...models import Company, DailyPeak, RollupDay, RollupLatest, RollupMonth
from . import periods

Row = tuple[date, int, int]  # (day, peak, level): one company's daily_peaks row


def month_of(day: date) -> date:
    return day.replace(day=1)


def day_parts(rows: Iterable[Row], carried: int) -> dict[date, tuple[int, int]]:
    """{day: (rise, change)} of one company's rows in day order, `carried` its level before
    the first."""
    parts: dict[date, tuple[int, int]] = {}
    for day, peak, level in rows:
        parts[day] = (peak - carried, level - carried)
        carried = level
    return parts


def month_parts(rows: Iterable[Row], carried: int) -> Iterator[tuple[date, int, date, int]]:
    """(month, through, last_day, level) per month of one company's rows in day order, which
    start at a month's first row (rows before it in that month would be left out); `carried`
    is the level before that month."""
    for month, group in itertools.groupby(rows, key=lambda r: month_of(r[0])):
        through, last = 0, month
        previous = 0  # the day of the month of the previous row; 0 before the 1st
        for day, peak, level in group:
            through += carried * (day.day - previous - 1) + peak
            previous, carried, last = day.day, level, day
        yield month, through, last, carried


@dataclass
class Extend:
    """The fast path's change to one company's sums: its row of `day` now peaks at `peak` and
    ends at `level`; `before` is the row's previous (peak, level) when it existed (same day),
    else None with `carried` the level of the company's latest earlier row, on `previous`."""

    company: str
    day: date
    peak: int
    level: int
    before: tuple[int, int] | None
    carried: int
    previous: date | None


class DayDeltas(dict[date, tuple[int, int]]):
    """(rise, change) to add to each day's rollup_days row: a transaction's whole rollup step
    collects them and applies them once, in day order (`add_days`)."""

    def add(self, day: date, rise: int, change: int) -> None:
        r, c = self.get(day, (0, 0))
        self[day] = (r + rise, c + change)


def extend(session: Session, kind: str, grown: Iterable[Extend], days: DayDeltas) -> None:
    """Apply record_changes' arithmetic to each company's month row and to `days`: its latest
    row grew or a new latest row began (its last row, so no later day or month moves). One
    company at most once per call; each kind of statement is sent once, as an executemany."""
    added: list[dict] = []  # the month row's latest day grew
    continued: list[dict] = []  # a new latest day in the month of the previous one
    begun: list[dict] = []  # the company's first row of the month
    for c in grown:
        old_peak, old_level = c.before if c.before is not None else (c.carried, c.carried)
        days.add(c.day, c.peak - old_peak, c.level - old_level)
        month = month_of(c.day)
        key = {"m_kind": kind, "m_month": month, "m_company": c.company}
        if c.before is not None:
            added.append({**key, "m_add": c.peak - old_peak, "m_level": c.level})
        elif c.previous is not None and month_of(c.previous) == month:
            gap = c.day.day - c.previous.day - 1
            add = c.carried * gap + c.peak
            continued.append({**key, "m_add": add, "m_last": c.day, "m_level": c.level})
        else:
            through = c.carried * (c.day.day - 1) + c.peak
            begun.append(
                {
                    "kind": kind,
                    "month": month,
                    "company": c.company,
                    "through": through,
                    "last_day": c.day,
                    "level": c.level,
                }
            )
    if added:
        session.execute(
            _ADD.values(through=_M.c.through + bindparam("m_add"), level=bindparam("m_level")),
            added,
        )
    if continued:
        session.execute(
            _ADD.values(
                through=_M.c.through + bindparam("m_add"),
                last_day=bindparam("m_last"),
                level=bindparam("m_level"),
            ),
            continued,
        )
    if begun:
        session.execute(insert(_M), begun)
    latest = [
        {"kind": kind, "company": c.company, "month": month_of(c.day), "level": c.level}
        for c in grown
    ]
    if latest:
        session.execute(_upsert_latest(session), latest)


def _upsert_latest(session: Session):
    """INSERT … ON CONFLICT of rollup_latest rows, for an executemany of their values."""
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    statement = dialect.insert(RollupLatest)
    return statement.on_conflict_do_update(
        index_elements=[RollupLatest.kind, RollupLatest.company],
        set_={"month": statement.excluded.month, "level": statement.excluded.level},
    )


_M = RollupMonth.__table__
_ADD = update(_M).where(
    _M.c.kind == bindparam("m_kind"),
    _M.c.month == bindparam("m_month"),
    _M.c.company == bindparam("m_company"),
)


def replace(
    session: Session,
    kind: str,
    company: str,
    first: date,
    old: list[Row],
    new: list[Row],
    carried: int,
    days: DayDeltas,
) -> None:
    """One company's rows from `first` on were `old` and are now `new` (rows before `first`
    unchanged, `carried` the level they leave, and `new` already written): add the
    difference to `days` and derive its months from `first`'s month on again."""
    for day, (rise, change) in day_parts(old, carried).items():
        days.add(day, -rise, -change)
    for day, (rise, change) in day_parts(new, carried).items():
        days.add(day, rise, change)
    month = month_of(first)
    m, p = RollupMonth, DailyPeak
    session.execute(
        delete(m).where(m.kind == kind, m.company == company, m.month >= month),
    )
    carried_in = session.scalar(
        select(p.level)
        .where(p.kind == kind, p.company == company, p.day < month)
        .order_by(p.day.desc())
        .limit(1)
    )
    rows = session.execute(
        select(p.day, p.peak, p.level)
        .where(p.kind == kind, p.company == company, p.day >= month)
        .order_by(p.day)
    ).all()
    _insert_months(session, kind, company, month_parts(rows, carried_in or 0))
    latest = session.execute(
        select(m.month, m.level)
        .where(m.kind == kind, m.company == company)
        .order_by(m.month.desc())
        .limit(1)
    ).first()
    latest_month: date | None = None  # no month rows left: level 0 (models.RollupLatest)
    level = 0
    if latest is not None:
        latest_month, level = latest.month, latest.level
    session.execute(
        _upsert_latest(session),
        [{"kind": kind, "company": company, "month": latest_month, "level": level}],
    )


def start_company(session: Session, kinds: Iterable[str], company: str) -> None:
    """A new company's rollup_latest rows, level 0 and no month, for each of `kinds` (those
    whose rollup is built): every company has one (models.RollupLatest)."""
    rows = [{"kind": kind, "company": company, "month": None, "level": 0} for kind in kinds]
    if rows:
        session.execute(insert(RollupLatest), rows)


SLOTS = 8  # rollup_days rows a day's sums may spread over (PostgreSQL)


def _slot(session: Session) -> int:
    """The connection's writer slot: drawn once per database connection, so a transaction
    updates one slot's rows (its lock order stays day order) and concurrent transactions,
    each on its own connection, mostly different ones."""
    connection = session.connection()
    if connection.dialect.name != "postgresql":
        return 0
    return connection.info.setdefault("rollup_slot", random.randrange(SLOTS))


def add_days(session: Session, kind: str, deltas: DayDeltas) -> None:
    """Add (rise, change) to each day's row of the connection's slot, creating it when
    missing; in day order (the lock order every writer keeps). Days whose sums do not move
    are not touched. Guarantees: each day's sums over its slots move by exactly `deltas`."""
    slot = _slot(session)
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    for day in sorted(deltas):
        rise, change = deltas[day]
        if rise == 0 and change == 0:
            continue
        values = {"kind": kind, "day": day, "slot": slot, "rise": rise, "change": change}
        statement = dialect.insert(RollupDay).values(**values)
        session.execute(
            statement.on_conflict_do_update(
                index_elements=[RollupDay.kind, RollupDay.day, RollupDay.slot],
                set_={
                    "rise": RollupDay.rise + statement.excluded.rise,
                    "change": RollupDay.change + statement.excluded.change,
                },
            )
        )


def _month_values(kind: str, company: str, parts: Iterable[tuple[date, int, date, int]]):
    return [
        {
            "kind": kind,
            "month": month,
            "company": company,
            "through": through,
            "last_day": last,
            "level": level,
        }
        for month, through, last, level in parts
    ]


def _insert_months(session: Session, kind: str, company: str, parts) -> None:
    values = _month_values(kind, company, parts)
    if values:
        session.execute(insert(RollupMonth), values)


def everyone_figures(
    session: Session, kind: str, period: periods.Period
) -> tuple[dict[str, int], list[int]] | None:
    """({company: month total}, [each day's sum over every company]) for every company, read
    from the sums: a row per company with rows in the month, a seek for each without, and a
    row per day. The same numbers as rollups.month_figures. None when some company's rows go
    past the period's last day (only a period ending today can have those: a write stamped
    ahead of the report's clock); the caller then sums the daily rows instead."""
    days = period.days
    first, last, count = days[0].day, days[-1].day, len(days)
    m = RollupMonth
    connection = session.connection()
    totals: dict[str, int] = {}
    query = select(m.company, m.through, m.last_day, m.level).where(
        m.kind == kind, m.month == first
    )
    for company, through, last_day, level in connection.execute(query).all():
        if last_day > last:
            return None
        totals[company] = through + level * (count - last_day.day)
    # A company without rows in the month has its latest earlier month's level all month.
    earlier = (
        select(m.level)
        .where(m.kind == kind, m.company == Company.id, m.month < first)
        .order_by(m.month.desc())
        .limit(1)
        .scalar_subquery()
    )
    quiet = select(Company.id, earlier).where(
        ~select(m.company).where(m.kind == kind, m.month == first, m.company == Company.id).exists()
    )
    for company, level in connection.execute(quiet).all():
        totals[company] = (level or 0) * count
    return totals, day_totals(session, kind, period)


def carried_into(
    session: Session, kind: str, month: date, companies: list[str] | Select[Any] | None
) -> dict[str, int]:
    """{company: the level it carries into `month` (a 1st)}, what rollups.carried_levels
    answers, from the sums: its latest earlier month's `level`, else 0. One range of the
    month before's rows (most companies have one), and a seek only for each company without.
    `companies`: those named, a query naming them, or None: every company."""
    before = month_of(month - timedelta(days=1))
    m, previous = RollupMonth, aliased(RollupMonth)
    earlier = (
        select(m.level)
        .where(m.kind == kind, m.company == Company.id, m.month < before)
        .order_by(m.month.desc())
        .limit(1)
        .scalar_subquery()
    )
    # COALESCE asks `earlier` only when the month before has no row (both databases).
    query = select(Company.id, func.coalesce(previous.level, earlier)).outerjoin(
        previous,
        and_(previous.kind == kind, previous.month == before, previous.company == Company.id),
    )
    if companies is not None:
        query = query.where(Company.id.in_(companies))
    # The driver's rows: a Row object each costs more than the rest (100,000 at provider scale).
    return {company: level or 0 for company, level in driver_rows(session.connection(), query)}


def day_totals(session: Session, kind: str, period: periods.Period) -> list[int]:
    """Each day's sum over every company of its daily peak, from rollup_days alone: one row
    per day, whatever the number of companies."""
    days = period.days
    first, last = days[0].day, days[-1].day
    connection = session.connection()
    d = RollupDay
    # PostgreSQL sums bigints as numeric: an int once, here.
    carried = int(
        connection.execute(
            select(func.coalesce(func.sum(d.change), 0)).where(d.kind == kind, d.day < first)
        ).scalar_one()
    )
    rows = {
        day: (int(rise), int(change))
        for day, rise, change in connection.execute(
            select(d.day, func.sum(d.rise), func.sum(d.change))
            .where(d.kind == kind, d.day >= first, d.day <= last)
            .group_by(d.day)
        )
    }
    sums = []
    for day in days:
        rise, change = rows.get(day.day, (0, 0))
        sums.append(carried + rise)
        carried += change
    return sums
