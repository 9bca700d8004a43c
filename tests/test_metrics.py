"""/metrics (docs/observe.md#metrics): not served unless configured, and then only to the
scrapers METRICS_TOKEN and METRICS_ALLOW admit; requests by endpoint (never the path) and
status, latency, rate-limit refusals, report and import durations, the database pool, the
event backlog, the delivery worker's attempts; and under a real gunicorn with three workers,
counts summed over all of them, whichever worker answers the scrape."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.mmap_dict import MmapedDict, mmap_key
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.engine import make_url

from webapp import create_app
from webapp.config import ConfigError
from webapp.extensions import db
from webapp.services.events import delivery, webhooks

from .conftest import BACKEND
from .factories import ACME, OPERATOR, csrf_from
from .observability import (
    ROOT,
    free_port,
    gunicorn,
    other_apps,
    server_env,
    stop,
)
from .waiting import wait_until

TOKEN = "metrics-test-token-0123456789"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
DDI = {"dialcode": "44", "number": "2071234567", "virt_exten": "100", "company": ACME}
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse_samples(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def app_with(app, test_config):
    """Another app on the test database with some settings changed: app_with(LOG_FORMAT=...)."""
    with other_apps(app, test_config) as make:
        yield make


@pytest.fixture
def metered(app_with):
    """An app serving /metrics to the token, and a scrape of it."""
    metrics_app = app_with(METRICS_TOKEN=TOKEN)
    client = metrics_app.test_client()

    def scrape() -> Samples:
        response = client.get("/metrics", headers=BEARER)
        assert response.status_code == 200, response.get_data(as_text=True)
        return parse_samples(response.get_data(as_text=True))

    metrics_app.scrape = scrape  # type: ignore[attr-defined]
    return metrics_app


# --- who may read them -------------------------------------------------------------------------


def test_metrics_are_not_served_without_configuration(app, client):
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", headers=BEARER).status_code == 404
    assert "metrics" not in app.view_functions


def test_a_scrape_needs_the_token(metered):
    client = metered.test_client()
    for headers in (
        {},
        {"Authorization": "Bearer wrong-token-0123456789"},
        {"Authorization": f"Basic {TOKEN}"},
    ):
        refused = client.get("/metrics", headers=headers)
        assert refused.status_code == 401
        assert refused.headers["WWW-Authenticate"].startswith("Bearer")
        assert b"telephony_" not in refused.data
    answer = client.get("/metrics", headers=BEARER)
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert b"# TYPE telephony_http_requests_total counter" in answer.data


def test_a_scrape_must_come_from_an_allowed_address(app_with):
    client = app_with(METRICS_ALLOW="10.0.0.0/8, ::1").test_client()
    assert client.get("/metrics").status_code == 403  # from 127.0.0.1
    inside = {"REMOTE_ADDR": "10.1.2.3"}
    assert client.get("/metrics", environ_base=inside).status_code == 200
    mapped = {"REMOTE_ADDR": "::ffff:10.1.2.3"}  # a dual-stack socket's form of it
    assert client.get("/metrics", environ_base=mapped).status_code == 200
    # Both set: a scrape needs both.
    both = app_with(METRICS_ALLOW="10.0.0.0/8", METRICS_TOKEN=TOKEN).test_client()
    assert both.get("/metrics", environ_base=inside).status_code == 401
    assert both.get("/metrics", headers=BEARER).status_code == 403
    assert both.get("/metrics", headers=BEARER, environ_base=inside).status_code == 200


def test_behind_a_trusted_proxy_the_allowed_address_is_the_clients(app_with):
    client = app_with(METRICS_ALLOW="10.0.0.0/8", TRUSTED_PROXY_COUNT=1).test_client()
    forwarded = {"X-Forwarded-For": "10.7.7.7"}
    assert client.get("/metrics", headers=forwarded).status_code == 200
    outside = {"X-Forwarded-For": "192.0.2.1"}
    assert (
        client.get(
            "/metrics", headers=outside, environ_base={"REMOTE_ADDR": "10.0.0.1"}
        ).status_code
        == 403
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"METRICS_TOKEN": "short"}, "METRICS_TOKEN: must be at least 16 characters"),
        ({"METRICS_TOKEN": "has a space in it, long"}, "METRICS_TOKEN: must be at least 16"),
        ({"METRICS_ALLOW": "10.0.0.0/8, nope"}, "METRICS_ALLOW: 'nope' is not an IP address"),
    ],
)
def test_metrics_settings_are_checked_at_start(test_config, settings, message):
    with pytest.raises(ConfigError, match=f"^{message}"):
        create_app({**test_config, **settings})


# --- what they count ---------------------------------------------------------------------------


def test_requests_are_counted_by_endpoint_and_status_never_by_path(metered):
    client = metered.test_client()
    before = metered.scrape()
    for number in ("2071234567", "2071234568"):
        assert client.get(f"/ddis/44/{number}").status_code == 302  # to /login
        assert client.get(f"/nope/{number}").status_code == 404
    after = metered.scrape()
    shown = ("telephony_http_requests_total", (("endpoint", "ddi_page.show"), ("status", "302")))
    assert after[shown] - before.get(shown, 0) == 2
    unmatched = (("endpoint", "unmatched"), ("status", "404"))
    assert (
        after[("telephony_http_requests_total", unmatched)]
        - before.get(("telephony_http_requests_total", unmatched), 0)
        == 2
    )
    count = "telephony_http_request_duration_seconds_count"
    assert (
        value(after, count, endpoint="ddi_page.show")
        - value(before, count, endpoint="ddi_page.show")
        == 2
    )
    labels = {v for (_name, pairs) in after for _k, v in pairs}
    assert not [v for v in labels if "2071" in v or "/" in v]  # a label never holds a path


def test_rate_limit_refusals_are_counted_by_limit(app_with, world):
    limited = app_with(
        METRICS_TOKEN=TOKEN, API_RATE_LIMIT="1 per minute", SIGN_IN_LIMIT="1 per 15 minutes"
    )
    client = limited.test_client()

    def scrape() -> Samples:
        return parse_samples(client.get("/metrics", headers=BEARER).get_data(as_text=True))

    before = scrape()
    statuses = [
        client.post("/rest/ops/read/", json={"type": "ddi"}, headers=world.root.headers).status_code
        for _ in range(3)
    ]
    assert statuses == [200, 429, 429]
    browser = limited.test_client()
    token = csrf_from(browser.get("/login").get_data(as_text=True))
    sign_ins = [
        browser.post(
            "/login", data={"csrf_token": token, "username": "cadmin", "password": "wrong"}
        ).status_code
        for _ in range(3)
    ]
    assert sign_ins.count(429) >= 1, sign_ins
    after = scrape()
    name = "telephony_rate_limited_total"
    assert value(after, name, limit="api") - value(before, name, limit="api") == 2
    assert value(after, name, limit="sign_in") - value(
        before, name, limit="sign_in"
    ) == sign_ins.count(429)


def test_report_and_import_durations_are_observed(metered, world):
    client = metered.test_client()
    before = metered.scrape()
    report = client.post(
        "/rest/call/readDDICount", json={"type": "cdr"}, headers=world.root.headers
    )
    assert report.status_code == 200, report.get_json()
    csv = b"dialcode,number,virt_exten,company\n44,2071234567,100,acme\n"
    headers = {**world.root.headers, "Content-Type": "text/csv"}
    assert client.post("/rest/ops/import/?dry_run=1", data=csv, headers=headers).status_code == 200
    assert client.post("/rest/ops/import/", data=csv, headers=headers).status_code == 200
    page = world.browser("root").get("/reports/ddis")
    assert page.status_code == 200
    after = metered.scrape()

    def grew(name: str, **labels: str) -> float:
        return value(after, f"{name}_count", **labels) - value(before, f"{name}_count", **labels)

    assert grew("telephony_report_duration_seconds", kind="ddi", entry="answer") == 1
    assert grew("telephony_report_duration_seconds", kind="ddi", entry="ranking") >= 1
    assert grew("telephony_ddi_import_duration_seconds", mode="plan") == 1
    assert grew("telephony_ddi_import_duration_seconds", mode="apply") == 1


@pytest.mark.usefixtures("allow_loopback_webhooks")
def test_the_event_backlog_is_newest_event_minus_each_webhooks_cursor(metered, world):
    early, _ = webhooks.create(OPERATOR, "http://127.0.0.1:9/early", [], [])
    db.session.commit()
    client = metered.test_client()
    for number in ("2071234567", "2071234568", "2071234569"):
        made = client.post(
            "/rest/ops/create/",
            json={"type": "ddi", "values": {**DDI, "number": number}},
            headers=world.root.headers,
        )
        assert made.status_code == 200
    late, _ = webhooks.create(OPERATOR, "http://127.0.0.1:9/late", [], [])
    db.session.commit()
    samples = metered.scrape()
    newest = value(samples, "telephony_events_newest_id")
    assert newest >= 3
    backlog = "telephony_webhook_backlog_events"
    assert value(samples, backlog, webhook=str(early.id)) == 3
    assert value(samples, backlog, webhook=str(late.id)) == 0
    assert value(samples, "telephony_webhook_retry_attempts", webhook=str(early.id)) == 0


def test_the_pool_gauges_follow_the_connections_in_use(metered):
    with metered.app_context():
        engine = db.engine
        size = engine.pool.size()
    idle = metered.scrape()
    assert value(idle, "telephony_db_pool_size") == size
    with engine.connect(), engine.connect():
        busy = metered.scrape()
    assert (
        value(busy, "telephony_db_pool_checked_out") - value(idle, "telephony_db_pool_checked_out")
        == 2
    )
    assert value(metered.scrape(), "telephony_db_pool_checked_out") == value(
        idle, "telephony_db_pool_checked_out"
    )


@pytest.mark.usefixtures("allow_loopback_webhooks")
def test_the_delivery_workers_attempts_are_counted(metered, factory):
    factory.company(ACME)
    webhooks.create(OPERATOR, "http://127.0.0.1:9/hook", [], [])
    db.session.commit()
    factory.ddi("44", "2071234567", ACME)
    before = metered.scrape()
    worker = delivery.Worker(db.engine)
    worker.run(once=True)
    assert worker.attempts == 1
    after = metered.scrape()
    name = "telephony_webhook_attempts_total"
    assert value(after, name, outcome="retry") - value(before, name, outcome="retry") == 1


def test_with_the_database_down_a_scrape_still_answers(app, app_with, tmp_path, caplog):
    """An outage is when the metrics matter most: the event gauges (read from the database)
    are left out, with one log line, and the rest is served."""
    if BACKEND == "postgresql":
        up = make_url(app.config["SQLALCHEMY_DATABASE_URI"])
        url = up.set(port=1).render_as_string(hide_password=False)
    else:
        folder = tmp_path / "telephony.db"
        folder.mkdir()  # a folder where the database file should be
        url = f"sqlite:///{folder}"
    client = app_with(METRICS_TOKEN=TOKEN, SQLALCHEMY_DATABASE_URI=url).test_client()
    assert client.get("/healthz").status_code == 200
    answer = client.get("/metrics", headers=BEARER)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    samples = parse_samples(answer.get_data(as_text=True))
    assert value(samples, "telephony_http_requests_total", endpoint="healthz", status="200") >= 1
    assert not [name for name, _labels in samples if name.startswith("telephony_events_")]
    lines = [r.getMessage() for r in caplog.records if r.name == "webapp.observability.metrics"]
    assert len(lines) == 1
    assert lines[0].startswith("metrics: the event backlog was not read: database unavailable")


# --- real processes ----------------------------------------------------------------------------


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=20) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


def post_json(url: str, body: Any, headers: dict[str, str]) -> int:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={**headers, "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=20) as answer:
        return answer.status


def stale_counts(directory: Path) -> None:
    """A file of a previous run, as a worker writes it: 1,000 healthz requests that did not
    happen in this run (gunicorn.conf.py must empty the directory at start)."""
    directory.mkdir()
    stale = MmapedDict(str(directory / "counter_999999.db"))
    key = mmap_key(
        "telephony_http_requests",
        "telephony_http_requests_total",
        ["endpoint", "status"],
        ["healthz", "200"],
        "stale",
    )
    stale.write_value(key, 1000.0, 0.0)
    stale.close()


@pytest.mark.slow
def test_under_gunicorn_a_scrape_sums_every_workers_counts(app, world, tmp_path):
    """Three sync workers: three long-polls held at once must each have a worker of their own,
    then 60 quick requests from 6 threads; whichever worker answers the scrape reports every
    request once. A worker killed keeps its counts, while its pool leaves the live gauges (the
    child_exit hook): after its replacement boots the pool size is still three workers'."""
    multiproc = tmp_path / "metrics"
    stale_counts(multiproc)
    env = server_env(
        app.config["SQLALCHEMY_DATABASE_URI"],
        tmp_path / "instance",
        METRICS_TOKEN=TOKEN,
        PROMETHEUS_MULTIPROC_DIR=str(multiproc),
        EVENTS_MAX_WAITING="3",  # the three long polls are one account's
    )
    pool_size = db.engine.pool.size()
    db.session.rollback()
    # --threads 1: sync workers (gunicorn.conf.py defaults to threads), one request each.
    with gunicorn(env, tmp_path / "gunicorn.log", "--workers", "3", "--threads", "1") as server:
        polls = [
            threading.Thread(
                target=post_json,
                args=(
                    server.base + "/rest/events/read",
                    {"after": 0, "wait": 1.5},
                    world.root.headers,
                ),
            )
            for _ in range(3)
        ]
        for poll in polls:
            poll.start()
        for poll in polls:
            poll.join()

        def hit() -> None:
            for _ in range(10):
                assert get(server.base + "/healthz")[0] == 200

        clients = [threading.Thread(target=hit) for _ in range(6)]
        for client in clients:
            client.start()
        for client in clients:
            client.join()

        workers = {p.stem.split("_")[-1] for p in multiproc.glob("counter_*.db")}
        assert len(workers) == 3, workers  # every worker counted some of them

        def scrape() -> Samples:
            status, body = get(server.base + "/metrics", BEARER)
            assert status == 200, body
            return parse_samples(body.decode())

        for _ in range(3):  # whichever worker answers
            samples = scrape()
            total = "telephony_http_requests_total"
            assert value(samples, total, endpoint="healthz", status="200") >= 60
            assert value(samples, total, endpoint="rest.read_events", status="200") == 3
            assert value(samples, "telephony_db_pool_size") == 3 * pool_size
        counted = value(samples, total, endpoint="healthz", status="200")
        # 60 and the start-up probe's (tests/observability.py); never the stale file's 1,000.
        assert 60 < counted < 100

        def live_gauges() -> set[str]:
            return {p.stem.split("_")[-1] for p in multiproc.glob("gauge_livesum_*.db")}

        assert live_gauges() == workers  # the master's check left none of its own
        victim = sorted(workers)[0]
        os.kill(int(victim), signal.SIGKILL)
        wait_until(lambda: live_gauges() - workers, 30, "the killed worker's replacement")
        assert victim not in live_gauges()
        samples = scrape()
        assert value(samples, "telephony_db_pool_size") == 3 * pool_size
        assert value(samples, total, endpoint="rest.read_events", status="200") == 3
        assert value(samples, total, endpoint="healthz", status="200") == counted


