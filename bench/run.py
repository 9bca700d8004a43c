"""`make bench`: every scenario on SQLite, and on PostgreSQL when BENCH_DATABASE_URL is set, as
one table of app figure, reference figure and ratio.

python -m bench.run [--ddis 1000000] [--companies 10000] [--quick] [--skip-http] [--skip-pages]

Data sets are generated on first use and kept: bench.db (the full size) and, for the growth
scenario, bench-1x.db and bench-2x.db with a quarter and half of the DDIs in as many companies
(the full set is 4x). On PostgreSQL, BENCH_DATABASE_URL names the full-size database and
<name>_1x, <name>_2x the others, created on the same server when missing.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from sqlalchemy.engine import make_url

from .data import ROOT, ensure_data
from .table import Result, render


def _urls(base: str, folder: Path) -> dict[int, str]:
    """The 1x, 2x and 4x (full) data sets for one database kind."""
    if base == "sqlite":
        return {
            1: f"sqlite:///{folder / 'bench-1x.db'}",
            2: f"sqlite:///{folder / 'bench-2x.db'}",
            4: f"sqlite:///{folder / 'bench.db'}",
        }
    parsed = make_url(base)
    return {
        1: parsed.set(database=f"{parsed.database}_1x").render_as_string(hide_password=False),
        2: parsed.set(database=f"{parsed.database}_2x").render_as_string(hide_password=False),
        4: base,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ddis", type=int, default=1_000_000)
    parser.add_argument("--companies", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="one short run each (smoke test)")
    parser.add_argument("--skip-http", action="store_true", help="no gunicorn/wrk scenarios")
    parser.add_argument("--skip-pages", action="store_true", help="no page-budget scenario")
    parser.add_argument("--dir", type=Path, default=ROOT, help="where the SQLite files live")
    args = parser.parse_args(argv)
    os.environ.setdefault("SECRET_KEY", "bench-secret-key-not-secret")
    os.environ.setdefault("INSTANCE_PATH", str(args.dir / "instance-bench"))
    repeat = 1 if args.quick else 3
    databases = [("sqlite", "sqlite")]
    if os.environ.get("BENCH_DATABASE_URL"):
        databases.append(("postgresql", os.environ["BENCH_DATABASE_URL"]))

    from .events import event_scenarios
    from .imports import import_scenarios
    from .month_close import month_close_scenarios
    from .report import growth_scenarios, report_scenarios
    from .service import service_scenarios

    started = time.perf_counter()
    results: list[Result] = []
    for label, base in databases:
        urls = _urls(base, args.dir)
        for factor, url in urls.items():
            ensure_data(url, args.ddis * factor // 4, args.companies)
        print(f"{label}: report scenarios", flush=True)
        results += report_scenarios(urls[4], label, repeat)
        print(f"{label}: month close (close, closed report, readAdjustments)", flush=True)
        results += month_close_scenarios(urls[4], label, repeat)
        print(f"{label}: growth", flush=True)
        results += growth_scenarios(sorted(urls.items()), label, repeat)
        print(f"{label}: DDI import (on a copy of the data set)", flush=True)
        results += import_scenarios(urls[4], label, args.ddis)
        print(f"{label}: change events (record, deliver, read)", flush=True)
        results += event_scenarios(urls[4], label, quick=args.quick)
        print(f"{label}: service hooks (request id, access line, metrics)", flush=True)
        results += service_scenarios(urls[4], label, quick=args.quick)
        if not args.skip_http:
            from .http import http_scenarios

            print(f"{label}: HTTP scenarios (gunicorn, 2 workers)", flush=True)
            results += http_scenarios(urls[4], quick=args.quick)
        if not args.skip_pages:
            from .pages import page_scenarios

            print(f"{label}: pages against the budget (gunicorn, one client)", flush=True)
            results += page_scenarios(urls[4], quick=args.quick)
    print()
    print(render(results))
    print(f"\nmake bench took {time.perf_counter() - started:.0f} s (data generation included)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
