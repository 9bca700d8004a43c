"""Webhooks do not wait for each other: the real worker (services/events/delivery.py) running
in a thread of the test, on real time, with its delivery threads, against real HTTP receivers
on 127.0.0.1, one of them slow or silent. The fast webhook's events arrive within 1 s of their
commit while the other is still working through its backlog; stopping leaves every cursor
where its receiver's answers put it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from webapp.extensions import db
from webapp.services.events import delivery

from .test_delivery import (
    Receiver,
    attempts,
    hook_row,
    make_ddis,
    new_hook,
    running_receiver,
)
from .waiting import wait_until

pytestmark = [
    pytest.mark.slow,  # real time: a slow receiver's seconds
    pytest.mark.usefixtures("allow_loopback_webhooks"),
]

SLOW_ANSWER = 2.0  # seconds a slow receiver takes to answer
BUDGET = 1.0  # seconds from a commit to its arrival at an unhindered webhook

receiver = pytest.fixture(running_receiver, name="receiver")
slow = pytest.fixture(running_receiver, name="slow")


class Running:
    """A worker's run() on a thread of the test, in an app context of its own."""

    def __init__(self, app, worker: delivery.Worker):
        self.worker = worker
        self.errors: list[BaseException] = []

        def run() -> None:
            try:
                with app.app_context():
                    worker.run()
            except BaseException as exc:  # pragma: no cover - reported by stop()
                self.errors.append(exc)

        self.thread = threading.Thread(target=run, name="worker-under-test")
        self.thread.start()

    def stop(self) -> None:
        """As SIGTERM does: the POSTs under way finish and are saved, then run() returns."""
        self.worker.stopping = True
        self.thread.join(timeout=SLOW_ANSWER * 5)
        assert not self.thread.is_alive(), "the worker did not stop"
        assert not self.errors, self.errors


@pytest.fixture
def running(app, world) -> Iterator[list[Running]]:
    started: list[Running] = []
    yield started
    for each in started:
        if each.thread.is_alive():
            each.stop()


def commit(*numbers: str) -> float:
    """One transaction creating these DDIs (one event each); when its commit returned."""
    make_ddis(*numbers)
    return time.monotonic()


def arrivals(receiver: Receiver, path: str, count: int) -> list[float]:
    """When the first `count` requests to `path` arrived, waiting for them."""
    wait_until(lambda: len(receiver.seen(path)) >= count, 10, f"{count} requests to {path}")
    return [r.arrived for r in receiver.seen(path)[:count]]


def test_a_slow_receiver_does_not_delay_another_webhook(app, receiver, slow, running):
    slow.script = lambda _request: (200, SLOW_ANSWER)
    slow_id, _ = new_hook(slow.url("/slow"))
    fast_id, _ = new_hook(receiver.url("/fast"))
    worker = delivery.Worker(db.engine)
    running.append(Running(app, worker))

    first = commit("2090000001", "2090000002", "2090000003")  # events 1-3, for both
    assert all(at - first <= BUDGET for at in arrivals(receiver, "/fast", 3))
    assert receiver.ids("/fast") == [1, 2, 3]
    # The slow webhook is at its first event: two more wait behind it, 4 s of answers. Its
    # POST may start a moment after the fast webhook's three (its own thread, a loaded CI
    # machine): waited for, well within the 2 s that answer takes.
    wait_until(lambda: slow.ids("/slow"), BUDGET, "the slow webhook's first POST")
    assert slow.ids("/slow") == [1]
    assert hook_row(slow_id).cursor == 0

    second = commit("2090000004", "2090000005")  # events 4-5, while the slow one works on
    assert all(at - second <= BUDGET for at in arrivals(receiver, "/fast", 5))
    assert receiver.ids("/fast") == [1, 2, 3, 4, 5]
    assert len(slow.delivered_ids("/slow")) < 3, "the slow backlog was done: nothing proven"

    # Stopped while the slow webhook's POST is under way: it is answered, and saved.
    running[0].stop()
    answered = slow.delivered_ids("/slow")
    assert answered == slow.ids("/slow") == list(range(1, len(answered) + 1))
    assert hook_row(slow_id).cursor == answered[-1]
    assert hook_row(fast_id).cursor == 5
    assert worker.delivered == worker.attempts == 5 + len(answered)
    assert not receiver.overlaps and not slow.overlaps


def test_a_receiver_that_never_answers_does_not_delay_another_webhook(app, receiver, slow, running):
    timeout = 2.0  # the worker's no-answer timeout, shortened from 10 s for the test
    slow.script = lambda _request: (200, timeout + 3)  # answers long after the worker gave up
    silent_id, _ = new_hook(slow.url("/silent"))
    new_hook(receiver.url("/fast"))
    worker = delivery.Worker(db.engine, sender=delivery.Sender(timeout=timeout))
    running.append(Running(app, worker))

    first = commit("2091000001", "2091000002")
    assert all(at - first <= BUDGET for at in arrivals(receiver, "/fast", 2))
    wait_until(lambda: slow.seen("/silent"), 5, "the POST that gets no answer")
    second = commit("2091000003")  # while that POST waits
    assert all(at - second <= BUDGET for at in arrivals(receiver, "/fast", 3))
    assert receiver.ids("/fast") == [1, 2, 3]

    # The silent webhook's first attempt ends at the timeout; its retry is 5 s later.
    wait_until(lambda: attempts(silent_id), 2 * timeout, "the timed-out attempt saved")
    running[0].stop()
    (tried,) = attempts(silent_id)
    assert (tried.event_id, tried.status, tried.error, tried.outcome) == (
        1,
        None,
        "timeout",
        "retry",
    )
    hook = hook_row(silent_id)
    assert (hook.cursor, hook.head_event, hook.head_attempts) == (0, 1, 1)
    assert slow.ids("/silent") == [1]


def test_each_webhook_gets_its_events_in_order_one_at_a_time_across_threads(app, receiver, running):
    """Eight webhooks on four threads, answers of varying speed, events committed while they
    are delivered: each webhook gets every event once, in id order, never two at once."""
    delays = {f"/h{n}": 0.001 * n for n in range(8)}
    receiver.script = lambda request: (200, delays[request.path])
    for path in delays:
        new_hook(receiver.url(path))
    worker = delivery.Worker(db.engine, concurrency=4)
    running.append(Running(app, worker))
    for n in range(10):
        make_ddis(*(f"20920{n:02d}{i:03d}" for i in range(15)))
    wait_until(lambda: all(len(receiver.seen(p)) >= 150 for p in delays), 60, "150 events at each")
    running[0].stop()
    for path in delays:
        assert receiver.ids(path) == list(range(1, 151)), path
    assert receiver.overlaps == []
    assert receiver.most_in_flight >= 2  # the threads did deliver at the same time
    assert worker.delivered == worker.attempts == 8 * 150


def test_concurrency_is_bounded(app):
    with pytest.raises(ValueError, match="concurrency"):
        delivery.Worker(db.engine, concurrency=0)
    with pytest.raises(ValueError, match="concurrency"):
        delivery.Worker(db.engine, concurrency=delivery.MAX_CONCURRENCY + 1)


def test_the_command_offers_the_workers_default_and_bounds():
    from webapp.cli.events import events_deliver

    option = next(p for p in events_deliver.params if p.name == "concurrency")
    assert option.default == delivery.DEFAULT_CONCURRENCY
    assert (option.type.min, option.type.max) == (1, delivery.MAX_CONCURRENCY)  # type: ignore[attr-defined]
