"""The report query's plan and time next to the hand-written reference, on DATABASE_URL.

python -m bench.report_plan [--kind ddi] [--repeat 3]: for the last closed month, runs
EXPLAIN ANALYZE of the app's query (PostgreSQL) and times both queries (median of --repeat runs
after one warm-up), checking that they give the same numbers.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import date

from sqlalchemy import text

from . import use_bench_database


def timed(session, statement, repeat: int) -> tuple[float, dict]:
    session.execute(statement).all()  # warm-up: caches, plans
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        rows = session.execute(statement).all()
        times.append(time.perf_counter() - t)
        result = {(c, int(d)): int(p) for c, d, p in rows if p}
    return statistics.median(times), result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", default="ddi", choices=["ddi", "user"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--today", type=date.fromisoformat, default=date.today())
    args = parser.parse_args(argv)
    use_bench_database()

    from webapp import create_app
    from webapp.extensions import db
    from webapp.services.billing import periods, reports

    from .reference import reference_query

    app = create_app()
    with app.app_context():
        tz = periods.zone(app.config["REPORT_TIMEZONE"])
        month, year = (args.today.month - 1 or 12), args.today.year - (args.today.month == 1)
        period = periods.resolve(month, year, tz, args.today)
        session = db.session
        count = session.execute(
            text(
                "SELECT count(*) FROM history_intervals WHERE kind = :k AND start_at < :e "
                "AND (end_at IS NULL OR end_at > :s)"
            ),
            {"k": args.kind, "s": period.start, "e": period.end},
        ).scalar()
        total = session.execute(text("SELECT count(*) FROM history_intervals")).scalar()
        print(
            f"{db.engine.dialect.name}: {total:,} intervals in all, {count:,} of kind "
            f"{args.kind} touching {year}-{month:02d}"
        )
        app_query = reports.peaks_query(args.kind, period, None)
        if db.engine.dialect.name == "postgresql":
            compiled = app_query.compile(dialect=db.engine.dialect)
            plan = (
                session.connection()
                .exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS) " + compiled.string, compiled.params)
                .scalars()
                .all()
            )
            print("\nEXPLAIN ANALYZE of the app's report query:")
            print("\n".join(plan))
        app_time, app_result = timed(session, app_query, args.repeat)
        ref_time, ref_result = timed(session, reference_query(args.kind, period), args.repeat)
        same = app_result == ref_result
        print(f"\n{'query':<28}{'median s':>10}")
        print(f"{'app (one-pass sweep)':<28}{app_time:>10.3f}")
        print(f"{'hand-written reference':<28}{ref_time:>10.3f}")
        print(f"ratio app/reference: {app_time / ref_time:.2f}   identical numbers: {same}")
        return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
