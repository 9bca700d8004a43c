"""The full rebuild of one kind's rollup (daily_peaks and its sums) on PostgreSQL as a few
set-based statements, instead of sweeping every company's events in Python. SQLite runs
_rollup_stream instead (one read of the history swept in Python: faster there), on the same
local midnights.

`day_peak.sweep` stays the definition; this is its equivalent in SQL, held to the row-by-row
rebuild (bench/rollup_reference.py) row for row by tests/test_rollup_build.py:

1. every real interval (no end, or an end after its start) gives +1 at its start and -1 at its
   end; one company's events at one instant are summed (the level after all of them counts);
2. one window over each company's instants in time order gives the level after each, and the
   local days of the instants before and after it;
3. grouped by (company, local day): the peak is the largest level after an instant of the day,
   or the level before its first instant when that instant is after midnight (the level held
   from midnight until then); the level is the one after its last instant, last_at that instant.

The local day of an instant is found among the local midnights Python computes
(periods.local_midnight_utc, the same function sweep uses): width_bucket over them as an
array (on SQLite, _rollup_stream bisects them as stored strings). So the days never depend on
the database's own time-zone data. The sums (rollup_days, rollup_months) are then derived from
the rows just written by two windows over the primary key, and on both databases
rollup_latest from rollup_months by a third.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from ...database import bulk_cache
from ...models import HistoryInterval
from . import _rollup_stream, periods

# kind's rows as the history implies them; {bucket}, {day} and {midnight} are the dialect's
# local-day functions (bucket i: the 1-based index of an instant's local day).
_SWEEP = """
WITH events AS (
  SELECT company, start_at AS t, 1 AS delta FROM history_intervals
  WHERE kind = :kind AND (end_at IS NULL OR end_at > start_at)
  UNION ALL
  SELECT company, end_at, -1 FROM history_intervals
  WHERE kind = :kind AND end_at > start_at
  {events_order}
),
instants AS (
  SELECT company, t, CAST(SUM(delta) AS INTEGER) AS delta, {bucket} AS i
  FROM events GROUP BY company, t
),
swept AS (
  SELECT company, t, i, delta, SUM(delta) OVER w AS level,
         LAG(i) OVER w AS before_i, LEAD(i) OVER w AS after_i
  FROM instants
  WINDOW w AS (PARTITION BY company ORDER BY t ROWS UNBOUNDED PRECEDING)
)
SELECT company, {day} AS day, MAX(peak) AS peak, MAX(level) AS level, MAX(t) AS last_at
FROM (
  SELECT company, i, t,
         -- The level before a day's first instant held from midnight, unless it is midnight.
         CASE WHEN delta < 0 AND (before_i IS NULL OR before_i <> i) AND t > {midnight}
              THEN level - delta ELSE level END AS peak,
         CASE WHEN after_i IS NULL OR after_i <> i THEN level END AS level
  FROM swept
) AS marked
GROUP BY company, i
"""

_DAYS = """
INSERT INTO rollup_days (kind, day, rise, change)
SELECT CAST(:kind AS VARCHAR(8)), day, SUM(peak - carried), SUM(level - carried) FROM (
  SELECT day, peak, level,
         COALESCE(LAG(level) OVER (PARTITION BY company ORDER BY day), 0) AS carried
  FROM daily_peaks WHERE kind = :kind
) AS r
GROUP BY day
"""

# through: Σ over the month's rows of peak + the level carried x the quiet days before the row
# (from the 1st, or from the previous row of the month); level: the month's last row's.
_MONTHS = """
SELECT month, company,
       SUM(CAST(carried AS BIGINT) * (dom - CASE WHEN before_month = month THEN before_dom
                                                 ELSE 0 END - 1) + peak) AS through,
       MAX(day) AS last_day,
       MAX(CASE WHEN after_month IS NULL OR after_month <> month THEN level END) AS level
