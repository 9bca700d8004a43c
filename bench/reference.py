"""Hand-written references for the daily peaks, independent of webapp.services.

REFERENCE_SQL clips every interval to each day it touches and sweeps each (company, day) on its
own: the straightforward formulation, slow at scale, kept as a second opinion in the tests.
WINDOW_SQL is the best from-scratch SQL we know, the reference `make bench` times the app
against. Both are portable between SQLite and PostgreSQL.
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


# The best from-scratch formulation we know, written by hand: every interval touching the
# month becomes a +1 at its (clamped) start and a -1 at its end, plus a 0 mark at each local
# midnight for each company; one window over (company; instant, ends < marks < starts) gives
# the level after each event and, as the running maximum of the marks' day numbers, the day
# it falls in. One sort, one pass, no range join: its cost grows with the intervals touching
# the month plus companies x days.
WINDOW_SQL = """
WITH days(day, ds) AS (VALUES {days}),
touching AS (
  SELECT company, start_at, end_at FROM history_intervals
  WHERE kind = :kind AND start_at < :pe
    AND (end_at IS NULL OR (end_at > :ps AND end_at > start_at))
),
events AS (
  SELECT company, CASE WHEN start_at < :ps THEN :ps ELSE start_at END AS t, 1 AS delta,
         CAST(NULL AS INTEGER) AS day
  FROM touching
  UNION ALL
  SELECT company, end_at, -1, NULL FROM touching WHERE end_at IS NOT NULL AND end_at < :pe
  UNION ALL
  SELECT c.company, d.ds, 0, d.day FROM (SELECT DISTINCT company FROM touching) c, days d
),
swept AS (
  SELECT company, SUM(delta) OVER w AS level, MAX(day) OVER w AS day FROM events
  WINDOW w AS (PARTITION BY company ORDER BY t, delta ROWS UNBOUNDED PRECEDING)
)
SELECT company, day, MAX(level) AS peak FROM swept GROUP BY company, day
"""


def window_reference_query(kind: str, period):
    """WINDOW_SQL as a text() statement with typed parameters for `period`'s days."""
    rows = ", ".join(f"(CAST(:day{i} AS INTEGER), :ds{i})" for i in range(len(period.days)))
    statement = text(WINDOW_SQL.format(days=rows))
    params = [
        bindparam("kind", kind, type_=String),
        bindparam("ps", period.start, type_=DateTime),
        bindparam("pe", period.end, type_=DateTime),
    ]
    for i, d in enumerate(period.days):
        params += [
            bindparam(f"day{i}", i, type_=Integer),
            bindparam(f"ds{i}", d.start, type_=DateTime),
        ]
    return statement.bindparams(*params)
