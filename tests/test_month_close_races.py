"""Month close under real concurrency: parallel clients against the threaded live server, and
the history import (a service, not an API call) in a thread of its own (docs/month-close.md).

Concurrent closes: one wins, the others are 409s, the figures are stored once. A close racing
an import stores the month wholly without or wholly with it, and the adjustments agree.
Concurrent reopens: one wins. An import that the close leaves out of its figures always warns
of the closed month (on PostgreSQL the close keeps imports out while it reads: a test pauses a
close mid-way to prove it).

History is October 2025 (ended), naive UTC, REPORT_TIMEZONE UTC.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import func, select, text

from webapp.access import Principal
from webapp.extensions import db
from webapp.models import AuditEntry, ClosedFigures, MonthClose
from webapp.services import changes
from webapp.services.billing import month_close, reports
from webapp.services.imports import history_import
from webapp.services.records import crud, kinds

from .factories import add_history
from .invariants import assert_close_writes_cover
from .test_month_close_exactness import expected_adjustments
from .test_races import in_parallel, post_json
from .waiting import wait_until

pytestmark = pytest.mark.slow

MONTH, YEAR = 10, 2025
SCOPE = {"month": MONTH, "year": YEAR}
BODY = {"type": "cdr", "scope": SCOPE}
KINDS = ("ddi", "user")
MONTH_KEYS = {"ddi": "billableDDIDaysForMonth", "user": "billableUserDaysForMonth"}


def call(base: str, token: str, path: str, body: dict) -> tuple[int, dict]:
    return post_json(base, token, f"/rest/call/{path}", body)


def assert_conflict(body: dict) -> None:
    """The API's error envelope for a 409, and nothing else."""
    assert set(body) == {"result", "error"}, body
    assert body["result"] == "error"
    error = body["error"]
    assert set(error) == {"code", "message"}, error
    assert error["code"] == "conflict" and error["message"], error


def closes() -> list[tuple]:
    db.session.rollback()
    m = MonthClose
    query = select(m.id, m.year, m.month, m.version, m.closed_by, m.reopened_at).order_by(m.id)
    return [tuple(row) for row in db.session.execute(query)]


def count(model, *where) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(model).where(*where))


def audited(action: str) -> int:
    return count(AuditEntry, AuditEntry.action == action)


def read_reports() -> dict[str, dict[str, Any]]:
    """Both reports of the month, as the service answers them (closed-aware)."""
    db.session.rollback()
    scope = reports.parse_scope(SCOPE)
    return {kind: reports.report(Principal.cli(), kind, scope) for kind in KINDS}


def waiting_on_a_lock() -> int:
    """PostgreSQL: how many backends of the test database wait for a lock now."""
    with db.engine.connect() as conn:
        return conn.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
        ).scalar()


def read_adjustments() -> dict[str, Any]:
    db.session.rollback()
    return month_close.adjustments(Principal.cli(), reports.parse_scope(SCOPE))["values"]


