"""The rollup rebuild (`flask history rollup`): the set-based rebuild the app runs against the
row-by-row sweep it replaced (bench/rollup_reference.py), measured in the same run.

Three rows per database, each run inside a transaction that is rolled back (the data set is
left as it was; on PostgreSQL the rollup's tables are vacuumed after each, untimed):
- over the rollup as kept (the usual case: a rebuild to check or repair it), both kinds;
- after a REPORT_TIMEZONE change: the rollup first rebuilt in another zone, then rebuilt in
  REPORT_TIMEZONE, where nearly every row changes;
- into an empty rollup, as the first `flask history rollup` after an import finds it (on
  PostgreSQL emptied by TRUNCATE, which a rollback undoes: the tables are then empty on disk,
  as a new database's are when the plan of the rebuild's reads is made).
The rows each writes are checked to be identical (a fingerprint per table) before the times
count.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import text

from .report import _app
from .rollup_reference import rebuild_all_row_by_row
from .table import Result

# Counted and summed per kind and day: equal fingerprints of two rebuilds of the same history.
FINGERPRINTS = (
    "SELECT kind, day, count(*), sum(peak), sum(level), max(last_at) FROM daily_peaks "
    "GROUP BY kind, day ORDER BY kind, day",
    "SELECT kind, day, rise, change FROM rollup_days ORDER BY kind, day",
    "SELECT kind, month, count(*), sum(through), sum(level), max(last_day) FROM rollup_months "
    "GROUP BY kind, month ORDER BY kind, month",
)


def rollup_scenarios(database_url: str, label: str, repeat: int = 1) -> list[Result]:
    """The rebuild over the rollup as kept, and after a time zone change (module doc)."""
    from webapp.extensions import db
    from webapp.services.billing import periods, rollups

    app = _app(database_url)
    results = []
    with app.app_context():
        tz = periods.zone(app.config["REPORT_TIMEZONE"])
        other = periods.zone("America/New_York" if tz.key != "America/New_York" else "UTC")
        intervals = db.session.execute(text("SELECT count(*) FROM history_intervals")).scalar()
        db.session.remove()

        def vacuum() -> None:
            """On PostgreSQL the rolled-back rows are dead tuples in the rollup's heap and
            indexes: vacuumed away (untimed), or the next run, and the report rows of later
            groups, would read through them."""
            if db.engine.dialect.name == "postgresql":
                with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
                    c.execute(text("VACUUM (ANALYZE) daily_peaks, rollup_days, rollup_months"))

        def timed(rebuild: Callable, before: Callable | None) -> tuple[float, list]:
            session = db.session
            try:
                if before is not None:
                    before(session)
                    session.flush()
                started = time.perf_counter()
                rebuild(session, tz)
                session.flush()
                elapsed = time.perf_counter() - started
                return elapsed, [session.execute(text(q)).all() for q in FINGERPRINTS]
            finally:
                session.rollback()
                db.session.remove()
                vacuum()

        def zone_change(session) -> None:
            rollups.rebuild_all(session, other)

        def emptied(session) -> None:
            tables = "daily_peaks, rollup_days, rollup_months, rollup_latest"
            if db.engine.dialect.name == "postgresql":
                session.execute(text(f"TRUNCATE {tables}"))
            else:
                for table in tables.split(", "):
                    session.execute(text(f"DELETE FROM {table}"))  # noqa: S608

        name = f"rollup rebuild (flask history rollup), {intervals:,} intervals"
        # The first build's row is context, without a target: it writes every row (a
        # foreign-key check and two index entries each), which is most of its time, so its
        # ratio to the row-by-row build, which writes the same rows, says little (README).
        for what, before, target in (
            ("over the rollup as kept", None, 0.25),
            (f"from {other.key}", zone_change, 0.25),
            ("into an empty rollup", emptied, None),
        ):
            times: dict[str, list[float]] = {"app": [], "ref": []}
            for _ in range(repeat):
                ref_time, expected = timed(rebuild_all_row_by_row, before)
                app_time, got = timed(rollups.rebuild_all, before)
                assert got == expected, "the set-based rebuild disagrees with the row-by-row one"
                times["ref"].append(ref_time)
                times["app"].append(app_time)
            results.append(
                Result(
                    label,
                    f"{name}: set-based, {what}",
                    min(times["app"]),
                    min(times["ref"]),
                    "row by row",
                    "s",
                    target=target,
                )
            )
        db.engine.dispose()
    return results
