"""Parallel clients against a real threaded server: answers, never 'database is locked' 500s."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import text

from webapp.extensions import db

from .invariants import assert_history_consistent

DDI = {"dialcode": "44", "number": "2071234567", "virt_exten": "100", "company": "acme"}


def post(base: str, token: str, op: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{base}/rest/ops/{op}/",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def in_parallel(calls) -> list[tuple[int, dict]]:
    """Run the calls at once: a barrier releases every thread together."""
    barrier = threading.Barrier(len(calls))

    def run(call):
        barrier.wait()
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


@pytest.fixture
def root(factory):
    factory.company("acme")
    factory.company("globex")
    return factory.account("root", system_admin=True)


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(app):
    if db.engine.dialect.name != "sqlite":
        pytest.skip("SQLite only")
    with db.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_duplicate_creates_racing_give_one_success_and_conflicts(live_server, root):
    results = in_parallel(
        [lambda: post(live_server, root.token, "create", {"type": "ddi", "values": DDI})] * 16
    )
    statuses = sorted(status for status, _ in results)
    assert statuses == [200] + [409] * 15, results
    assert all(body["error"]["code"] == "conflict" for status, body in results if status == 409)
    assert_history_consistent()


def test_distinct_creates_racing_all_land(live_server, root):
    calls = [
        (
            lambda n=n: post(
                live_server,
                root.token,
                "create",
                {"type": "ddi", "values": {**DDI, "number": str(1000 + n)}},
            )
        )
        for n in range(32)
    ]
    assert [status for status, _ in in_parallel(calls)] == [200] * 32
    _, body = post(live_server, root.token, "read", {"type": "ddi", "scope": {}})
    assert body["total"] == 32
    assert_history_consistent()


def test_updates_racing_deletes_leave_no_orphan_history(live_server, root):
    rows = [{**DDI, "number": str(5000 + n)} for n in range(40)]
    assert post(live_server, root.token, "create", {"type": "ddi", "values": rows})[0] == 200
    moves = [
        (
            lambda n=n: post(
                live_server,
                root.token,
                "update",
                {
                    "type": "ddi",
                    "scope": {"company": "acme", "number": str(5000 + n)},
                    "values": {"company": "globex"},
                },
            )
        )
        for n in range(0, 40, 2)
    ]
    deletes = [
        (
            lambda n=n, company=company: post(
                live_server,
                root.token,
                "delete",
                {
                    "type": "ddi",
                    "scope": {"company": company, "number": str(5000 + n)},
                },
            )
        )
        for n in range(0, 40, 2)
        for company in ("acme", "globex")
    ]
    results = in_parallel(moves + deletes)
    assert all(status == 200 for status, _ in results), results
    assert_history_consistent()


def test_phone_user_creates_racing_in_two_companies(live_server, root):
    calls = [
        (
            lambda c=c: post(
                live_server,
                root.token,
                "create",
                {
                    "type": "user",
                    "values": {"username": "ana", "virt_exten": "1", "company": c},
                },
            )
        )
        for c in ("acme", "globex") * 8
    ]
    statuses = sorted(status for status, _ in in_parallel(calls))
    assert statuses == [200, 200] + [409] * 14
    assert_history_consistent()
    with db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM phone_users")).scalar() == 2
