"""The `flask --app app` commands as a script would run them: through Flask's command line in
this process (the `flask` fixture, tests/commands.py), and as the real executable where the
process is the subject (`flask_process`, and the tests naming a database of their own)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select
from werkzeug.security import check_password_hash

from webapp.extensions import db
from webapp.models import Account, AuditEntry, Company, Ddi, HistoryInterval, PhoneUser

from .invariants import assert_history_consistent

ROOT = Path(__file__).resolve().parent.parent


def assert_one_line_error(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0]


def count(model) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(model))


@pytest.mark.slow  # three `flask` processes
def test_the_executable_refuses_bad_input_with_one_line_and_exit_1(flask_process):
    """The real `flask` process (what an operator's script sees): a domain refusal and a
    usage mistake are each one line on stderr, no traceback, exit status 1; the in-process
    runs of the other tests stand in for it."""
    ok = flask_process("companies", "create", "acme", "--name", "Acme Telecom")
    assert ok.returncode == 0, ok.stderr
    again = flask_process("companies", "create", "acme", "--name", "Again")
    assert_one_line_error(again, "already exists")
    assert again.returncode == 1 and again.stdout == ""
    usage = flask_process("companies", "create", "newco")
    assert_one_line_error(usage, "--help")
    assert usage.returncode == 1 and usage.stdout == ""
    assert count(Company) == 1


def test_an_uncaught_error_in_process_is_a_traceback_and_exit_1(flask, monkeypatch):
    """The in-process runs keep what a process shows of a bug: Click's runner sets an
    uncaught exception aside, the `flask` fixture puts its traceback on stderr, status 1,
    so `"Traceback" not in stderr` still catches one."""
    from webapp.services import companies

    def broken(*_args, **_kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(companies, "create", broken)
    result = flask("companies", "create", "acme", "--name", "Acme")
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "RuntimeError: a bug" in result.stderr


def test_companies_create_and_refuse_bad_input(flask):
    ok = flask("companies", "create", "acme", "--name", "Acme Telecom")
    assert ok.returncode == 0, ok.stderr
    assert db.session.get(Company, "acme").name == "Acme Telecom"
    assert_one_line_error(flask("companies", "create", "acme", "--name", "Again"), "already exists")
    assert_one_line_error(flask("companies", "create", "Not Valid", "--name", "x"), "identifier")
    assert_one_line_error(flask("companies", "create", "x", "--name", "  "), "name")
    assert count(Company) == 1


def test_accounts_create_with_stdin_password_and_grants(flask, client):
    flask("companies", "create", "acme", "--name", "Acme")
    result = flask(
        "accounts",
        "create",
        "carol",
        "--password-stdin",
        "--admin-of",
        "acme",
        "--reporting-for",
        "acme",
        "--billing-summary",
        stdin="a long enough password\n",
    )
    assert result.returncode == 0, result.stderr
    assert "Password" not in result.stdout
    db.session.rollback()
    carol = db.session.scalar(select(Account).where(Account.username == "carol"))
    assert [c.id for c in carol.admin_of] == ["acme"] and carol.billing_summary
    assert carol.password_hash != "a long enough password"


def test_accounts_create_generates_a_password_shown_once(flask):
    result = flask("accounts", "create", "dave", "--system-admin")
    assert result.returncode == 0
    password = result.stdout.strip().splitlines()[-1].split(": ", 1)[1]
    assert len(password) >= 16
    from webapp.services.identity.signin import check_password

    db.session.rollback()
    assert check_password("dave", password) is not None


@pytest.mark.parametrize(
    ("args", "stdin", "word"),
    [
        (("accounts", "create", "eve", "--admin-of", "nope"), None, "nope"),
        (("accounts", "create", "Bad Name"), None, "Username"),
        (("accounts", "create", "eve", "--password-stdin"), "short\n", "password"),
        (("accounts", "disable", "nobody"), None, "nobody"),
        (("tokens", "create", "nobody"), None, "nobody"),
    ],
)
def test_account_mistakes_print_one_line(flask, args, stdin, word):
    assert_one_line_error(flask(*args, stdin=stdin), word)
    assert count(Account) == 0


def test_token_printed_last_works_until_the_account_is_disabled(flask, client):
    flask("accounts", "create", "root", "--system-admin")
    result = flask("tokens", "create", "root", "--name", "ci")
    assert result.returncode == 0
    token = result.stdout.strip().splitlines()[-1]
    assert token.startswith("tad_") and " " not in token
    headers = {"Authorization": f"Bearer {token}"}
    read = {"type": "ddi", "scope": {}}
    assert client.post("/rest/ops/read/", json=read, headers=headers).status_code == 200
    assert flask("accounts", "disable", "root").returncode == 0
    db.session.rollback()
    assert client.post("/rest/ops/read/", json=read, headers=headers).status_code == 401


def test_accounts_enable_lets_a_disabled_account_back_in_and_is_audited(flask, client):
    flask("accounts", "create", "root", "--system-admin")
    result = flask("tokens", "create", "root", "--name", "ci")
    headers = {"Authorization": f"Bearer {result.stdout.strip().splitlines()[-1]}"}
    read = {"type": "ddi", "scope": {}}
    assert flask("accounts", "disable", "root").returncode == 0
    assert client.post("/rest/ops/read/", json=read, headers=headers).status_code == 401

    enabled = flask("accounts", "enable", "root")
    assert enabled.returncode == 0, enabled.stderr
    assert enabled.stdout.strip() == "Enabled account root."
    db.session.rollback()
    assert db.session.scalar(select(Account.active).where(Account.username == "root"))
    assert client.post("/rest/ops/read/", json=read, headers=headers).status_code == 200
    entry = db.session.scalars(
        select(AuditEntry).where(AuditEntry.action == "account.enable")
    ).one()
    assert entry.actor.startswith("cli:") and entry.via == "cli"
    assert (entry.before["active"], entry.after["active"]) == (False, True)

    # Already active, or no such account: one line, exit 1, nothing written.
    assert_one_line_error(flask("accounts", "enable", "root"), "already active")
    assert_one_line_error(flask("accounts", "enable", "nobody"), "nobody")
    db.session.rollback()
    actions = db.session.scalars(
        select(AuditEntry.action).where(AuditEntry.action.like("account.%"))
    )
    assert sorted(actions) == ["account.create", "account.disable", "account.enable"]


@pytest.mark.slow  # the demo's records, twice
def test_demo_seed_is_idempotent_and_consistent(flask):
    first = flask("demo", "seed")
    assert first.returncode == 0, first.stderr
    assert "admin" in first.stdout and "Company-Admin" in first.stdout
    # Every account it made is printed, with the password that signs it in.
    printed = {
        line.split()[0]: line.split()[1]
        for line in first.stdout.splitlines()
        if line.startswith("  ")
    }
    db.session.rollback()
    hashes = dict(db.session.execute(select(Account.username, Account.password_hash)).all())
    assert (
        set(printed)
        == set(hashes)
        == {
            "admin",
            "acme-admin",
            "globex-admin",
            "billing",
            "reporting",
        }
    )
    assert all(check_password_hash(hashes[name], printed[name]) for name in printed)
    counts = {m: count(m) for m in (Company, Account, Ddi, PhoneUser, HistoryInterval)}
    assert counts[Ddi] >= 200 and counts[PhoneUser] >= 100 and counts[Account] == 5
    assert counts[HistoryInterval] > counts[Ddi] + counts[PhoneUser]  # moves and deletions
    assert_history_consistent()
    second = flask("demo", "seed")
    assert second.returncode == 0
    assert "already present" in second.stdout
    assert {m: count(m) for m in counts} == counts
    # The demo passwords are reprinted from instance/, so `make run` can always show them.
    assert first.stdout.splitlines()[-1] in second.stdout
    db.session.rollback()
    assert db.session.scalar(select(func.count()).where(AuditEntry.action == "demo.seed")) == 1


def test_demo_seed_refuses_a_database_with_companies_or_accounts_and_writes_nothing(flask):
    """The walk: a company created first used to make the seed stop half-way, leaving a
    System-Admin whose password was never shown. Now nothing is written."""
    assert flask("companies", "create", "acme", "--name", "Acme").returncode == 0
    models = (Company, Account, Ddi, PhoneUser, HistoryInterval, AuditEntry)
    before = {m: count(m) for m in models}
    refused = flask("demo", "seed")
    assert_one_line_error(refused, "company 'acme'", "empty database", "nothing was written")
    assert refused.returncode == 1 and refused.stdout == ""
    assert {m: count(m) for m in models} == before
    assert count(Account) == 0

    # An account alone is enough to refuse too (the demo's would sit beside it).
    created = flask("accounts", "create", "ops", "--system-admin")
    assert created.returncode == 0, created.stderr
    before = {m: count(m) for m in models}
    refused = flask("demo", "seed")
    assert_one_line_error(refused, "empty database")
    assert {m: count(m) for m in models} == before


# This test and the next name a SQLite file of their own, whatever TEST_DATABASE_URL: once.
@pytest.mark.slow  # a `flask` process
@pytest.mark.database_independent
def test_commands_on_a_database_without_schema_say_what_to_do(tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'empty.db'}",
        "INSTANCE_PATH": str(tmp_path),
        "SECRET_KEY": "cli-test-secret-key-x",
    }
    result = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "app", "companies", "create", "a", "--name", "A"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_one_line_error(result, "db upgrade")


@pytest.mark.slow  # three `flask` processes
@pytest.mark.database_independent
def test_db_upgrade_builds_a_fresh_sqlite_database(tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'new.db'}",
        "INSTANCE_PATH": str(tmp_path),
        "SECRET_KEY": "cli-test-secret-key-x",
    }
    for args in (("db", "upgrade"), ("db", "upgrade"), ("companies", "create", "a", "--name", "A")):
        result = subprocess.run(
            [sys.executable, "-m", "flask", "--app", "app", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr


# Click refuses these before the command opens the database: once per `make test`.
@pytest.mark.database_independent
@pytest.mark.parametrize(
    "args",
    [
        ("companies", "create", "newco"),
        ("companies", "nosuch"),
        ("accounts", "create"),
        ("companies", "create", "x", "--name", "X", "--bogus"),
        ("history", "import"),
    ],
)
def test_usage_mistakes_are_one_line_and_exit_1(flask, args):
    result = flask(*args)
    assert_one_line_error(result, "--help")
    assert result.returncode == 1


@pytest.mark.slow  # a `flask` process
@pytest.mark.database_independent  # a server on no port, whatever TEST_DATABASE_URL
def test_an_unreachable_database_is_one_line(tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": "postgresql+psycopg://nobody@127.0.0.1:1/none",
        "INSTANCE_PATH": str(tmp_path),
        "SECRET_KEY": "cli-test-secret-key-x",
    }
    result = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "app", "companies", "create", "a", "--name", "A"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_one_line_error(result, "database")


def alembic_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "logger=alembic" in line]


def test_db_check_prints_its_verdict_alone(flask):
    """Alembic's INFO lines (some twenty: what it connected to and compared) only when asked
    for; the verdict on stdout either way. (On SQLite, Alembic's warnings that it cannot
    compare the expression indexes stay on stderr: they are not log lines.)"""
    quiet = flask("db", "check", LOG_LEVEL="INFO", LOG_FORMAT="text")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout == "No new upgrade operations detected.\n"
    assert not [line for line in quiet.stderr.splitlines() if line.startswith("time=")]
    for told in (
        flask("db", "check", "--verbose", LOG_LEVEL="INFO", LOG_FORMAT="text"),
        flask("db", "check", LOG_LEVEL="DEBUG", LOG_FORMAT="text"),
    ):
        assert told.returncode == 0, told.stderr
        assert told.stdout == "No new upgrade operations detected.\n"
        assert alembic_lines(told.stderr), told.stderr
    # Only the check is quiet: `db upgrade` still says what Alembic does.
    upgrade = flask("db", "upgrade", LOG_LEVEL="INFO", LOG_FORMAT="text")
    assert upgrade.returncode == 0, upgrade.stderr
    assert alembic_lines(upgrade.stderr), upgrade.stderr
