"""At most EVENTS_MAX_WAITING reads of the change events waiting at once per account
(webapp/services/events/wait_slots.py): through the API with real waiting reads in threads, the
slots freed however a read ends, and counted across processes, a killed holder freeing its own.
The same limit under a real gunicorn, with the health checks timed: tests/test_deploy.py."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
from sqlalchemy import select, text

from webapp.access import Principal
from webapp.errors import TooManyRequests
from webapp.extensions import db
from webapp.models import Account
from webapp.services.events import feed, journal, wait_slots
from webapp.services.identity import api_tokens
from webapp.services.records import crud, kinds

from .factories import ACME, OPERATOR, Caller
from .waiting import wait_until

READ = "/rest/events/read"


@pytest.fixture
def waiters(monkeypatch) -> set[int]:
    """The threads that have begun to wait for a commit (feed._wait_for_commit): a read
    holding its slot, past the point where it could be refused."""
    began: set[int] = set()
    wait_for_commit = feed._wait_for_commit

    def noted(newest: int, deadline: float) -> bool:
        began.add(threading.get_ident())
        return wait_for_commit(newest, deadline)

    monkeypatch.setattr(feed, "_wait_for_commit", noted)
    return began


def post(app, caller: Caller, body: dict[str, Any]):
    return app.test_client().post(READ, json=body, headers=caller.headers)


@contextmanager
def reading(app, caller: Caller, body: dict[str, Any], waiters: set[int], count: int):
    """`count` reads of `caller` in threads of their own, each begun to wait once this
    yields; yields the list their answers go to (status, body) once they have ended."""
    answers: list[tuple[int, Any]] = []
    before = len(waiters)

    def run() -> None:
        r = post(app, caller, body)
        answers.append((r.status_code, r.json))

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: len(waiters) >= before + count, 10, f"{count} reads to wait")
        yield answers
    finally:
        for thread in threads:
            thread.join(15)


def account_id(caller: Caller) -> int:
    found = db.session.scalar(select(Account.id).where(Account.username == caller.username))
    db.session.rollback()
    assert found is not None
    return found


def new_ddi(number: str) -> int:
    """Commit a DDI of acme (one event, which acme's waiting readers wake for); its id."""
    crud.create(
        OPERATOR,
        kinds.DDI,
        {"dialcode": "44", "number": number, "virt_exten": "100", "company": ACME},
    )
    newest = journal.newest()
    db.session.rollback()
    return newest


def assert_refused(r) -> None:
    assert r.status_code == 429, (r.status_code, r.json)
    assert r.json == {
        "result": "error",
        "error": {
            "code": "rate_limited",
            "message": "This account already has 2 reads of the events waiting; "
            "try again when one has ended.",
        },
    }
    # Its own value, not the API rate limit's window (flask-limiter sets one on every answer).
    assert r.headers["Retry-After"] == str(wait_slots.RETRY_AFTER_SECONDS)


def test_an_account_at_its_limit_is_refused_at_once_and_nothing_else_is(app, world, waiters):
    first = new_ddi("1")
    cadmin = world.cadmin
    other_token = Caller("cadmin", api_tokens.create(OPERATOR, "cadmin", "second"))
    wait = {"after": first, "wait": 10}
    with reading(app, cadmin, wait, waiters, 2) as answers:
        # A third that would wait, with either of the account's tokens: refused at once.
        for caller in (cadmin, other_token):
            began = time.monotonic()
            assert_refused(post(app, caller, wait))
            assert time.monotonic() - began < 1
        # Never refused: wait 0, and a read that finds events at once.
        r = post(app, cadmin, {"after": first, "wait": 0})
        assert (r.status_code, r.json["values"]) == (200, [])
        r = post(app, cadmin, {"after": 0, "wait": 10})
        assert (r.status_code, [e["id"] for e in r.json["values"]]) == (200, [first])
        # Another account waits as usual (its whole wait, as nothing is committed).
        began = time.monotonic()
        r = post(app, world.cadmin2, {"after": first, "wait": 0.3})
        assert (r.status_code, r.json["last"]) == (200, first)
        assert time.monotonic() - began >= 0.3
        assert answers == []  # the two still wait
        second = new_ddi("2")  # ends them
    assert [(status, body["last"]) for status, body in answers] == [(200, second)] * 2
    # Both slots free again once they answered.
    with wait_slots.slot(account_id(cadmin)), wait_slots.slot(account_id(cadmin)):
        pass


def test_wait_zero_is_never_refused_and_the_command_line_takes_no_slot(app, world, waiters):
    first = new_ddi("1")
    cadmin = world.cadmin
    with reading(app, cadmin, {"after": first, "wait": 10}, waiters, 2):
        for _ in range(5):
            r = post(app, cadmin, {"after": first})
            assert (r.status_code, r.json["last"]) == (200, first)
        # The operator at the command line has no account: never limited.
        query = feed.Query(after=first, wait=0.05)
        assert feed.read(Principal.cli(), query).last == first
        new_ddi("2")


def test_a_slot_is_freed_when_its_read_ends_in_an_error(app, world, waiters):
    first = new_ddi("1")
    cadmin = world.cadmin
    with reading(app, cadmin, {"after": first, "wait": 10}, waiters, 2) as answers:
        assert_refused(post(app, cadmin, {"after": first, "wait": 10}))
        # The counter the waiting reads look at disappears under them: each read fails (500).
        with db.engine.begin() as connection:
            connection.execute(text("ALTER TABLE event_counter RENAME TO event_counter_away"))
        try:
            wait_until(lambda: len(answers) == 2, 10, "the two reads to fail")
        finally:
            with db.engine.begin() as connection:
                connection.execute(text("ALTER TABLE event_counter_away RENAME TO event_counter"))
    assert [(status, body["error"]["code"]) for status, body in answers] == [
        (500, "internal_error")
    ] * 2
    r = post(app, cadmin, {"after": first, "wait": 0.1})  # waits again: a slot is free
    assert (r.status_code, r.json["last"]) == (200, first)
    with wait_slots.slot(account_id(cadmin)), wait_slots.slot(account_id(cadmin)):
        pass


def test_a_slot_is_freed_by_an_exception_or_a_refusal_inside_it(app, world):
    me = account_id(world.cadmin)
    for _ in range(3):
        with pytest.raises(RuntimeError), wait_slots.slot(me), wait_slots.slot(me):
            raise RuntimeError("the read failed")
    with wait_slots.slot(me), wait_slots.slot(me), pytest.raises(TooManyRequests):  # noqa: SIM117
        with wait_slots.slot(me):
            pass
    with wait_slots.slot(me), wait_slots.slot(me):
        pass


def _hold(me: int, count: int, holding: Any) -> None:
    """In a forked process (the test's app context copied with it): hold `count` slots until
    killed."""
    with ExitStack() as stack:
        for _ in range(count):
            stack.enter_context(wait_slots.slot(me))
        holding.set()
        signal.pause()


@contextmanager
def other_process_holding(me: int, count: int) -> Iterator[multiprocessing.Process]:
    context = multiprocessing.get_context("fork")
    holding = context.Event()
    process = context.Process(target=_hold, args=(me, count, holding), daemon=True)
    process.start()
    try:
        assert holding.wait(10), "the other process to take its slots"
        yield process
    finally:
        if process.is_alive():
            os.kill(process.pid, signal.SIGKILL)
        process.join(10)


def test_slots_count_across_processes_and_a_killed_holder_frees_its_own(app, world):
    first = new_ddi("1")
    cadmin = world.cadmin
    me = account_id(cadmin)
    with other_process_holding(me, 1) as holder:
        with wait_slots.slot(me):  # the second, here
            assert_refused(post(app, cadmin, {"after": first, "wait": 10}))
        with wait_slots.slot(me), pytest.raises(TooManyRequests):  # noqa: SIM117
            with wait_slots.slot(me):
                pass
        # Killed as gunicorn kills a worker past its timeout: no code of its own runs.
        os.kill(holder.pid, signal.SIGKILL)
        holder.join(10)
        with wait_slots.slot(me), wait_slots.slot(me):
            pass
    # Another account's slots, all taken by another process: no matter.
    with (
        other_process_holding(account_id(world.cadmin2), 2),
        wait_slots.slot(me),
        wait_slots.slot(me),
    ):
        pass
