"""The HTTP scenarios of `make bench`: the app under gunicorn against references served alike.

Every figure comes from a real server: the app (`webapp:create_app()`) and the bare-Flask
references (bench/bare_app.py) each run under gunicorn with 2 sync workers on 127.0.0.1, and
Datasette (SQLite only, when installed: `pip install -e '.[bench]'`) on the same file. All
servers stay up for the whole invocation and the runs are interleaved (app, reference, app,
reference, ...), so a machine that slows down halfway slows both sides of a ratio alike.

- API read: `POST /rest/ops/read` (ddi, scope company, limit 100) with a Company-Admin's Bearer
  token, `wrk` with a few connections; median req/s of the runs after a warm-up.
- List page: `GET /ddis?company=X` with the session cookie of that Company-Admin (signed in
  through the /login form), one connection (`wrk -c1 --latency`), median of the runs' p50.
- Batch create: 1,000-row `POST /rest/ops/create` batches with a System-Admin token from two
  client threads (one per worker); rows/s. The rows are deleted again after each run.

Run it with `python -m bench.http` (DATABASE_URL as for the other bench commands).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.cookiejar import CookieJar
from importlib.util import find_spec
from pathlib import Path

from .table import Result

ROOT = Path(__file__).resolve().parent.parent
LUA = Path(__file__).with_name("request.lua")
WORKERS = 2
READ_LIMIT = 100
READ_MIN_DDIS = 100
BATCH_ROWS = 1000
# Batch rows use dialcodes the generator never does (it uses 44 only), in a company of their
# own, so deleting them afterwards cannot touch generated data.
BATCH_COMPANY = "bench-batch"
APP_DIALCODE, BARE_DIALCODE = "999", "998"
SYSADMIN, COMPANY_ADMIN = "bench-sysadmin", "bench-company-admin"
PASSWORD = "bench-password-not-secret"
# The bench server must never answer 429: the limiter stays on (its cost is part of the app's
# figure, as in production), with a bound no run can reach.
UNLIMITED = "1000000000 per minute"


@dataclass(frozen=True)
class Settings:
    duration: float  # seconds per wrk run
    runs: int  # measured runs per figure, after one warm-up
    connections: int  # wrk connections for the throughput scenarios
    batches: int  # 1,000-row batches per batch-create run


FULL = Settings(duration=5, runs=3, connections=8, batches=10)
QUICK = Settings(duration=1, runs=1, connections=4, batches=2)


def datasette_installed() -> bool:
    """Whether Datasette, the optional SQLite reference, can be started."""
    return find_spec("datasette") is not None


# --- principals and data -------------------------------------------------------------------
@dataclass
class Setup:
    sysadmin_token: str
    admin_token: str
    token_ids: list[int]
    read_company: str
    read_ddis: int
    list_company: str
    list_ddis: int


def ensure_account(operator, username: str, **grants) -> None:
    """Create the account with the bench password, or reset an existing one to it and its grants,
    so repeated runs on one database reuse the same accounts."""
    from webapp.errors import Conflict
    from webapp.services.identity import accounts

    try:
        accounts.create(operator, username, PASSWORD, **grants)
    except Conflict:
        accounts.set_grants(
            operator,
            username,
            system_admin=grants.get("system_admin", False),
            admin_of=grants.get("admin_of", ()),
            billing_summary=False,
            reporting_for=(),
        )
        accounts.reset_password(operator, username, PASSWORD)


def _prepare(database_url: str) -> Setup:
    """Pick the companies, create the accounts and tokens through the services (audited, as an
    operator at the command line would)."""
    from sqlalchemy import func, select

    from webapp import create_app
    from webapp.access import Principal
    from webapp.errors import Conflict
    from webapp.extensions import db
    from webapp.models import ApiToken, Company, Ddi
    from webapp.services import companies
    from webapp.services.identity import api_tokens

    app = create_app(
        {"SQLALCHEMY_DATABASE_URI": database_url, "SECRET_KEY": "bench-secret-key-not-secret"}
    )
    operator = Principal.cli("cli:bench")
    with app.app_context():
        sizes = db.session.execute(
            select(Ddi.company, func.count()).group_by(Ddi.company).order_by(func.count().desc())
        ).all()
        if not sizes or sizes[0][1] < READ_MIN_DDIS:
            raise RuntimeError(f"The bench needs a company with at least {READ_MIN_DDIS} DDIs.")
        list_company, list_ddis = sizes[0]
        # The read: a company of ordinary size that fills the page (the smallest with >= 100),
        # rather than the largest, whose count(*) would dominate.
        read_company, read_ddis = min(
            ((c, n) for c, n in sizes if n >= READ_MIN_DDIS), key=lambda cn: (cn[1], cn[0])
        )
        db.session.rollback()
        if db.session.get(Company, BATCH_COMPANY) is None:
            with contextlib.suppress(Conflict):
                companies.create(operator, BATCH_COMPANY, "Bench batch creates")
        ensure_account(operator, SYSADMIN, system_admin=True)
        ensure_account(operator, COMPANY_ADMIN, admin_of=sorted({read_company, list_company}))
        sysadmin_token = api_tokens.create(operator, SYSADMIN, "bench")
        admin_token = api_tokens.create(operator, COMPANY_ADMIN, "bench")
        token_ids = list(
            db.session.scalars(
                select(ApiToken.id).where(
                    ApiToken.token_hash.in_(
                        [api_tokens.hash_token(t) for t in (sysadmin_token, admin_token)]
                    )
                )
            )
        )
        db.session.remove()
    return Setup(
        sysadmin_token, admin_token, token_ids, read_company, read_ddis, list_company, list_ddis
    )


def _revoke(database_url: str, token_ids: list[int]) -> None:
    """Revoke this run's tokens: a bench leaves no working credentials behind."""
    from webapp import create_app
    from webapp.access import Principal
    from webapp.extensions import db
    from webapp.services.identity import api_tokens

    app = create_app(
        {"SQLALCHEMY_DATABASE_URI": database_url, "SECRET_KEY": "bench-secret-key-not-secret"}
    )
    with app.app_context():
        for token_id in token_ids:
            api_tokens.revoke(Principal.cli("cli:bench"), token_id)
        db.session.remove()


