"""`make bench`: every scenario on SQLite, and on PostgreSQL when BENCH_DATABASE_URL is set, as
one table of app figure, reference figure and ratio.

python -m bench.run [--ddis 1000000] [--companies 10000] [--quick] [--skip-http] [--skip-pages]
                   [--only report,http,...] [--skip-sqlite] [--scale [--scale-ddis 2000000]
                   [--scale-companies 100000]]

Data sets are generated on first use and kept: bench.db (the full size) and, for the growth
scenario, bench-1x.db and bench-2x.db with a quarter and half of the DDIs in as many companies
(the full set is 4x). On PostgreSQL, BENCH_DATABASE_URL names the full-size database and
<name>_1x, <name>_2x the others, created on the same server when missing.

--scale adds the 100,000-company rows (bench/scale.py, and the month close on that set): a data
set of --scale-ddis DDIs in --scale-companies companies, bench-100k.db (<name>_100k on
PostgreSQL), generated on first use and kept like the others; its rows' database column says
"100k". Not part of the default run: generating 2,000,000 DDIs takes most of an hour.

The replica rows (bench/replica.py) run on PostgreSQL only: they copy the full set into a primary
and streaming replica of their own (PostgreSQL's server binaries needed; SQLite has no rows).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.engine import make_url

from .close_changes import close_changes_scenarios
from .data import ROOT, ensure_data
from .downloads import download_scenarios
from .events import event_scenarios
from .imports import import_scenarios
from .month_close import month_close_scenarios
from .numbers import number_scenarios
from .replica import replica_scenarios
from .report import growth_scenarios, report_scenarios
from .rollup import rollup_scenarios
from .scale import scale_scenarios, set_label
from .service import service_scenarios
from .signin import signin_scenarios
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


def _scale_url(base: str, folder: Path) -> str:
    """The 100,000-company data set (--scale) for one database kind."""
    if base == "sqlite":
        return f"sqlite:///{folder / 'bench-100k.db'}"
    parsed = make_url(base)
    return parsed.set(database=f"{parsed.database}_100k").render_as_string(hide_password=False)


# The groups of rows, in the table's order (--only picks some).
GROUPS = {
    "report": "report scenarios",
    "month-close": "month close (close, closed report, readAdjustments)",
    "close-changes": "changes since a close after a late batch (on a copy of the data set)",
    "growth": "growth",
    "rollup": "rollup rebuild (flask history rollup; in a rolled-back transaction)",
    "import": "DDI import (on a copy of the data set)",
    "numbers": "number inventory: stock and allocate (on a copy of the data set)",
    "events": "change events (record, deliver, read)",
    "signin": "sign-in (a page under MFA_REQUIRED, the second step; on a copy of the data set)",
    "service": "service hooks (request id, access line, metrics)",
    "downloads": "big downloads (gunicorn.conf.py, 2 workers)",
    "replica": "read replica: pages and a mixed load (a copy of the data set; PostgreSQL only)",
    "http": "HTTP scenarios (gunicorn, 2 workers)",
    "pages": "pages against the budget (gunicorn, one client)",
}
SCALE = "100,000 companies: pages of every company, month close (--scale)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ddis", type=int, default=1_000_000)
    parser.add_argument("--companies", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="one short run each (smoke test)")
    parser.add_argument("--skip-http", action="store_true", help="no gunicorn/wrk scenarios")
    parser.add_argument("--skip-pages", action="store_true", help="no page-budget scenario")
    parser.add_argument("--dir", type=Path, default=ROOT, help="where the SQLite files live")
    parser.add_argument(
        "--skip-sqlite", action="store_true", help="PostgreSQL only (BENCH_DATABASE_URL)"
    )
    parser.add_argument("--scale", action="store_true", help="and the 100,000-company rows")
    parser.add_argument("--scale-ddis", type=int, default=2_000_000)
    parser.add_argument("--scale-companies", type=int, default=100_000)
    parser.add_argument(
        "--only",
        type=lambda text: set(text.split(",")),
        default=set(GROUPS),
        metavar="GROUP,...",
        help=f"only these groups of rows, of: {', '.join(GROUPS)}",
    )
    args = parser.parse_args(argv)
    if args.skip_sqlite and not os.environ.get("BENCH_DATABASE_URL"):
        parser.error("--skip-sqlite: set BENCH_DATABASE_URL to a PostgreSQL database")
    if unknown := args.only - set(GROUPS):
        parser.error(f"--only: no group {', '.join(sorted(unknown))}")
    os.environ.setdefault("SECRET_KEY", "bench-secret-key-not-secret")
    os.environ.setdefault("INSTANCE_PATH", str(args.dir / "instance-bench"))
    repeat = 1 if args.quick else 3
    databases = [] if args.skip_sqlite else [("sqlite", "sqlite")]
    if os.environ.get("BENCH_DATABASE_URL"):
        databases.append(("postgresql", os.environ["BENCH_DATABASE_URL"]))

    started = time.perf_counter()
    results: list[Result] = []
    for label, base in databases:
        urls = _urls(base, args.dir)
        for factor, url in urls.items():
            if factor == 4 or "growth" in args.only:
                ensure_data(url, args.ddis * factor // 4, args.companies)
        results += _run(label, urls, args, repeat)
        if args.scale:
            scale_url = _scale_url(base, args.dir)
            ensure_data(scale_url, args.scale_ddis, args.scale_companies)
            print(f"{label}: {SCALE}", flush=True)
            scaled = set_label(label, args.scale_companies)
            results += scale_scenarios(scale_url, urls[4], scaled, quick=args.quick)
            results += month_close_scenarios(scale_url, scaled, repeat)
    print()
    print(render(results))
    print(f"\nmake bench took {time.perf_counter() - started:.0f} s (data generation included)")
    return 0


def _run(label: str, urls: dict[int, str], args: argparse.Namespace, repeat: int) -> list[Result]:
    """The groups of rows --only names, in the table's order, on one database's data sets."""
    full = urls[4]
    scenarios: dict[str, Callable[[], list[Result]]] = {
        "report": lambda: report_scenarios(full, label, repeat),
        "month-close": lambda: month_close_scenarios(full, label, repeat),
        "close-changes": lambda: close_changes_scenarios(full, label, quick=args.quick),
        "growth": lambda: growth_scenarios(sorted(urls.items()), label, repeat),
        # Minutes a run at full size for the row-by-row reference: once, not `repeat` times.
        "rollup": lambda: rollup_scenarios(full, label),
        "import": lambda: import_scenarios(full, label, args.ddis),
        # The stock's own size: as many numbers as the data set has DDIs (§14's bench).
        "numbers": lambda: number_scenarios(full, label, args.ddis, runs=3 if args.quick else 20),
        "events": lambda: event_scenarios(full, label, quick=args.quick),
        "signin": lambda: signin_scenarios(full, label, quick=args.quick),
        "service": lambda: service_scenarios(full, label, quick=args.quick),
        "downloads": lambda: download_scenarios(full, label, quick=args.quick),
        "replica": lambda: replica_scenarios(full, label, quick=args.quick),
        "http": lambda: [] if args.skip_http else _http(full, args.quick),
        "pages": lambda: [] if args.skip_pages else _pages(full, args.quick),
    }
    results: list[Result] = []
    for group, run in scenarios.items():
        if group in args.only:
            print(f"{label}: {GROUPS[group]}", flush=True)
            results += run()
    return results


def _http(url: str, quick: bool) -> list[Result]:
    from .http import http_scenarios  # needs wrk and Datasette: imported only when run

    return http_scenarios(url, quick=quick)


def _pages(url: str, quick: bool) -> list[Result]:
    from .pages import page_scenarios

    return page_scenarios(url, quick=quick)


if __name__ == "__main__":
    raise SystemExit(main())
