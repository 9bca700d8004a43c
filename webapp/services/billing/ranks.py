"""One page of every company ranked by month total, worked out in the database (docs/pages.md).

The report page for every company shows 50 companies of all of them. Reading every company's
total into Python to sort them grows with the company count (100,000 rows at the largest
provider the bench holds, docs/operations.md); here the database ranks them and answers only
the page's rows: `ORDER BY total DESC, id LIMIT n OFFSET k` over an expression of the sums kept
beside the rollup (_rollup_sums: a company's month row, or the level it carries into a month
without rows) or of a close's stored totals. The day sums come from rollup_days or the close,
one row per day. The numbers are those of _rollup_sums.everyone_figures and
closed_figures.month_figures (tests/test_reports_ranking.py holds them equal).
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Integer, and_, cast, extract, func, select
from sqlalchemy.orm import Session, aliased

from ...models import ClosedFigures, Company, RollupMonth
from . import _rollup_sums, closed_figures, periods

Page = list[tuple[str, int]]  # (company, month total), in rank order


def company_count(session: Session) -> int:
    """How many companies there are: every one is ranked, zeros included."""
    return session.scalar(select(func.count()).select_from(Company)) or 0


def open_page(
    session: Session, kind: str, period: periods.Period, offset: int, limit: int
) -> tuple[Page, list[int]] | None:
    """(the page's companies with their totals, each day's sum over every company) from the
    rollup's kept sums. None when some company's rows go past the period's last day (only a
    month to date can have those: a write stamped ahead of the report's clock): the caller then
    sums the daily rows, as _rollup_sums.everyone_figures does."""
    days = period.days
    first, last, count = days[0].day, days[-1].day, len(days)
    m = RollupMonth
    if last.month == (last + timedelta(days=1)).month:  # a month to date: rows may lie ahead
        ahead = select(m.company).where(m.kind == kind, m.month == first, m.last_day > last)
        if session.connection().execute(ahead.limit(1)).first() is not None:
            return None
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
    page = [(c, int(t)) for c, t in session.connection().execute(query)]
    return page, _rollup_sums.day_totals(session, kind, period)


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