# --- servers -------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A server process in its own process group, started, awaited and always stopped."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], port: int, log_dir: Path):
        self.name, self.argv, self.env, self.port = name, argv, env, port
        self.log = log_dir / f"{name}.log"
        self.base = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> None:
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # so stop() can reach the workers too, and only them
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited at start:\n{self.log.read_text()[-3000:]}")
            try:
                # The URL is always http://127.0.0.1:<port>, built here.
                with urllib.request.urlopen(self.base + "/", timeout=2):  # noqa: S310
                    return
            except urllib.error.HTTPError:
                return  # any HTTP answer (404, a redirect to /login) means it is serving
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not answer within {timeout:.0f} s")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        # SIGTERM: gunicorn stops its workers and exits; uvicorn (Datasette) exits.
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)


def gunicorn_server(
    name: str, factory: str, env: dict[str, str], log_dir: Path, *, timeout: int | None = None
) -> Server:
    """`factory` under gunicorn with the bench's sync workers on a free loopback port.
    timeout: gunicorn's worker timeout in seconds (its default, 30, when None)."""
    port = _free_port()
    # --threads 1: sync workers, as the results were measured, though gunicorn.conf.py (read
    # from the working directory) defaults to threads.
    argv = [sys.executable, "-m", "gunicorn", "--workers", str(WORKERS), "--threads", "1"]
    if timeout is not None:
        argv += ["--timeout", str(timeout)]
    argv += ["--bind", f"127.0.0.1:{port}", "--log-level", "warning", factory]
    return Server(name, argv, env, port, log_dir)


# --- load generation -----------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    requests_per_s: float
    p50_ms: float


def _ms(value: str, unit: str) -> float:
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}[unit]


