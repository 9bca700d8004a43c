"""The full rebuild of one kind's rollup on SQLite: the history read once, a row of instants per
company, swept in Python company by company; each company's rows compared with the ones kept
and only the difference written.

On SQLite this beats the set-based statements of _rollup_build (which PostgreSQL runs): a window
over every instant, the day of each found by a function SQLite calls back, and the temporary
tables of the result and of its comparison cost more than this. Rows cross from SQLite to Python
joined per company (group_concat), not one by one: a row costs the driver several times what
splitting its text costs.

The sweep is `day_peak.sweep`'s, on the values as SQLite stores them: instants are strings of
one fixed format (_rollup_build._stored), so they sort in time order, and the local day of an
instant is found by bisecting the local midnights Python computed (periods.local_midnight_utc,
as sweep's). Held to the row-by-row rebuild (bench/rollup_reference.py) row for row by
tests/test_rollup_build.py.
"""

from __future__ import annotations

import bisect
import sqlite3
from typing import Any

# Each company's starts and ends (of real intervals: zero-length and backwards ones never
# count), comma-separated: one index range read in company order, no sort.
_HISTORY = """
SELECT company, group_concat(start_at), group_concat(end_at) FROM history_intervals
WHERE kind = ? AND (end_at IS NULL OR end_at > start_at)
GROUP BY company
"""

# One company's kept rows of both tables in the form _text writes them (in key order, as the
# indexes are read; another order only costs the comparison by key).
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

# The columns the rows hold as int (the others are the strings SQLite stores).
_INTEGERS = {"peak", "level", "through"}

_LAST = "~"  # sorts after every stored instant: the end of a company's starts and ends

# Pending writes are sent in batches of about this many rows (an executemany per statement).
_BATCH = 20_000


def write(raw: sqlite3.Connection, kind: str, midnights: list[str], days: list[str]) -> int:
    """Bring kind's daily_peaks, rollup_days and rollup_months to what the history implies,
    the local day of an instant being days[i - 1] for midnights[i - 1] <= instant <
    midnights[i] (stored strings). Returns the rows of daily_peaks the kind now has."""
    peaks = _Table(raw, kind, "daily_peaks", ("day", "peak", "level", "last_at"))
    months = _Table(raw, kind, "rollup_months", ("month", "through", "last_day", "level"))
    sums: dict[str, list[int]] = {}
    seen: set[str] = set()
    count = 0
    for company, starts, ends in raw.execute(_HISTORY, (kind,)):
        rows = _company_days(starts.split(","), ends.split(",") if ends else [], midnights, days)
        seen.add(company)
        count += len(rows)
        _add_days(sums, rows)
        kept_peaks, kept_months = raw.execute(_KEPT, (kind, company)).fetchone()
        pending = peaks.company(company, rows, kept_peaks)
        pending += months.company(company, _months(rows), kept_months)
        if pending >= _BATCH:
            peaks.flush()
            months.flush()
    # Companies without history keep no rows.
    for (company,) in raw.execute("SELECT id FROM companies").fetchall():
        if company not in seen:
            kept_peaks, kept_months = raw.execute(_KEPT, (kind, company)).fetchone()
            peaks.company(company, [], kept_peaks)
            months.company(company, [], kept_months)
    peaks.flush()
    months.flush()
    raw.execute("DELETE FROM rollup_days WHERE kind = ?", (kind,))
    raw.executemany(
        "INSERT INTO rollup_days (kind, day, rise, change) VALUES (?, ?, ?, ?)",
        [(kind, day, rise, change) for day, (rise, change) in sorted(sums.items())],
    )
    return count


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
        at = min(starts[i], ends[j])
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


def _add_days(sums: dict[str, list[int]], rows: list[Day]) -> None:
    """Add one company's rows to the day sums of rollup_days: on each day with a row, the rise
    of its peak and the change of its level over the level carried from its previous row."""
    carried = 0
    for day, peak, level, _ in rows:
        s = sums.get(day)
        if s is None:
            sums[day] = [peak - carried, level - carried]
        else:
            s[0] += peak - carried
            s[1] += level - carried
        carried = level


def _months(rows: list[Day]) -> list[Month]:
    """One company's rows of rollup_months from its days: per month the sum over its days of
    the peak (on a day without a row, the level carried into it), its last day with a row and
    the level after that."""
    out: list[Month] = []
    carried = through = previous = 0
    month = last_day = ""
    for day, peak, level, _ in rows:
        if not (month and day.startswith(month)):
            if month:
                out.append((month + "-01", through, last_day, carried))
            month, through, previous = day[:7], 0, 0  # stored as YYYY-MM-DD
        dom = int(day[8:])
        through += carried * (dom - previous - 1) + peak
        previous, carried, last_day = dom, level, day
    if month:
        out.append((month + "-01", through, last_day, carried))
    return out


def _text(rows: list[Any]) -> str | None:
    """Rows as _KEPT reads them."""
    if not rows:
        return None
    return ",".join([f"{a}|{b}|{c}|{d}" for a, b, c, d in rows])


class _Table:
    """The pending deletes, updates and inserts that bring one rollup table's rows of a kind,
    company by company, to the ones computed: only the rows that differ from the kept ones."""

    def __init__(self, raw: sqlite3.Connection, kind: str, table: str, columns: tuple[str, ...]):
        self.raw, self.kind = raw, kind
        key, *values = columns
        self.integers = [n for n, column in enumerate(columns) if column in _INTEGERS]
        # Only this module's table and column names go into these statements, never input.
        where = f"WHERE kind = ? AND company = ? AND {key} = ?"
        self.delete = f"DELETE FROM {table} {where}"  # noqa: S608
        assignments = ", ".join(f"{v} = ?" for v in values)
        self.update = f"UPDATE {table} SET {assignments} {where}"  # noqa: S608
        marks = ", ".join("?" for _ in range(len(columns) + 2))
        self.insert = f"INSERT INTO {table} (kind, company, {', '.join(columns)}) VALUES ({marks})"  # noqa: S608
        self.deletes: list[tuple[Any, ...]] = []
        self.updates: list[tuple[Any, ...]] = []
        self.inserts: list[tuple[Any, ...]] = []

    def company(self, company: str, rows: list[Any], kept: str | None) -> int:
        """Note the writes that make the company's rows `rows` (in key order) from the `kept`
        ones (as _KEPT reads them); returns how many writes are pending."""
        if kept == _text(rows):
            return 0
        old = {row[0]: row for row in self._parsed(kept)}
        kind = self.kind
        for row in rows:
            was = old.pop(row[0], None)
            if was is None:
                self.inserts.append((kind, company, *row))
            elif was != row:
                self.updates.append((*row[1:], kind, company, row[0]))
        self.deletes += [(kind, company, key) for key in old]
        return len(self.deletes) + len(self.updates) + len(self.inserts)

    def _parsed(self, kept: str | None) -> list[tuple[Any, ...]]:
        """The kept rows as tuples of the computed ones' types."""
        rows = []
        for text in kept.split(",") if kept else ():
            row: list[Any] = text.split("|")
            for n in self.integers:
                row[n] = int(row[n])
            rows.append(tuple(row))
        return rows

    def flush(self) -> None:
        for statement, rows in (
            (self.delete, self.deletes),
            (self.update, self.updates),
            (self.insert, self.inserts),
        ):
            if rows:
                self.raw.executemany(statement, rows)
                rows.clear()
