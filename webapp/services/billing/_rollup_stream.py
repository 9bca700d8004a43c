"""The full rebuild of one kind's rollup: the history read once, a row of instants per company,
swept in Python company by company; each company's rows compared with the ones kept and only
the difference written. Both databases run it, each through its Store (SqliteStore here,
_rollup_stream_pg.PostgresStore): what differs is how a company's row is read and how the
writes are sent.

This beats set-based statements (a window over every instant, the day of each found by a
function or an array search, the temporary tables of the result and of its comparison): rows
cross from the database to Python joined per company (group_concat, string_agg), not one by
one, and a row costs the driver several times what splitting its text costs.

The sweep is `day_peak.sweep`'s, on the instants as text of one format per database (SQLite:
as SQLAlchemy stores them, _rollup_build._stored; PostgreSQL: a timestamp's ISO output,
_rollup_build._pg_text), in which text order is time order; the local day of an instant is
found by bisecting the local midnights Python computed (periods.local_midnight_utc, as
sweep's), written in the same format. Held to the row-by-row rebuild
(bench/rollup_reference.py) row for row by tests/test_rollup_build.py on both databases.
"""

from __future__ import annotations

import bisect
import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

# Each company's starts and ends (of real intervals: zero-length and backwards ones never
# count), comma-separated: one index range read in company order, no sort.
_HISTORY = """
SELECT company, group_concat(start_at), group_concat(end_at) FROM history_intervals
WHERE kind = ? AND (end_at IS NULL OR end_at > start_at)
GROUP BY company
"""

# One company's kept rows of both tables as the text Table.company compares (in key order, as
# the indexes are read; another order only costs the comparison by key).
_KEPT = """
SELECT
  (SELECT group_concat(day || '|' || peak || '|' || level || '|' || last_at, ',')
   FROM daily_peaks WHERE kind = ?1 AND company = ?2),
  (SELECT group_concat(month || '|' || through || '|' || last_day || '|' || level, ',')
   FROM rollup_months WHERE kind = ?1 AND company = ?2)
"""

# A row of daily_peaks without kind and company: (day, peak, level, last_at).
Day = tuple[str, int, int, str]
# A row of rollup_months without kind and company: (month, through, last_day, level).
Month = tuple[str, int, str, int]
# (company, its starts, its ends, its kept daily_peaks, its kept rollup_months): Store.companies
Kept = tuple[str, str | None, str | None, str | None, str | None]

_LAST = "~"  # sorts after every stored instant: the end of a company's starts and ends

# Pending writes are sent in batches of about this many rows (an executemany per statement).
_BATCH = 20_000


def write(store: Store, kind: str, midnights: list[str], days: list[str]) -> int:
    """Bring kind's daily_peaks, rollup_days and rollup_months to what the history implies,
    the local day of an instant being days[i - 1] for midnights[i - 1] <= instant <
    midnights[i] (instants and days as `store` gives them as text). Returns the rows of
    daily_peaks the kind now has."""
    peaks = Table("daily_peaks", ("day", "peak", "level", "last_at"))
    months = Table("rollup_months", ("month", "through", "last_day", "level"))
    sums: dict[str, list[int]] = {}
    # Days are YYYY-MM-DD: their month's first day and their day of the month.
    calendar = {day: (day[:8] + "01", int(day[8:])) for day in days}
    count = 0
    for company, starts, ends, kept_peaks, kept_months in store.companies(kind):
        rows: list[Day] = []  # a company without history keeps no rows
        if starts:
            ended = ends.split(",") if ends else []
            rows = _company_days(starts.split(","), ended, midnights, days)
        count += len(rows)
        pending = peaks.company(company, rows, kept_peaks)
        pending += months.company(company, _sums(rows, sums, calendar), kept_months)
        if pending >= _BATCH:
            store.flush(kind, peaks)
            store.flush(kind, months)
    store.flush(kind, peaks)
    store.flush(kind, months)
    store.replace_days(kind, [(day, rise, change) for day, (rise, change) in sorted(sums.items())])
    return count


class Store(Protocol):
    """A database's side of `write`: what it reads and how it writes."""

    def companies(self, kind: str) -> Iterable[Kept]:
        """Every company, with its starts and ends (of real intervals) comma-separated, and
        its kept rows of both tables as `Table.company` compares them, in key order."""
        ...

    def flush(self, kind: str, table: Table) -> None:
        """Write (and clear) `table`'s pending writes."""
        ...

    def replace_days(self, kind: str, rows: list[tuple[str, int, int]]) -> None:
        """Make kind's rollup_days rows (day, rise, change), each on slot 0."""
        ...