def wrk(
    url: str,
    duration: float,
    connections: int,
    *,
    method: str = "GET",
    body: str = "",
    token: str = "",
    cookie: str = "",
) -> Run:
    """One wrk run; fails on any non-2xx/3xx answer or socket error, which would make the
    figure meaningless (a fast 401 or 429 is not a fast read)."""
    threads = max(1, min(connections, 2))
    env = {
        **os.environ,
        "BENCH_METHOD": method,
        "BENCH_BODY": body,
        "BENCH_TOKEN": token,
        "BENCH_COOKIE": cookie,
    }
    # wrk takes whole seconds only.
    seconds = max(1, round(duration))
    argv = ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s"]
    argv += ["--latency", "-s", str(LUA), url]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=seconds + 60)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    out = done.stdout
    if "Non-2xx or 3xx responses" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw failed requests on {url}:\n{out}")
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p50 = re.search(r"^\s+50%\s+([\d.]+)(us|ms|s|m)\s*$", out, re.MULTILINE)
    if not rps or not p50:
        raise RuntimeError(f"Could not read wrk's output:\n{out}")
    return Run(float(rps.group(1)), _ms(*p50.groups()))


def _fetch(url: str, *, body: object = None, token: str = "", cookie: str = "") -> bytes:
    """One request with urllib, for the checks before the timed runs."""
    headers = {}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if cookie:
        headers["Cookie"] = cookie
    # Only ever http://127.0.0.1 URLs of the servers started here.
    request = urllib.request.Request(url, data=data, headers=headers)  # noqa: S310
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
        return response.read()


Measure = Callable[[float], Run]  # one run of the given duration


def _interleaved(settings: Settings, measures: dict[str, Measure]) -> dict[str, list[Run]]:
    """A warm-up of each, then the measured runs in turn, so drift hits every figure alike."""
    for measure in measures.values():
        measure(max(1.0, settings.duration / 2))
    runs: dict[str, list[Run]] = {name: [] for name in measures}
    for _ in range(settings.runs):
        for name, measure in measures.items():
            runs[name].append(measure(settings.duration))
    return runs


def _median(runs: list[Run], field: str) -> float:
    return statistics.median(getattr(r, field) for r in runs)


# --- scenarios -----------------------------------------------------------------------------
def _read_scenario(
    db: str, s: Settings, setup: Setup, app: Server, bare: Server, datasette: Server | None
) -> list[Result]:
    body = {
        "type": "ddi",
        "scope": {"company": setup.read_company},
        "limit": READ_LIMIT,
        "offset": 0,
    }
    answer = json.loads(_fetch(app.base + "/rest/ops/read", body=body, token=setup.admin_token))
    reference = json.loads(_fetch(bare.base + "/read", body=body))
    if answer["values"] != reference["values"] or answer["total"] != reference["total"]:
        raise RuntimeError("The app and the bare-Flask read disagree; the comparison is void.")
    rows = answer["numrows"]
    encoded = json.dumps(body)
    measures = {
        "app": lambda d: wrk(
            app.base + "/rest/ops/read",
            d,
            s.connections,
            method="POST",
            body=encoded,
            token=setup.admin_token,
        ),
        "bare": lambda d: wrk(bare.base + "/read", d, s.connections, method="POST", body=encoded),
    }
    if datasette is not None:
        # One statement, so the count rides along as an uncorrelated subquery SQLite runs once:
        # the same two lookups the app makes.
        sql = (
            "select dialcode, number, virt_exten, company, "
            "(select count(*) from ddis where company = :company) as total "
            "from ddis where company = :company order by dialcode, number limit :limit"
        )
        query = urllib.parse.urlencode(
            {"sql": sql, "company": setup.read_company, "limit": READ_LIMIT, "_shape": "objects"}
        )
        ds_url = f"{datasette.base}/{datasette.name_of_db}.json?{query}"  # type: ignore[attr-defined]
        ds_rows = json.loads(_fetch(ds_url))["rows"]
        if [r["number"] for r in ds_rows] != [v["number"] for v in answer["values"]]:
            raise RuntimeError("Datasette and the app read different rows.")
        measures["datasette"] = lambda d: wrk(ds_url, d, s.connections)
    runs = _interleaved(s, measures)
    name = (
        f"API read, company {setup.read_company} ({setup.read_ddis:,} DDIs), {rows} rows, "
        f"{s.connections} conns"
    )
    app_rps = _median(runs["app"], "requests_per_s")
    results = [
        Result(
            db,
            name,
            app_rps,
            _median(runs["bare"], "requests_per_s"),
            "bare Flask",
            "req/s",
            target=0.6,
            higher_is_better=True,
        ),
    ]
    if "datasette" in runs:
        results.append(
            Result(
                db,
                name,
                app_rps,
                _median(runs["datasette"], "requests_per_s"),
                "Datasette",
                "req/s",
                target=3.0,
                higher_is_better=True,
            )
        )
    return results


