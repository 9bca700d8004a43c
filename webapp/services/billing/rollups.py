"""Daily peaks kept beside the history, so a report reads one row per company-day with events
instead of sweeping every interval that touches the month.

For each (kind, company, local day) on which the history has an event, daily_peaks holds the
day's peak, the level at its end and the instant of its last event. A day without a row is
quiet: its level all day, and so its peak, is the level at the end of the company's latest
earlier row. The rows are a pure function of the history, kept exact three ways:

- Live writes call `record_changes` in their own transaction, after their history rows are written
  (both through the one change path, services/changes.py). Every writer holds its companies' locks
  (`lock_companies`) from before it reads the clock until it commits, so one company's changes reach
  the rollup in timestamp order and a change extends the day's row by simple arithmetic. A change
  that is not later than the company's last recorded event (a clock step back, two changes in one
  microsecond) rebuilds that company from the change's day instead, so the rows stay exact.
- A history import calls `rebuild_from` for the companies and days it touched.
- `flask history rollup` (`rebuild` of everything) builds them the first time, and again after
  REPORT_TIMEZONE changes; until then reports compute from the history (reports.py). It reads
  the history once, a row per company, swept in Python and only the rows that differ written
  (_rollup_build, _rollup_stream; both databases), held row for row to the Python sweep it
  replaced (bench/rollup_reference.py).

Every write of rows also notes, for the closed months whose figures depend on them, the companies
written to (close_writes.note; a full rebuild clears the record instead: close_writes.forget_all),
so what changed since a close recomputes those companies only.

`day_peak.sweep` is the one definition of a day's peak: a partial `rebuild` and the report's
drill-down (report_days.py) run it; `record_changes` (the fast path), the full rebuild's stream
(_rollup_stream) and the SQL of reports.peaks_query (the fallback while the rollup is unbuilt)
are its equivalents, and tests/test_rollups.py holds every
path to the from-scratch computation on random histories.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from datetime import date, datetime
from operator import itemgetter
from typing import Any
from zoneinfo import ZoneInfo

from flask import current_app
from sqlalchemy import (
    Date,
    Integer,
    Select,
    String,
    and_,
    bindparam,
    cast,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.orm import Session

from ...access import Principal
from ...database import driver_rows, utcnow, write_transaction
from ...models import Company, DailyPeak, HistoryInterval, RollupState
from ...wording import counted
from ..history import audit, intervals
from . import _rollup_build, _rollup_sums, close_writes, day_peak, periods

KINDS = ("ddi", "user")


def lock_companies(session: Session, companies: Iterable[str]) -> None:
    """Serialise writers per company until commit (PostgreSQL; SQLite writers are serial).

    Call after the rows a write changes are locked and before write_clock: a writer that waits
    here is then stamped after the one it waited for. FOR NO KEY UPDATE does not conflict with
    the KEY SHARE locks that foreign-key checks take, so inserts into other tables never wait.
    Companies are locked in identifier order so two writers cannot deadlock on them.
    """
    if session.get_bind().dialect.name != "postgresql":
        return
    for chunk in intervals.chunks(sorted(set(companies))):
        session.execute(
            select(Company.id)
            .where(Company.id.in_(chunk))
            .order_by(Company.id)
            .with_for_update(key_share=True)
        ).all()


def built_zone(session: Session, kind: str) -> str | None:
    """The time zone kind's rollup is kept in, or None if it was never built."""
    return session.scalar(select(RollupState.timezone).where(RollupState.kind == kind))


def start_company(session: Session, company: str) -> None:
    """Give a company created in this transaction its rollup_latest rows (level 0, no month)
    for each kind whose rollup is built, so every company has one (models.RollupLatest). A
    full rebuild writes every company's; on PostgreSQL it keeps company creation out until it
    commits (`rebuild_all`), so a company is never created between the two unseen by both."""
    built = session.scalars(select(RollupState.kind).order_by(RollupState.kind)).all()
    _rollup_sums.start_company(session, built, company)


