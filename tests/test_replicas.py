"""Read replicas (docs/replicas.md), against a real primary and streaming replica of the suite's
own (tests/replicas.py): the routed reads are served by the replica (seen by pausing its replay:
a change made meanwhile is missing from them), a reader's own writes are never missing from
what it reads, a replica past REPLICA_MAX_LAG_SECONDS or stopped is skipped within the same
request, and the change feed read from the replica misses no event under concurrent writers."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup
from flask import Flask
from flask_migrate import upgrade
from prometheus_client import REGISTRY
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

from webapp import create_app, replicas
from webapp.extensions import db

from .factories import Factory
from .replicas import Pair, binaries, pair_marks, start_pair

BIN = binaries()

pytestmark = pair_marks()

COMPANY = "acme"
ROOT = Path(__file__).resolve().parent.parent


class Setup:
    """The pair, an app on it with the replica configured, and who reads and writes."""

    def __init__(self, pair: Pair, app: Flask) -> None:
        self.pair, self.app = pair, app
        self.primary: Engine = create_engine(
            pair.url(pair.primary_port), isolation_level="AUTOCOMMIT"
        )
        self.replica: Engine = create_engine(
            pair.url(pair.replica_port), isolation_level="AUTOCOMMIT", pool_pre_ping=True
        )
        self.factory = Factory(app)
        self.numbers = iter(range(2070000001, 2079999999))

    @property
    def chooser(self) -> replicas.Replicas:
        found = replicas.of(self.app)
        assert found is not None
        return found

    def pause(self) -> None:
        with self.replica.connect() as conn:
            conn.execute(text("SELECT pg_wal_replay_pause()"))

    def resume(self) -> None:
        with self.replica.connect() as conn:
            conn.execute(text("SELECT pg_wal_replay_resume()"))
        self.caught_up()

    def caught_up(self, timeout: float = 20) -> None:
        """Until the replica has replayed everything the primary has written so far."""
        with self.primary.connect() as conn:
            target = conn.execute(text("SELECT pg_current_wal_insert_lsn()")).scalar_one()
        deadline = time.monotonic() + timeout
        with self.replica.connect() as conn:
            while not conn.execute(
                text("SELECT pg_last_wal_replay_lsn() >= CAST(:t AS pg_lsn)"), {"t": target}
            ).scalar_one():
                assert time.monotonic() < deadline, "the replica never caught up"
                time.sleep(0.02)

    def new_ddi(self, caller) -> str:
        number = str(next(self.numbers))
        body = {
            "type": "ddi",
            "values": {"dialcode": "44", "number": number, "virt_exten": "100", "company": COMPANY},
        }
        response = self.factory.api(caller, "create", body)
        assert response.status_code == 200, response.get_data(as_text=True)
        return number

    def current(self, timeout: float = 20) -> None:
        """Until this process's checks find the replica serving: a process knows a replica's
        lag once it has a sample of the primary's position the replica has passed, so a
        replica counts as lagging for its first second or so."""
        self.caught_up()
        deadline = time.monotonic() + timeout
        while True:
            self.fresh_checks()
            self.chooser.states()  # checks each replica now
            if all(r.state == "ok" for r in self.chooser.replicas):
                return
            assert time.monotonic() < deadline, [r.state for r in self.chooser.replicas]
            time.sleep(0.6)

    def fresh_checks(self) -> None:
        """Forget when the replica was last checked: the next read checks it."""
        for replica in self.chooser.replicas:
            replica.checked_at = replica.retry_at = float("-inf")


def served(database: str) -> float:
    return REGISTRY.get_sample_value("telephony_routed_reads_total", {"database": database}) or 0


@pytest.fixture(scope="module")
def setup(migrated, test_config) -> Iterator[Setup]:
    assert BIN is not None
    pair = start_pair(BIN)
    app = create_app(
        {
            **test_config,
            "SQLALCHEMY_DATABASE_URI": pair.url(pair.primary_port),
            "DATABASE_REPLICA_URLS": pair.url(pair.replica_port),
            "REPLICA_MAX_LAG_SECONDS": "30",
        }
    )
    try:
        with app.app_context():
            upgrade()
            made = Setup(pair, app)
            made.factory.company(COMPANY, "Acme")
            made.reader = made.factory.account("reader", system_admin=True)
            made.writer = made.factory.account("writer", system_admin=True)
            db.session.remove()
        made.browser = made.factory.browser("reader")
        made.caught_up()
        yield made
    finally:
        with app.app_context():
            db.engine.dispose()
        if (found := replicas.of(app)) is not None:
            found.dispose()
        pair.close()


# --- what each routed read shows ---------------------------------------------------------------


def _api_numbers(setup: Setup) -> set[str]:
    body = {"type": "ddi", "scope": {"company": COMPANY}, "limit": 1000}
    response = setup.factory.api(setup.reader, "read", body)
    assert response.status_code == 200, response.get_data(as_text=True)
    return {row["number"] for row in response.get_json()["values"]}


def _feed_numbers(setup: Setup) -> set[str]:
    response = setup.factory.client.post(
        "/rest/events/read", json={"limit": 1000}, headers=setup.reader.headers
    )
    assert response.status_code == 200, response.get_data(as_text=True)
    return {event["key"].get("number") for event in response.get_json()["values"]}


def _today_count(setup: Setup) -> int:
    response = setup.factory.client.get(
        "/rest/call/readDDICount",
        query_string={"company": COMPANY},
        headers=setup.reader.headers,
    )
    assert response.status_code == 200, response.get_data(as_text=True)
    today = datetime.now(UTC).date().isoformat()
    return response.get_json()["values"][COMPANY]["dates"][today]


def _page(path: str) -> Callable[[Setup], str]:
    def read(setup: Setup) -> str:
        response = setup.browser.get(path)
        assert response.status_code == 200, response.get_data(as_text=True)[:300]
        return response.get_data(as_text=True)

    return read


def _report_csv_count(setup: Setup) -> int:
    text_ = _page(f"/reports/ddis.csv?company={COMPANY}")(setup)
    rows = list(csv.reader(io.StringIO(text_)))
    today = datetime.now(UTC).date().isoformat()
    column = rows[0].index(today)
    return int(next(row for row in rows[1:] if row[0] == COMPANY)[column])


def _company_ddis(setup: Setup) -> int:
    page = BeautifulSoup(_page(f"/companies/{COMPANY}")(setup), "html.parser")
    found = page.find(id="ddis-now")
    assert found is not None
    return int(found.get_text().replace(",", ""))


# Each routed read, and whether it shows a DDI made since (by its number, or by the count).
SHOWS: dict[str, Callable[[Setup, str, int], bool]] = {
    "POST /rest/ops/read": lambda s, number, _n: number in _api_numbers(s),
    "POST /rest/events/read": lambda s, number, _n: number in _feed_numbers(s),
    "readDDICount": lambda s, _number, count: _today_count(s) == count,
    "/ddis": lambda s, number, _n: number in _page(f"/ddis?company={COMPANY}")(s),
    "/ddis.csv": lambda s, number, _n: number in _page(f"/ddis.csv?company={COMPANY}")(s),
    "/audit": lambda s, number, _n: number in _page("/audit")(s),
    "/audit.csv": lambda s, number, _n: number in _page("/audit.csv")(s),
    "/reports/ddis.csv": lambda s, _number, count: _report_csv_count(s) == count,
    f"/companies/{COMPANY}": lambda s, _number, count: _company_ddis(s) == count,
}


def _count(setup: Setup) -> int:
    with setup.primary.connect() as conn:
        return conn.execute(
            text("SELECT count(*) FROM ddis WHERE company = :c"), {"c": COMPANY}
        ).scalar_one()


# --- the tests ---------------------------------------------------------------------------------


def test_the_routed_reads_are_served_by_the_replica(setup):
    """With the replica's replay paused, a DDI another account makes is missing from every
    routed read of this one: they come from the replica. Once it has replayed, they show it."""
    setup.fresh_checks()
    setup.current()
    before = served("replica1")
    setup.pause()
    try:
        number = setup.new_ddi(setup.writer)
        count = _count(setup)
        missing = {name: shows(setup, number, count) for name, shows in SHOWS.items()}
        assert not any(missing.values()), missing
        assert served("replica1") - before == len(SHOWS)
    finally:
        setup.resume()
    shown = {name: shows(setup, number, count) for name, shows in SHOWS.items()}
    assert all(shown.values()), shown


def test_a_reader_sees_its_own_writes_while_the_replica_is_behind(setup):
    """The writer's own reads go to the primary until the replica has replayed its write: by
    token, and by its signed-in session (a page after an API write with its cookie)."""
    setup.pause()
    try:
        primary_before = served("primary")
        number = setup.new_ddi(setup.reader)  # the reader's token
        assert number in _api_numbers(setup)
        assert number in _page(f"/ddis?company={COMPANY}")(setup)
        assert served("primary") - primary_before == 2
        # Another account, which wrote nothing, still reads from the replica.
        response = setup.factory.client.post(
            "/rest/ops/read/",
            json={"type": "ddi", "scope": {"company": COMPANY}, "limit": 1000},
            headers=setup.writer.headers,
        )
        assert number not in {row["number"] for row in response.get_json()["values"]}
    finally:
        setup.resume()
    replica_before = served("replica1")
    assert number in _api_numbers(setup)  # replayed: the replica serves the reader again
    assert served("replica1") - replica_before == 1


def test_a_replica_past_the_lag_bound_is_skipped_until_it_catches_up(setup):
    chooser = setup.chooser
    chooser.max_lag = 1.0
    setup.pause()
    try:
        number = setup.new_ddi(setup.writer)
        time.sleep(1.5)
        setup.fresh_checks()
        before = served("primary")
        assert number in _api_numbers(setup)  # from the primary, in the same request
        assert served("primary") - before == 1
        ready = setup.factory.client.get("/readyz")
        assert ready.status_code == 200
        (state,) = ready.get_json()["replicas"]
        assert state["name"] == "replica1" and state["state"] == "lagging"
        # Behind by more than the bound, or by an unknown time (no sample of the primary's
        # position as old as what it has replayed): lagging either way.
        assert state["lag_seconds"] is None or state["lag_seconds"] > 1.0
    finally:
        setup.resume()
        chooser.max_lag = 30
    setup.current()
    before = served("replica1")
    assert number in _api_numbers(setup)
    assert served("replica1") - before == 1
    (state,) = setup.factory.client.get("/readyz").get_json()["replicas"]
    assert state["state"] == "ok" and state["lag_seconds"] is not None


def test_a_stopped_replica_is_skipped_and_a_read_it_fails_is_read_again_on_the_primary(
    setup, caplog
):
    number = setup.new_ddi(setup.writer)
    # An account that never wrote reads here: no replica is asked for its writes before its
    # reads, so the first read meets the stopped replica itself.
    with setup.app.app_context():
        onlooker = setup.factory.account("onlooker", system_admin=True)
        db.session.remove()
    kept = setup.reader, setup.browser
    setup.reader, setup.browser = onlooker, setup.factory.browser("onlooker")
    (replica,) = setup.chooser.replicas
    try:
        setup.current()
        assert number in _api_numbers(setup)
        setup.pair.stop(setup.pair.replica)
        try:
            # Checked a moment ago, so chosen: the read fails there, runs again on the primary.
            replica.checked_at = time.monotonic()
            before = served("primary")
            for name, shows in SHOWS.items():
                assert shows(setup, number, _count(setup)), name
            assert served("primary") - before == len(SHOWS)
            assert replica.state == "down"
            assert "replica1 failed a read" in caplog.text
            ready = setup.factory.client.get("/readyz")
            assert ready.status_code == 200
            assert ready.get_json()["replicas"] == [
                {"name": "replica1", "state": "down", "lag_seconds": None}
            ]
        finally:
            setup.pair.start(setup.pair.replica)
        setup.current()
        before = served("replica1")
        assert number in _api_numbers(setup)
        assert served("replica1") - before == 1
    finally:
        setup.reader, setup.browser = kept


def test_the_feed_read_from_the_replica_misses_nothing_under_concurrent_writers(setup):
    """Writers commit on the primary while a reader follows the feed from the replica by the
    last id it has seen: it ends with every event, in id order, none twice."""
    setup.caught_up()
    with setup.primary.connect() as conn:
        start = conn.execute(text("SELECT coalesce(max(last_id), 0) FROM event_txns")).scalar_one()
    writers_done = threading.Event()
    errors: list[BaseException] = []
    seen: list[int] = []
    replica_before = served("replica1")

    def write(caller) -> None:
        try:
            factory = Factory(setup.app)
            for _ in range(25):
                number = str(next(setup.numbers))
                body = {
                    "type": "ddi",
                    "values": {
                        "dialcode": "44",
                        "number": number,
                        "virt_exten": "100",
                        "company": COMPANY,
                    },
                }
                response = factory.api(caller, "create", body)
                assert response.status_code == 200, response.get_data(as_text=True)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def read() -> None:
        try:
            client = setup.app.test_client()
            after = start
            quiet = 0
            while quiet < 5:
                response = client.post(
                    "/rest/events/read",
                    json={"after": after, "limit": 50},
                    headers=setup.reader.headers,
                )
                body: dict[str, Any] = response.get_json()
                assert response.status_code == 200, body
                seen.extend(event["id"] for event in body["values"])
                after = body["last"] if body["values"] else after
                if writers_done.is_set() and not body["values"]:
                    setup.caught_up()
                    quiet += 1
        except BaseException as exc:
            errors.append(exc)

    # Writers on tokens of their own, so the reader (which never writes) stays on the replica.
    with setup.app.app_context():
        callers = [setup.factory.account(f"feeder{i}", system_admin=True) for i in range(3)]
        db.session.remove()
    writers = [threading.Thread(target=write, args=(c,)) for c in callers]
    reader = threading.Thread(target=read)
    reader.start()
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    writers_done.set()
    reader.join(timeout=120)
    assert not errors, errors
    with setup.primary.connect() as conn:
        expected = list(
            conn.execute(
                text("SELECT e.txn_id, e.seq FROM events e ORDER BY e.txn_id, e.seq")
            ).all()
        )
        ids = [
            row[0]
            for row in conn.execute(
                text(
                    "SELECT t.first_id + e.seq FROM events e JOIN event_txns t ON t.id = e.txn_id"
                    " WHERE t.first_id + e.seq > :start ORDER BY 1"
                ),
                {"start": start},
            ).all()
        ]
    assert expected  # the writers' events are there
    assert seen == ids
    assert len(ids) >= 75
    assert served("replica1") - replica_before > 5


# --- the bench's replica rows (bench/replica.py) -----------------------------------------------


@pytest.mark.slow
def test_bench_replica_rows_run(setup: Setup, tmp_path):
    """`make bench`'s replica rows run (`--quick`): a small data set generated on this module's
    primary, copied by bench/replica.py into a pair of its own; each page row is checked there
    to have been served by the replica, and the mixed load's row names the primary's share."""
    with setup.primary.connect() as conn:
        conn.execute(text("DROP DATABASE IF EXISTS bench_source"))
        conn.execute(text("CREATE DATABASE bench_source"))
    source = setup.pair.url(setup.pair.primary_port, "bench_source")
    env = {
        **os.environ,
        "INSTANCE_PATH": str(tmp_path),
        "SECRET_KEY": "bench-secret-key-not-secret",
        "DATABASE_URL": source,
    }
    generate = [sys.executable, "-m", "bench.generate", "--ddis", "3000", "--companies", "40"]
    done = subprocess.run(generate, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    bench = [sys.executable, "-m", "bench.replica", "--url", source, "--quick"]
    done = subprocess.run(bench, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| postgresql")]
    assert any("read replica: /reports/ddis " in line for line in rows), done.stdout
    assert any("read replica: /ddis?company=<largest> " in line for line in rows)
    assert any("primary's share of" in line for line in rows)
    assert len(rows) == 7, done.stdout
