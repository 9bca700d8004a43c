"""_rollup_stream's Store on PostgreSQL: every company's row read by one query, streamed
through a server-side cursor, and each batch of writes sent as one statement per kind of write
over arrays (unnest), not a statement per row.

Instants cross as a timestamp's text in the ISO DateStyle (`YYYY-MM-DD HH:MM:SS` and the
fraction of a second without trailing zeros, none when whole): one text per instant, and text
order is time order. The columns are `timestamp without time zone` holding UTC (models.py), so
the session's TimeZone never enters the text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._rollup_stream import Kept, Table

# Each company, with its starts and ends (of real intervals: zero-length and backwards ones never
# count; an index-only range of ix_history_kind_company_start) and its kept rows in key order.
# Companies without history come too: their kept rows are to be deleted.
_COMPANIES = """
SELECT c.id, h.starts, h.ends, p.kept, m.kept FROM companies AS c
LEFT JOIN LATERAL (
  SELECT string_agg(CAST(start_at AS text), ',') AS starts,
         string_agg(CAST(end_at AS text), ',') AS ends
  FROM history_intervals
  WHERE kind = %(kind)s AND company = c.id AND (end_at IS NULL OR end_at > start_at)
) AS h ON true
LEFT JOIN LATERAL (
  SELECT string_agg(CAST(day AS text) || '|' || peak || '|' || level || '|'
                    || CAST(last_at AS text), ',' ORDER BY day) AS kept
  FROM daily_peaks WHERE kind = %(kind)s AND company = c.id
) AS p ON true
LEFT JOIN LATERAL (
  SELECT string_agg(CAST(month AS text) || '|' || through || '|' || CAST(last_day AS text)
                    || '|' || level, ',' ORDER BY month) AS kept
  FROM rollup_months WHERE kind = %(kind)s AND company = c.id
) AS m ON true
"""

# The PostgreSQL type of each column the stream writes (arrays of them cross as parameters).
_TYPES = {
    "company": "varchar",
    "day": "date",
    "peak": "integer",
    "level": "integer",
    "last_at": "timestamp",
    "month": "date",
    "through": "bigint",
    "last_day": "date",
}


class PostgresStore:
    """`write` on PostgreSQL, through the psycopg connection under the session's (in its
    transaction)."""

    def __init__(self, raw: Any):
        self.raw = raw
        with raw.cursor() as cursor:
            # The text of dates and instants the stream parses and compares (module doc); the
            # per-company subqueries are small, compiling them (JIT) costs more than it saves.
            cursor.execute("SET LOCAL DateStyle = 'ISO, YMD'")
            cursor.execute("SET LOCAL jit = off")

    def companies(self, kind: str) -> Iterator[Kept]:
        with self.raw.cursor(name="rollup_companies") as cursor:
            cursor.itersize = 200
            cursor.execute(_COMPANIES, {"kind": kind})
            yield from cursor

    def flush(self, kind: str, table: Table) -> None:
        name, (key, *values) = table.table, table.columns
        columns = table.columns

        def rows(names: tuple[str, ...]) -> str:
            """unnest of one parameter per column, as a relation n(names): the companies an
            array, every other column its values' text comma-separated (dates, instants and
            numbers hold no comma; psycopg quoting each element of an array cost more than
            the statement)."""
            arrays = ", ".join(
                f"CAST(string_to_array(%s, ',') AS {_TYPES[_base(n)]}[])"
                if n != "company"
                else "CAST(%s AS varchar[])"
                for n in names
            )
            return f"unnest({arrays}) AS n({', '.join(names)})"

        # Only this module's table and column names go into these statements, never input.
        mine = f"t.kind = %s AND t.company = n.company AND t.{key} = n.{key}"
        assignments = ", ".join(f"{v} = n.{v}" for v in values)
        with self.raw.cursor() as cursor:
            for statement, pending, kind_first in (
                (
                    f"DELETE FROM {name} AS t USING {rows(('company', key))} WHERE {mine}",  # noqa: S608
                    table.deletes,
                    False,
                ),
                (
                    f"UPDATE {name} AS t SET {assignments} "  # noqa: S608
                    f"FROM {rows(('company', *columns))} WHERE {mine}",
                    table.updates,
                    False,
                ),
                (
                    f"UPDATE {name} AS t SET {key} = n.new_{key}, {assignments} "  # noqa: S608
                    f"FROM {rows(('company', key, f'new_{key}', *values))} WHERE {mine}",
                    table.moves,
                    False,
                ),
                (
                    f"INSERT INTO {name} (kind, company, {', '.join(columns)}) "  # noqa: S608
                    f"SELECT CAST(%s AS varchar), n.* FROM {rows(('company', *columns))}",
                    table.inserts,
                    True,
                ),
            ):
                if pending:
                    companies, *others = zip(*pending, strict=True)
                    arrays = [list(companies), *(",".join(map(str, c)) for c in others)]
                    # The kind's parameter is where its %s is: after the arrays, in the
                    # INSERT before them.
                    cursor.execute(statement, (kind, *arrays) if kind_first else (*arrays, kind))
        table.clear()

    def replace_days(self, kind: str, rows: list[tuple[str, int, int]]) -> None:
        with self.raw.cursor() as cursor:
            cursor.execute("DELETE FROM rollup_days WHERE kind = %s", (kind,))
            if rows:
                days, rises, changes = (",".join(map(str, c)) for c in zip(*rows, strict=True))
                cursor.execute(
                    "INSERT INTO rollup_days (kind, day, rise, change) "
                    "SELECT CAST(%s AS varchar), * FROM unnest("
                    "CAST(string_to_array(%s, ',') AS date[]), "
                    "CAST(string_to_array(%s, ',') AS bigint[]), "
                    "CAST(string_to_array(%s, ',') AS bigint[]))",
                    (kind, days, rises, changes),
                )


def _base(column: str) -> str:
    """A move's new key column is typed as the key."""
    return column.removeprefix("new_")