def record_changes(
    session: Session,
    kind: str,
    at: datetime,
    ends: Counter[str],
    starts: Counter[str],
) -> None:
    """Add one instant's interval ends and starts (how many per company) to the rollup.

    The fast path: arithmetic on the company's latest row that gives what `day_peak.sweep`, the
    definition, would give for the history with these events added. Guarantees: afterwards the
    rows of every company named equal what `rebuild` would compute from the history, provided
    the caller wrote these intervals first and holds `lock_companies` for them. Does nothing
    while the rollup is not built. Reading the state after the history write matters on
    PostgreSQL: a rebuild running meanwhile holds the history table, so either it sees this
    change or this reads its finished state.
    """
    zone_name = built_zone(session, kind)
    if zone_name is None:
        return
    tz = periods.zone(zone_name)
    day = periods.today_in(tz, at)
    day_start = periods.local_midnight_utc(day, tz)
    days = _rollup_sums.DayDeltas()
    companies = sorted(set(ends) | set(starts))
    latest = _latest_rows(session, kind, companies)
    grown: list[_rollup_sums.Extend] = []
    same_day: list[dict] = []  # the day's row exists: it grows
    new_day: list[dict] = []  # the company's first row of the day
    late: dict[str, date] = {}  # out of order: rebuilt from the history instead
    for company in companies:
        delta = starts[company] - ends[company]
        row = latest.get(company)
        if row is not None and (row.day > day or row.last_at >= at):
            # Out of order: the day's arithmetic would be wrong, the history is not.
            late[company] = min(day, row.day)
        elif row is not None and row.day == day:
            level = row.level + delta
            peak = max(row.peak, level)
            same_day.append({"p_company": company, "p_peak": peak, "p_level": level})
            grown.append(
                _rollup_sums.Extend(
                    company, day, peak, level, (row.peak, row.level), row.level, day
                )
            )
        else:
            carry = 0 if row is None else row.level
            level = carry + delta
            # The carried level was the level from midnight until now, unless now is midnight.
            peak = max(carry, level) if at > day_start else level
            new_day.append(
                {
                    "kind": kind,
                    "company": company,
                    "day": day,
                    "peak": peak,
                    "level": level,
                    "last_at": at,
                }
            )
            grown.append(
                _rollup_sums.Extend(
                    company, day, peak, level, None, carry, None if row is None else row.day
                )
            )
    if same_day:
        session.execute(
            _GROW.values(peak=bindparam("p_peak"), level=bindparam("p_level"), last_at=at),
            [{**r, "p_kind": kind, "p_day": day} for r in same_day],
        )
    if new_day:
        session.execute(DailyPeak.__table__.insert(), new_day)
    # Today's row, of no closed month unless the change was in flight as its month ended (the
    # out-of-order ones are noted by _rebuild). Each of these companies' rows was just written.
    close_writes.note(
        session, kind, {c: day for c in companies if c not in late}, rows_written=True
    )
    _rollup_sums.extend(session, kind, grown, days)
    for company, since in late.items():
        _rebuild(session, kind, {company: since}, tz, days)
    _rollup_sums.add_days(session, kind, days)


# Spelled out (not through an alias) so tests/test_changes.py's scan of writers sees it.
_GROW = update(DailyPeak.__table__).where(
    DailyPeak.__table__.c.kind == bindparam("p_kind"),
    DailyPeak.__table__.c.company == bindparam("p_company"),
    DailyPeak.__table__.c.day == bindparam("p_day"),
)


def _latest_rows(session: Session, kind: str, companies: list[str]) -> dict[str, Any]:
    """Each company's latest daily_peaks row (day, peak, level, last_at), if it has one. On
    PostgreSQL one seek per company down the primary key (a LATERAL join over the list); on
    SQLite the latest day per company from the primary key, then its row. (A correlated
    subquery per row made PostgreSQL evaluate it for every row of those companies: 10 s at
    10,000 companies; the grouped form still read each company's rows: 3 s.)"""
    found: dict[str, Any] = {}
    if session.get_bind().dialect.name == "postgresql":
        for row in session.execute(_LATEST_PG, {"kind": kind, "companies": companies}):
            found[row.company] = row
        return found
    p = DailyPeak
    for chunk in intervals.chunks(companies):
        newest = (
            select(p.company, func.max(p.day).label("day"))
            .where(p.kind == kind, p.company.in_(chunk))
            .group_by(p.company)
            .subquery()
        )
        query = select(p.company, p.day, p.peak, p.level, p.last_at).join(
            newest, and_(p.kind == kind, p.company == newest.c.company, p.day == newest.c.day)
        )
        for row in session.execute(query):
            found[row.company] = row
    return found


