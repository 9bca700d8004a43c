"""_rollup_stream's Store on PostgreSQL: the companies' rows read by one query per batch of
companies, and each batch of writes sent as one statement per kind of write over arrays
(unnest), not a statement per row.

A query per batch, not one cursor over every company: a plan is fixed when it is made, and
this transaction fills the very tables it reads as it goes. On a first build daily_peaks and
rollup_months are empty when the plan is made; reading nothing costs the same by any path,
and the planner took a table scan, or with scans off an index led by `kind` then `day`, for
each company's subquery, which then read every row written so far: quadratic (20,000
companies, 100,000 DDIs: 98 s, 12 minutes with scans off; 100,000 companies never finished).
A batch's plan is made from the tables as they are then (the planner scales its estimate by
their size on disk), so as they grow each company's rows become a seek on their key.

Instants cross as a timestamp's text in the ISO DateStyle (`YYYY-MM-DD HH:MM:SS` and the
fraction of a second without trailing zeros, none when whole): one text per instant, and text
order is time order. The columns are `timestamp without time zone` holding UTC (models.py), so
the session's TimeZone never enters the text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._rollup_stream import Kept, Table

# A batch of companies, each with its starts and ends (of real intervals: zero-length and
# backwards ones never count; an index-only range of ix_history_kind_company_start) and its kept
# rows in key order. Companies without history come too: their kept rows are to be deleted.
_COMPANIES = """
SELECT c.id, h.starts, h.ends, p.kept, m.kept FROM unnest(CAST(%(batch)s AS varchar[])) AS c(id)
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

# Companies per query: large enough that a query's fixed cost is small beside its seeks, small
# enough that the plan follows the tables as this transaction fills them (module doc).
_COMPANIES_BATCH = 500

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
        # The companies are read first (100,000 ids are a few MB): a batch's query then runs
        # on the connection while no other statement is open on it.
        with self.raw.cursor() as cursor:
            cursor.execute("SELECT id FROM companies ORDER BY id")
            ids = [company for (company,) in cursor]
        batches = [ids[i : i + _COMPANIES_BATCH] for i in range(0, len(ids), _COMPANIES_BATCH)]
        # Each batch's query is sent as soon as the one before is read: in pipeline mode
        # (_rollup_build.write) the server runs it while the sweep works through the batch
        # before. Its companies are not the ones that batch's writes change.
        if not batches:
            return  # no company: nothing to read (a new database)
        pending = self._send(kind, batches[0])
        for following in [*batches[1:], None]:
            with pending:
                rows = pending.fetchall()
            if following is not None:
                pending = self._send(kind, following)
            yield from rows

    def _send(self, kind: str, batch: list[str]) -> Any:
        """A cursor with the query of `batch` sent (its rows not read yet)."""
        cursor = self.raw.cursor()
        # Never prepared (psycopg prepares a statement run five times, and the server may
        # then keep one generic plan): each batch planned afresh.
        cursor.execute(_COMPANIES, {"kind": kind, "batch": batch}, prepare=False)
        return cursor

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
