"""Fixtures: one fresh database per test run (SQLite by default, PostgreSQL when
TEST_DATABASE_URL is set), migrated once with Alembic, emptied as every test starts."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from flask import current_app, g
from sqlalchemy import Engine, event
from sqlalchemy.engine import make_url
from werkzeug.serving import make_server

from webapp import create_app
from webapp.config import parse_networks
from webapp.database import utcnow
from webapp.extensions import db, limiter
from webapp.models import EventCounter, RollupState
from webapp.observability import logs

from . import snapshots
from .commands import run_in_process, run_process
from .databases import postgres_database
from .factories import BASIC_ROLES, COMPANIES, Factory, World

PG_URL = os.environ.get("TEST_DATABASE_URL", "").strip()
BACKEND = "postgresql" if PG_URL else "sqlite"


@event.listens_for(Engine, "connect")
def _sync_sqlite_at_checkpoints(dbapi_connection, _record) -> None:
    """A test database is thrown away after the run, so it need not survive the machine
    crashing: with synchronous=NORMAL, SQLite in WAL mode syncs at checkpoints instead of on
    every commit (about 2 ms each here, tens of thousands of commits a run). Nothing else the
    app does changes."""
    if isinstance(dbapi_connection, sqlite3.Connection):
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()


def pytest_collection_modifyitems(config, items):
    """`make test` runs the suite twice, on SQLite and then on PostgreSQL: what does not
    depend on the database (the bench smoke run on its own SQLite files, the pages' axe
    checks, the style sheets) runs in the first pass only, so CI does not pay for it twice.
    So do the real-browser tests (tests/browser/): what they test is the browser's side of
    the pages (scripts, htmx swaps, focus, layout), and every page's server side, the same
    requests, runs on both databases in the in-process tests."""
    if not PG_URL:
        return
    skip = pytest.mark.skip(reason="database-independent: run in the SQLite pass of make test")
    browser = Path(__file__).parent / "browser"
    for item in items:
        if item.get_closest_marker("database_independent") or browser in item.path.parents:
            item.add_marker(skip)


def pytest_report_header(config):
    return f"database: {BACKEND}" + (f" ({make_url(PG_URL).render_as_string()})" if PG_URL else "")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    stats = terminalreporter.stats
    counts = {k: len(stats.get(k, [])) for k in ("passed", "failed", "error", "skipped")}
    terminalreporter.write_line(
        f"database {BACKEND}: {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['error']} errors, {counts['skipped']} skipped"
    )


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """A database of this run's own, dropped at the end whatever happened."""
    if not PG_URL:
        with tempfile.TemporaryDirectory(prefix="telephony-test-") as tmp:
            yield f"sqlite:///{Path(tmp) / 'test.db'}"
        return
    with postgres_database(PG_URL, "telephony_test") as url:
        yield url


@pytest.fixture(scope="session")
def test_config(database_url, tmp_path_factory) -> dict:
    return {
        "TESTING": True,
        "SECRET_KEY": "test-secret-key-not-for-production",
        "SQLALCHEMY_DATABASE_URI": database_url,
        "RATELIMIT_STORAGE_URI": "memory://",
        # scrypt costs 0.1 s a hash; the suite makes thousands of accounts.
        "PASSWORD_HASH_METHOD": "pbkdf2:sha256:1000",
    }


@pytest.fixture(scope="session")
def migrated(test_config, tmp_path_factory) -> str:
    """The schema, built by the real Alembic migrations (not create_all)."""
    from flask_migrate import upgrade

    os.environ["INSTANCE_PATH"] = str(tmp_path_factory.mktemp("instance"))
    app = create_app(test_config)
    with app.app_context():
        upgrade()
        db.engine.dispose()
    url = test_config["SQLALCHEMY_DATABASE_URI"]
    if not PG_URL:
        _keep_sqlite_open(make_url(url).database or "")
    return url


_KEEPERS: list[sqlite3.Connection] = []


def _keep_sqlite_open(path: str) -> None:
    """One idle connection to the test database for the whole run. Each test ends by closing
    its pool's connection (app fixture), and SQLite's last connection to a database in WAL mode
    to close checkpoints the log and deletes it: 15 to 20 ms a test, a minute of a run. While
    this one stays open no other is the last. It reads once, so that it takes part in the WAL
    (its shared lock on the -shm file, which is what the closing ones see), and holds no other
    lock: idle, it blocks no writer."""
    keeper = sqlite3.connect(path, check_same_thread=False)
    keeper.execute("SELECT count(*) FROM sqlite_master").fetchall()
    _KEEPERS.append(keeper)


def empty_all_tables() -> None:
    """Every table empty, and the (empty) report rollup marked built as a fresh migration
    leaves it, so tests exercise the rollup unless they change REPORT_TIMEZONE."""
    zone = current_app.config["REPORT_TIMEZONE"]
    left = {
        # The one row migration 0013 puts in event_counter (events get their ids from it).
        EventCounter.__table__: [{"id": 1, "last_id": 0}],
        RollupState.__table__: [
            {"kind": k, "timezone": zone, "built_at": utcnow()} for k in ("ddi", "user")
        ],
    }
    with db.engine.begin() as conn:
        snapshots.delete_rows(conn, db.metadata.sorted_tables)
        for table, rows in left.items():
            conn.execute(table.insert(), rows)
    snapshots.mark_emptied({table.name: len(rows) for table, rows in left.items()})


