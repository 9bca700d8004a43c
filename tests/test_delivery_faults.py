"""Webhook delivery under faults: real `flask events deliver` processes against the test
database, a real HTTP receiver on 127.0.0.1 that goes down, answers 503, answers slowly; a
worker killed; the database ending the worker's connections; two workers at once.

The workers run on real time, so each test waits for real retries (the first after 5 s)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select, text
from sqlalchemy.engine import make_url

from webapp.extensions import db
from webapp.models import Webhook, WebhookAttempt
from webapp.services.events import delivery, webhooks
from webapp.services.records import crud, kinds

from .factories import OPERATOR
from .test_delivery import Receiver, first_arrivals, running_receiver
from .waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("allow_loopback_webhooks")]

ROOT = Path(__file__).resolve().parent.parent
WORKER_NAME = "webhook-worker"  # the application_name of its PostgreSQL connections


class Workers:
    """`flask events deliver` subprocesses on the test database; stopped at the end."""

    def __init__(self, app, tmp_path: Path):
        url = app.config["SQLALCHEMY_DATABASE_URI"]
        if url.startswith("postgresql"):
            url = (
                make_url(url)
                .update_query_dict({"application_name": WORKER_NAME})
                .render_as_string(hide_password=False)
            )
        self.env = {
            **os.environ,
            "DATABASE_URL": url,
            "INSTANCE_PATH": str(tmp_path / "instance"),
            # The app's: the webhook secrets the test made are sealed with a key derived
            # from it, as a deployment's worker and server share it.
            "SECRET_KEY": app.config["SECRET_KEY"],
            "WEBHOOK_ALLOW_NETWORKS": "127.0.0.0/8",  # where the receivers listen
        }
        self.tmp_path = tmp_path
        self.started: list[tuple[subprocess.Popen, Path]] = []

    def start(self, *options: str) -> subprocess.Popen:
        db.session.rollback()  # let the worker see a fresh state
        log = self.tmp_path / f"worker-{len(self.started)}.log"
        with log.open("w") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "flask", "--app", "app", "events", "deliver", *options],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.started.append((process, log))
        return process

    def log(self, process: subprocess.Popen) -> str:
        return next(log for p, log in self.started if p is process).read_text()

    def stop(self, process: subprocess.Popen, timeout: float = 15) -> int:
        """SIGTERM, as a service manager stops it; SIGKILL if it is not gone in `timeout`."""
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                return process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
        return process.wait()

    def stop_all(self) -> None:
        for process, _ in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process, _ in self.started:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def workers(world, tmp_path) -> Iterator[Workers]:
    w = Workers(world.factory.app, tmp_path)
    yield w
    w.stop_all()


receiver = pytest.fixture(running_receiver, name="receiver")


# A second receiver, for a webhook beside the one under test.
bystander = pytest.fixture(running_receiver, name="bystander")


def make_ddis(
    prefix: str, count: int, per_transaction: int | None = None, company: str = "acme"
) -> list[int]:
    """`count` DDIs of `company`, in transactions of `per_transaction` (all in one by
    default); the ids of their events."""
    step = per_transaction or count
    for start in range(0, count, step):
        crud.create(
            OPERATOR,
            kinds.DDI,
            [
                {
                    "dialcode": "44",
                    "number": f"{prefix}{n:05d}",
                    "virt_exten": "1",
                    "company": company,
                }
                for n in range(start, min(start + step, count))
            ],
        )
    db.session.rollback()
    last = webhooks.newest_event()
    return list(range(last - count + 1, last + 1))


def attempts(webhook_id: int) -> list[WebhookAttempt]:
    db.session.rollback()
    rows = list(
        db.session.scalars(
            select(WebhookAttempt)
            .where(WebhookAttempt.webhook_id == webhook_id)
            .order_by(WebhookAttempt.id)
        )
    )
    db.session.rollback()
    return rows


def wait_saved(webhook_id: int, last_id: int, timeout: float = 10) -> None:
    """Wait until the worker has saved its progress to `last_id` (the receiver may have answered
    before the worker committed the attempts)."""

    def saved() -> bool:
        db.session.rollback()
        hook = db.session.get(Webhook, webhook_id)
        assert hook is not None
        db.session.refresh(hook)
        return hook.cursor >= last_id

    wait_until(saved, timeout, f"the cursor at {last_id}")


def assert_all_delivered_in_order(receiver: Receiver, path: str, ids: list[int]) -> None:
    """Every event answered 2xx at least once; first arrivals in id order, nothing skipped."""
    assert set(receiver.delivered_ids(path)) == set(ids), path
    assert first_arrivals(receiver.ids(path)) == ids, path
    assert first_arrivals(receiver.delivered_ids(path)) == ids, path


def test_receiver_down_then_answering_503_then_back_loses_nothing(workers, receiver, bystander):
    status = {"now": 200}
    receiver.script = lambda _request: status["now"]
    # The webhook under test takes acme's events; a bystander webhook, on a receiver that stays
    # up, takes globex's: its deliveries show how far the worker has gone meanwhile.
    hook_id = webhooks.create(OPERATOR, receiver.url("/h"), companies=["acme"])[0].id
    bystander_id = webhooks.create(OPERATOR, bystander.url("/b"), companies=["globex"])[0].id
    worker = workers.start()
    ids = make_ddis("2080", 20, per_transaction=5)
    wait_until(lambda: len(receiver.delivered_ids()) >= 20, 20, "the first events")

    # Down: the listener is closed, a connection is refused. One failed attempt, then back
    # before its retry 5 s later.
    receiver.down()
    ids += make_ddis("2081", 20, per_transaction=5)
    wait_until(
        lambda: any(a.error == "connection refused" for a in attempts(hook_id)), 10, "a refusal"
    )
    # A whole pass of the worker after the refusal's, while the receiver is down: three globex
    # events, each committed once the bystander has saved the one before, so each reaches it
    # in a later pass than the one before (a pass serves a webhook once); the third's began
    # after the pass following the refusal's had ended. Had the worker not kept to the
    # retry's time, it would have tried the webhook under test in that pass, and been refused.
    for n in range(3):
        wait_saved(bystander_id, make_ddis(f"2088{n}", 1, company="globex")[-1])
    receiver.up()
    wait_until(lambda: len(set(receiver.delivered_ids())) >= 40, 15, "delivery after the outage")

    # 503 for a while: one failed attempt, then 2xx again before the retry.
    status["now"] = 503
    ids += make_ddis("2082", 20, per_transaction=5)
    wait_until(lambda: any(r.status == 503 for r in receiver.seen()), 10, "a 503")
    status["now"] = 200
    wait_until(lambda: len(set(receiver.delivered_ids())) >= 60, 15, "delivery after the 503s")
    wait_saved(hook_id, ids[-1])

    assert_all_delivered_in_order(receiver, "/h", ids)
    failures = [a for a in attempts(hook_id) if a.outcome != "delivered"]
    assert [(a.status, a.error, a.outcome) for a in failures] == [
        (None, "connection refused", "retry"),
        (503, None, "retry"),
    ]
    assert workers.stop(worker) == 0  # SIGTERM: a clean stop
    assert worker.returncode == 0


def test_an_answer_slower_than_the_timeout_is_no_answer_and_is_retried(workers, receiver):
    slow = {"left": 1}

    def script(_request):
        if slow["left"]:
            slow["left"] -= 1
            return (200, delivery.TIMEOUT_SECONDS + 1.5)
        return 200

    receiver.script = script
    hook_id = webhooks.create(OPERATOR, receiver.url("/h"))[0].id
    ids = make_ddis("2083", 3)
    workers.start()
    wait_until(lambda: set(receiver.delivered_ids()) >= set(ids[1:]), 30, "the retry")
    wait_saved(hook_id, ids[-1])
    tried = attempts(hook_id)
    first, second = tried[0], tried[1]
    assert (first.event_id, first.status, first.error, first.outcome) == (
        ids[0],
        None,
        "timeout",
        "retry",
    )
    assert 10_000 <= first.duration_ms < 11_000
    assert second.event_id == ids[0] and second.outcome == "delivered"
    assert (second.at - first.at).total_seconds() >= 5
    assert [(a.event_id, a.outcome) for a in tried[1:]] == [(i, "delivered") for i in ids]
    assert receiver.ids() == [ids[0], *ids]
    assert receiver.seen()[0].headers["webhook-id"] == receiver.seen()[1].headers["webhook-id"]


def test_a_worker_killed_mid_batch_is_replaced_and_nothing_is_skipped(workers, receiver):
    receiver.script = lambda _request: (200, 0.02)
    webhooks.create(OPERATOR, receiver.url("/h"))
    ids = make_ddis("2084", 150)
    worker = workers.start()
    wait_until(lambda: len(receiver.seen()) >= 80, 20, "80 arrivals")
    worker.send_signal(signal.SIGKILL)
    worker.wait(10)
    before = len(receiver.seen())
    assert before < 150, "the worker finished before it was killed"

    workers.start()
    wait_until(lambda: set(receiver.delivered_ids()) >= set(ids), 20, "every event")
    assert_all_delivered_in_order(receiver, "/h", ids)
    repeated = len(receiver.seen()) - len(ids)
    # At least once: what the killed worker sent since it last saved is sent again, no more.
    assert 0 <= repeated < before
    assert not receiver.overlaps


def worker_backends() -> set[int]:
    """PostgreSQL: the backends serving the workers' connections now."""
    with db.engine.connect() as conn:
        return set(
            conn.execute(
                text(
                    "SELECT pid FROM pg_stat_activity"
                    " WHERE datname = current_database() AND application_name = :name"
                ),
                {"name": WORKER_NAME},
            ).scalars()
        )