def differences(closed: dict[str, dict[str, Any]], now: dict[str, dict[str, Any]]):
    """What readAdjustments must answer for reports `closed` and history giving `now`."""

    def days(answers: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {kind: {c: e["dates"] for c, e in answers[kind].items()} for kind in KINDS}

    return expected_adjustments(days(closed), days(now))


@pytest.fixture
def root(factory):
    for company in ("acme", "globex", "initech", "umbrella"):
        factory.company(company)
    add_history(
        ("ddi", "acme", "44:1", datetime(2025, 10, 1), datetime(2025, 10, 11)),
        ("ddi", "globex", "44:2", datetime(2025, 9, 20), None),
        ("ddi", "globex", "44:3", datetime(2025, 10, 16), None),
        ("user", "acme", "ana", datetime(2025, 9, 1), None),
        ("user", "initech", "bo", datetime(2025, 10, 30, 22), datetime(2025, 11, 2)),
    )
    return factory.account("root", system_admin=True)


def test_concurrent_closes_of_one_month_store_it_once(live_server, root):
    open_reports = read_reports()
    nonzero = sum(
        1 for kind in KINDS for entry in open_reports[kind].values() if entry[MONTH_KEYS[kind]]
    )
    assert nonzero == 4  # acme and globex DDIs, acme and initech users; umbrella none
    for version in (1, 2):
        results = in_parallel([lambda: call(live_server, root.token, "closeMonth", BODY)] * 16)
        statuses = sorted(status for status, _ in results)
        assert statuses == [200] + [409] * 15, results
        for status, body in results:
            if status == 409:
                assert_conflict(body)
        (won,) = [body for status, body in results if status == 200]
        assert won["result"] == "success"
        assert won["period"]["version"] == version and won["period"]["closed"] is True
        rows = closes()  # one row a version; only the latest not reopened
        assert [(y, m, v, by, reopened is None) for _, y, m, v, by, reopened in rows] == [
            (YEAR, MONTH, v, "root", v == version) for v in range(1, version + 1)
        ]
        latest = rows[-1][0]
        assert count(ClosedFigures, ClosedFigures.close_id == latest) == nonzero
        assert count(ClosedFigures) == nonzero * version
        assert audited("month.close") == version
        assert read_reports() == open_reports
        assert read_adjustments() == {}
        if version == 1:
            status, body = call(
                live_server, root.token, "reopenMonth", {**BODY, "reason": "once more"}
            )
            assert status == 200, body


# Seconds each side of the race waits after the barrier: (import, close), one pair a round.
# (import delay, close delay) per round, in seconds: each side started a little later in turn,
# so that both orders happen. The delays shape the race; nothing waits on them.
STAGGER = [(0, 0), (0.005, 0), (0.02, 0), (0, 0.005), (0, 0.02), (0, 0.04), (0, 0.08), (0, 0)]


def late_csv(round_: int) -> str:
    """A backfill touching both kinds, four companies and most days of the month: a close
    that saw part of it would store figures equal to neither the history before nor after."""
    rows = [
        f"ddi,acme,44:9{round_}01,2025-10-03T00:00:00Z,2025-10-06T00:00:00Z",
        f"ddi,globex,44:9{round_}02,2025-10-12T06:00:00Z,2025-10-12T18:00:00Z",
        f"ddi,initech,44:9{round_}03,2025-10-20T00:00:00Z,2025-10-23T00:00:00Z",
        f"user,globex,late{round_},2025-10-08T00:00:00Z,2025-10-10T00:00:00Z",
        f"user,initech,late{round_},2025-10-25T12:00:00Z,2025-10-26T12:00:00Z",
    ]
    # And one DDI an hour a day in Umbrella: every day of the month changes.
    rows += [
        f"ddi,umbrella,44:8{round_}{day:02d},2025-10-{day:02d}T10:00:00Z,2025-10-{day:02d}T11:00:00Z"
        for day in range(1, 32)
    ]
    return "\n".join(["kind,company,key,start,end", *rows]) + "\n"


def test_a_close_racing_an_import_stores_the_history_wholly_before_or_after_it(
    app, live_server, root
):
    """The import in a thread of its own (a service: the command line's), the close over
    HTTP, released together; then reopened for the next round. Staggered a little either way
    from round to round, so both orders happen."""
    outcomes = []
    for round_, (import_delay, close_delay) in enumerate(STAGGER):
        before = read_reports()

        def do_import(round_=round_, delay=import_delay):
            with app.app_context():
                time.sleep(delay)
                return history_import.import_csv(Principal.cli(), late_csv(round_))

        def do_close(delay=close_delay):
            time.sleep(delay)
            return call(live_server, root.token, "closeMonth", BODY)

        imported, (status, body) = in_parallel([do_import, do_close])
        assert imported.written == 36
        assert status == 200, body
        closed = read_reports()
        adjustments = read_adjustments()
        status, body = call(live_server, root.token, "reopenMonth", {**BODY, "reason": "race"})
        assert status == 200, body
        after = read_reports()
        changed = differences(before, after)
        assert {company: set(kinds) for company, kinds in changed.items()} == {
            "acme": {"ddi"},
            "globex": {"ddi", "user"},
            "initech": {"ddi", "user"},
            "umbrella": {"ddi"},
        }
        if closed == before:
            outcomes.append("close first")
            assert adjustments == changed
            # Left out of the closed figures: the import names the month (its warning).
            assert imported.closed_months == ["2025-10"], outcomes
        else:
            outcomes.append("import first")
            assert closed == after, f"the close stored part of the import, round {round_}"
            assert adjustments == {}
            # The import ran before the close: it had no closed month to warn of.
            assert imported.closed_months == [], outcomes


def test_an_import_during_a_close_waits_for_it_and_warns(app, live_server, root, monkeypatch):
    """The race above, made deterministic: the close (over HTTP) pauses once its snapshot is
    taken, while it computes; the import starts then. Without the close's lock the import
    would commit inside that window, be left out of the figures and name no closed month (its
    check ran before the close committed): this test found that. With it (the close holds
    SHARE UPDATE EXCLUSIVE on history_intervals from its first statement), the import waits
    for the close, then sees the month closed and names it. SQLite's writers take turns."""
    if db.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL only: SQLite runs one write transaction at a time")
    before = read_reports()
    snapshot_taken, import_done = threading.Event(), threading.Event()
    store = month_close._store

    def paused_store(*args):
        if not snapshot_taken.is_set():
            snapshot_taken.set()
            # Go on once the import has either committed (which the close's lock must
            # prevent) or is waiting for a lock, which only the close holds.
            wait_until(
                lambda: import_done.is_set() or waiting_on_a_lock(),
                30,
                "the import to commit or to wait for the close's lock",
            )
        return store(*args)

    monkeypatch.setattr(month_close, "_store", paused_store)
    with ThreadPoolExecutor(1) as pool:
        closing = pool.submit(call, live_server, root.token, "closeMonth", BODY)
        assert snapshot_taken.wait(timeout=30)
        try:
            imported = history_import.import_csv(Principal.cli(), late_csv(0))
        finally:
            import_done.set()
        status, body = closing.result(timeout=60)
    assert status == 200, body
    assert imported.written == 36
    closed = read_reports()
    adjustments = read_adjustments()
    assert call(live_server, root.token, "reopenMonth", {**BODY, "reason": "x"})[0] == 200
    after = read_reports()
    assert closed == before, "the close's figures are its snapshot's: without the import"
    assert adjustments == differences(before, after)
    assert imported.closed_months == ["2025-10"], "the import waited for the close, and warns"


def test_a_live_change_during_a_close_into_its_month_waits_and_is_noted(
    app, live_server, root, monkeypatch
):
    """A live change stamped on the month's last day that reaches the rollup while the close
    (paused once its snapshot is taken) computes: left out of the close's figures, it must be
    in the record of writes since the close (close_writes), or the changes since the close,
    read from that record, would miss it. The close holds SHARE on daily_peaks from before its
    snapshot, so the change waits for it, then sees the month closed and notes its company.
    (A change committed unseen would leave the record without it: this test fails then.)"""
    if db.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL only: SQLite runs one write transaction at a time")
    before = read_reports()
    snapshot_taken, change_done = threading.Event(), threading.Event()
    store = month_close._store

    def paused_store(*args):
        if not snapshot_taken.is_set():
            snapshot_taken.set()
            wait_until(
                lambda: change_done.is_set() or waiting_on_a_lock(),
                30,
                "the change to commit or to wait for the close's lock",
            )
        return store(*args)

    monkeypatch.setattr(month_close, "_store", paused_store)
    # In flight as the month ended: stamped on its last day, committed after its close began.
    monkeypatch.setattr(changes, "write_clock", lambda session: datetime(2025, 10, 31, 23))
    with ThreadPoolExecutor(1) as pool:
        closing = pool.submit(call, live_server, root.token, "closeMonth", BODY)
        assert snapshot_taken.wait(timeout=30)
        try:
            crud.create(
                Principal.cli(),
                kinds.PHONE_USER,
                {"username": "late", "virt_exten": "300", "company": "umbrella"},
            )
        finally:
            change_done.set()
        status, body = closing.result(timeout=60)
    assert status == 200, body
    closed = read_reports()
    adjustments = read_adjustments()
    assert_close_writes_cover()
    assert call(live_server, root.token, "reopenMonth", {**BODY, "reason": "x"})[0] == 200
    after = read_reports()
    assert closed == before, "the close's figures are its snapshot's: without the change"
    assert adjustments == differences(before, after)
    assert "umbrella" in adjustments


def test_concurrent_reopens_one_wins(live_server, root):
    for version in (1, 2, 3):
        status, body = call(live_server, root.token, "closeMonth", BODY)
        assert status == 200 and body["period"]["version"] == version, body
        results = in_parallel(
            [
                lambda: call(live_server, root.token, "reopenMonth", {**BODY, "reason": "left"}),
                lambda: call(live_server, root.token, "reopenMonth", {**BODY, "reason": "right"}),
            ]
        )
        assert sorted(status for status, _ in results) == [200, 409], results
        for status, body in results:
            if status == 409:
                assert_conflict(body)
            else:
                assert body["period"] == {"year": YEAR, "month": MONTH, "closed": False}
        assert count(MonthClose, MonthClose.reopened_at.is_not(None)) == version
        assert audited("month.reopen") == version
        db.session.rollback()
        reason = db.session.scalar(
            select(MonthClose.reopen_reason).where(MonthClose.version == version)
        )
        winner = next(i for i, (status, _) in enumerate(results) if status == 200)
        assert reason == ("left", "right")[winner]