@pytest.mark.slow
@pytest.mark.usefixtures("allow_loopback_webhooks")
def test_the_delivery_worker_serves_its_metrics_on_its_port(app, factory, tmp_path):
    factory.company(ACME)
    webhooks.create(OPERATOR, "http://127.0.0.1:9/hook", [], [])
    db.session.commit()
    factory.ddi("44", "2071234567", ACME)
    db.session.rollback()
    env = server_env(app.config["SQLALCHEMY_DATABASE_URI"], tmp_path / "instance")
    argv = [sys.executable, "-m", "flask", "--app", "app", "events", "deliver"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        refused = subprocess.run(
            [*argv, "--metrics-port", str(busy)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        f"Error: --metrics-port: cannot listen on 127.0.0.1:{busy}: Address already in use"
    ]
    port = free_port()
    worker = subprocess.Popen(
        [*argv, "--metrics-port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:

        def attempted() -> bool:
            try:
                _status, body = get(f"http://127.0.0.1:{port}/metrics")
            except OSError:
                return False
            samples = parse_samples(body.decode())
            return value(samples, "telephony_webhook_attempts_total", outcome="retry") == 1

        wait_until(attempted, 30, "one failed attempt in the worker's metrics", interval=0.1)
    finally:
        stop(worker)
    assert worker.returncode == 0, worker.stderr.read() if worker.stderr else ""