_LATEST_PG = text(
    """
    SELECT c.company, p.day, p.peak, p.level, p.last_at
    FROM unnest(CAST(:companies AS text[])) AS c(company)
    CROSS JOIN LATERAL (
        SELECT day, peak, level, last_at FROM daily_peaks
        WHERE kind = :kind AND company = c.company
        ORDER BY day DESC LIMIT 1
    ) AS p
    """
)


def rebuild(session: Session, kind: str, starts: dict[str, date] | None, tz: ZoneInfo) -> int:
    """Recompute kind's rows, and their sums (_rollup_sums), from the history: for each company
    in `starts` from its date on, or, with `starts` None, everything (and record `tz` as the
    rollup's zone). Returns rows written.

    Guarantees: the rows written are exactly those the history implies; rows before a
    company's start date are kept (the history before it is unchanged by the caller's
    contract, e.g. an import writes only intervals that start on or after it).
    """
    if starts is None:
        # Every row may change: the record of writes into closed months cannot say which, so
        # the closes fall back to the full comparison (close_writes.forget_all).
        close_writes.forget_all(session)
        # One read of the whole history, swept per company (_rollup_build).
        written = _rollup_build.write(session, kind, tz)
        state = session.get(RollupState, kind)
        if state is None:
            session.add(RollupState(kind=kind, timezone=tz.key, built_at=utcnow()))
        else:
            state.timezone, state.built_at = tz.key, utcnow()
        session.flush()
        return written
    days = _rollup_sums.DayDeltas()
    written = _rebuild(session, kind, starts, tz, days)
    _rollup_sums.add_days(session, kind, days)
    return written


def _rebuild(
    session: Session,
    kind: str,
    starts: dict[str, date],
    tz: ZoneInfo,
    days: _rollup_sums.DayDeltas,
) -> int:
    """A partial rebuild, collecting its day sums into `days` for the caller to apply (once
    per rollup step, in day order): a few companies from a day on, swept in Python."""
    h = HistoryInterval
    real = h.end_at.is_(None) | (h.end_at > h.start_at)  # zero-length intervals never count
    replaced: dict[str, tuple[list[_rollup_sums.Row], int]] = {}  # old rows, carried level
    close_writes.note(session, kind, starts)
    groups = _partial_groups(session, kind, starts, tz, real, replaced)
    local_days = day_peak.LocalDays(tz)
    out: list[tuple[str, date, int, int, datetime]] = []
    for company, events in groups:
        events.sort(key=lambda e: (e[0], e[1]))
        out += [
            (company, r.day, r.peak, r.level, r.last_at)
            for r in day_peak.sweep(events, tz, local_days)
        ]
    # Written after the read has been consumed: one statement at a time on the connection.
    for i in range(0, len(out), 5000):
        session.execute(
            insert(DailyPeak),
            [
                {"kind": kind, "company": c, "day": d, "peak": p, "level": lv, "last_at": at}
                for c, d, p, lv, at in out[i : i + 5000]
            ],
        )
    new: dict[str, list[_rollup_sums.Row]] = {company: [] for company in replaced}
    for c, d, p, lv, _ in out:
        new[c].append((d, p, lv))
    for company, (old, carried) in replaced.items():
        _rollup_sums.replace(
            session, kind, company, starts[company], old, new[company], carried, days
        )
    return len(out)