def test_the_database_ending_the_workers_connections_is_recovered_from(workers, receiver):
    if db.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL only: SQLite has no server to end a connection")
    receiver.script = lambda _request: (200, 0.005)
    webhooks.create(OPERATOR, receiver.url("/h"))
    ids = make_ddis("2085", 400)
    worker = workers.start()
    wait_until(lambda: len(receiver.seen()) >= 20, 20, "the first arrivals")
    terminated = 0
    cut: set[int] = set()  # the backends of the worker's connections ended so far
    for _ in range(3):
        # Each cut ends connections the worker opened since the one before: it is back.
        wait_until(lambda: worker_backends() - cut, 20, "the worker on the database again")
        with db.engine.connect() as conn:
            ended = conn.execute(
                text(
                    "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND application_name = :name"
                ),
                {"name": WORKER_NAME},
            ).all()
            conn.commit()
        terminated += len(ended)
        cut.update(pid for pid, _ in ended)
    assert terminated >= 3
    more = make_ddis("2086", 20)  # after the last cut: the worker still picks up new events
    wait_until(lambda: set(receiver.delivered_ids()) >= set(ids + more), 30, "every event")
    assert worker.poll() is None, workers.log(worker)  # it carried on
    assert_all_delivered_in_order(receiver, "/h", ids + more)
    assert "database unavailable" in workers.log(worker)


