"""The page scenario of `make bench`: every browser page against the page budget.

The budget: with the full bench data set, every page answers
within 150 ms on the server (p95, 2-core machine, SQLite and PostgreSQL) and weighs at most
300 KB of HTML (1 KB = 1,000 bytes; CSV downloads stream and are exempt).

The app runs as in the other HTTP scenarios (bench/http.py: gunicorn, 2 sync workers,
127.0.0.1, the same environment and helpers). The scenario signs in through the real /login
form as the bench System-Admin and as the bench Company-Admin, whose only grant is made the
largest company (the accounts bench/http.py makes, reset to the bench password), then takes
each page in turn: a warm-up (one request per worker, untimed), then N
requests one after the other on one client (N = 30; 3 with --quick; fewer when a page is so
slow that its requests pass PAGE_SECONDS, never fewer than MIN_REQUESTS).

What is timed is the client's time from opening the connection to the last byte of the body,
on loopback: the server's time plus a connect and a few copies, so the figure errs on the slow
side of the server-side budget. The row gives p95 (nearest rank) as the app figure, p50 and the
page's weight (its uncompressed HTML, the largest of the requests) in the scenario text.

A page answering 404 while no route of the app matches its path is not built yet: its row
says "not built" instead of failing the run. Any other answer than 200 fails the run.

Run it with `python -m bench.pages [--quick]` (DATABASE_URL as for the other bench commands).
The run signs in and resets the two bench accounts, so give it a copy of a data set you want
to keep unchanged.
"""

from __future__ import annotations

import contextlib
import http.client
import math
import statistics
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path

from werkzeug.routing import MapAdapter

from .http import (
    COMPANY_ADMIN,
    SYSADMIN,
    app_env,
    ensure_account,
    gunicorn_server,
    running,
    sign_in,
)
from .report import last_closed_month
from .table import Result, kilobytes

CLOSER = "cli:bench-pages"  # the operator that closes a month for the run (and only this run)
# The run's webhook (for its pages): never delivered to, no worker runs during the bench.
WEBHOOK_URL = "http://127.0.0.1:9/bench-pages"

BUDGET_MS = 150.0
BUDGET_BYTES = 300_000
PAGE_SECONDS = 60.0  # per page and role: stop measuring a page after this, once MIN_REQUESTS
MIN_REQUESTS = 5
# A page slower than gunicorn's default 30 s worker timeout is still measured, not killed.
WORKER_TIMEOUT = 300
NUMBER_QUERY = "4567"  # the number search: digits found anywhere in a number
# The top bar's search (/search), each finding several records (one would redirect): a number's
# start matching thousands, a number's end with a company containing it, a company name
# fragment, a username's start.
SEARCHES = ["/search?q=%2B44+10000", "/search?q=4042", "/search?q=company+c001", "/search?q=u12"]
# A Company-Admin's: its one company alone would open (303), so numbers and usernames only.
# The stock (docs/numbers.md): available numbers from 44 2071000000 on, as many as the data
# set's DDIs (whose numbers the generator writes from 44 1000000001 on), RESERVED of them
# reserved for the largest company.
STOCK_DIALCODE, STOCK_FIRST, RESERVED = "44", "2071000000", 1_000
ADMIN_SEARCHES = ["/search?q=%2B44+10", "/search?q=u1"]


@dataclass(frozen=True)
class Settings:
    requests: int  # timed requests per page and role
    warmup: int  # untimed requests first: one per worker


FULL = Settings(requests=30, warmup=2)
QUICK = Settings(requests=3, warmup=2)


@dataclass(frozen=True)
class Subjects:
    """What the pages are opened on: the largest company, one DDI of it, a day to drill into."""

    company: str
    ddi: tuple[str, str]  # dialcode, number
    day: str  # YYYY-MM-DD, in the default (current) report month
    small_company: str  # the last company by identifier: among the smallest (bench.generate)
    closed: tuple[int, int]  # (year, month): the last ended month, closed for the run
    webhook: int  # a webhook made for the run (its pages), deleted after it
    reserved: str  # a number of STOCK_DIALCODE reserved for `company` (its page)