def rebuild_from(session: Session, kind: str, first: dict[str, datetime]) -> None:
    """Recompute kind's rows of each company in `first` from the local day of its instant on
    (the history before it is unchanged), in the zone the rollup is kept in; nothing while the
    rollup is not built."""
    zone_name = built_zone(session, kind)
    if zone_name is None or not first:
        return
    tz = periods.zone(zone_name)
    rebuild(session, kind, {c: periods.today_in(tz, at) for c, at in first.items()}, tz)


def _partial_groups(
    session: Session,
    kind: str,
    starts: dict[str, date],
    tz: ZoneInfo,
    real,
    replaced: dict[str, tuple[list[_rollup_sums.Row], int]],
):
    """Per company, the events from its start date's midnight on; rows from then on dropped,
    and kept in `replaced` with the level carried into the start date (for the sums)."""
    h = HistoryInterval
    p = DailyPeak
    for company, first_day in sorted(starts.items()):
        origin = periods.local_midnight_utc(first_day, tz)
        mine = and_(p.kind == kind, p.company == company)
        old = session.execute(
            select(p.day, p.peak, p.level).where(mine, p.day >= first_day).order_by(p.day)
        ).all()
        carried = session.scalar(
            select(p.level).where(mine, p.day < first_day).order_by(p.day.desc()).limit(1)
        )
        replaced[company] = ([(d, pk, lv) for d, pk, lv in old], carried or 0)
        session.execute(
            delete(DailyPeak).where(
                DailyPeak.kind == kind, DailyPeak.company == company, DailyPeak.day >= first_day
            )
        )
        query = select(h.company, h.start_at, h.end_at).where(
            h.kind == kind,
            h.company == company,
            real,
            # An interval ending at the origin itself still ends on the first day.
            or_(h.end_at.is_(None), h.end_at >= origin),
        )
        yield from _by_company(session.execute(query).all(), origin)


def _by_company(result, origin: datetime):
    """Group (company, start, end) rows, in company order, into per-company event lists."""
    company: str | None = None
    events: list[tuple[datetime, int, bool]] = []
    for c, start, end in result:
        if c != company:
            if company is not None:
                yield company, events
            company, events = c, []
        if start < origin:
            events.append((origin, 1, False))
        else:
            events.append((start, 1, True))
        if end is not None:
            events.append((end, -1, True))
    if company is not None:
        yield company, events


def rebuild_all(session: Session, tz: ZoneInfo) -> dict[str, int]:
    """Rebuild every kind's rollup in `tz` in the caller's transaction; {kind: rows written}.

    On PostgreSQL live writers wait for it (they need the history table), so no change made
    meanwhile is missed."""
    session.flush()
    intervals.lock_table(session)
    if session.get_bind().dialect.name == "postgresql":
        # Company creation waits (SHARE conflicts with its insert; the writers' row locks on
        # companies do not): one created meanwhile is in the rebuild's rollup_latest, or
        # created after it commits and gets its rows from the state written here.
        session.execute(text("LOCK TABLE companies IN SHARE MODE"))
    return {kind: rebuild(session, kind, None, tz) for kind in KINDS}


def build(principal: Principal) -> dict[str, int]:
    """Rebuild every kind's rollup from the history in REPORT_TIMEZONE; {kind: rows written}.

    Guarantees: all or nothing, audited; afterwards reports read the rollup again (they compute
    from the history while it is missing or kept in another zone)."""
    principal.require_system_admin("rebuild the report rollup")
    tz = periods.zone(current_app.config["REPORT_TIMEZONE"])
    with write_transaction() as session:
        counts = rebuild_all(session, tz)
        detail = ", ".join(f"{kind}: {counted(n, 'day row')}" for kind, n in counts.items())
        audit.record(
            session,
            [
                audit.entry(
                    principal, "history.rollup", "report rollup", detail=f"{tz.key}; {detail}"
                )
            ],
        )
    return counts