def _isolate_requests(app) -> None:
    """Tests keep an app context pushed, and Flask reuses it for test-client requests, so `g`
    (where flask-login caches the user) and the database session would outlive a request.
    In production every request has its own context; make test requests behave the same."""

    def fresh():
        for cached in ("_login_user", "csrf_token"):  # flask-login's user, flask-wtf's token
            g.pop(cached, None)
        db.session.remove()

    def ended(_exc):
        fresh()
        # flask-wtf's mark that CSRFProtect checked this request's token, which a form's own
        # check trusts: left over, it would pass a forged token in the next request. Cleared
        # only at the end, as it is set by CSRFProtect's own before_request.
        g.pop("csrf_valid", None)

    app.before_request(fresh)
    app.teardown_request(ended)


@pytest.fixture(scope="session")
def shared_app(migrated, test_config):
    """One app for the whole run: building one costs about 40 ms (Werkzeug compiles every
    route), which thousands of tests would pay again and again. Each test gets it with the
    configuration it started with (`app`); a test that needs other settings at creation builds
    its own (observability.other_apps)."""
    app = create_app(dict(test_config))
    _isolate_requests(app)
    # The process-wide state create_app sets, which another app made in a test replaces.
    app.extensions["test.limiter_state"] = dict(vars(limiter))
    return app


@pytest.fixture
def app(shared_app):
    app = shared_app
    config = dict(app.config)
    vars(limiter).update(app.extensions["test.limiter_state"])
    logs.configure(config["LOG_LEVEL"], config["LOG_FORMAT"])
    # Rate-limit counters live in the process-wide limiter: each test starts from zero.
    limiter.reset()
    try:
        with app.app_context():
            # Emptied as each test starts, not again as it ends: only the next test (this
            # worker's, on this worker's database) would see what it left.
            empty_all_tables()
            yield app
            db.session.remove()
            # On SQLite each test opens its own connection (one loads the planner's statistics
            # when it opens, which some tests change); on PostgreSQL, whose statistics are the
            # server's, the connection stays in the pool for the next test: a new one costs a
            # backend's start and its catalog reads of every table the emptying touches.
            if not PG_URL:
                db.engine.dispose()
    finally:
        # What a test changed in the configuration ends with it.
        app.config.clear()
        app.config.update(config)


LOOPBACK = "127.0.0.0/8"


@pytest.fixture
def allow_loopback_webhooks(app) -> None:
    """Webhooks may target 127.0.0.0/8 (WEBHOOK_ALLOW_NETWORKS), where the tests' receivers
    listen; without this fixture loopback is refused, as by default in production. A module
    whose webhooks go to 127.0.0.1 asks for it with
    `pytestmark = pytest.mark.usefixtures("allow_loopback_webhooks")`."""
    app.config["WEBHOOK_ALLOW_NETWORKS"] = parse_networks(LOOPBACK)


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def factory(app) -> Factory:
    return Factory(app)


@pytest.fixture
def world_companies() -> dict[str, str]:
    """The companies of `world` (id -> name); a module overrides this to narrow them."""
    return dict(COMPANIES)


@pytest.fixture
def world_accounts() -> dict[str, str]:
    """The accounts of `world` (username -> role of factories.ROLES); overridable per module."""
    return {role: role for role in BASIC_ROLES}


@pytest.fixture
@snapshots.kept
def world(factory, world_companies, world_accounts) -> World:
    """The shared world: the companies and one account (with an API token) per role.
    Modules needing records build on it by defining `world(world)` themselves."""
    return World.build(factory, world_companies, world_accounts)


@contextmanager
def serving(server) -> Iterator[str]:
    """Run a socketserver-style server (Werkzeug's, http.server's) in a thread; yields its
    base URL, and shuts it down and closes its socket on the way out."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def serve_app(app) -> contextlib.AbstractContextManager[str]:
    """An app served by Werkzeug's threaded server on a free loopback port (see `serving`)."""
    return serving(make_server("127.0.0.1", 0, app, threaded=True))


@pytest.fixture
def live_server(app) -> Iterator[str]:
    """The app served by Werkzeug's threaded server on a free loopback port."""
    with serve_app(app) as base:
        yield base


def _commands(app, tmp_path, run: Callable[..., Any]) -> Callable[..., Any]:
    """`run(ARGS, env, stdin)` on the test database, with the environment a deployment's
    commands get (what `flask` and `flask_process` share)."""
    env = {
        "DATABASE_URL": app.config["SQLALCHEMY_DATABASE_URI"],
        "INSTANCE_PATH": str(tmp_path / "instance"),
        # The app's: a deployment's commands and server share it (webhook secrets are
        # sealed with a key derived from it).
        "SECRET_KEY": app.config["SECRET_KEY"],
    }

    def run_flask(*args: str, stdin: str | None = None, **settings: str) -> Any:
        """`settings`: more environment variables (LOG_LEVEL="DEBUG")."""
        db.session.rollback()  # let the command see and write a fresh state
        # The webhook targets the test allows (allow_loopback_webhooks), as when it runs.
        allowed = app.config.get("WEBHOOK_ALLOW_NETWORKS") or ()
        allow = {"WEBHOOK_ALLOW_NETWORKS": ",".join(map(str, allowed))}
        return run(args, {**env, **allow, **settings}, stdin)

    return run_flask


@pytest.fixture
def flask(app, tmp_path):
    """Run `flask --app app ARGS…` against the test database, in this process
    (commands.run_in_process: Click drives Flask's command line on a fresh app built from
    the environment, as the executable would); returns what the tests read of a
    CompletedProcess: returncode, stdout, stderr (an uncaught exception's traceback
    included, status 1), args. A process costs 1.5 s to start: this is the default."""
    return _commands(app, tmp_path, run_in_process)


@pytest.fixture
def flask_process(app, tmp_path):
    """The same as `flask`, as a real subprocess (CompletedProcess): for the tests whose
    subject is the process itself (the actual executable's exit status and its one line on
    stderr, a process running beside another), which no in-process run can prove."""
    return _commands(app, tmp_path, run_process)
