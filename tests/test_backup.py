"""Backups and restores (docs/backup.md): `flask db backup PATH` on SQLite while the app
serves and writes, the PostgreSQL procedure (pg_dump --format=custom, pg_restore into a fresh
database and over a changed one), each proved by a restored copy whose reports equal the
source's; and the command's refusals.

The world: three companies with DDIs and phone users made through the services, two past
months of history, October 2025 closed (and a late interval since, so its adjustments are not
empty); the copy must answer every report, the closed month's figures and adjustments, exactly
as the source does.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from flask import Flask
from sqlalchemy import event, select, text
from sqlalchemy.engine import make_url

from webapp import create_app
from webapp.access import Principal
from webapp.cli.backup import libpq_url
from webapp.extensions import db, limiter
from webapp.models import Ddi
from webapp.services.billing import month_close

from .commands import Ran, run_in_process
from .conftest import BACKEND, PG_URL
from .databases import postgres_database
from .factories import ACME, GLOBEX, INITECH, World, add_history, snapshot
from .invariants import assert_history_consistent
from .snapshots import kept
from .test_races import post_json
from .waiting import wait_until

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SECRET = "backup-test-secret-key-not-secret"
BUSY = "busy"  # the company the writer thread fills while the backup runs
COMPANIES = (ACME, GLOBEX, INITECH)
REPORTS = ("readDDICount", "readUserCount")
MONTHS: list[dict[str, int]] = [{}, {"year": 2025, "month": 9}, {"year": 2025, "month": 10}]
CLOSED = {"year": 2025, "month": 10}
LEAKS = ("Traceback", 'File "')

needs_sqlite = pytest.mark.skipif(BACKEND != "sqlite", reason="the SQLite online backup")
needs_postgresql = pytest.mark.skipif(
    BACKEND != "postgresql", reason="PostgreSQL's pg_dump/pg_restore: set TEST_DATABASE_URL"
)


@pytest.fixture
@kept
def world(world: World, factory) -> World:
    """The shared world plus DDIs, phone users, two months of history, October 2025 closed and
    an interval imported into it after the close."""
    for i, company in enumerate(COMPANIES):
        for n in range(3 + i):
            factory.ddi("44", f"20700{i}{n:04d}", company, virt_exten=str(100 + n))
        factory.user(f"ana{i}", company)
    add_history(
        ("ddi", ACME, "44:1", datetime(2025, 9, 3, 9), datetime(2025, 10, 14, 17, 30)),
        ("ddi", GLOBEX, "44:2", datetime(2025, 9, 20), datetime(2025, 11, 1)),
        ("ddi", GLOBEX, "44:3", datetime(2025, 10, 16), datetime(2025, 10, 31, 12)),
        ("user", ACME, "bob", datetime(2025, 9, 1), datetime(2025, 10, 5)),
        ("user", INITECH, "cy", datetime(2025, 10, 30, 23), datetime(2025, 11, 2)),
    )
    month_close.close_month(Principal.cli("test"), month_close.MonthRequest(10, 2025))
    add_history(("ddi", INITECH, "44:4", datetime(2025, 10, 2), datetime(2025, 10, 9)))
    return world


def figures(app: Flask, token: str, companies: tuple[str, ...] = COMPANIES) -> dict[str, Any]:
    """What `app` answers a System-Admin for both reports, this month and two past ones (one
    closed), and the closed month's adjustments: the answers a restore must reproduce."""
    client = app.test_client()
    headers = {"Authorization": f"Bearer {token}"}
    out: dict[str, Any] = {}
    for report in REPORTS:
        for month in MONTHS:
            scope = {"company": list(companies), **month}
            response = client.post(
                f"/rest/call/{report}", json={"type": "cdr", "scope": scope}, headers=headers
            )
            assert response.status_code == 200, response.get_json()
            out[f"{report} {month or 'now'}"] = response.get_json()
    response = client.post(
        "/rest/call/readAdjustments",
        json={"type": "cdr", "scope": {"company": list(companies), **CLOSED}},
        headers=headers,
    )
    assert response.status_code == 200, response.get_json()
    out["adjustments"] = response.get_json()
    if companies == COMPANIES:  # the world is what it says
        assert out["adjustments"]["values"], "the late interval should show as an adjustment"
        assert out["readDDICount {'year': 2025, 'month': 10}"]["period"]["closed"] is True
    return out