def peak_lists(
    session: Session,
    kind: str,
    period: periods.Period,
    companies: list[str] | Select[Any] | None,
    carried: dict[str, int] | None = None,
) -> dict[str, list[int]]:
    """{company: [peak of each day of the period]} from the rollup, for every company named
    (or a query naming them, e.g. close_writes.written_query; None: every company). Two
    queries: each company's level carried into the period (or `carried`, carried_levels'
    answer when the caller has it), and the period's rows; the days between rows are filled
    with the level the previous row left."""
    first = period.days[0].day
    level = carried if carried is not None else carried_levels(session, kind, first, companies)
    return _filled(level, _period_found(session, kind, period, companies), len(period.days))


def _period_found(
    session: Session,
    kind: str,
    period: periods.Period,
    companies: list[str] | Select[Any] | None,
) -> Sequence[Any]:
    """The period's rollup rows (company, day index, peak, end level) of the companies named
    (or a query naming them; None: every one), each company's in day order: one query."""
    first, last = period.days[0].day, period.days[-1].day
    p = DailyPeak
    # A day's index in the period, worked out by the database (day_offset), for any span.
    index = day_offset(session, p.day, first)
    # In day order, the index's own (no sort): each company's rows come in order.
    in_period = (
        select(p.company, index, p.peak, p.level)
        .where(p.kind == kind, p.day >= first, p.day <= last)
        .order_by(p.day)
    )
    if isinstance(companies, Select):
        # A query's companies (those written to since a close): a seek of the primary key
        # (kind, company, day) per company, its rows in order, rather than the month's range
        # of every company, filtered (a parameter list is filtered one by one on PostgreSQL
        # once its statement is prepared: 1,000 x 175,000 comparisons).
        in_period = (
            in_period.where(p.company.in_(companies)).order_by(None).order_by(p.company, p.day)
        )
    elif companies is not None:
        in_period = in_period.where(p.company.in_(companies))
    # The driver's rows as they come (a string and three integers: nothing for SQLAlchemy to
    # convert): 175,000 rows a month at 10,000 companies, whose Row objects cost more than the
    # loops over them.
    return driver_rows(session.connection(), in_period)


def _filled(
    carried: dict[str, int], rows: Iterable[tuple[str, int, int, int]], count: int
) -> dict[str, list[int]]:
    """{company: `count` day values} from each company's level carried into the first day
    and its rows (company, day index, peak, end level) in day order: a day without a row has
    the level the company's previous row left (or the carried one).

    One pass over the rows, no object made per row: each company's list ends with a
    placeholder, the level its next day starts with; a row fills the quiet days before it
    with that level (one list repeat) and puts its own peak and end level in its place."""
    lists = {company: [level] for company, level in carried.items()}
    for company, i, peak, end_level in rows:
        values = lists.get(company)
        if values is None:  # a company the caller's `carried` does not name: nothing carried
            values = lists[company] = [0]
        if i >= len(values):
            values += [values[-1]] * (i + 1 - len(values))
        values[i] = peak
        values.append(end_level)
    for values in lists.values():
        if len(values) < count:
            values += [values[-1]] * (count - len(values))
        else:
            del values[count:]  # the placeholder after a row on the last day
    return lists


# A close's row of one company: (company, total, days as text, marks; None without marks).
Stored = tuple[str, int, str, str | None]


def iso_day(session: Session, column: Any) -> Any:
    """A date column as its ISO text (2026-11-03), whatever the server's DateStyle: SQLite
    stores it so; PostgreSQL's cast to text follows DateStyle ("03/11/2026" under SQL, DMY),
    to_char does not."""
    if session.get_bind().dialect.name == "postgresql":
        return func.to_char(column, literal("YYYY-MM-DD"), type_=String)
    return cast(column, String)


def day_offset(session: Session, column: Any, first: date) -> Any:
    """A date column as its number of days after `first` (an integer): PostgreSQL subtracts
    dates by itself, SQLite through julianday."""
    if session.get_bind().dialect.name == "postgresql":
        return column - literal(first, Date)
    return cast(func.julianday(column) - func.julianday(literal(first.isoformat())), Integer)


