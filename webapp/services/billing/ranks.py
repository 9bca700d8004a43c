"""One page of every company ranked by month total, worked out in the database (docs/pages.md).

The report page for every company shows 50 companies of all of them. Reading every company's
total into Python to sort them grows with the company count (100,000 rows at the largest
provider the bench holds, docs/operations.md); here only as many rows as the page needs are
read, in an index's order: for the current month the companies in order of current level and
of month row `through`, until no company not yet read can rank on the page (`_top`, a threshold
scan over the sums kept beside the rollup: _rollup_sums); for a closed month a close's stored
totals in total order. An earlier month not closed is ranked by `ORDER BY total DESC, id LIMIT
n OFFSET k` over an expression of every company's sums (`_every`). The day sums come from
rollup_days or the close, one row per day. The numbers are those of
_rollup_sums.everyone_figures and closed_figures.month_figures (tests/test_reports_ranking.py
holds them equal).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from sqlalchemy import Integer, and_, cast, extract, func, select
from sqlalchemy.orm import Session, aliased

from ...models import ClosedFigures, Company, RollupLatest, RollupMonth
from . import _rollup_sums, closed_figures, periods

Page = list[tuple[str, int]]  # (company, month total), in rank order


def company_count(session: Session) -> int:
    """How many companies there are: every one is ranked, zeros included."""
    return session.scalar(select(func.count()).select_from(Company)) or 0


def open_page(
    session: Session,
    kind: str,
    period: periods.Period,
    offset: int,
    limit: int,
    depth: int | None = None,
    companies: int | None = None,
) -> tuple[Page, list[int]] | None:
    """(the page's companies with their totals, each day's sum over every company) from the
    rollup's kept sums. None when some company's rows go past the period's last day (only a
    month to date can have those: a write stamped ahead of the report's clock): the caller then
    sums the daily rows, as _rollup_sums.everyone_figures does.

    The latest month (no row of any later one: the current month) is ranked by `_top`, which
    reads only as many companies as its page needs, unless the page lies past an eighth of the
    `companies` (there reading every company costs less than reading that far twice over); an
    earlier one by `_every`, which computes every company's total. `depth` is _top's first read
    (tests make it small; given, _top ranks whatever the page)."""
    days = period.days
    first, last, count = days[0].day, days[-1].day, len(days)
    m = RollupMonth
    connection = session.connection()
    if last.month == (last + timedelta(days=1)).month:  # a month to date: rows may lie ahead
        ahead = select(m.company).where(m.kind == kind, m.month == first, m.last_day > last)
        if connection.execute(ahead.limit(1)).first() is not None:
            return None
    later = select(m.company).where(m.kind == kind, m.month > first).limit(1)
    deep = depth is None and companies is not None and (offset + limit) * 8 > companies
    if not deep and connection.execute(later).first() is None:
        page = _top(session, kind, period, offset + limit, depth)[offset:]
    else:
        page = _every(session, kind, first, count, offset, limit)
    return page, _rollup_sums.day_totals(session, kind, period)


def _top(
    session: Session, kind: str, period: periods.Period, wanted: int, depth: int | None
) -> Page:
    """The first `wanted` companies of the latest month, `period`, ranked.

    A threshold scan over the sums kept beside the rollup, each company's exact total computed
    as it is met: companies in current-level order (rollup_latest, ix_rollup_latest_level) and,
    for each day of the period, the month rows whose last row is on that day in `through`
    order (ix_rollup_months_last_day), all from the largest. A company not met yet has a level
    no greater than the last one read, `level`: without a month row it totals level x count;
    with one whose last row is on day d, through + its level x (count - d), at most the last
    `through` read of day d + level x (count - d). The reads go twice as deep until the
    `wanted`-th total met is at least every such bound: every company above it has then been
    met, and the companies tied with it are looked up by their total (`_tied`: ties go by
    identifier). Once every company has been met, the rest of the page totals 0 (`_zeros`)."""
    count = len(period.days)
    first = period.days[0].day
    read = depth or max(2 * wanted, 64)
    totals: dict[str, int] = {}
    # The last `through` read of each day's month rows; a day is dropped once all are read.
    reading = dict.fromkeys((d.day for d in period.days), 0)
    while True:
        _read_days(session, kind, first, count, read, reading, totals)
        levels = _read_levels(session, kind, first, count, read, totals)
        ranked = sorted((-t, c) for c, t in totals.items() if t > 0)
        if len(levels) < read:  # every company met: those not in `ranked` total 0
            page = [(c, -t) for t, c in ranked[:wanted]]
            return page + _zeros(session, {c for _, c in ranked}, wanted - len(page))
        level = levels[-1]
        bound = max(
            [level * count]
            + [through + level * (count - day.day) for day, through in reading.items()]
        )
        if len(ranked) < wanted or -ranked[wanted - 1][0] < bound:
            read *= 2
            continue
        last = -ranked[wanted - 1][0]
        above = [(c, -t) for t, c in ranked if -t > last]
        if last > bound:
            return above + [(c, last) for _, c in ranked[len(above) : wanted]]
        met = {c for c, t in totals.items() if t == last}
        tie = _Tie(kind, first, count, last, level, reading)
        return above + [(c, last) for c in _tied(session, tie, met, wanted - len(above))]


def _read_days(
    session: Session,
    kind: str,
    first: date,
    count: int,
    read: int,
    reading: dict[date, int],
    totals: dict[str, int],
) -> None:
    """For each day still in `reading`, the first `read` month rows whose last row is on that
    day, in `through` order, into `totals`; `reading` then holds the last `through` read of
    each, and no longer the days whose rows were all read."""
    m = RollupMonth
    connection = session.connection()
    for day in list(reading):
        rows = connection.execute(
            select(m.company, m.through, m.level)
            .where(m.kind == kind, m.month == first, m.last_day == day)
            .order_by(m.through.desc())
            .limit(read)
        ).all()
        for company, through, level in rows:
            totals[company] = through + level * (count - day.day)
        if len(rows) < read:
            del reading[day]
        else:
            reading[day] = rows[-1].through


def _read_levels(
    session: Session, kind: str, first: date, count: int, read: int, totals: dict[str, int]
) -> list[int]:
    """The first `read` companies in current-level order, their totals into `totals`; their
    levels, in that order."""
    m, latest = RollupMonth, RollupLatest
    by_level = (
        select(latest.company, latest.level, m.through, m.last_day)
        .select_from(latest)
        .outerjoin(m, and_(m.kind == kind, m.month == first, m.company == latest.company))
        .where(latest.kind == kind)
        .order_by(latest.level.desc())
        .limit(read)
    )
    levels = []
    for company, level, through, last_day in session.connection().execute(by_level):
        totals[company] = (
            level * count if through is None else through + level * (count - last_day.day)
        )
        levels.append(level)
    return levels


@dataclass(frozen=True)
class _Tie:
    """A total that companies not met yet may share (_top): month `first` over `count` days,
    read down to current `level`, and for each day in `reading` its month rows down to a
    `through` (the days not in it were read whole)."""

    kind: str
    first: date
    count: int
    total: int
    level: int
    reading: dict[date, int]


def _tied(session: Session, tie: _Tie, met: set[str], wanted: int) -> list[str]:
    """The first `wanted` identifiers of the companies totalling `tie.total`: of those met
    (`met`, all of them) and of those not met, looked up by their total. One without a row in
    the month totals level x count, so its level is total / count: a range of
    ix_rollup_latest_level in identifier order. One whose last row in the month is on day d
    totals through + level x (count - d), so its `through` lies from
    total - tie.level x (count - d) to the last one read of day d: a range of
    ix_rollup_months_last_day, each row's total computed there."""
    m, latest = RollupMonth, RollupLatest
    connection = session.connection()
    found = set(met)
    if tie.total % tie.count == 0:
        quiet = (
            select(latest.company)
            .where(
                latest.kind == tie.kind,
                latest.level == tie.total // tie.count,
                latest.month < tie.first,
            )
            .order_by(latest.company)
            .limit(wanted)
        )
        found.update(connection.execute(quiet).scalars())
    for day, through in tie.reading.items():
        rest = tie.count - day.day
        rows = (
            select(m.company)
            .where(
                m.kind == tie.kind,
                m.month == tie.first,
                m.last_day == day,
                m.through >= tie.total - tie.level * rest,
                m.through <= min(tie.total, through),
                m.through + m.level * rest == tie.total,
            )
            .order_by(m.company)
            .limit(wanted)
        )
        found.update(connection.execute(rows).scalars())
    return sorted(found)[:wanted]