def app_on(database_url: str, test_config: dict) -> Flask:
    """A new app on another database (a backup, a restored copy), as a restarted server is."""
    limiter.reset()
    return create_app({**test_config, "SQLALCHEMY_DATABASE_URI": database_url})


def dispose(other: Flask) -> None:
    """Close another app's connections (its database may be dropped next)."""
    with other.app_context():
        db.session.remove()
        db.engine.dispose()


def run_cli(database_url: str, *args: str, instance: Path) -> Ran:
    """`flask --app app ARGS…` on `database_url` (a scratch or restored copy; the `flask`
    fixture runs on the test database), in this process as that fixture does
    (commands.run_in_process)."""
    env = {"DATABASE_URL": database_url, "INSTANCE_PATH": str(instance), "SECRET_KEY": SECRET}
    return run_in_process(args, env)


def assert_one_line_error(done: Ran | subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: "), lines
    for word in words:
        assert word in lines[0], lines
    assert not any(leak in done.stderr for leak in LEAKS)


def busy_numbers() -> list[str]:
    db.session.rollback()
    return sorted(db.session.scalars(select(Ddi.number).where(Ddi.company == BUSY)))


# --- SQLite: the online backup while the app writes --------------------------------------------


def _no_checkpoints(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA wal_autocheckpoint=0")
    cursor.close()


@needs_sqlite
def test_a_backup_taken_while_the_app_writes_is_one_consistent_moment(
    app, world, factory, live_server, flask_process, tmp_path, test_config, monkeypatch
):
    """A thread creates DDIs one after another through the served API while `db backup` runs
    as a subprocess (flask_process: a process of its own, as in production, its output free
    of the served app's log lines). The copy holds exactly the first k of them (a consistent
    prefix: no torn write, every DDI with its history, audit entry and event), k between the
    writes done before the command started and those done when it ended; its rollup equals a
    rebuild, its reports for the other companies equal the source's (the writer wrote nothing
    there), the busy company's today is k, and SQLite's integrity_check passes on it.

    The app's connections checkpoint nothing meanwhile, so every write of the test is in the
    -wal file only, the case a copy of the database file alone would get wrong (it would hold
    none of them)."""
    factory.company(BUSY)
    root = world.root
    # The writer goes as fast as the server answers: past API_RATE_LIMIT's 600 a minute when
    # the backup process starts slowly on a busy machine, and a 429 is not what this checks.
    # (The `app` fixture puts the limiter back as it was for the next test.)
    monkeypatch.setattr(limiter, "enabled", False)
    event.listen(db.engine, "connect", _no_checkpoints)
    db.session.remove()
    db.engine.dispose()  # every connection from here on is a new one, without checkpoints
    before_writer = snapshot()
    created: list[int] = []
    failures: list[Any] = []
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set():
            status, body = post_json(
                live_server,
                root.token,
                "/rest/ops/create/",
                {
                    "type": "ddi",
                    "values": {
                        "dialcode": "99",
                        "number": f"{n:06d}",
                        "virt_exten": "1",
                        "company": BUSY,
                    },
                },
            )
            if status != 200:
                failures.append((status, body))
                return
            created.append(n)
            n += 1

    def wait_for(count: int) -> None:
        wait_until(
            lambda: len(created) >= count or failures, 30, f"{count} writes by the writer thread"
        )

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        wait_for(5)
        started = len(created)
        target = tmp_path / "backups" / "telephony.db"
        target.parent.mkdir()
        done = flask_process("db", "backup", str(target))
        ended = len(created)
        wait_for(ended + 5)  # the writer went on after the copy too
    finally:
        stop.set()
        thread.join(timeout=30)
        event.remove(db.engine, "connect", _no_checkpoints)
        db.session.remove()
        db.engine.dispose()
    assert not failures, failures
    assert done.returncode == 0, done.stderr
    assert ended > started, "no write happened while the backup ran"

    line = done.stdout.strip()
    assert "\n" not in line and done.stderr == ""
    assert line.startswith(f"Wrote {target}: ") and "bytes" in line
    assert "schema revision " in line and "quick_check ok" in line
    revision = db.session.scalar(text("SELECT version_num FROM alembic_version"))
    assert f"schema revision {revision} " in line
    assert os.listdir(target.parent) == [target.name], "no temporary file left beside it"
    assert target.stat().st_mode & 0o777 == 0o600, "a backup holds hashes and webhook secrets"

    with sqlite3.connect(target) as copy:
        assert copy.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert copy.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    assert not Path(f"{target}-wal").exists()

    restored = app_on(f"sqlite:///{target}", test_config)
    with restored.app_context():
        numbers = busy_numbers()
        k = len(numbers)
        assert started <= k <= ended + 1, (started, k, ended)
        assert numbers == [f"{n:06d}" for n in range(k)], "not a prefix of the writes"
        copied = snapshot()
        # Each create wrote its DDI, history interval, audit entry and event together.
        for item in ("history", "open_history", "audit", "events", "event_ids"):
            assert copied[item] == before_writer[item] + k, item
        assert_history_consistent()
        db.session.remove()
    # The source, once the writer stopped, for the companies the writer never touched.
    assert figures(restored, root.token) == figures(app, root.token)
    busy_now = figures(restored, root.token, (BUSY,))["readDDICount now"]
    assert list(busy_now["values"][BUSY]["dates"].values())[-1] == k
    dispose(restored)


@needs_sqlite
def test_the_backup_answers_as_the_source_when_nothing_is_writing(
    app, world, flask, tmp_path, test_config
):
    """With no writer, the copy's every answer equals the source's, and the command line
    contract holds: one line on stdout, exit 0."""
    target = tmp_path / "quiet.db"
    done = flask("db", "backup", str(target))
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.strip().splitlines()) == 1
    restored = app_on(f"sqlite:///{target}", test_config)
    assert figures(restored, world.root.token) == figures(app, world.root.token)
    dispose(restored)


# --- the command's refusals ----------------------------------------------------------------


def unwritable_directory(tmp_path: Path) -> Path | None:
    """A directory this process cannot create a file in: a mode-0500 one, or (root writes
    anywhere) /sys, read-only in most containers; None if there is none to be had."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    for candidate in (locked, Path("/sys")):
        probe = candidate / ".probe"
        try:
            probe.touch()
        except OSError:
            return candidate
        probe.unlink()
    return None


@needs_sqlite
def test_an_existing_file_is_kept_unless_force(app, world, flask, tmp_path):
    target = tmp_path / "backups" / "kept.db"
    target.parent.mkdir()
    target.write_text("an older backup")
    done = flask("db", "backup", str(target))
    assert_one_line_error(done, str(target), "already exists", "--force")
    assert target.read_text() == "an older backup"
    assert os.listdir(target.parent) == ["kept.db"]

    done = flask("db", "backup", "--force", str(target))
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(target) as copy:
        assert copy.execute("SELECT count(*) FROM companies").fetchone() == (3,)
    assert os.listdir(target.parent) == ["kept.db"]


def backup_in_process(app: Flask, *args: str) -> Result:
    """`flask db backup ARGS…` run by Click in this process: for the refusals, which all come
    before any copying (the subprocess tests above hold the real command line)."""
    return app.test_cli_runner().invoke(args=["db", "backup", *args])


def assert_refused(result: Result, *words: str) -> None:
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception  # not an uncaught error
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: "), lines
    for word in words:
        assert word in lines[0], lines


def test_bad_targets_are_one_line_and_exit_1(app, tmp_path):
    """Every refusal is one line naming the problem, before any work (so on either
    database), and leaves nothing behind."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    database = make_url(app.config["SQLALCHEMY_DATABASE_URI"]).database or ""
    cases: list[tuple[list[str], tuple[str, ...]]] = [
        ([str(tmp_path)], ("is a directory",)),
        ([str(tmp_path / "missing" / "b.db")], ("no such directory",)),
        ([str(a_file / "b.db")], ("not a directory",)),
        ([], ("Missing argument 'PATH'",)),
        ([str(tmp_path / "x.db"), "extra"], ("unexpected extra argument",)),
        ([str(tmp_path / "x.db"), "--forced"], ("No such option",)),
    ]
    if BACKEND == "sqlite":
        cases.append(([database, "--force"], ("is the database itself",)))
    unwritable = unwritable_directory(tmp_path)
    if unwritable is not None:
        cases.append(([str(unwritable / "b.db")], ("Cannot write in", str(unwritable))))
    for args, words in cases:
        assert_refused(backup_in_process(app, *args), *words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "locked"]
    if BACKEND == "sqlite":
        with sqlite3.connect(database) as source:
            assert source.execute("PRAGMA quick_check").fetchall() == [("ok",)]


def test_a_missing_sqlite_file_is_refused_not_created(tmp_path, test_config):
    missing = tmp_path / "absent.db"
    other = create_app({**test_config, "SQLALCHEMY_DATABASE_URI": f"sqlite:///{missing}"})
    result = backup_in_process(other, str(tmp_path / "b.db"))
    assert_refused(result, str(missing), "does not exist")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@needs_postgresql
def test_without_pg_dump_it_prints_the_command_to_run(app, tmp_path, monkeypatch):
    """No pg_dump on PATH: one line with the exact documented command, and nothing written."""
    target = tmp_path / "telephony.dump"
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without PostgreSQL's client tools
    url = make_url(app.config["SQLALCHEMY_DATABASE_URI"])
    command = f"pg_dump --format=custom --file {target} {libpq_url(url)}"
    assert_refused(backup_in_process(app, str(target)), "pg_dump is not on PATH", command)
    assert not target.exists()


def test_libpq_url_drops_the_driver_and_the_password():
    """The URL pg_dump is given (and the message prints): libpq's scheme, no password (that
    goes in PGPASSWORD), every other part kept."""
    url = make_url(
        "postgresql+psycopg://telephony:s3cret@db.internal:5433/telephony?sslmode=require"
    )
    assert libpq_url(url) == "postgresql://telephony@db.internal:5433/telephony?sslmode=require"


# --- PostgreSQL: pg_dump, pg_restore ---------------------------------------------------------


def restore(dump: Path, database_url: str, *options: str) -> None:
    """The documented restore: pg_restore into `database_url` (libpq form), all or nothing."""
    command = [
        "pg_restore",
        *options,
        "--no-owner",
        "--exit-on-error",
        "--single-transaction",
        "--dbname",
        libpq_url(make_url(database_url)),
        str(dump),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


@needs_postgresql
def test_pg_dump_and_pg_restore_reproduce_the_reports_exactly(
    app, world, flask, tmp_path, test_config
):
    """The documented commands: `pg_dump --format=custom` of the serving database,
    `pg_restore` into a fresh database: an app on the copy answers every report, the closed
    month and its adjustments exactly as the source, and `db check` finds models and schema
    agree. Then the copy is changed and restored over with `--clean --if-exists`: the same
    answers again."""
    assert shutil.which("pg_dump") and shutil.which("pg_restore")
    dump = tmp_path / "telephony.dump"
    source_url = app.config["SQLALCHEMY_DATABASE_URI"]
    db.session.rollback()
    dumped = subprocess.run(
        ["pg_dump", "--format=custom", "--file", str(dump), libpq_url(make_url(source_url))],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert dumped.returncode == 0, dumped.stderr
    source = figures(app, world.root.token)
    source_rows = snapshot()

    with postgres_database(PG_URL, "telephony_restore") as copy_url:
        restore(dump, copy_url)
        restored = app_on(copy_url, test_config)
        with restored.app_context():
            assert snapshot() == source_rows
            assert_history_consistent()
            db.session.remove()
        assert figures(restored, world.root.token) == source
        # A change after the backup, then the restore over it.
        response = restored.test_client().post(
            "/rest/ops/create/",
            json={
                "type": "ddi",
                "values": {"dialcode": "99", "number": "1", "virt_exten": "1", "company": ACME},
            },
            headers=world.root.headers,
        )
        assert response.status_code == 200, response.get_json()
        assert figures(restored, world.root.token) != source
        dispose(restored)  # the app stops before a restore over its database
        restore(dump, copy_url, "--clean", "--if-exists")
        with restored.app_context():
            assert snapshot() == source_rows
            db.session.remove()
        assert figures(restored, world.root.token) == source
        dispose(restored)
        checked = run_cli(copy_url, "db", "check", instance=tmp_path / "instance")
        assert checked.returncode == 0, checked.stderr
        assert "No new upgrade operations detected" in checked.stdout + checked.stderr


@needs_sqlite
@pytest.mark.usefixtures("allow_loopback_webhooks")
def test_a_backup_holds_no_webhook_secret_in_clear(app, flask, tmp_path):
    """The webhooks' signing secrets, current and rotated out, are in the backup only sealed:
    neither `whsec_` nor any secret's key material appears in the file."""
    from webapp.services.events import webhooks

    operator = Principal.cli("test")
    hook, first = webhooks.create(operator, "http://127.0.0.1:9/a")
    _, second = webhooks.rotate_secret(operator, hook.id)  # `first` now the previous one
    _, other = webhooks.create(operator, "http://127.0.0.1:9/b")
    target = tmp_path / "backup.db"
    done = flask("db", "backup", str(target))
    assert done.returncode == 0, done.stderr
    data = target.read_bytes()
    assert b"whsec_" not in data
    for secret in (first, second, other):
        assert secret.removeprefix("whsec_").encode() not in data
    with sqlite3.connect(target) as copy:
        rows = copy.execute("SELECT secret_sealed, previous_secret_sealed FROM webhooks").fetchall()
    assert len(rows) == 2 and all(sealed for sealed, _ in rows)


@needs_postgresql
def test_db_backup_runs_pg_dump_into_a_restorable_archive(app, world, flask, tmp_path, test_config):
    """On PostgreSQL `db backup` runs the documented pg_dump itself (temporary file, then the
    name): one line with size and schema revision; the archive restores to the same answers;
    an existing file is refused as on SQLite."""
    target = tmp_path / "backups" / "telephony.dump"
    target.parent.mkdir()
    done = flask("db", "backup", str(target))
    assert done.returncode == 0, done.stderr
    revision = db.session.scalar(text("SELECT version_num FROM alembic_version"))
    line = done.stdout.strip()
    assert line.startswith(f"Wrote {target}: ") and f"schema revision {revision} " in line
    assert "pg_dump --format=custom" in line
    assert os.listdir(target.parent) == ["telephony.dump"]
    assert target.stat().st_mode & 0o777 == 0o600

    assert_one_line_error(flask("db", "backup", str(target)), "already exists", "--force")

    source = figures(app, world.root.token)
    with postgres_database(PG_URL, "telephony_restore") as copy_url:
        restore(dump=target, database_url=copy_url)
        restored = app_on(copy_url, test_config)
        assert figures(restored, world.root.token) == source
        dispose(restored)


def test_the_backup_command_sits_in_the_db_group(app):
    """`db backup` beside Flask-Migrate's own commands, with its help."""
    result = app.test_cli_runner().invoke(args=["db", "backup", "--help"])
    assert result.exit_code == 0
    assert "--force" in result.output and "PATH" in result.output
