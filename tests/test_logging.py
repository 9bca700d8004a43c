"""Log lines and request ids (docs/observe.md#logging): the JSON and key=value shapes, the
X-Request-ID taken, made or replaced, returned, and written in the audit entry; one access
line per request with its fields; and, under a real gunicorn, `flask run` and in the delivery
worker, the same format for every line."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import urllib.request
from typing import Any

import pytest
from sqlalchemy import select

from webapp import create_app
from webapp.config import ConfigError
from webapp.extensions import db
from webapp.models import AuditEntry
from webapp.observability import logs
from webapp.services.events import webhooks

from .factories import ACME, OPERATOR
from .observability import (
    ROOT,
    free_port,
    gunicorn,
    other_apps,
    server_env,
    stop,
)
from .waiting import wait_until

ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
HEX_ID = re.compile(r"[0-9a-f]{32}")
LOGFMT_PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^ ]*)')
DDI = {"dialcode": "44", "number": "2071234567", "virt_exten": "100", "company": ACME}


def parse_text(line: str) -> dict[str, Any]:
    """A key=value line as a dict (quoted values are JSON strings); the whole line must parse."""
    pairs = LOGFMT_PAIR.findall(line)
    assert " ".join(f"{k}={v}" for k, v in pairs) == line, line
    return {k: json.loads(v) if v.startswith('"') else v for k, v in pairs}


def parse(line: str, kind: str) -> dict[str, Any]:
    return json.loads(line) if kind == "json" else parse_text(line)


def lines_of(captured: str, kind: str) -> list[dict[str, Any]]:
    return [parse(line, kind) for line in captured.splitlines() if line.strip()]


def access_lines(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["logger"] == logs.ACCESS_LOGGER]


@pytest.fixture
def app_with(app, test_config):
    """Another app on the test database with some settings changed: app_with(LOG_FORMAT=...)."""
    with other_apps(app, test_config) as make:
        yield make


@pytest.mark.parametrize("kind", ["json", "text"])
def test_an_access_line_has_time_level_logger_message_and_the_request_fields(
    app_with, world, capsys, kind
):
    client = app_with(LOG_FORMAT=kind).test_client()
    capsys.readouterr()
    response = client.post("/rest/ops/read/?x=1", json={"type": "ddi"}, headers=world.root.headers)
    assert response.status_code == 200
    [line] = access_lines(lines_of(capsys.readouterr().err, kind))
    assert list(line)[:4] == ["time", "level", "logger", "message"]
    assert ISO_UTC.fullmatch(line["time"]), line
    assert line["level"] == "INFO" and line["message"] == "POST /rest/ops/read/ 200"
    assert line["method"] == "POST"
    assert line["path"] == "/rest/ops/read/"  # the path alone: a query may hold search terms
    assert int(line["status"]) == 200
    assert float(line["duration_ms"]) > 0
    assert line["account"] == "root"  # the token's owner
    assert line["client"] == "127.0.0.1"
    assert line["request_id"] == response.headers["X-Request-ID"]


def test_the_access_line_names_the_session_account_or_nobody(app, world, capsys):
    browser = world.browser("cadmin")
    capsys.readouterr()
    assert browser.get("/ddis").status_code == 200
    assert app.test_client().get("/login").status_code == 200
    first, second = access_lines(lines_of(capsys.readouterr().err, "text"))
    assert (first["path"], first["account"]) == ("/ddis", "cadmin")
    assert (second["path"], second["account"]) == ("/login", "-")


@pytest.mark.parametrize("kind", ["json", "text"])
def test_a_message_can_never_break_its_line(app_with, capsys, kind):
    app_with(LOG_FORMAT=kind)
    capsys.readouterr()
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("webapp.test").exception('two\nlines = "quoted" \x1b[31m')
    [line] = capsys.readouterr().err.splitlines()
    record = parse(line, kind)
    assert record["message"] == 'two\nlines = "quoted" \x1b[31m'
    assert record["level"] == "ERROR" and record["logger"] == "webapp.test"
    assert "ValueError: boom" in record["exception"]
    assert "request_id" not in record  # not in a request


def test_request_id_is_taken_from_the_request_and_returned(client, capsys):
    capsys.readouterr()
    response = client.get("/healthz", headers={"X-Request-ID": "lb-7f3a.9_Z-01"})
    assert response.headers["X-Request-ID"] == "lb-7f3a.9_Z-01"
    [line] = access_lines(lines_of(capsys.readouterr().err, "text"))
    assert line["request_id"] == "lb-7f3a.9_Z-01"


def test_request_id_is_made_when_the_request_has_none(client):
    first = client.get("/healthz").headers["X-Request-ID"]
    second = client.get("/healthz").headers["X-Request-ID"]
    assert HEX_ID.fullmatch(first) and HEX_ID.fullmatch(second) and first != second


@pytest.mark.parametrize(
    "sent", ["", "has space", "x" * 65, "a/b", "semi;colon", 'quote"d', "ünicode", "a=b"]
)
def test_a_request_id_that_is_not_sane_is_replaced(client, capsys, sent):
    capsys.readouterr()
    response = client.get("/healthz", headers={"X-Request-ID": sent})
    rid = response.headers["X-Request-ID"]
    assert HEX_ID.fullmatch(rid) and rid != sent
    [line] = access_lines(lines_of(capsys.readouterr().err, "text"))
    assert line["request_id"] == rid


def test_every_answer_carries_its_id_a_refusal_and_an_unknown_address_too(app_with, world):
    client = app_with(API_RATE_LIMIT="1 per minute").test_client()
    headers = {**world.root.headers, "X-Request-ID": "limited-1"}
    client.post("/rest/ops/read/", json={"type": "ddi"}, headers=headers)
    refused = client.post("/rest/ops/read/", json={"type": "ddi"}, headers=headers)
    assert refused.status_code == 429  # refused by flask-limiter's own before_request
    assert refused.headers["X-Request-ID"] == "limited-1"
    missing = client.get("/no/such/page", headers={"X-Request-ID": "missing-1"})
    assert missing.status_code == 404 and missing.headers["X-Request-ID"] == "missing-1"


def test_the_audit_entry_carries_the_request_id(app, world, factory):
    response = world.client.post(
        "/rest/ops/create/",
        json={"type": "ddi", "values": DDI},
        headers={**world.root.headers, "X-Request-ID": "create-ddi-42"},
    )
    assert response.status_code == 200, response.get_json()
    made = world.client.post(
        "/rest/ops/create/",
        json={"type": "ddi", "values": {**DDI, "number": "2071234568"}},
        headers=world.root.headers,
    )
    factory.ddi("44", "2071234569", ACME)  # the command line's door: no request
    rows = db.session.execute(
        select(AuditEntry.target, AuditEntry.request_id)
        .where(AuditEntry.action == "ddi.create")
        .order_by(AuditEntry.id)
    ).all()
    assert [r.request_id for r in rows] == [
        "create-ddi-42",
        made.headers["X-Request-ID"],
        None,
    ]


def test_log_settings_are_checked_at_start(test_config):
    with pytest.raises(ConfigError, match=r"^LOG_FORMAT: 'xml' is not json"):
        create_app({**test_config, "LOG_FORMAT": "xml"})
    with pytest.raises(ConfigError, match=r"^LOG_LEVEL: 'LOUD' is not one of DEBUG"):
        create_app({**test_config, "LOG_LEVEL": "LOUD"})


def test_log_level_leaves_out_the_less_severe_lines(app_with, client, capsys):
    app_with(LOG_LEVEL="WARNING")
    capsys.readouterr()
    client.get("/healthz")
    logging.getLogger("webapp.test").warning("kept")
    [line] = capsys.readouterr().err.splitlines()
    assert parse_text(line)["message"] == "kept"


def werkzeug_record(message: str, *args: Any) -> logging.LogRecord:
    return logging.LogRecord("werkzeug", logging.INFO, __file__, 0, message, args, None)


def test_the_development_servers_lines_pass_without_its_request_line_or_colours():
    """logs.QuietDevServer on the records Werkzeug makes (its `_log` strips the newline its
    request line is written with): the request line dropped, the start message one line
    with the address first, colours removed, anything else (a traceback) left whole."""
    quiet = logs.QuietDevServer()
    request = werkzeug_record(
        '127.0.0.1 - - [27/Nov/2026 17:00:00] "%s" %s %s',
        "\x1b[33mGET /x HTTP/1.1\x1b[0m",
        "404",
        "-",
    )
    assert not quiet.filter(request)
    start = werkzeug_record(
        "\x1b[31m\x1b[1mWARNING: This is a development server.\x1b[0m\n"
        " * Running on all addresses (0.0.0.0)\n * Running on http://127.0.0.1:5000"
    )
    assert quiet.filter(start)
    assert start.getMessage() == (
        "Running on all addresses (0.0.0.0); Running on http://127.0.0.1:5000; "
        "WARNING: This is a development server."
    )
    press = werkzeug_record("\x1b[33mPress CTRL+C to quit\x1b[0m")
    assert quiet.filter(press) and press.getMessage() == "Press CTRL+C to quit"
    error = werkzeug_record("Error on request:\n%s", "Traceback (most recent call last):\n  x")
    assert quiet.filter(error)
    assert error.getMessage() == "Error on request:\nTraceback (most recent call last):\n  x"


# --- real processes ----------------------------------------------------------------------------


@pytest.mark.slow
def test_gunicorn_writes_its_own_lines_and_the_apps_in_one_format(app, tmp_path):
    """Every line gunicorn's master and worker write is one JSON record with the fields, and
    each request has exactly one access line: gunicorn's own access log stays off. Through
    the package's config (as a wheel is run), `-c python:webapp.gunicorn_conf`."""
    env = server_env(
        app.config["SQLALCHEMY_DATABASE_URI"],
        tmp_path / "instance",
        LOG_FORMAT="json",
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
    )
    db.session.rollback()
    log = tmp_path / "gunicorn.log"
    with gunicorn(env, log, "--workers", "1", config="python:webapp.gunicorn_conf") as server:
        request = urllib.request.Request(
            server.base + "/login", headers={"X-Request-ID": "through-gunicorn-1"}
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.headers["X-Request-ID"] == "through-gunicorn-1"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    for record in records:
        assert ISO_UTC.fullmatch(record["time"]) and record["level"] in {"INFO", "WARNING"}
        assert record["logger"] and record["message"]
    messages = [r["message"] for r in records if r["logger"] == "gunicorn.error"]
    assert any(m.startswith("Starting gunicorn") for m in messages), messages
    assert any(m.startswith("Booting worker") for m in messages), messages
    assert any(m.startswith("Shutting down") for m in messages), messages
    assert [r["request_id"] for r in access_lines(records) if r["path"] == "/login"] == [
        "through-gunicorn-1"
    ]
    assert not [r for r in records if "/login" in r["message"] and r not in access_lines(records)]


@pytest.mark.slow
def test_the_development_server_writes_one_access_line_per_request(app, tmp_path):
    """`flask run` (`make run`): the app's access line, not Werkzeug's request line beside it;
    Werkzeug's start line kept, as one line beginning "Running on http://…"; no ANSI escape
    codes (stderr is a file here), and every line in the app's format."""
    port = free_port()
    env = server_env(
        app.config["SQLALCHEMY_DATABASE_URI"],
        tmp_path / "instance",
        LOG_FORMAT="text",
        LOG_LEVEL="INFO",
        FLASK_DEBUG="0",
    )
    err, out = tmp_path / "stderr.log", tmp_path / "stdout.log"
    db.session.rollback()
    argv = [sys.executable, "-m", "flask", "--app", "app", "run", "--port", str(port)]
    with open(err, "wb") as stderr, open(out, "wb") as stdout:
        server = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=stdout, stderr=stderr, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:

        def answers() -> bool:
            if server.poll() is not None:
                raise AssertionError(f"flask run exited:\n{err.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=2):
                    return True
            except OSError:
                return False

        wait_until(answers, 60, "flask run to answer /healthz", interval=0.1)
        request = urllib.request.Request(base + "/login", headers={"X-Request-ID": "dev-1"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 200
        # Both lines of the request were written before its answer was sent (the app's in its
        # after_request, Werkzeug's as it sends the status line): stopping now loses neither.
    finally:
        stop(server)
    written = err.read_text()
    assert "\x1b" not in written and "\\u001b" not in written, written
    records = [parse_text(line) for line in written.splitlines()]
    about_login = [r for r in records if "/login" in r["message"]]
    assert [(r["logger"], r["request_id"]) for r in about_login] == [
        (logs.ACCESS_LOGGER, "dev-1")
    ], written
    werkzeug = [r["message"] for r in records if r["logger"] == "werkzeug"]
    assert werkzeug[0].startswith(f"Running on http://127.0.0.1:{port}; WARNING: "), werkzeug
    assert "\n" not in werkzeug[0]


@pytest.mark.slow
def test_gunicorn_refuses_to_start_with_a_bad_log_format(app, tmp_path):
    env = server_env(
        app.config["SQLALCHEMY_DATABASE_URI"],
        tmp_path / "instance",
        LOG_FORMAT="xml",
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
    )
    result = subprocess.run(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "--bind", "127.0.0.1:0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 3  # gunicorn's "do not restart me" (deploy/systemd)
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    assert "Configuration error: LOG_FORMAT: 'xml' is not json" in output
    assert "Booting worker" not in output


@pytest.mark.slow
@pytest.mark.usefixtures("allow_loopback_webhooks")
def test_the_delivery_worker_writes_the_same_lines(app, factory, tmp_path):
    """`flask events deliver` in its own process: every line it writes (here urllib3's debug
    lines of a POST to a closed port) is a JSON record of the app's format."""
    factory.company(ACME)
    webhooks.create(OPERATOR, "http://127.0.0.1:9/hook", [], [])
    db.session.commit()
    factory.ddi("44", "2071234567", ACME)  # one event to deliver
    env = server_env(
        app.config["SQLALCHEMY_DATABASE_URI"],
        tmp_path / "instance",
        LOG_FORMAT="json",
        LOG_LEVEL="DEBUG",
        WEBHOOK_ALLOW_NETWORKS="127.0.0.0/8",
        # The app's: the webhook's secret is sealed with a key derived from it.
        SECRET_KEY=app.config["SECRET_KEY"],
    )
    db.session.rollback()
    result = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "app", "events", "deliver", "--once"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Delivered 0 of 1 attempt.\n"
    records = [json.loads(line) for line in result.stderr.splitlines()]
    assert any(r["logger"].startswith("urllib3") for r in records), result.stderr
    for record in records:
        assert ISO_UTC.fullmatch(record["time"]) and record["level"] and record["message"]