def sign_in(base: str, username: str) -> str:
    """Sign in through the real /login form (GET for its CSRF token, then POST) and return the
    Cookie header a browser would send afterwards."""
    from bs4 import BeautifulSoup

    jar = CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(base + "/login", timeout=30) as response:
        soup = BeautifulSoup(response.read(), "html.parser")
    field = soup.select_one("input[name=csrf_token]")
    if field is None:
        raise RuntimeError("The sign-in form has no csrf_token field.")
    form = urllib.parse.urlencode(
        {"csrf_token": field["value"], "username": username, "password": PASSWORD}
    ).encode()
    with opener.open(base + "/login", data=form, timeout=30) as response:
        landed = response.geturl()
    if urllib.parse.urlsplit(landed).path == "/login":
        raise RuntimeError(f"Signing in as {username} failed.")
    cookie = "; ".join(f"{c.name}={c.value}" for c in jar)
    if "session=" not in cookie:
        raise RuntimeError("Signed in, but no session cookie came back (Secure-only cookies?).")
    return cookie


def _rows_on(html: bytes) -> int:
    from bs4 import BeautifulSoup

    return len(BeautifulSoup(html, "html.parser").select("table tbody tr"))


def _last_page_url(base: str, first_url: str, html: bytes) -> str:
    """The pager's rel=last link; without one (offset paging, which only links prev/next), the
    rel=next link with the page number the "Page 1 of N" text names."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    if (last := soup.select_one("a[rel~=last]")) is not None:
        return urllib.parse.urljoin(first_url, last["href"])
    nxt = soup.select_one("a[rel~=next]")
    pages = re.search(r"Page\s+\d+\s+of\s+([\d,]+)", soup.get_text(" "))
    if nxt is None or pages is None:
        raise RuntimeError("The first list page links to no last page.")
    parts = urllib.parse.urlsplit(urllib.parse.urljoin(first_url, nxt["href"]))
    query = dict(urllib.parse.parse_qsl(parts.query))
    query["page"] = pages.group(1).replace(",", "")
    return parts._replace(query=urllib.parse.urlencode(query)).geturl()


def _list_scenario(db: str, s: Settings, setup: Setup, app: Server, bare: Server) -> list[Result]:
    cookie = sign_in(app.base, COMPANY_ADMIN)
    company = urllib.parse.quote(setup.list_company)
    first_url = f"{app.base}/ddis?company={company}"
    first_html = _fetch(first_url, cookie=cookie)
    if _rows_on(first_html) != 50:
        raise RuntimeError(f"The first list page shows {_rows_on(first_html)} rows, not 50.")
    last_url = _last_page_url(app.base, first_url, first_html)
    # Offset paging ends on the remainder, keyset paging on the last 50: either is a page.
    last_rows = _rows_on(_fetch(last_url, cookie=cookie))
    if not 0 < last_rows <= 50 or last_url == first_url:
        raise RuntimeError(f"The last list page ({last_url}) shows {last_rows} rows.")
    bare_url = f"{bare.base}/list?company={company}"
    if _rows_on(_fetch(bare_url)) != 50:
        raise RuntimeError("The bare-Flask list page does not show 50 rows.")
    # One connection, one request at a time: the latency a person waiting for the page sees.
    runs = _interleaved(
        s,
        {
            "first": lambda d: wrk(first_url, d, 1, cookie=cookie),
            "last": lambda d: wrk(last_url, d, 1, cookie=cookie),
            "bare": lambda d: wrk(bare_url, d, 1),
        },
    )
    first, last = _median(runs["first"], "p50_ms"), _median(runs["last"], "p50_ms")
    where = f"largest company {setup.list_company} ({setup.list_ddis:,} DDIs)"
    return [
        Result(
            db,
            f"list page 1 p50, {where}",
            first,
            _median(runs["bare"], "p50_ms"),
            "bare Flask HTML table",
            "ms",
            absolute_target=50.0,
        ),
        # Same run's first page as the reference; 1.1x leaves room for timer noise.
        Result(
            db, f"list last page p50, {where}", last, first, "page 1, same run", "ms", target=1.1
        ),
    ]


def _batches(dialcode: str, count: int) -> list[bytes]:
    """`count` bodies of 1,000 new DDIs each; the same keys every run (they are deleted after)."""
    bodies = []
    for b in range(count):
        values = [
            {
                "dialcode": dialcode,
                "number": f"7{b:04d}{i:05d}",
                "virt_exten": "100",
                "company": BATCH_COMPANY,
            }
            for i in range(BATCH_ROWS)
        ]
        bodies.append(json.dumps({"type": "ddi", "values": values}).encode())
    return bodies


def _post(port: int, path: str, body: bytes, token: str = "") -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        answer = response.read()
    finally:
        conn.close()
    if response.status != 200:
        raise RuntimeError(f"POST {path} answered {response.status}: {answer[:500]!r}")
    return json.loads(answer)


def _timed_batches(server: Server, path: str, bodies: list[bytes], token: str = "") -> float:
    """Rows per second for all `bodies`, posted by one client thread per worker."""
    started = time.perf_counter()
    with ThreadPoolExecutor(WORKERS) as pool:
        answers = list(pool.map(lambda b: _post(server.port, path, b, token), bodies))
    elapsed = time.perf_counter() - started
    created = sum(a["numrows"] for a in answers)
    if created != len(bodies) * BATCH_ROWS:
        raise RuntimeError(f"{path} created {created} rows, not {len(bodies) * BATCH_ROWS}.")
    return created / elapsed


def _batch_scenario(
    db: str, database_url: str, s: Settings, setup: Setup, app: Server, bare: Server
) -> list[Result]:
    from sqlalchemy import create_engine, text

    engine = create_engine(database_url)

    def clean_app() -> None:
        # Through the API, as the rows were made: history intervals close, audit records it.
        scope = {"company": BATCH_COMPANY, "dialcode": APP_DIALCODE}
        body = json.dumps({"type": "ddi", "scope": scope}).encode()
        _post(app.port, "/rest/ops/delete", body, setup.sysadmin_token)

    def clean_bare() -> None:
        # The reference bypassed the app, so its rows and intervals go the same way, leaving
        # nothing behind (its dialcode is the reference's own).
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM ddis WHERE dialcode = :d"), {"d": BARE_DIALCODE})
            conn.execute(
                text(
                    "DELETE FROM history_intervals WHERE kind = 'ddi' AND key >= :lo AND key < :hi"
                ),
                {"lo": f"{BARE_DIALCODE}:", "hi": f"{BARE_DIALCODE};"},
            )

    app_bodies = _batches(APP_DIALCODE, s.batches)
    bare_bodies = _batches(BARE_DIALCODE, s.batches)
    app_runs, bare_runs = [], []
    try:
        clean_app()  # leftovers of an interrupted earlier run would be 409s
        clean_bare()
        for measured in [False] + [True] * s.runs:  # a one-batch warm-up first
            count = s.batches if measured else 1
            app_rate = _timed_batches(
                app, "/rest/ops/create", app_bodies[:count], setup.sysadmin_token
            )
            clean_app()
            bare_rate = _timed_batches(bare, "/create", bare_bodies[:count])
            clean_bare()
            if measured:
                app_runs.append(app_rate)
                bare_runs.append(bare_rate)
    finally:
        with contextlib.suppress(Exception):
            clean_app()
        clean_bare()
        engine.dispose()
    name = f"API create, {s.batches} batches of {BATCH_ROWS:,} DDIs, {WORKERS} clients"
    return [
        Result(
            db,
            name,
            statistics.median(app_runs),
            statistics.median(bare_runs),
            "bare Flask executemany",
            "rows/s",
            higher_is_better=True,
            absolute_target=5000.0,
        ),
    ]


# --- entry point ---------------------------------------------------------------------------
def app_env(database_url: str, log_dir: Path) -> dict[str, str]:
    """The environment the bench servers run in: the database, a fresh secret, and an instance
    folder of its own under log_dir (the repository's instance/config.py must not change what
    is measured, and the sign-in limit is only settable there), with limits no run can reach."""
    instance = log_dir / "instance"
    instance.mkdir(exist_ok=True)
    (instance / "config.py").write_text(
        f"API_RATE_LIMIT = {UNLIMITED!r}\nSIGN_IN_LIMIT = {UNLIMITED!r}\n"
        f"SIGN_IN_ADDRESS_LIMIT = {UNLIMITED!r}\n"
    )
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "SECRET_KEY": secrets.token_urlsafe(32),
        "INSTANCE_PATH": str(instance),
        "API_RATE_LIMIT": UNLIMITED,
        "HTTPS": "",  # plain http on loopback: the session cookie must not be Secure-only
    }


@contextlib.contextmanager
def running(servers: list[Server]) -> Iterator[list[Server]]:
    """Start every server in turn; stop all of them on the way out whatever happened."""
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in servers:
            server.stop()


@contextlib.contextmanager
def _servers(database_url: str, log_dir: Path) -> Iterator[tuple[Server, Server, Server | None]]:
    """The app, the bare-Flask reference and (SQLite, when installed) Datasette, all stopped on
    the way out whatever happened."""
    env = app_env(database_url, log_dir)
    servers = [
        gunicorn_server("app", "app:app", env, log_dir),  # the production entry (docs/deploy.md)
        gunicorn_server("bare", "bench.bare_app:create_app()", env, log_dir),
    ]
    datasette = None
    if database_url.startswith("sqlite") and datasette_installed():
        path = Path(database_url.removeprefix("sqlite:///"))
        port = _free_port()
        argv = [sys.executable, "-m", "datasette", "serve", str(path), "-h", "127.0.0.1"]
        argv += ["-p", str(port), "--setting", "sql_time_limit_ms", "10000"]
        datasette = Server("datasette", argv, env, port, log_dir)
        datasette.name_of_db = path.stem  # type: ignore[attr-defined]
        servers.append(datasette)
    with running(servers):
        yield servers[0], servers[1], datasette


def http_scenarios(database_url: str, quick: bool = False) -> list[Result]:
    """Run the read, list-page and batch-create scenarios against `database_url` (a generated
    bench database) and return one Result per comparison.

    quick: ~1 s runs, one repetition, two batches, for the smoke test; every code path still
    runs, Datasette included when installed. Needs `wrk` on PATH.
    """
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed (Debian: apt-get install wrk).")
    settings = QUICK if quick else FULL
    from sqlalchemy.engine import make_url

    db = make_url(database_url).get_backend_name()
    setup = _prepare(database_url)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="bench-http-") as tmp,
            _servers(database_url, Path(tmp)) as (app, bare, datasette),
        ):
            results = _read_scenario(db, settings, setup, app, bare, datasette)
            results += _list_scenario(db, settings, setup, app, bare)
            results += _batch_scenario(db, database_url, settings, setup, app, bare)
    finally:
        _revoke(database_url, setup.token_ids)
    return results


def main(argv: list[str] | None = None) -> int:
    import argparse

    from . import use_bench_database
    from .table import render

    parser = argparse.ArgumentParser(description="The HTTP scenarios of make bench.")
    parser.add_argument("--quick", action="store_true", help="1 s runs, for a smoke test")
    args = parser.parse_args(argv)
    print(render(http_scenarios(use_bench_database(), quick=args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
