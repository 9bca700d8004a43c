"""The 100,000-company rows (`make bench BENCH_ARGS=--scale`): the pages that show a page of
every company, on a data set with ten times the companies of the full one.

python -m bench.scale --url URL --reference URL [--quick]

Each page is asked in process (Flask's test client, signed in as the bench System-Admin, the
account bench/http.py makes) on the 100,000-company set (the app figure) and on the full
10,000-company set (the reference), interleaved, in the same run: the ratio is what ten times
the companies cost a page that shows 50 of them. The targets are the page budget's
(docs/pages.md: 150 ms p95 of server time, 300 KB of HTML), on the app figure; the ratio has
none, it is what to watch. The figure is p95 (nearest rank) of N requests after one warm-up
(N = 20; 3 with --quick). The month close rows run on the same set (bench/month_close.py).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from .http import PASSWORD, SYSADMIN, ensure_account
from .month_close import _restore, _state
from .report import last_closed_month
from .table import Result, render

BUDGET_MS = 150.0
BUDGET_BYTES = 300_000


def pages(closed: tuple[int, int]) -> list[str]:
    """The pages whose work could grow with the company count though they show a page of them."""
    year, month = closed
    return [
        "/reports/ddis",
        "/reports/users",
        f"/reports/ddis?year={year}&month={month}",  # closed for the run: the stored totals
        "/reports/ddis?offset=500",
        "/admin/companies",
        "/admin/companies?sort=ddis&dir=desc",
        "/admin/companies?sort=users&dir=asc&page=2",
        "/companies/suggest?for=records&q=c0",
        "/companies/suggest?for=records&q=",
    ]


def _client(database_url: str) -> tuple[object, Callable[[], None]]:
    """A test client signed in as the bench System-Admin, and what undoes the run's close."""
    from webapp import create_app, freeze_startup_objects
    from webapp.access import Principal
    from webapp.errors import Conflict
    from webapp.extensions import db
    from webapp.services.billing import month_close, periods

    app = create_app(
        {"SQLALCHEMY_DATABASE_URI": database_url, "SECRET_KEY": "bench-secret-key-not-secret"}
    )
    operator = Principal.cli("cli:bench-scale")
    with app.app_context():
        ensure_account(operator, SYSADMIN, system_admin=True)
        tz = periods.zone(app.config["REPORT_TIMEZONE"])
        month, year = last_closed_month(periods.today_in(tz))
        request = month_close.parse_scope({"year": year, "month": month})
        before, last_audit = _state(db)
        with contextlib.suppress(Conflict):  # closed already: read as it is
            month_close.close_month(operator, request)
        db.session.remove()
    client = signed_in_client(app, SYSADMIN)
    freeze_startup_objects()  # as each gunicorn worker does once its app is built (wsgi.py)

    def undo() -> None:  # the run's close and its audit entry deleted: the set as it was
        with app.app_context():
            _restore(db, before, last_audit, operator.username)

    return client, undo


def signed_in_client(app: Any, username: str) -> Any:
    """A test client with a session of its own for `username` (the bench password), opened
    through the sign-in service as /login would."""
    from webapp.services.identity import signin

    with app.app_context():
        checked = signin.check_password(username, PASSWORD)
        account = signin.open_session(checked, "password", signin.Client(None, None))
        user_id = account.get_id()
    client = app.test_client()
    with client.session_transaction() as session:
        session["_user_id"] = user_id
        session["_fresh"] = True
    return client


def set_label(database: str, companies: int) -> str:
    """The database column of the scaled set's rows: "sqlite 100k"."""
    size = f"{companies // 1000:,}k" if companies % 1000 == 0 else f"{companies:,}"
    return f"{database} {size}"


def p95(times: list[float]) -> float:
    ordered = sorted(times)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def in_turns(
    clients: dict[str, Any], path: str, runs: int, weighed: str
) -> tuple[dict[str, float], int]:
    """Each client asks path once to warm up, then `runs` times, in turns (machine drift hits
    them alike): each one's p95 in ms, and the weight of the heaviest answer `weighed` got."""
    times: dict[str, list[float]] = {name: [] for name in clients}
    size = 0
    for round_ in range(1 + runs):
        for name, client in clients.items():
            t = time.perf_counter()
            response = client.get(path)
            spent = time.perf_counter() - t
            assert response.status_code == 200, (name, path, response.status_code)
            if round_:
                times[name].append(spent)
            if name == weighed:
                size = max(size, len(response.data))
    return {name: p95(spent) * 1000 for name, spent in times.items()}, size


def scale_scenarios(
    scale_url: str, reference_url: str, label: str, quick: bool = False
) -> list[Result]:
    """One row per page (module doc): p95 on the 100,000-company set against the full set's;
    `label` names the set in the database column (set_label)."""
    today = date.today()
    closed = last_closed_month(today)[::-1]
    clients = {}
    undo = []
    try:
        for name, url in (("scale", scale_url), ("reference", reference_url)):
            client, undo_close = _client(url)
            clients[name] = client
            undo.append(undo_close)
        companies = _companies(scale_url)
        results = []
        for path in pages((closed[0], closed[1])):
            times, size = in_turns(clients, path, 3 if quick else 20, weighed="scale")
            results.append(
                Result(
                    label,
                    f"{companies:,} companies, one page of them: {path}",
                    times["scale"],
                    times["reference"],
                    "same page, full data set",
                    "ms",
                    absolute_target=BUDGET_MS,
                    size=size,
                    size_budget=BUDGET_BYTES,
                )
            )
        return results
    finally:
        for undo_close in undo:
            undo_close()


def _companies(url: str) -> int:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM companies")).scalar_one())
    finally:
        engine.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the 100,000-company data set")
    parser.add_argument("--reference", required=True, help="the full (10,000-company) data set")
    parser.add_argument("--label", help="the database column (default: the URL's backend)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("SECRET_KEY", "bench-secret-key-not-secret")
    os.environ.setdefault(
        "INSTANCE_PATH", str(Path(__file__).resolve().parent.parent / "instance-bench")
    )
    label = args.label or args.url.split(":", 1)[0].split("+", 1)[0]
    label = set_label(label, _companies(args.url))
    print(render(scale_scenarios(args.url, args.reference, label, args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