class SqliteStore:
    """`write` on SQLite, through the DB-API connection under the session's."""

    def __init__(self, raw: sqlite3.Connection):
        self.raw = raw

    def companies(self, kind: str) -> Iterator[Kept]:
        raw = self.raw
        seen: set[str] = set()
        for company, starts, ends in raw.execute(_HISTORY, (kind,)):
            seen.add(company)
            yield (company, starts, ends, *raw.execute(_KEPT, (kind, company)).fetchone())
        for (company,) in raw.execute("SELECT id FROM companies").fetchall():
            if company not in seen:
                yield (company, None, None, *raw.execute(_KEPT, (kind, company)).fetchone())

    def flush(self, kind: str, table: Table) -> None:
        name, (key, *values) = table.table, table.columns
        # Only this module's table and column names go into these statements, never input.
        where = f"WHERE kind = ? AND company = ? AND {key} = ?"
        assignments = ", ".join(f"{v} = ?" for v in values)
        marks = ", ".join("?" for _ in range(len(table.columns) + 2))
        columns = ", ".join(table.columns)
        for statement, rows in (
            (f"DELETE FROM {name} {where}", [(kind, c, k) for c, k in table.deletes]),  # noqa: S608
            (
                f"UPDATE {name} SET {assignments} {where}",  # noqa: S608
                [(*v, kind, c, k) for c, k, *v in table.updates],
            ),
            (
                f"UPDATE {name} SET {key} = ?, {assignments} {where}",  # noqa: S608
                [(*row, kind, c, k) for c, k, *row in table.moves],
            ),
            (
                f"INSERT INTO {name} (kind, company, {columns}) VALUES ({marks})",  # noqa: S608
                [(kind, *row) for row in table.inserts],
            ),
        ):
            if rows:
                self.raw.executemany(statement, rows)
        table.clear()

    def replace_days(self, kind: str, rows: list[tuple[str, int, int]]) -> None:
        self.raw.execute("DELETE FROM rollup_days WHERE kind = ?", (kind,))
        self.raw.executemany(
            "INSERT INTO rollup_days (kind, day, rise, change) VALUES (?, ?, ?, ?)",
            [(kind, *row) for row in rows],
        )


def _company_days(
    starts: list[str], ends: list[str], midnights: list[str], days: list[str]
) -> list[Day]:
    """One company's days, as day_peak.sweep finds them, from its intervals' starts and ends:
    the level after all of an instant's starts and ends counts, and the level before a day's
    first instant held from its midnight unless that instant is midnight."""
    starts.sort()
    ends.sort()
    starts.append(_LAST)
    ends.append(_LAST)
    out: list[Day] = []
    level = peak = day_level = i = j = 0
    last = lo = hi = ""
    bucket = 0  # of the day being swept; 0 before the first
    while True:
        at, end = starts[i], ends[j]
        if end < at:
            at = end
        if at == _LAST:
            break
        before = level
        while starts[i] == at:
            i += 1
            level += 1
        while ends[j] == at:
            j += 1
            level -= 1
        if not lo <= at < hi:  # the first instant of a day
            if bucket:
                out.append((days[bucket - 1], peak, day_level, last))
            bucket = bisect.bisect_right(midnights, at)
            lo, hi = midnights[bucket - 1], midnights[bucket]
            peak = before if at > lo and before > level else level
        elif level > peak:
            peak = level
        day_level, last = level, at
    if bucket:
        out.append((days[bucket - 1], peak, day_level, last))
    return out


def _sums(
    rows: list[Day], sums: dict[str, list[int]], calendar: dict[str, tuple[str, int]]
) -> list[Month]:
    """Add one company's rows to the day sums of rollup_days (on each day with a row, the rise
    of its peak and the change of its level over the level carried from its previous row), and
    return its rows of rollup_months: per month the sum over its days of the peak (on a day
    without a row, the level carried into it), its last day with a row and the level after
    that. calendar: a day's month and day of the month."""
    out: list[Month] = []
    carried = through = previous = 0
    month = last_day = ""
    for day, peak, level, _ in rows:
        s = sums.get(day)
        if s is None:
            sums[day] = [peak - carried, level - carried]
        else:
            s[0] += peak - carried
            s[1] += level - carried
        first, dom = calendar[day]
        if first != month:
            if month:
                out.append((month, through, last_day, carried))
            month, through, previous = first, 0, 0
        through += carried * (dom - previous - 1) + peak
        previous, carried, last_day = dom, level, day
    if month:
        out.append((month, through, last_day, carried))
    return out


class Table:
    """The pending writes that bring one rollup table's rows of a kind, company by company, to
    the ones computed: only the rows that differ from the kept ones. `columns`: the key within
    a company, then the values."""

    def __init__(self, table: str, columns: tuple[str, ...]):
        self.table, self.columns = table, columns
        self.deletes: list[tuple[Any, ...]] = []  # (company, key)
        self.updates: list[tuple[Any, ...]] = []  # (company, key, *values)
        self.moves: list[tuple[Any, ...]] = []  # (company, old key, new key, *values)
        self.inserts: list[tuple[Any, ...]] = []  # (company, key, *values)

    def company(self, company: str, rows: list[Any], kept: str | None) -> int:
        """Note the writes that make the company's rows `rows` (in key order) from the `kept`
        ones (`key|value|value|value`, comma-separated, as the stores read them); returns how
        many writes are pending."""
        texts = [f"{a}|{b}|{c}|{d}" for a, b, c, d in rows]
        if kept == (",".join(texts) if texts else None):
            return 0
        old = {text.partition("|")[0]: text for text in kept.split(",")} if kept else {}
        added = []
        for row, text in zip(rows, texts, strict=True):
            was = old.pop(row[0], None)
            if was is None:
                added.append(row)
            elif was != text:
                self.updates.append((company, *row))
        # A kept row whose key is gone takes the key of a new row: one write instead of a
        # delete and an insert (keys gone are no new row's, keys new no kept row's).
        gone = list(old)
        self.moves += [(company, key, *row) for key, row in zip(gone, added, strict=False)]
        self.deletes += [(company, key) for key in gone[len(added) :]]
        self.inserts += [(company, *row) for row in added[len(gone) :]]
        return len(self.deletes) + len(self.updates) + len(self.moves) + len(self.inserts)

    def clear(self) -> None:
        for rows in (self.deletes, self.updates, self.moves, self.inserts):
            rows.clear()