def close_figures(
    session: Session, kind: str, period: periods.Period, carried: dict[str, int]
) -> Iterator[Stored]:
    """What a close stores, from one read of the month's rows: (company, the sum of its
    peak_lists' days, those days as closed_figures.encode writes them, month_marks' string)
    for every company with a row in the month or a level carried into it (any other company's
    days are all zeros), `carried` being carried_levels' answer for the month's 1st. The marks
    list the rows in day order (same_marks compares them in any order).

    The month's rows are read here, before the answer is iterated: what it yields is worked
    out as it is taken, so a close can write each company's row while the next is computed
    (on PostgreSQL the server stores one as Python works out the next: month_close._store).

    At 100,000 companies a month holds a million rows of both kinds and a close has 5 s. So
    the rows are sorted by company (itertools.groupby hands over each company's, with no
    lookup per row) as the driver gives them, no Row object; and the days' text is written a
    run of equal days at a time, each number formatted once (formatting all 31 of a company's
    days was a fifth of a close)."""
    first, last = period.days[0].day, period.days[-1].day
    p = DailyPeak
    # Each row's day as its index in the period, which the server works out 3 times faster
    # than a date's text (to_char: 0.45 s of a million rows); the marks take each day's text
    # from `days`. In the covering index's day order, no sort by the database (PostgreSQL's,
    # by collation, spilled to disk), so each company's rows stay in day order through the
    # stable sort.
    index = day_offset(session, p.day, first).label("day_index")
    query = select(p.company, index, p.peak, p.level).where(
        p.kind == kind, p.day >= first, p.day <= last
    )
    found = driver_rows(session.connection(), query.order_by(p.day))
    found.sort(key=itemgetter(0))
    days = [d.day.isoformat() for d in period.days]
    return _stored(found, days, carried)


def _stored(found: list[Any], days: list[str], carried: dict[str, int]) -> Iterator[Stored]:
    """close_figures' answer from the month's rows `found` (company, day index, peak, level),
    sorted by company and in day order within each; `days` the period's days as text."""
    count = len(days)
    with_rows = set()
    for company, rows in itertools.groupby(found, key=itemgetter(0)):
        with_rows.add(company)
        carry = carried.get(company, 0)
        carry_text = start = str(carry)
        total = 0
        texts: list[str] = []  # each day's number as text
        marks: list[str] = []
        for _, i, peak, end_level in rows:
            quiet = i - len(texts)
            if quiet > 0:  # the days before the row, at the level carried
                total += carry * quiet
                texts += [carry_text] * quiet
            total += peak
            peak_text, carry_text = str(peak), str(end_level)
            texts.append(peak_text)
            marks.append(f"{days[i]}:{peak_text}:{carry_text}")
            carry = end_level
        quiet = count - len(texts)
        total += carry * quiet
        texts += [carry_text] * quiet
        yield company, total, ",".join(texts), f"{start}|{','.join(marks)}"
    for company, level in carried.items():  # no row in the month: its level all month
        if level and company not in with_rows:
            yield company, level * count, ",".join([str(level)] * count), f"{level}|"


def month_figures(
    session: Session, kind: str, period: periods.Period, companies: list[str] | None
) -> tuple[dict[str, int], list[int]]:
    """({company: the sum of its daily peaks over the period}, [each day's sum over those
    companies]) from the rollup, for every company named (None: every company): what
    `peak_lists` gives, summed, without building any company's list of days.

    A row's `level` holds from the day after it until the company's next row, and the level
    carried into the period until its first row, so a company's sum is Σ peak of its rows +
    Σ level x the quiet days after each row + carried x the days before its first row (all
    days, for a company without a row). One pass over the period's rows in day order (the
    index's order: no sort) with each company's latest row in hand; the day sums are kept as
    differences between consecutive days."""
    count = len(period.days)
    first, last = period.days[0].day, period.days[-1].day
    level = carried_levels(session, kind, first, companies)
    p = DailyPeak
    index = day_offset(session, p.day, first)  # the day's index in the period
    query = (
        select(index, p.company, p.peak, p.level)
        .where(p.kind == kind, p.day >= first, p.day <= last)
        .order_by(p.day)
    )
    if companies is not None:
        query = query.where(p.company.in_(companies))
    totals = dict.fromkeys(level, 0)
    steps = [0] * (count + 1)  # steps[d] = day d's sum - day d-1's
    latest: dict[str, tuple[int, int]] = {}  # company: (index, level) of its latest row
    # On the connection: plain rows, without the ORM's per-row work (175,000 rows a month at
    # 10,000 companies).
    for i, company, peak, end_level in session.connection().execute(query).all():
        before = latest.get(company)
        if before is None:
            carry = level.get(company, 0)
            totals[company] = carry * i + peak
            steps[0] += carry
            steps[i] -= carry
        else:
            j, carry = before
            totals[company] += carry * (i - j - 1) + peak
            steps[i] -= carry  # the level carried since day j + 1 stops here
        steps[i] += peak
        steps[i + 1] += end_level - peak
        latest[company] = (i, end_level)
    for company, carry in level.items():
        if company not in latest:
            totals[company] = carry * count
            steps[0] += carry
    for company, (i, carry) in latest.items():
        totals[company] += carry * (count - i - 1)
    return totals, list(itertools.accumulate(steps[:count]))


