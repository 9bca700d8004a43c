"""Time the list pages: python -m bench.list_page [--requests 50] [--sort number]

Signs in through /login with the Flask test client (in process, no network) as a Company-Admin
of the largest company and of a median-sized one (accounts made through the accounts service,
and reused on later runs), and as a System-Admin; then times the first page of /ddis and
/users (`?company=X` for the Company-Admins, unscoped for the System-Admin) and the last page,
reached through the page's own `a[rel=last]` link. Prints the median and 90th percentile of
each. Reads DATABASE_URL (default bench.db), made by `python -m bench.generate`.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from html.parser import HTMLParser
from urllib.parse import urlencode

from . import use_bench_database

PASSWORD = "bench list page password"


class _Links(HTMLParser):
    """The href of every <a> by its rel attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.rel: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and a.get("rel") and a.get("href"):
            self.rel.setdefault(a["rel"], a["href"])


def rel_link(html: str, rel: str) -> str | None:
    parser = _Links()
    parser.feed(html)
    return parser.rel.get(rel)


def timed(client, url: str, n: int) -> tuple[list[float], str]:
    times, body = [], ""
    for _ in range(n):
        t0 = time.perf_counter()
        response = client.get(url)
        body = response.get_data(as_text=True)
        times.append((time.perf_counter() - t0) * 1000)
        if response.status_code != 200:
            raise SystemExit(f"{url}: {response.status_code}")
    return times, body


def sign_in(app, username: str):
    client = app.test_client()
    page = client.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page).group(1)
    response = client.post(
        "/login", data={"csrf_token": token, "username": username, "password": PASSWORD}
    )
    if response.status_code != 302:
        raise SystemExit(f"could not sign in as {username}")
    return client


def ensure_account(username: str, **grants) -> None:
    from webapp.access import Principal
    from webapp.errors import Conflict
    from webapp.services.identity import accounts

    try:
        accounts.create(Principal.cli("bench"), username, PASSWORD, **grants)
    except Conflict:
        accounts.reset_password(Principal.cli("bench"), username, PASSWORD)


def pick_companies(db) -> list[tuple[str, str, int]]:
    """(label, company, DDIs): the largest company and the median one by DDI count."""
    from sqlalchemy import func, select

    from webapp.models import Ddi

    sizes = db.session.execute(
        select(Ddi.company, func.count()).group_by(Ddi.company).order_by(func.count(), Ddi.company)
    ).all()
    if not sizes:
        raise SystemExit("no DDIs: run python -m bench.generate first")
    largest, median = sizes[-1], sizes[len(sizes) // 2]
    return [("largest", largest[0], largest[1]), ("typical", median[0], median[1])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50, help="requests per page (50)")
    parser.add_argument("--sort", help="a column to sort by (default: the key order)")
    parser.add_argument("--desc", action="store_true", help="sort descending")
    args = parser.parse_args(argv)
    use_bench_database()

    from webapp import create_app
    from webapp.extensions import db

    app = create_app()
    with app.app_context():
        companies = pick_companies(db)
        for label, company, _ in companies:
            ensure_account(f"bench-{label}", admin_of=[company])
        ensure_account("bench-root", system_admin=True)
        backend = db.engine.url.get_backend_name()
        db.session.remove()
    sort = {"sort": args.sort, "dir": "desc" if args.desc else "asc"} if args.sort else {}
    cases = [
        (f"bench-{label}", f"{label} ({company}, {size:,} DDIs)", {"company": company})
        for label, company, size in companies
    ] + [("bench-root", "System-Admin, every company", {})]
    print(f"{backend}, {args.requests} requests per page, ms")
    print(f"{'view':<44} {'page':<7} {'first p50':>9} {'p90':>7} {'last p50':>9} {'p90':>7}")
    for username, label, query in cases:
        client = sign_in(app, username)
        for path in ("/ddis", "/users"):
            url = f"{path}?{urlencode({**query, **sort})}" if query or sort else path
            client.get(url)  # warm the caches once
            first, body = timed(client, url, args.requests)
            last_url = rel_link(body, "last")
            last = timed(client, last_url, args.requests)[0] if last_url else first
            print(
                f"{label:<44} {path:<7} {statistics.median(first):9.1f} "
                f"{statistics.quantiles(first, n=10)[-1]:7.1f} {statistics.median(last):9.1f} "
                f"{statistics.quantiles(last, n=10)[-1]:7.1f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