def test_two_workers_never_deliver_to_one_webhook_at_once(workers, receiver):
    receiver.script = lambda _request: (200, 0.001)
    paths = ("/a", "/b", "/c")
    for path in paths:
        webhooks.create(OPERATOR, receiver.url(path))
    ids = make_ddis("2087", 500, per_transaction=100)
    first, second = workers.start(), workers.start()
    wait_until(
        lambda: all(set(receiver.delivered_ids(p)) >= set(ids) for p in paths),
        40,
        "every event at every webhook",
    )
    assert receiver.most_in_flight >= 2  # the two delivered at the same time
    assert receiver.overlaps == []  # but never two requests in flight for one webhook
    for path in paths:
        assert_all_delivered_in_order(receiver, path, ids)
    assert first.poll() is None and second.poll() is None


def test_two_workers_with_threads_keep_each_webhooks_order(workers, receiver):
    """Two workers of three threads each, eight webhooks answering at different speeds, events
    committed while they deliver: each webhook gets its events in id order, never two at once,
    and the workers did deliver to several webhooks at the same time."""
    paths = [f"/w{n}" for n in range(8)]
    receiver.script = lambda request: (200, 0.002 * paths.index(request.path))
    for path in paths:
        webhooks.create(OPERATOR, receiver.url(path))
    first, second = workers.start("--concurrency", "3"), workers.start("--concurrency", "3")
    ids: list[int] = []
    for n in range(6):
        ids += make_ddis(f"2089{n}", 40, per_transaction=10)
    wait_until(
        lambda: all(set(receiver.delivered_ids(p)) >= set(ids) for p in paths),
        60,
        "every event at every webhook",
    )
    assert receiver.most_in_flight >= 3  # more than one thread of one worker at a time
    assert receiver.overlaps == []  # but never two requests in flight for one webhook
    for path in paths:
        assert receiver.ids(path) == ids, path  # in order, and none sent twice
    assert first.poll() is None and second.poll() is None


def test_sigterm_while_posts_are_under_way_saves_every_webhooks_cursor(workers, receiver):
    """SIGTERM while four webhooks each have a POST under way: each is answered, each
    webhook's cursor saved at its last answered event, and the next worker sends on from
    there: no event twice, none skipped."""
    paths = [f"/s{n}" for n in range(4)]
    receiver.script = lambda _request: (200, 0.3)
    hook_ids = {path: webhooks.create(OPERATOR, receiver.url(path))[0].id for path in paths}
    ids = make_ddis("2090", 30)
    worker = workers.start()
    wait_until(
        lambda: all(len(receiver.seen(p)) >= 2 for p in paths), 20, "two POSTs to each webhook"
    )
    assert workers.stop(worker) == 0
    for path, hook_id in hook_ids.items():
        answered = receiver.delivered_ids(path)
        assert receiver.ids(path) == answered == ids[: len(answered)], path
        assert len(answered) < len(ids), "the worker finished before it was stopped"
        db.session.rollback()
        assert db.session.get(Webhook, hook_id).cursor == answered[-1], path  # saved, exited
        assert [a.event_id for a in attempts(hook_id)] == answered, path
    receiver.script = lambda _request: 200
    workers.start()
    wait_until(
        lambda: all(set(receiver.delivered_ids(p)) >= set(ids) for p in paths),
        30,
        "the rest",
    )
    for path in paths:
        assert receiver.ids(path) == ids, path  # the stopped worker's progress was all kept