def _prepare(database_url: str) -> tuple[Subjects, MapAdapter]:
    """Reset the two bench accounts (through the services, audited) and pick the subjects.
    Returns them and the app's URL map bound for matching, to tell "not built" from a 404."""
    from sqlalchemy import func, select

    from webapp import create_app
    from webapp.access import Principal
    from webapp.extensions import db
    from webapp.models import Company, Ddi
    from webapp.services.billing import periods
    from webapp.services.events import webhooks

    app = create_app(
        {
            "SQLALCHEMY_DATABASE_URI": database_url,
            "SECRET_KEY": "bench-secret-key-not-secret",
            "WEBHOOK_ALLOW_NETWORKS": "127.0.0.0/8",  # WEBHOOK_URL: nothing is ever sent to it
        }
    )
    operator = Principal.cli("cli:bench")
    with app.app_context():
        largest = db.session.execute(
            select(Ddi.company, func.count())
            .group_by(Ddi.company)
            .order_by(func.count().desc(), Ddi.company)
            .limit(1)
        ).first()
        if largest is None:
            raise RuntimeError("The page scenario needs a data set with DDIs.")
        company = largest[0]
        ddi = db.session.execute(
            select(Ddi.dialcode, Ddi.number)
            .where(Ddi.company == company)
            .order_by(Ddi.dialcode, Ddi.number)
            .limit(1)
        ).one()
        small = db.session.scalar(select(func.max(Company.id)))
        db.session.rollback()
        ensure_account(operator, SYSADMIN, system_admin=True)
        ensure_account(operator, COMPANY_ADMIN, admin_of=[company])
        today = periods.today_in(periods.zone(app.config["REPORT_TIMEZONE"]))
        month, year = last_closed_month(today)
        _close_for_the_run(Principal.cli(CLOSER), year, month)
        stocked = _stock_for_the_run(operator, company)
        hook, _secret = webhooks.create(Principal.cli(CLOSER), WEBHOOK_URL, (), [company])
        webhook = hook.id
        db.session.remove()
    subjects = Subjects(
        company,
        (ddi.dialcode, ddi.number),
        today.replace(day=1).isoformat(),
        small or company,
        (year, month),
        webhook,
        stocked,
    )
    return subjects, app.url_map.bind("127.0.0.1")


