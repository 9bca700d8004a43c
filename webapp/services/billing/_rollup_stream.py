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

# One company's kept rows of both tables as the text _Table.company compares (in key order, as
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
    # Days are stored as YYYY-MM-DD: their month's first day and their day of the month.
    calendar = {day: (day[:8] + "01", int(day[8:])) for day in days}
    seen: set[str] = set()
    count = 0
    for company, starts, ends in raw.execute(_HISTORY, (kind,)):
        rows = _company_days(starts.split(","), ends.split(",") if ends else [], midnights, days)
        seen.add(company)
        count += len(rows)
        kept_peaks, kept_months = raw.execute(_KEPT, (kind, company)).fetchone()
        pending = peaks.company(company, rows, kept_peaks)
        pending += months.company(company, _sums(rows, sums, calendar), kept_months)
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


class _Table:
    """The pending writes that bring one rollup table's rows of a kind, company by company, to
    the ones computed: only the rows that differ from the kept ones."""

    def __init__(self, raw: sqlite3.Connection, kind: str, table: str, columns: tuple[str, ...]):
        self.raw, self.kind = raw, kind
        key, *values = columns
        # Only this module's table and column names go into these statements, never input.
        where = f"WHERE kind = ? AND company = ? AND {key} = ?"
        self.delete = f"DELETE FROM {table} {where}"  # noqa: S608
        assignments = ", ".join(f"{v} = ?" for v in values)
        self.update = f"UPDATE {table} SET {assignments} {where}"  # noqa: S608
        self.move = f"UPDATE {table} SET {key} = ?, {assignments} {where}"  # noqa: S608
        marks = ", ".join("?" for _ in range(len(columns) + 2))
        self.insert = f"INSERT INTO {table} (kind, company, {', '.join(columns)}) VALUES ({marks})"  # noqa: S608
        self.deletes: list[tuple[Any, ...]] = []
        self.updates: list[tuple[Any, ...]] = []
        self.moves: list[tuple[Any, ...]] = []
        self.inserts: list[tuple[Any, ...]] = []

    def company(self, company: str, rows: list[Any], kept: str | None) -> int:
        """Note the writes that make the company's rows `rows` (in key order) from the `kept`
        ones (as _KEPT reads them); returns how many writes are pending."""
        texts = [f"{a}|{b}|{c}|{d}" for a, b, c, d in rows]
        if kept == (",".join(texts) if texts else None):
            return 0
        old = {text.partition("|")[0]: text for text in kept.split(",")} if kept else {}
        kind = self.kind
        added = []
        for row, text in zip(rows, texts, strict=True):
            was = old.pop(row[0], None)
            if was is None:
                added.append(row)
            elif was != text:
                self.updates.append((*row[1:], kind, company, row[0]))
        # A kept row whose key is gone takes the key of a new row: one write instead of a
        # delete and an insert (keys gone are no new row's, keys new no kept row's).
        gone = list(old)
        self.moves += [(*row, kind, company, key) for key, row in zip(gone, added, strict=False)]
        self.deletes += [(kind, company, key) for key in gone[len(added) :]]
        self.inserts += [(kind, company, *row) for row in added[len(gone) :]]
        return len(self.deletes) + len(self.updates) + len(self.moves) + len(self.inserts)

    def flush(self) -> None:
        for statement, rows in (
            (self.delete, self.deletes),
            (self.update, self.updates),
            (self.move, self.moves),
            (self.insert, self.inserts),
        ):
            if rows:
                self.raw.executemany(statement, rows)
                rows.clear()