def carried_levels(
    session: Session, kind: str, first: date, companies: list[str] | Select[Any] | None
) -> dict[str, int]:
    """{company: the level carried into the day `first`}: its latest earlier row's, else 0;
    one index seek per company. Into a month's 1st (every report's period) the sums kept
    per month answer it for the most part in one range (_rollup_sums.carried_into)."""
    if first.day == 1:
        return _rollup_sums.carried_into(session, kind, first, companies)
    carried = (
        select(DailyPeak.level)
        .where(DailyPeak.kind == kind, DailyPeak.company == Company.id, DailyPeak.day < first)
        .order_by(DailyPeak.day.desc())
        .limit(1)
        .scalar_subquery()
    )
    query = select(Company.id, carried)
    if companies is not None:
        query = query.where(Company.id.in_(companies))
    return {company: value or 0 for company, value in session.connection().execute(query)}


def month_marks(
    session: Session, kind: str, period: periods.Period, carried: dict[str, int] | None = None
) -> dict[str, str]:
    """{company: the rollup's input to its figures over `period`}: the level it carries into
    the period and its rows in it ("2|2026-10-03:5:4,…"), for every company with a row in the
    period or a non-zero carried level (any other company's figures are all zeros).

    `peak_lists` is a function of exactly this, so two equal marks of a company give equal
    figures (the days being the same local days): a closed month's adjustments recompute only
    the companies whose marks differ from those stored at the close. The rows are concatenated
    by the database (10,000 strings, not 175,000 rows), in whatever order it reads them:
    compare two with `same_marks`."""
    first, last = period.days[0].day, period.days[-1].day
    p = DailyPeak
    mark = iso_day(session, p.day) + ":" + cast(p.peak, String) + ":" + cast(p.level, String)
    # In no particular order: an ORDER BY within the aggregate sorts every company's rows and
    # doubles the query's time on PostgreSQL; `same_marks` compares them as sets.
    if session.get_bind().dialect.name == "postgresql":
        joined = func.string_agg(mark, literal(","))
    else:
        joined = func.group_concat(mark, ",")
    query = (
        select(p.company, joined)
        .where(p.kind == kind, p.day >= first, p.day <= last)
        .group_by(p.company)
    )
    marks: dict[str, str] = {c: m for c, m in session.connection().execute(query)}
    if carried is None:
        carried = carried_levels(session, kind, first, None)
    return {
        company: f"{carried.get(company, 0)}|{marks.get(company, '')}"
        for company in marks.keys() | {c for c, level in carried.items() if level}
    }


def same_marks(a: str | None, b: str | None) -> bool:
    """Whether two month_marks strings name the same carried level and the same rows, in
    whatever order the database concatenated them."""
    if a == b:
        return True
    if a is None or b is None:
        return False
    carried_a, _, rows_a = a.partition("|")
    carried_b, _, rows_b = b.partition("|")
    return carried_a == carried_b and sorted(rows_a.split(",")) == sorted(rows_b.split(","))