FROM (
  SELECT company, day, peak, level, {month} AS month, {dom} AS dom,
         COALESCE(LAG(level) OVER w, 0) AS carried,
         {before_month} AS before_month, {before_dom} AS before_dom,
         {after_month} AS after_month
  FROM daily_peaks WHERE kind = :kind
  WINDOW w AS (PARTITION BY company ORDER BY day)
) AS r
GROUP BY company, month
"""


@dataclass(frozen=True)
class _Target:
    """A rollup table, the key of its rows within a kind and their other columns."""

    table: str
    keys: tuple[str, ...]
    values: tuple[str, ...]
    # The temporary table's columns, typed as the table's own: on SQLite an untyped column
    # compares with another affinity than the table's, and the key's index goes unused.
    columns: str


_PEAKS = _Target(
    "daily_peaks",
    ("company", "day"),
    ("peak", "level", "last_at"),
    "company VARCHAR, day DATE, peak INTEGER, level INTEGER, last_at TIMESTAMP",
)
_MONTH_ROWS = _Target(
    "rollup_months",
    ("month", "company"),
    ("through", "last_day", "level"),
    "month DATE, company VARCHAR, through BIGINT, last_day DATE, level INTEGER",
)
_LATEST = _Target(
    "rollup_latest", ("company",), ("month", "level"), "company VARCHAR, month DATE, level INTEGER"
)
# Each company's latest month row (rollup_latest), from the rows _MONTHS just wrote.
_LATEST_ROWS = """
SELECT company, month, level FROM (
  SELECT company, month, level,
         ROW_NUMBER() OVER (PARTITION BY company ORDER BY month DESC) AS n
  FROM rollup_months WHERE kind = :kind
) AS r
WHERE n = 1
"""


def write(session: Session, kind: str, tz: ZoneInfo) -> int:
    """Bring kind's daily_peaks, rollup_days, rollup_months and rollup_latest to what the
    history implies in `tz`: the rows `rollups.rebuild` guarantees for a full rebuild. Returns
    the rows of daily_peaks the kind now has.

    The rows are computed into a temporary table and only the difference is written (rows
    gone deleted, rows changed updated, rows new inserted): a rebuild mostly finds the rows it
    would write already there, and rewriting them all cost more than computing them (a
    foreign-key check and two index entries per row, beside each deleted one)."""
    postgres = session.get_bind().dialect.name == "postgresql"
    params: dict[str, object] = {"kind": kind}
    bounds = _midnights(session, kind, tz)
    if not postgres:
        written = _write_sqlite(session, kind, bounds)
        _sync(session, _LATEST, _LATEST_ROWS, {"kind": kind})
        return written
    if bounds is None:
        sweep = "SELECT company, day, peak, level, last_at FROM daily_peaks WHERE 1 = 0"
    else:
        # The sorts of a whole kind's events; the default 4 MB spills them to disk.
        session.execute(text("SET LOCAL work_mem = '128MB'"))
        params.update(first=bounds[0], midnights=bounds[1])
        sweep = _SWEEP.format(
            events_order="",
            bucket="width_bucket(t, CAST(:midnights AS timestamp[]))",
            day="CAST(:first AS date) + (i - 1)",
            midnight="(CAST(:midnights AS timestamp[]))[i]",
        )
    written = _sync(session, _PEAKS, sweep, params)
    session.execute(text("DELETE FROM rollup_days WHERE kind = :kind"), params)
    session.execute(text(_DAYS), params)
    months = _MONTHS.format(
        month="CAST(date_trunc('month', day) AS date)",
        dom="CAST(EXTRACT(DAY FROM day) AS INTEGER)",
        before_month="CAST(date_trunc('month', LAG(day) OVER w) AS date)",
        before_dom="CAST(EXTRACT(DAY FROM LAG(day) OVER w) AS INTEGER)",
        after_month="CAST(date_trunc('month', LEAD(day) OVER w) AS date)",
    )
    _sync(session, _MONTH_ROWS, months, {"kind": kind})
    _sync(session, _LATEST, _LATEST_ROWS, {"kind": kind})
    return written


def _sync(session: Session, target: _Target, query: str, params: dict[str, object]) -> int:
    """Make kind's rows of `target` those `query` selects (its keys and values, by name):
    computed into a temporary table, then the rows that differ deleted, updated, inserted.
    Returns how many rows the query gave."""
    new = f"rollup_new_{target.table}"
    session.execute(text(f"DROP TABLE IF EXISTS {new}"))
    columns = ", ".join((*target.keys, *target.values))
    session.execute(text(f"CREATE TEMPORARY TABLE {new} ({target.columns})"))
    session.execute(text(f"INSERT INTO {new} ({columns}) {query}"), params)
    session.execute(text(f"CREATE INDEX {new}_key ON {new} ({', '.join(target.keys)})"))
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text(f"ANALYZE {new}"))
    # Only the module's own table and column names go into these statements, never input.
    same_key = " AND ".join(f"n.{k} = t.{k}" for k in target.keys)
    mine = f"t.kind = :kind AND {same_key}"
    gone = f"DELETE FROM {target.table} AS t WHERE t.kind = :kind"  # noqa: S608
    others = f"NOT EXISTS (SELECT 1 FROM {new} AS n WHERE {same_key})"  # noqa: S608
    session.execute(text(f"{gone} AND {others}"), params)
    changed = " OR ".join(f"t.{v} <> n.{v}" for v in target.values)
    assignments = ", ".join(f"{v} = n.{v}" for v in target.values)
    moved = f"UPDATE {target.table} AS t SET {assignments} FROM {new} AS n"  # noqa: S608
    session.execute(text(f"{moved} WHERE {mine} AND ({changed})"), params)
    picked = ", ".join(f"n.{c}" for c in (*target.keys, *target.values))
    added = f"SELECT CAST(:kind AS VARCHAR(8)), {picked} FROM {new} AS n"  # noqa: S608
    order = ", ".join(f"n.{k}" for k in target.keys)
    missing = f"NOT EXISTS (SELECT 1 FROM {target.table} AS t WHERE {mine})"  # noqa: S608
    into = f"INSERT INTO {target.table} (kind, {columns})"
    session.execute(text(f"{into} {added} WHERE {missing} ORDER BY {order}"), params)
    count = session.execute(text(f"SELECT count(*) FROM {new}")).scalar_one()  # noqa: S608
    session.execute(text(f"DROP TABLE {new}"))
    return int(count)


def _midnights(session: Session, kind: str, tz: ZoneInfo) -> tuple[date, list[datetime]] | None:
    """(the first local day, the UTC instant of each local midnight from its start to the end
    of the last day with an event) for kind's history; None without history. Bucket i (from 1)
    is the day first + i - 1, [midnights[i - 1], midnights[i])."""
    h = HistoryInterval
    # Four index ends (ix_history_kind_start, ix_history_kind_end), not a scan.
    row = session.execute(
        select(
            func.min(h.start_at), func.max(h.start_at), func.min(h.end_at), func.max(h.end_at)
        ).where(h.kind == kind)
    ).one()
    instants = [at for at in row if at is not None]
    if not instants:
        return None
    first = periods.today_in(tz, min(instants))
    count = (periods.today_in(tz, max(instants)) - first).days + 2
    return first, [periods.local_midnight_utc(first + timedelta(days=n), tz) for n in range(count)]


def _stored(at: datetime) -> str:
    """A naive datetime as SQLAlchemy stores it in SQLite (always with microseconds), so the
    stored strings bisect in time order."""
    return f"{at:%Y-%m-%d %H:%M:%S}.{at.microsecond:06d}"


def _write_sqlite(session: Session, kind: str, bounds: tuple[date, list[datetime]] | None) -> int:
    """write() on SQLite: the events swept in Python (_rollup_stream), on the session's
    connection and in its transaction."""
    first, midnights = bounds if bounds is not None else (date.min, [])
    stored = [_stored(at) for at in midnights]
    days = [(first + timedelta(days=n)).isoformat() for n in range(len(midnights))]
    raw = session.connection().connection.dbapi_connection
    assert raw is not None
    with bulk_cache(session):
        return _rollup_stream.write(raw, kind, stored, days)  # type: ignore[arg-type]
