"""A hand-written reference for the daily peaks, independent of webapp.services.reports.

It clips every interval to each day it touches and sweeps each (company, day) on its own: the
straightforward from-scratch formulation. Portable between SQLite and PostgreSQL.
"""

from __future__ import annotations

from sqlalchemy import DateTime, Integer, String, bindparam, text

REFERENCE_SQL = """
WITH days(day, ds, de) AS (VALUES {days}),
clipped AS (
  SELECT h.company, d.day,
         CASE WHEN h.start_at > d.ds THEN h.start_at ELSE d.ds END AS s,
         CASE WHEN h.end_at IS NULL OR h.end_at >= d.de THEN NULL ELSE h.end_at END AS e
  FROM history_intervals h
  JOIN days d ON h.start_at < d.de AND (h.end_at IS NULL OR h.end_at > d.ds)
  WHERE h.kind = :kind AND (h.end_at IS NULL OR h.end_at > h.start_at)
),
events AS (
  SELECT company, day, s AS t, 1 AS delta FROM clipped
  UNION ALL
  SELECT company, day, e AS t, -1 AS delta FROM clipped WHERE e IS NOT NULL
)
SELECT company, day, MAX(level) AS peak FROM (
  SELECT company, day,
         SUM(delta) OVER (PARTITION BY company, day ORDER BY t, delta
                          ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS level
  FROM events
) running
GROUP BY company, day
"""


def reference_query(kind: str, period):
    """The reference as a text() statement with typed parameters for `period`'s days."""
    rows = ", ".join(f"(CAST(:day{i} AS INTEGER), :ds{i}, :de{i})" for i in range(len(period.days)))
    statement = text(REFERENCE_SQL.format(days=rows))
    params = [bindparam("kind", kind, type_=String)]
    for i, d in enumerate(period.days):
        params += [
            bindparam(f"day{i}", i, type_=Integer),
            bindparam(f"ds{i}", d.start, type_=DateTime),
            bindparam(f"de{i}", d.end, type_=DateTime),
        ]
    return statement.bindparams(*params)