def _zeros(session: Session, positive: set[str], wanted: int) -> Page:
    """The first `wanted` companies outside `positive` in identifier order, each totalling 0:
    the end of a ranking whose every non-zero total is in `positive`."""
    if wanted <= 0:
        return []
    page: Page = []
    for company in session.connection().execute(select(Company.id).order_by(Company.id)).scalars():
        if company not in positive:
            page.append((company, 0))
            if len(page) == wanted:
                break
    return page


def _every(session: Session, kind: str, first: date, count: int, offset: int, limit: int) -> Page:
    """One page of month `first` over `count` days, every company's total computed in the
    database from its month row or the level it carries into the month."""
    m = RollupMonth
    # A company without rows in the month has its latest earlier month's level all month.
    e = aliased(RollupMonth)
    earlier = (
        select(e.level)
        .where(e.kind == kind, e.company == Company.id, e.month < first)
        .order_by(e.month.desc())
        .limit(1)
        .scalar_subquery()
    )
    through_end = m.through + m.level * (count - cast(extract("day", m.last_day), Integer))
    # COALESCE evaluates its arguments in turn: the seek for the carried level only for a
    # company without a month row.
    total = func.coalesce(through_end, func.coalesce(earlier, 0) * count)
    joined = Company.__table__.outerjoin(
        m, and_(m.kind == kind, m.month == first, m.company == Company.id)
    )
    query = (
        select(Company.id, total.label("total"))
        .select_from(joined)
        .order_by(total.desc(), Company.id)
        .offset(offset)
        .limit(limit)
    )
    return [(c, int(t)) for c, t in session.connection().execute(query)]


