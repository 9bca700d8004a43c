"""Configuration checked at start (webapp/config.py SETTINGS): a bad setting stops the app and
every command with one line naming the variable and exit status 1; the checked values are the
parsed ones; instance/config.py is read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from webapp import create_app
from webapp.config import SETTINGS, ConfigError, serving_warnings

from .commands import FLASK, run_in_process
from .conftest import PG_URL

ROOT = Path(__file__).resolve().parent.parent
KEY = "k" * 32
FERNET_KEY = "m" * 43 + "="  # 32 bytes in URL-safe base64: a well-formed Fernet key

BAD = [
    ("DATABASE_URL", "::nonsense", "not a database URL"),
    ("DATABASE_URL", "postgres://u@h/db", "postgresql+psycopg://"),
    ("DATABASE_URL", "postgresql://u@h/db", "postgresql+psycopg://"),
    ("DATABASE_URL", "mysql://u@h/db", "not supported"),
    ("DATABASE_URL", "postgresql+psycopg://u@h", "names no database"),
    ("DATABASE_URL", "sqlite:////no/such/folder/x.db", "does not exist"),
    ("SECRET_KEY", "short", "at least 16 characters"),
    ("REPORT_TIMEZONE", "Mars/Olympus_Mons", "not an IANA time zone"),
    ("REPORT_TIMEZONE", "../etc/passwd", "not an IANA time zone"),
    ("RATELIMIT_STORAGE_URI", "memcache-ish://x", "not a rate-limit storage"),
    ("RATELIMIT_STORAGE_URI", "localhost:6379", "not a rate-limit storage"),
    ("API_RATE_LIMIT", "600 per fortnight", "not a rate"),
    ("API_RATE_LIMIT", "lots", "not a rate"),
    ("API_RATE_LIMIT", "", "not a rate"),
    ("SIGN_IN_LIMIT", "ten", "not a rate"),
    ("SIGN_IN_ADDRESS_LIMIT", "1 per eon", "not a rate"),
    ("HTTPS", "maybe", "not one of"),
    ("TRUSTED_PROXY_COUNT", "one", "not a whole number"),
    ("TRUSTED_PROXY_COUNT", "9", "not between 0 and 5"),
    ("EVENTS_RETENTION_DAYS", "0", "not between 1"),
    ("EVENTS_RETENTION_DAYS", "90 days", "not a whole number"),
    ("WEBHOOK_ALLOW_NETWORKS", "10.0.0.0/33", "not an IP address or network"),
    ("WEBHOOK_ALLOW_NETWORKS", "switches.example.net", "not an IP address or network"),
    ("EVENTS_MAX_WAITING", "0", "not between 1 and 64"),
    ("EVENTS_MAX_WAITING", "65", "not between 1 and 64"),
    ("EVENTS_MAX_WAITING", "two", "not a whole number"),
    ("EVENTS_MAX_WAITING", "", "not a whole number"),
    ("WEBHOOK_SECRET_KEYS", "not-a-fernet-key", "entry 1 is not a Fernet key"),
    ("WEBHOOK_SECRET_KEYS", f"{FERNET_KEY}, short", "entry 2 is not a Fernet key"),
    ("WEBHOOK_SECRET_KEYS", f"{FERNET_KEY},{FERNET_KEY}", "a key is listed twice"),
    ("MFA_REQUIRED", "everyone", "not one of none, system-admin, admins, all"),
    ("MFA_REQUIRED", "", "not one of"),
    ("OIDC_ISSUER", "http://sso.example.com", "not an https:// URL"),
    ("OIDC_ISSUER", "https://sso.example.com/?tenant=1", "not an issuer URL"),
    ("OIDC_CLIENT_ID", "a\nb", "printable characters"),
    ("OIDC_USERNAME_CLAIM", "x" * 101, "1 to 100 printable characters"),
    ("DATABASE_REPLICA_URLS", "mysql://u@h/db", "entry 1: 'mysql' databases are not supported"),
    (
        "DATABASE_REPLICA_URLS",
        "postgresql+psycopg://u:secret@h/db, sqlite:////tmp/x.db",
        "entry 2 is not a PostgreSQL URL",
    ),
    (
        "DATABASE_REPLICA_URLS",
        "postgresql+psycopg://u@h/db,postgresql+psycopg://u@h/db",
        "a replica is listed twice",
    ),
    ("REPLICA_MAX_LAG_SECONDS", "0.5", "not between 1 and 3600"),
    ("REPLICA_MAX_LAG_SECONDS", "five", "not a number of seconds"),
    ("REPLICA_MAX_LAG_SECONDS", "nan", "not between"),
]


def _key(env: str) -> str:
    return next(s.key for s in SETTINGS if s.env == env)


@pytest.mark.parametrize(("env", "value", "reason"), BAD)
def test_a_bad_setting_is_one_error_naming_it(env, value, reason):
    config = {"SECRET_KEY": KEY, _key(env): value}
    with pytest.raises(ConfigError) as raised:
        create_app(config)
    message = str(raised.value)
    assert message.startswith(f"{env}: ") and reason in message
    assert "\n" not in message


def test_every_setting_is_in_the_configuration_table():
    page = (ROOT / "docs" / "configuration.md").read_text()
    table = page.split("## Settings", 1)[1].split("\n## ", 1)[0]
    missing = [s.env for s in SETTINGS if f"`{s.env}`" not in table]
    assert missing == []


def test_checked_values_are_parsed(app):
    created = create_app(
        {
            "SECRET_KEY": KEY,
            "HTTPS": "yes",
            "TRUSTED_PROXY_COUNT": "2",
            "EVENTS_RETENTION_DAYS": "30",
            "EVENTS_MAX_WAITING": " 5 ",
            "REPORT_TIMEZONE": " Europe/Paris ",
            "WEBHOOK_SECRET_KEYS": f" {FERNET_KEY} ,, {FERNET_KEY[:-2]}E= ",
        }
    )
    config = created.config
    assert config["EVENTS_MAX_WAITING"] == 5
    assert create_app({"SECRET_KEY": KEY}).config["EVENTS_MAX_WAITING"] == 2  # the default
    assert config["WEBHOOK_SECRET_KEYS"] == (FERNET_KEY, FERNET_KEY[:-2] + "E=")
    assert config["HTTPS"] is True and config["TRUSTED_PROXY_COUNT"] == 2
    assert config["EVENTS_RETENTION_DAYS"] == 30 and config["REPORT_TIMEZONE"] == "Europe/Paris"
    # What HTTPS implies follows it, whichever source set it.
    assert config["SESSION_COOKIE_SECURE"] and config["WTF_CSRF_SSL_STRICT"]
    assert config["PREFERRED_URL_SCHEME"] == "https"


def test_a_bad_webhook_secret_key_is_never_repeated_in_the_message():
    secret_looking = "s3cr3t-key-material-that-is-not-a-fernet-key"
    with pytest.raises(ConfigError) as raised:
        create_app({"SECRET_KEY": KEY, "WEBHOOK_SECRET_KEYS": f"{FERNET_KEY},{secret_looking}"})
    assert "entry 2" in str(raised.value)
    assert secret_looking not in str(raised.value) and FERNET_KEY not in str(raised.value)


def test_instance_config_py_is_read(tmp_path, monkeypatch):
    """instance/config.py may set any setting (docs/configuration.md), and it is checked too."""
    monkeypatch.setenv("INSTANCE_PATH", str(tmp_path))
    (tmp_path / "config.py").write_text('API_RATE_LIMIT = "7 per minute"\n')
    assert create_app({"SECRET_KEY": KEY}).config["API_RATE_LIMIT"] == "7 per minute"
    (tmp_path / "config.py").write_text('REPORT_TIMEZONE = "Nowhere/Land"\n')
    with pytest.raises(ConfigError, match=r"^REPORT_TIMEZONE: "):
        create_app({"SECRET_KEY": KEY})


def _flask(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flask", "--app", "app", *args],
        cwd=ROOT,
        env={**os.environ, "SECRET_KEY": KEY, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_replicas_need_a_postgresql_primary_other_than_themselves():
    replica = "postgresql+psycopg://app:secret@replica/telephony"
    with pytest.raises(ConfigError) as raised:
        create_app({"SECRET_KEY": KEY, "DATABASE_REPLICA_URLS": replica})
    assert str(raised.value) == (
        "DATABASE_REPLICA_URLS is set but DATABASE_URL is not PostgreSQL: replicas are "
        "PostgreSQL streaming replicas of a PostgreSQL primary"
    )
    same = {
        "SQLALCHEMY_DATABASE_URI": replica,
        "DATABASE_REPLICA_URLS": "postgresql+psycopg://reader@replica:5432/telephony",
    }
    with pytest.raises(ConfigError) as raised:
        create_app({"SECRET_KEY": KEY, **same})
    assert "lists DATABASE_URL itself" in str(raised.value)
    # The message never repeats a URL: it may hold a password.
    with pytest.raises(ConfigError) as raised:
        create_app({"SECRET_KEY": KEY, "DATABASE_REPLICA_URLS": "postgresql://app:secret@r/db"})
    assert "secret" not in str(raised.value) and "entry 1" in str(raised.value)


def test_single_sign_on_needs_its_three_settings_together():
    config = {"SECRET_KEY": KEY, "OIDC_ISSUER": "https://sso.example.com/realms/x"}
    with pytest.raises(ConfigError) as raised:
        create_app(config)
    message = str(raised.value)
    assert message == (
        "OIDC_ISSUER is set but OIDC_CLIENT_ID and OIDC_CLIENT_SECRET are not: single sign-on "
        "needs all three"
    )


# A bad setting is refused before any database is opened: once per `make test`.
@pytest.mark.database_independent
@pytest.mark.slow
@pytest.mark.parametrize(
    ("env", "value"),
    [
        ("MFA_REQUIRED", "sometimes"),
        ("API_RATE_LIMIT", "lots"),
        ("REPORT_TIMEZONE", "Mars/Base"),
        ("DATABASE_URL", "::"),
        ("WEBHOOK_ALLOW_NETWORKS", "10.0.0.0/8, everything"),
    ],
)
def test_every_command_refuses_a_bad_setting_with_one_line(tmp_path, env, value):
    """The real executable for the first command (its exit status and stderr are the
    contract), the others in process (tests/commands.py): the refusal is app.py's, the same
    before any command runs."""
    settings = {"INSTANCE_PATH": str(tmp_path), "SECRET_KEY": KEY, env: value}
    runs = [
        _flask(settings, "db", "upgrade"),
        *(run_in_process(args, settings) for args in (["companies", "list"], ["routes"])),
    ]
    for done in runs:
        args = done.args[len(FLASK) :]
        assert done.returncode == 1, (args, done.stderr)
        assert done.stderr.strip().splitlines() == [done.stderr.strip()]
        assert done.stderr.startswith(f"Configuration error: {env}: ")
        assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.slow
@pytest.mark.skipif(not PG_URL, reason="needs PostgreSQL (TEST_DATABASE_URL)")
def test_a_missing_postgresql_database_is_one_line_saying_how_to_create_it(tmp_path):
    from sqlalchemy.engine import make_url

    url = make_url(PG_URL).set(database="telephony_never_created")
    rendered = url.render_as_string(hide_password=False)
    done = _flask({"INSTANCE_PATH": str(tmp_path), "DATABASE_URL": rendered}, "db", "upgrade")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    line = done.stderr.strip()
    assert "\n" not in line
    assert "database 'telephony_never_created' does not exist" in line
    assert (
        f"`createdb -h {url.host} -p {url.port} -O {url.username} telephony_never_created`" in line
    )
    assert line.endswith("as a role allowed to create databases (e.g. add -U postgres)")


@pytest.mark.database_independent  # refused before any database is opened
@pytest.mark.slow
def test_gunicorn_refuses_to_boot_with_a_bad_setting(tmp_path):
    """The server started as docs/deploy.md says (gunicorn.conf.py: its master checks before any
    worker starts) stops at once, non-zero, with the one line; no worker keeps restarting."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "gunicorn.conf.py",
            "--bind",
            "127.0.0.1:0",
            "--workers",
            "2",
            "app:app",
        ],
        cwd=ROOT,
        env={
            **os.environ,
            "SECRET_KEY": KEY,
            "INSTANCE_PATH": str(tmp_path),
            "API_RATE_LIMIT": "lots",
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "Configuration error: API_RATE_LIMIT: 'lots' is not a rate" in done.stderr
    assert "Traceback" not in done.stderr and "Booting worker" not in done.stderr


def test_memory_rate_limits_under_several_workers_are_warned_about():
    config = {"RATELIMIT_STORAGE_URI": "memory://"}
    assert serving_warnings(config, 1) == []
    (warning,) = serving_warnings(config, 4)
    assert "4 worker processes" in warning and "redis://" in warning
    assert serving_warnings({"RATELIMIT_STORAGE_URI": "redis://127.0.0.1:6379"}, 4) == []


def test_too_few_threads_for_one_accounts_long_polls_are_warned_about():
    """One account's EVENTS_MAX_WAITING waiting reads may all land on one worker: it needs
    that many threads and two more for pages and health checks (docs/deploy.md#long-polls)."""
    config = {"EVENTS_MAX_WAITING": 2}
    assert serving_warnings(config, 3, threads=4) == []
    assert serving_warnings(config, 3, threads=8) == []  # gunicorn.conf.py's default
    for threads in (1, 3):
        (warning,) = serving_warnings(config, 3, threads=threads)
        assert f"{threads} thread(s) per worker and EVENTS_MAX_WAITING=2" in warning
        assert "GUNICORN_THREADS to at least 4" in warning
    (warning,) = serving_warnings({"EVENTS_MAX_WAITING": 10}, 3, threads=8)
    assert "at least 12" in warning


@pytest.mark.slow
def test_gunicorn_warns_when_several_workers_count_rate_limits_alone(app, tmp_path):
    """Served as docs/deploy.md says with memory:// counters and 2 workers, gunicorn's log says
    that each worker counts alone; with 1 worker it does not."""
    from webapp.extensions import db

    from .observability import gunicorn, server_env

    db.session.rollback()
    for workers, warned in (("2", True), ("1", False)):
        env = server_env(
            app.config["SQLALCHEMY_DATABASE_URI"],
            tmp_path / "instance",
            RATELIMIT_STORAGE_URI="memory://",
            PROMETHEUS_MULTIPROC_DIR=str(tmp_path / f"metrics-{workers}"),
        )
        log = tmp_path / f"gunicorn-{workers}.log"
        with gunicorn(env, log, "--workers", workers):
            pass
        text = log.read_text()
        assert ("each counts alone" in text) is warned, text[-3000:]
        assert "Traceback" not in text


@pytest.mark.database_independent  # a SQLite URL of its own, whatever TEST_DATABASE_URL
@pytest.mark.slow
def test_a_database_that_cannot_be_opened_is_one_line_for_every_command(tmp_path):
    """A DATABASE_URL that passes the check but cannot be opened (here a folder where the
    SQLite file should be; a mistyped host, port or role on PostgreSQL alike): Flask-Migrate's
    db commands and the delivery worker's single pass say so in one line and exit 1."""
    folder = tmp_path / "telephony.db"
    folder.mkdir()
    env = {"INSTANCE_PATH": str(tmp_path), "DATABASE_URL": f"sqlite:///{folder}"}
    for args in (["db", "upgrade"], ["db", "current"], ["events", "deliver", "--once"]):
        done = _flask(env, *args)
        assert done.returncode == 1, (args, done.stderr)
        assert "Traceback" not in done.stderr, (args, done.stderr[-2000:])
        assert (
            done.stderr.strip()
            .splitlines()[-1]
            .startswith("Error: The database is unavailable: unable to open database file")
        ), (args, done.stderr)


@pytest.mark.database_independent  # a SQLite file of its own, whatever TEST_DATABASE_URL
@pytest.mark.slow
def test_the_delivery_worker_on_a_database_never_migrated_says_so_and_exits(tmp_path):
    """Not an outage to wait out: one line saying what to run, exit 1, even without --once."""
    env = {"INSTANCE_PATH": str(tmp_path), "DATABASE_URL": f"sqlite:///{tmp_path / 'new.db'}"}
    for args in (["events", "deliver", "--once"], ["events", "deliver"]):
        done = _flask(env, *args)
        assert done.returncode == 1, (args, done.stderr)
        assert done.stderr.strip().splitlines()[-1] == (
            "Error: The database has no schema yet; run 'flask --app app db upgrade' first."
        )