def _stock_for_the_run(operator, company: str) -> str:
    """The stock the lifecycle's pages are measured with (docs/numbers.md): as many available
    numbers as the data set has DDIs (1,000,000 at full size), STOCK_DIALCODE STOCK_FIRST on,
    of which RESERVED are reserved for the largest company. Made through the services on the
    first run and kept (a later run finds them and adds nothing but an expired reservation's
    renewal); returns the first reserved number."""
    from sqlalchemy import func, select

    from webapp.extensions import db
    from webapp.models import Ddi, Number
    from webapp.services import inventory
    from webapp.services.numbers import reserving, stock
    from webapp.services.numbers.stock import Entry

    wanted = db.session.scalar(select(func.count()).select_from(Ddi)) or 0
    first = int(STOCK_FIRST)
    have = db.session.scalar(
        select(func.count())
        .select_from(Number)
        .where(
            Number.dialcode == STOCK_DIALCODE,
            Number.number >= STOCK_FIRST,
            Number.number < str(first + wanted),
        )
    )
    db.session.rollback()
    if not have:
        width = len(STOCK_FIRST)

        def chunks():
            for start in range(0, wanted, stock.CHUNK):
                yield [
                    Entry("block", STOCK_DIALCODE, f"{first + i:0{width}d}")
                    for i in range(start, min(wanted, start + stock.CHUNK))
                ]

        stock.write(operator, chunks)
    on = inventory.today()
    held = select(Number.number).where(
        Number.dialcode == STOCK_DIALCODE,
        Number.held_for == company,
        Number.state == inventory.RESERVED,
        Number.held_until >= on,
    )
    reserved = db.session.scalars(held.order_by(Number.number).limit(1)).first()
    db.session.rollback()
    if reserved is None:
        count = min(RESERVED, max(1, wanted // 10))
        scope = {"dialcode": STOCK_DIALCODE, "prefix": STOCK_FIRST[:4], "count": count}
        taken = reserving.reserve(operator, {"scope": scope, "values": {"company": company}})
        reserved = taken[0]["number"]
    return reserved


def _close_for_the_run(operator, year: int, month: int) -> None:
    """Close the last ended month, so its pages are measured closed (undone by _reopen_after)."""
    from webapp.extensions import db
    from webapp.services.billing import closed_figures, month_close

    latest = closed_figures.latest(db.session(), year, month)
    if latest is None or not latest.closed:
        month_close.close_month(operator, month_close.MonthRequest(month, year))


def _reopen_after(database_url: str, year: int, month: int) -> None:
    """Delete the closes of the month and the webhook this run made: the data set is left as
    the report and month close scenarios expect it (the last ended month open)."""
    from sqlalchemy import delete, select

    from webapp import create_app
    from webapp.extensions import db
    from webapp.models import AuditEntry, ClosedFigures, MonthClose, Webhook

    app = create_app(
        {"SQLALCHEMY_DATABASE_URI": database_url, "SECRET_KEY": "bench-secret-key-not-secret"}
    )
    with app.app_context():
        made = select(MonthClose.id).where(
            MonthClose.year == year, MonthClose.month == month, MonthClose.closed_by == CLOSER
        )
        db.session.execute(delete(ClosedFigures).where(ClosedFigures.close_id.in_(made)))
        db.session.execute(delete(MonthClose).where(MonthClose.id.in_(made)))
        db.session.execute(delete(Webhook).where(Webhook.created_by == CLOSER))
        db.session.execute(
            delete(AuditEntry).where(
                AuditEntry.actor == CLOSER,
                AuditEntry.action.in_(["month.close", "webhook.create"]),
            )
        )
        db.session.commit()
        db.session.remove()


def pages(s: Subjects) -> list[tuple[str, str, list[str]]]:
    """(role, bench account, paths): every page as the System-Admin, and those the
    Company-Admin of the largest company may open."""
    c = urllib.parse.quote(s.company)
    dialcode, number = (urllib.parse.quote(k) for k in s.ddi)
    edit = f"/ddis/{dialcode}/{number}/edit"
    ddi_page = f"/ddis/{dialcode}/{number}"  # its intervals and audit entries
    # The audit log (bench.audit_log: an entry per change of the history, about 3 million),
    # and its record filter with a number written as people write it.
    typed = urllib.parse.quote_plus(f"+{s.ddi[0]} {s.ddi[1]}")
    audit = ["/audit", f"/audit?target={typed}", f"/audit?company={c}"]
    records = [
        "/ddis",
        "/users",
        f"/ddis?company={c}",
        f"/ddis?q={NUMBER_QUERY}",
        f"/ddis?sort=virt_exten&company={c}",
        # The list in another state (docs/pages.md, "State filter"): a Company-Admin's
        # reservations, one range per company; the System-Admin's below.
        "/ddis?state=reserved",
    ]
    # The lifecycle's pages on the stock (_stock_for_the_run): the list by state, by
    # dialcode and prefix, and every state at once, each a keyset range of the page's size;
    # a reserved number's page.
    stock_prefix = STOCK_FIRST[:5]
    lifecycle = [f"/ddis?state=reserved&company={c}", f"/ddis/{STOCK_DIALCODE}/{s.reserved}"]
    system_admin = [
        *records,
        *lifecycle,
        "/ddis?state=available",
        f"/ddis?state=available&dialcode={STOCK_DIALCODE}&number={stock_prefix}",
        "/ddis?state=aging",
        f"/ddis?state=all&company={c}",
        "/ddis?state=all",
        f"/ddis?state=all&dialcode={STOCK_DIALCODE}&number={stock_prefix}",
        "/ddis/stock",
        f"/ddis/free?dialcode={STOCK_DIALCODE}&prefix={stock_prefix}&count=100",
        "/ddis/new",
        "/users/new",
        edit,
        ddi_page,
        "/ddis/import",
        "/reports/ddis",
        "/reports/users",
        f"/reports/ddis?company={c}",
        # A day's drill-down: its summary, the first page of its changes and of the records
        # active all day; then a later page of each (a page past the end is the last one).
        f"/reports/ddis/day?company={c}&date={s.day}",
        f"/reports/ddis/day?company={c}&date={s.day}&changes=2&page=300",
        # The last ended month, closed: its reports read the stored figures; the changes since
        # the close (a fragment the report page loads after itself) recompute the month.
        "/reports/months",
        f"/reports/ddis?year={s.closed[0]}&month={s.closed[1]}",
        f"/reports/users?year={s.closed[0]}&month={s.closed[1]}",
        f"/reports/months/{s.closed[0]:04d}-{s.closed[1]:02d}/reopen",
        f"/reports/months/{s.closed[0]:04d}-{s.closed[1]:02d}/changes?kind=ddi",
        "/admin/companies",
        # Sorted by a count (the rollup's, one seek per company), and its second page.
        "/admin/companies?sort=ddis&dir=desc",
        "/admin/companies?sort=users&dir=asc&page=2",
        f"/companies/{c}",
        "/admin/accounts",
        "/admin/accounts/new",
        f"/admin/accounts/{urllib.parse.quote(COMPANY_ADMIN)}/grants",
        *audit,
        f"/audit?company={urllib.parse.quote(s.small_company)}",
        "/audit?actor=api-operator-3",
        "/audit?last=1",
        # The action filter: a common action (a million entries) and a rare one (one index
        # range each).
        "/audit?action=ddi.delete",
        "/audit?action=month.close",
        "/accounts/suggest?q=bench",
        "/account/tokens",
        "/companies/suggest?for=records&q=c0",
        *SEARCHES,
        "/admin/webhooks",
        f"/admin/webhooks/{s.webhook}",
        f"/admin/webhooks/{s.webhook}/edit",
    ]
    company_admin = [
        *records,
        *lifecycle,
        "/users/new",
        edit,
        ddi_page,
        f"/companies/{c}",
        *audit,
        "/audit?action=month.close",  # a rare action (none of the company's)
        # A common action of the log, and an actor with no entry of the company: each one
        # range per company and side (migration 0018), not the action's or company's whole.
        "/audit?action=ddi.delete",
        "/audit?actor=cli",
        "/accounts/suggest?q=bench",
        "/account/tokens",
        *ADMIN_SEARCHES,
    ]
    return [
        ("System-Admin", SYSADMIN, system_admin),
        (f"Company-Admin of {s.company}", COMPANY_ADMIN, company_admin),
    ]


class Client:
    """One signed-in visitor: its cookies, kept up to date as a browser would (a form page
    stores its CSRF token in the session), and one request at a time."""

    def __init__(self, port: int, cookie: str):
        self.port = port
        jar: SimpleCookie = SimpleCookie()
        jar.load(cookie)
        self.cookies = {name: morsel.value for name, morsel in jar.items()}

    def get(self, path: str) -> tuple[int, bytes, float]:
        """Status, body and milliseconds from opening the connection to the body's last byte."""
        headers = {
            "Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()),
            "Accept": "text/html",
            "Connection": "close",  # gunicorn's sync workers close it anyway
        }
        started = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WORKER_TIMEOUT + 30)
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            body = response.read()
        finally:
            conn.close()
        elapsed = (time.perf_counter() - started) * 1000
        for header in response.headers.get_all("Set-Cookie") or []:
            jar: SimpleCookie = SimpleCookie()
            jar.load(header)
            self.cookies.update({name: morsel.value for name, morsel in jar.items()})
        return response.status, body, elapsed


def p95(times: list[float]) -> float:
    """The nearest-rank 95th percentile: of 30 requests, the second slowest."""
    ordered = sorted(times)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _routed(routes: MapAdapter, path: str) -> bool:
    """Whether some route of the app matches the path (a 404 then is the page's own answer)."""
    from werkzeug.exceptions import HTTPException, NotFound

    try:
        routes.match(urllib.parse.urlsplit(path).path, method="GET")
    except NotFound:
        return False
    except HTTPException:  # a redirect (trailing slash) or 405: a route is there
        return True
    return True


def _measure(
    db: str, client: Client, role: str, path: str, routes: MapAdapter, s: Settings
) -> Result:
    name = f"page {path} as {role}"
    status, body, _ = client.get(path)
    if status == 404 and not _routed(routes, path):
        return Result(db, name, 0.0, BUDGET_MS, "page budget", "ms", note="not built (404)")
    if status != 200:
        raise RuntimeError(f"{path} as {role} answered {status}: {body[:300]!r}")
    for _ in range(s.warmup - 1):
        client.get(path)
    times: list[float] = []
    size = 0
    started = time.monotonic()
    while len(times) < s.requests:
        status, body, ms = client.get(path)
        if status != 200:
            raise RuntimeError(f"{path} as {role} answered {status} after the warm-up.")
        times.append(ms)
        size = max(size, len(body))
        if len(times) >= MIN_REQUESTS and time.monotonic() - started > PAGE_SECONDS:
            break
    taken = "" if len(times) == s.requests else f", {len(times)} requests"
    return Result(
        db,
        f"{name}: p95; p50 {statistics.median(times):,.1f} ms, {kilobytes(size)}{taken}",
        p95(times),
        BUDGET_MS,
        "page budget",
        "ms",
        absolute_target=BUDGET_MS,
        size=size,
        size_budget=BUDGET_BYTES,
    )


def page_scenarios(database_url: str, quick: bool = False) -> list[Result]:
    """One Result per page and role, on `database_url` (a generated bench data set).

    quick: 3 timed requests a page, for the smoke test; every page is still opened.
    """
    from sqlalchemy.engine import make_url

    settings = QUICK if quick else FULL
    db = make_url(database_url).get_backend_name()
    subjects, routes = _prepare(database_url)
    results: list[Result] = []
    with contextlib.ExitStack() as undo, tempfile.TemporaryDirectory(prefix="bench-pages-") as tmp:
        undo.callback(_reopen_after, database_url, *subjects.closed)
        log_dir = Path(tmp)
        env = app_env(database_url, log_dir)
        app = gunicorn_server("app", "app:app", env, log_dir, timeout=WORKER_TIMEOUT)
        with running([app]):
            for role, account, paths in pages(subjects):
                client = Client(app.port, sign_in(app.base, account))
                for path in paths:
                    results.append(_measure(db, client, role, path, routes, settings))
                    row = results[-1]
                    figure = row.note or f"{row.app:.1f} ms p95"
                    print(f"  {row.scenario.split(':')[0]}: {figure}", file=sys.stderr, flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    import argparse

    from . import use_bench_database
    from .table import render

    parser = argparse.ArgumentParser(description="The page scenario of make bench.")
    parser.add_argument("--quick", action="store_true", help="3 requests a page, smoke test")
    args = parser.parse_args(argv)
    print(render(page_scenarios(use_bench_database(), quick=args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
