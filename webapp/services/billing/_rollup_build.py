"""The full rebuild of one kind's rollup (daily_peaks and its sums): on both databases the
history read once, a row of starts and ends per company, swept in Python (_rollup_stream), each
company's rows compared with the kept ones and only the difference written; each database its
own reads and writes (_rollup_stream.SqliteStore, _rollup_stream_pg.PostgresStore).

This module gives the stream what it needs of the zone: the local midnights Python computes
(periods.local_midnight_utc, the same function day_peak.sweep uses), as text in the database's
format of an instant, so the days never depend on the database's own time-zone data. Then
rollup_latest is derived from the rollup_months rows just written, by a window.

`day_peak.sweep` stays the definition; the stream is held to the row-by-row rebuild
(bench/rollup_reference.py) row for row by tests/test_rollup_build.py on both databases.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from ...database import bulk_cache
from ...models import HistoryInterval
from . import _rollup_stream, _rollup_stream_pg, periods


@dataclass(frozen=True)
class _Target:
    """A rollup table, the key of its rows within a kind and their other columns."""

    table: str
    keys: tuple[str, ...]
    values: tuple[str, ...]
    # The temporary table's columns, typed as the table's own: on SQLite an untyped column
    # compares with another affinity than the table's, and the key's index goes unused.
    columns: str


_LATEST = _Target(
    "rollup_latest", ("company",), ("month", "level"), "company VARCHAR, month DATE, level INTEGER"
)
# Each company's latest month row (rollup_latest), from the rollup_months rows just written;
# level 0 and no month for a company without any (models.RollupLatest). Two index seeks a
# company (its last month, then that row), whatever the statistics: joined to a window over
# every month row instead, SQLite (no statistics yet for the rows this build just wrote)
# scanned the window's result once per company, and a first build at 100,000 companies never
# ended.
_LATEST_ROWS = """
SELECT c.id, r.month, COALESCE(r.level, 0) FROM companies AS c
LEFT JOIN rollup_months AS r ON r.kind = :kind AND r.company = c.id AND r.month = (
  SELECT max(m.month) FROM rollup_months AS m WHERE m.kind = :kind AND m.company = c.id
)
"""
# PostgreSQL: one backward index seek a company, its last row. The query above costs it a
# seek for each of the company's month rows (the subquery is evaluated per candidate row of
# the join), and SQLite has no LATERAL.
_LATEST_ROWS_PG = """
SELECT c.id, r.month, COALESCE(r.level, 0) FROM companies AS c
LEFT JOIN LATERAL (
  SELECT m.month, m.level FROM rollup_months AS m WHERE m.kind = :kind AND m.company = c.id
  ORDER BY m.month DESC LIMIT 1
) AS r ON true
"""


def write(session: Session, kind: str, tz: ZoneInfo) -> int:
    """Bring kind's daily_peaks, rollup_days, rollup_months and rollup_latest to what the
    history implies in `tz`: the rows `rollups.rebuild` guarantees for a full rebuild. Returns
    the rows of daily_peaks the kind now has.

    Only the difference is written (rows gone deleted, rows changed updated, rows new
    inserted; rollup_days, a row per day, rewritten): a rebuild mostly finds the rows it would
    write already there, and rewriting them all cost more than computing them (a foreign-key
    check and two index entries per row, beside each deleted one)."""
    bounds = _midnights(session, kind, tz)
    first, midnights = bounds if bounds is not None else (date.min, [])
    days = [(first + timedelta(days=n)).isoformat() for n in range(len(midnights))]
    raw = session.connection().connection.dbapi_connection
    assert raw is not None
    store: _rollup_stream.Store
    if session.get_bind().dialect.name == "postgresql":
        store = _rollup_stream_pg.PostgresStore(raw)
        # In pipeline mode a batch of writes is sent without waiting for it: the server
        # applies it while the sweep goes on with the companies already read (the store sends
        # each batch's read ahead too), and reading a batch's rows waits for everything sent
        # before (in order, in the one transaction). Half the rebuild's time was the server's,
        # half Python's, one after the other.
        with raw.pipeline():
            written = _rollup_stream.write(store, kind, [_pg_text(at) for at in midnights], days)
        latest = _LATEST_ROWS_PG
    else:
        store = _rollup_stream.SqliteStore(raw)  # type: ignore[arg-type]
        with bulk_cache(session):
            written = _rollup_stream.write(store, kind, [_stored(at) for at in midnights], days)
        latest = _LATEST_ROWS
    _sync(session, _LATEST, latest, {"kind": kind})
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
    # A value may be NULL (rollup_latest's month): compared as equal to NULL alone.
    distinct = "IS DISTINCT FROM" if session.get_bind().dialect.name == "postgresql" else "IS NOT"
    changed = " OR ".join(f"t.{v} {distinct} n.{v}" for v in target.values)
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


def _pg_text(at: datetime) -> str:
    """A naive datetime as PostgreSQL writes a timestamp in the ISO DateStyle: the fraction of
    a second without its trailing zeros, none when whole (so equal instants are equal text,
    and text order is time order)."""
    whole = f"{at:%Y-%m-%d %H:%M:%S}"
    return f"{whole}.{at.microsecond:06d}".rstrip("0") if at.microsecond else whole