def closed_page(
    session: Session, close: closed_figures.Close, kind: str, offset: int, limit: int
) -> tuple[Page, list[int]]:
    """(the page's companies with their stored totals, each day's stored sum) of a close. The
    companies with a non-zero total come first, read in rank order from ix_closed_figures_rank;
    every other company totals 0 and follows in identifier order."""
    f = ClosedFigures
    stored = (f.close_id == close.id, f.kind == kind, f.total > 0)
    connection = session.connection()
    # The page's lowest total first, in the index's own order (a backward scan that stops
    # there), then the rows down to it: the page and the ties at its end, whatever the
    # planner's statistics (a close's rows are new when its page is first read, and without
    # them PostgreSQL sorted every row of the close instead of the few it needs).
    lowest = connection.execute(
        select(f.total).where(*stored).order_by(f.total.desc()).offset(offset + limit - 1).limit(1)
    ).scalar()
    ranked = select(f.company, f.total).where(*stored)
    if lowest is not None:
        ranked = ranked.where(f.total >= lowest)
    ranked = ranked.order_by(f.total.desc(), f.company).offset(offset).limit(limit)
    page = [(c, int(t)) for c, t in connection.execute(ranked)]
    if len(page) < limit:
        counted = connection.execute(select(func.count()).where(*stored)).scalar_one()
        zeros = (
            select(Company.id)
            .where(~select(f.company).where(*stored, f.company == Company.id).exists())
            .order_by(Company.id)
            .offset(max(0, offset - counted))
            .limit(limit - len(page))
        )
        page += [(c, 0) for c in connection.execute(zeros).scalars()]
    return page, list(close.day_totals[kind])
