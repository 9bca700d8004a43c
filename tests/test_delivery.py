"""Webhook delivery in process: a real HTTP receiver on 127.0.0.1 and the real worker
(services/events/delivery.py), walked through time with an injected clock."""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import signal
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from sqlalchemy import select
from standardwebhooks.webhooks import Webhook as Verifier
from standardwebhooks.webhooks import WebhookVerificationError

from webapp.access import Principal
from webapp.database import utcnow
from webapp.errors import Conflict, Invalid
from webapp.extensions import db
from webapp.models import EventTxn, Webhook, WebhookAttempt
from webapp.services.events import delivery, feed, journal, webhooks
from webapp.services.records import crud, kinds

from .factories import OPERATOR

# The receivers listen on 127.0.0.1, which webhooks may target only when allowed.
pytestmark = pytest.mark.usefixtures("allow_loopback_webhooks")

# --- a receiver -------------------------------------------------------------------------------


@dataclass
class Request:
    """One POST as the receiver saw it."""

    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes
    arrived: float  # time.monotonic()
    status: int | None = None  # what it answered (None: it never did)

    @property
    def event(self) -> dict[str, Any]:
        return json.loads(self.body)

    @property
    def event_id(self) -> int:
        return int(self.event["id"])


# What to answer a request: a status, or (status, seconds to wait before answering).
Script = Callable[[Request], "int | tuple[int, float]"]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    receiver: Receiver


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the worker's connection pool expects
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.receiver._opened(self.connection)

    def finish(self) -> None:
        self.server.receiver._closed(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if len(body) < length:
            # The sender died mid-request (a worker killed by a test): no request arrived, as
            # a real server would not hand a cut one to its application either.
            self.close_connection = True
            return
        request = Request(
            self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic()
        )
        receiver = self.server.receiver
        receiver._arrive(request)
        left = False
        try:
            try:
                answer = receiver.script(request)
            except Exception as exc:  # a test's script failing: a 500, and the test told
                receiver.errors.append(exc)
                answer = 500
            status, delay = answer if isinstance(answer, tuple) else (answer, 0.0)
            if delay:  # a slow receiver, as the script asks: the worker's wait is under test
                time.sleep(delay)
            # Noted before the answer leaves: the worker may act on it (send the webhook's next
            # event, on another connection when its pool has none free), and the test read it,
            # before this thread runs again.
            request.status = status
            receiver._left(request)
            left = True
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()
            self.wfile.flush()
        except OSError:  # the worker gave up on the answer and closed the connection
            request.status = None
            self.close_connection = True
        finally:
            if not left:
                receiver._left(request)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Receiver:
    """An HTTP/1.1 server on 127.0.0.1 that records every POST and answers as `script` says
    (200 by default). `down()` closes the listener and every open connection (a new one is
    refused); `up()` listens again on the same port. It also notes whether two requests to
    the same path were ever in flight at once."""

    def __init__(self, script: Script | None = None):
        self.script: Script = script or (lambda _request: 200)
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.in_flight: Counter[str] = Counter()
        self.overlaps: list[str] = []  # paths that had two requests in flight at once
        self.most_in_flight = 0  # the most requests in flight at once, whatever their paths
        self.errors: list[Exception] = []  # raised by the script
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.up()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def up(self) -> None:
        server = _Server(("127.0.0.1", self.port), _Handler)
        server.receiver = self
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def down(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        with self.lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self._server = None

    def close(self) -> None:
        self.down()

    # what the handler reports
    def _opened(self, connection: socket.socket) -> None:
        with self.lock:
            self._connections.add(connection)

    def _closed(self, connection: socket.socket) -> None:
        with self.lock:
            self._connections.discard(connection)

    def _arrive(self, request: Request) -> None:
        with self.lock:
            self.in_flight[request.path] += 1
            if self.in_flight[request.path] > 1:
                self.overlaps.append(request.path)
            self.most_in_flight = max(self.most_in_flight, sum(self.in_flight.values()))
            self.requests.append(request)

    def _left(self, request: Request) -> None:
        with self.lock:
            self.in_flight[request.path] -= 1

    # what the tests ask
    def seen(self, path: str | None = None) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if path is None or r.path == path]

    def ids(self, path: str | None = None) -> list[int]:
        return [r.event_id for r in self.seen(path)]

    def delivered_ids(self, path: str | None = None) -> list[int]:
        """The events answered with a 2xx, in arrival order."""
        return [r.event_id for r in self.seen(path) if r.status and 200 <= r.status < 300]


def first_arrivals(ids: list[int]) -> list[int]:
    """Each event id at its first arrival, in arrival order."""
    seen: set[int] = set()
    first = []
    for event_id in ids:
        if event_id not in seen:
            seen.add(event_id)
            first.append(event_id)
    return first


def running_receiver() -> Iterator[Receiver]:
    """A Receiver for the test, closed after it; whatever it could not answer fails the test."""
    r = Receiver()
    yield r
    r.close()
    assert not r.errors, r.errors


receiver = pytest.fixture(running_receiver, name="receiver")


# --- the worker and its clock -----------------------------------------------------------------


class Clock:
    """The worker's clock: stands still until moved."""

    def __init__(self, now: datetime | None = None):
        self.now = now or utcnow()

    def __call__(self) -> datetime:
        return self.now

    def to(self, when: datetime) -> None:
        self.now = when

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@dataclass
class Run:
    worker: delivery.Worker
    clock: Clock = field(default_factory=Clock)

    def drain(self) -> int:
        """Passes until nothing is due at the clock's time; how many passes did work."""
        worked = 0
        while self.worker.run_once():
            worked += 1
        return worked


@pytest.fixture
def run(world) -> Iterator[Run]:
    """A worker on the test database with a clock of the test's (and the world's companies)."""
    clock = Clock()
    worker = delivery.Worker(db.engine, clock=clock)
    yield Run(worker, clock)
    worker.locks.close()


def new_hook(url: str, types: tuple[str, ...] = (), companies: tuple[str, ...] = ()):
    hook, secret = webhooks.create(OPERATOR, url, types, companies)
    return hook.id, secret


def hook_row(webhook_id: int) -> Webhook:
    db.session.rollback()
    hook = db.session.get(Webhook, webhook_id)
    assert hook is not None
    db.session.refresh(hook)
    return hook


def attempts(webhook_id: int) -> list[WebhookAttempt]:
    db.session.rollback()
    return list(
        db.session.scalars(
            select(WebhookAttempt)
            .where(WebhookAttempt.webhook_id == webhook_id)
            .order_by(WebhookAttempt.id)
        )
    )


def readers_view(companies: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every event as a Company-Admin of `companies` reads it."""
    db.session.rollback()
    reader = Principal(username="reader", via="api", admin_of=frozenset(companies))
    return feed.read(reader, feed.Query(limit=feed.MAX_LIMIT)).values


def all_events(world) -> list[dict[str, Any]]:
    """Every event as POST /rest/events/read shows it to a System-Admin."""
    values: list[dict[str, Any]] = []
    after = 0
    while True:
        answer = world.client.post(
            "/rest/events/read", json={"after": after, "limit": 1000}, headers=world.root.headers
        )
        assert answer.status_code == 200, answer.get_data(as_text=True)
        body = answer.get_json()
        values += body["values"]
        if not body["values"]:
            return values
        after = body["last"]


def recorded_at(event_id: int) -> datetime:
    db.session.rollback()
    return db.session.scalar(
        select(EventTxn.at).where(EventTxn.first_id <= event_id, EventTxn.last_id >= event_id)
    )


def ddi(number: str, company: str = "acme", exten: str = "100") -> dict[str, str]:
    return {"dialcode": "44", "number": number, "virt_exten": exten, "company": company}


def make_ddis(*numbers: str, company: str = "acme") -> None:
    """One transaction creating these DDIs: one event each, ids in this order."""
    crud.create(OPERATOR, kinds.DDI, [ddi(n, company) for n in numbers])


def last_event_id() -> int:
    db.session.rollback()
    return webhooks.newest_event()


def every_change_once(world) -> None:
    """One event of each type, by the API as root: DDIs created, updated, moved, deleted; a
    phone user created, updated, deleted; numbers stocked, reserved, released, retired."""

    def api(op: str, body: dict[str, Any]) -> None:
        answer = world.factory.api(world.root, op, body)
        assert answer.status_code == 200, answer.get_data(as_text=True)

    def numbers(op: str, body: dict[str, Any]) -> None:
        headers = world.root.headers
        answer = world.factory.client.post(f"/rest/numbers/{op}", json=body, headers=headers)
        assert answer.status_code == 200, answer.get_data(as_text=True)

    numbers("stock", {"values": [{"dialcode": "44", "number": "2079999999"}]})
    key = {"dialcode": "44", "number": "2079999999"}
    numbers("reserve", {"scope": key, "values": {"company": "acme"}})
    numbers("release", {"scope": key})
    numbers("retire", {"scope": key})

    api("create", {"type": "ddi", "values": [ddi("2070000001"), ddi("2070000002")]})
    api(
        "update",
        {
            "type": "ddi",
            "scope": {"company": "acme", "number": "2070000001"},
            "values": {"virt_exten": "101"},
        },
    )
    api(
        "update",
        {
            "type": "ddi",
            "scope": {"company": "acme", "number": "2070000002"},
            "values": {"company": "globex"},
        },
    )
    api("delete", {"type": "ddi", "scope": {"company": "acme", "number": "2070000001"}})
    user = {"username": "ana", "virt_exten": "300", "company": "initech"}
    api("create", {"type": "user", "values": user})
    api(
        "update",
        {
            "type": "user",
            "scope": {"company": "initech", "username": "ana"},
            "values": {"virt_exten": "301"},
        },
    )
    api("delete", {"type": "user", "scope": {"company": "initech", "username": "ana"}})


# --- what a webhook receives ------------------------------------------------------------------


def test_each_post_is_the_event_as_read_signed_by_the_standard_scheme(world, receiver):
    hook_id, secret = new_hook(receiver.url("/all"))
    every_change_once(world)
    events = all_events(world)
    assert {e["type"] for e in events} == set(webhooks.TYPES)
    handlers = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT))

    worker = delivery.Worker(db.engine)
    worker.run(once=True)

    # run() took SIGTERM and SIGINT only while it ran (pytest's own handler is back)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == handlers
    assert worker.delivered == worker.attempts == len(events)
    seen = receiver.seen("/all")
    assert [r.event for r in seen] == events
    for request, event in zip(seen, events, strict=True):
        assert request.headers["webhook-id"] == f"evt_{event['id']}"
        assert request.headers["content-type"] == "application/json"
        assert request.headers["webhook-signature"].startswith("v1,")
        assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 60
        assert Verifier(secret).verify(request.body, request.headers) == event
        with pytest.raises(WebhookVerificationError):
            Verifier(webhooks.new_secret()).verify(request.body, request.headers)
        with pytest.raises(WebhookVerificationError):  # the body is what is signed
            Verifier(secret).verify(request.body.replace(b'"id"', b'"id" '), request.headers)
    hook = hook_row(hook_id)
    assert hook.cursor == events[-1]["id"]
    assert (hook.head_event, hook.head_attempts, hook.next_attempt_at) == (None, 0, None)
    state = webhooks.state(hook)
    assert not state.retrying and not state.failed and not state.queued
    assert [(a.event_id, a.status, a.outcome) for a in reversed(state.recent)] == [
        (e["id"], 200, "delivered") for e in events
    ]

    # Nothing more is due: another pass sends nothing.
    delivery.Worker(db.engine).run(once=True)
    assert len(receiver.seen()) == len(events)


def test_a_webhook_receives_only_the_events_committed_after_its_creation(app, receiver, run):
    make_ddis("2071000001", "2071000002")
    early_id, _ = new_hook(receiver.url("/early"))
    make_ddis("2071000003")
    late_id, _ = new_hook(receiver.url("/late"))
    make_ddis("2071000004", "2071000005")
    run.drain()
    assert receiver.ids("/early") == [3, 4, 5]
    assert receiver.ids("/late") == [4, 5]
    assert hook_row(early_id).cursor == hook_row(late_id).cursor == 5


def _companies_of(event: dict[str, Any]) -> set[str]:
    """Both sides of a move: the company now and the one before."""
    sides = {event["company"]}
    for record in (event["before"], event["after"]):
        if record is not None:
            sides.add(record["company"])
    return sides


def test_filters_by_event_type_and_company_either_side_of_a_move(world, receiver, run):
    filters = {
        "/all": ((), ()),
        "/created": (("ddi.created", "user.deleted"), ()),
        "/globex": ((), ("globex",)),
        "/initech-updates": (("ddi.updated",), ("initech",)),
    }
    secrets = {path: new_hook(receiver.url(path), *f)[1] for path, f in filters.items()}
    make_ddis("2072000001", "2072000002")  # acme
    make_ddis("2072000003", company="globex")

    def move(number: str, source: str, target: str) -> None:
        crud.update(OPERATOR, kinds.DDI, {"company": source, "number": number}, {"company": target})

    move("2072000001", "acme", "globex")  # into globex
    move("2072000003", "globex", "initech")  # out of globex, into initech
    crud.update(
        OPERATOR, kinds.DDI, {"company": "acme", "number": "2072000002"}, {"virt_exten": "7"}
    )
    crud.create(
        OPERATOR, kinds.PHONE_USER, {"username": "bo", "virt_exten": "1", "company": "globex"}
    )
    crud.delete_rows(OPERATOR, kinds.PHONE_USER, {"company": "globex", "username": "bo"})
    crud.delete_rows(OPERATOR, kinds.DDI, {"company": "initech", "number": "2072000003"})
    events = all_events(world)
    run.drain()

    for path, (types, companies) in filters.items():
        # A company filter delivers what a Company-Admin of those companies reads: the side
        # of a move in another company is null (access.redact).
        read = readers_view(companies) if companies else events
        expected = [
            e
            for e in read
            if (not types or e["type"] in types)
            and (not companies or _companies_of(e) & set(companies))
        ]
        seen = receiver.seen(path)
        assert [r.event for r in seen] == expected, path
        for request in seen:
            Verifier(secrets[path]).verify(request.body, request.headers)
    moves = [e["id"] for e in events if e["type"] == "ddi.updated" and len(_companies_of(e)) == 2]
    assert len(moves) == 2
    assert set(moves) <= set(receiver.ids("/globex"))  # the move in and the move out
    assert receiver.ids("/initech-updates") == [moves[1]]
    # Each cursor moved to the last event, whatever its filter let through.
    for hook in webhooks.listed(OPERATOR):
        assert hook.cursor == events[-1]["id"]


@pytest.mark.slow
def test_events_reach_each_webhook_once_in_order_across_batches(app, receiver, run):
    paths = ("/a", "/b", "/c")
    for path in paths:
        new_hook(receiver.url(path))
    make_ddis(*(f"20730{n:05d}" for n in range(delivery.BATCH * 2 + 50)))
    for n in range(20):
        make_ddis(f"20731{n:05d}")
    total = delivery.BATCH * 2 + 70
    assert run.drain() >= 1
    for path in paths:
        assert receiver.ids(path) == list(range(1, total + 1)), path
    assert not receiver.overlaps


# --- failures, retries, giving up -------------------------------------------------------------


def _walk_to_next_attempt(run: Run, receiver: Receiver, hook_id: int) -> None:
    """Move the clock to just before the webhook's next attempt (nothing is sent), then to it
    (one attempt is made)."""
    due = hook_row(hook_id).next_attempt_at
    assert due is not None
    before = len(receiver.seen())
    run.clock.to(due - timedelta(milliseconds=1))
    assert run.worker.run_once() is False
    assert len(receiver.seen()) == before, "sent before it was due"
    run.clock.to(due)
    assert run.worker.run_once() is True


@pytest.mark.parametrize("failure", ["503", "connection refused"])
def test_a_failed_post_is_retried_on_schedule_and_later_events_wait(app, receiver, run, failure):
    answers = {"status": 503}
    receiver.script = lambda _request: answers["status"]
    hook_id, secret = new_hook(receiver.url("/h"))
    make_ddis("2074000001")
    make_ddis("2074000002")
    if failure == "connection refused":
        receiver.down()

    run.clock.to(utcnow())
    start = run.clock.now
    assert run.worker.run_once() is True
    schedule = [5, 30, 120, 600, 3600, 3600, 3600]
    times = [start]
    for n, delay in enumerate(schedule, start=1):
        hook = hook_row(hook_id)
        assert (hook.head_event, hook.head_attempts, hook.cursor) == (1, n, 0)
        assert hook.next_attempt_at == times[-1] + timedelta(seconds=delay)
        assert webhooks.state(hook).retrying
        _walk_to_next_attempt(run, receiver, hook_id)
        times.append(run.clock.now)
    recorded = attempts(hook_id)
    assert [a.event_id for a in recorded] == [1] * (len(schedule) + 1)
    assert [a.at for a in recorded] == times
    assert {a.outcome for a in recorded} == {"retry"}
    if failure == "503":
        assert {a.status for a in recorded} == {503}
        assert {a.error for a in recorded} == {None}
        assert receiver.ids() == [1] * (len(schedule) + 1)  # event 2 waits behind event 1
        assert {r.headers["webhook-id"] for r in receiver.seen()} == {"evt_1"}
        for request in receiver.seen():
            Verifier(secret).verify(request.body, request.headers)
    else:
        assert {a.status for a in recorded} == {None}
        assert {a.error for a in recorded} == {"connection refused"}
        assert receiver.seen() == []
        receiver.up()

    # The receiver answers again: at the next due time event 1, then event 2, in that order.
    answers["status"] = 204
    _walk_to_next_attempt(run, receiver, hook_id)
    assert run.worker.run_once() is False
    tail = receiver.seen()[-2:]
    assert [(r.event_id, r.status) for r in tail] == [(1, 204), (2, 204)]
    assert tail[0].headers["webhook-id"] == "evt_1"
    hook = hook_row(hook_id)
    assert (hook.cursor, hook.head_event, hook.head_attempts, hook.next_attempt_at) == (
        2,
        None,
        0,
        None,
    )
    assert not webhooks.state(hook).retrying
    assert [a.outcome for a in attempts(hook_id)][-2:] == ["delivered", "delivered"]


def test_attempts_are_recorded_with_status_and_time_taken(app, receiver, run):
    answers = iter([(500, 0.15), (200, 0.05)])
    receiver.script = lambda _request: next(answers)
    hook_id, _ = new_hook(receiver.url("/h"))
    make_ddis("2075000001")
    run.drain()
    run.clock.advance(seconds=5)
    run.drain()
    failed, delivered = attempts(hook_id)
    assert (failed.event_id, failed.status, failed.outcome, failed.error) == (1, 500, "retry", None)
    assert 150 <= failed.duration_ms < 2000
    assert (delivered.status, delivered.outcome) == (200, "delivered")
    assert 50 <= delivered.duration_ms < 2000
    state = webhooks.state(hook_row(hook_id))
    assert [a.id for a in state.recent] == [delivered.id, failed.id]  # newest first

    # No connection at all: no status, the reason instead.
    receiver.down()
    make_ddis("2075000002")
    run.drain()
    refused = attempts(hook_id)[-1]
    assert (refused.event_id, refused.status, refused.error) == (2, None, "connection refused")
    assert refused.outcome == "retry"
    assert webhooks.state(hook_row(hook_id)).retrying


@pytest.mark.slow
def test_an_event_failing_24_hours_after_it_was_recorded_is_given_up(app, receiver, run):
    receiver.script = lambda request: 500 if request.event_id == 1 else 200
    hook_id, _ = new_hook(receiver.url("/h"))
    make_ddis("2076000001")
    make_ddis("2076000002")
    recorded = recorded_at(1)
    run.clock.to(utcnow())
    run.worker.run_once()
    while attempts(hook_id)[-1].outcome == "retry":
        _walk_to_next_attempt(run, receiver, hook_id)
    tried = [a for a in attempts(hook_id) if a.event_id == 1]
    gaps = [(b.at - a.at).total_seconds() for a, b in itertools.pairwise(tried)]
    assert gaps == [5, 30, 120, 600] + [3600] * (len(gaps) - 4)
    assert [a.outcome for a in tried] == ["retry"] * (len(tried) - 1) + ["failed"]
    assert tried[-2].at - recorded < delivery.GIVE_UP_AFTER <= tried[-1].at - recorded
    assert len(tried) == 29  # 0 s, 5 s, 35 s, 155 s, 755 s, 4355 s, then hourly to 24 h
    # The queue went on in the same pass: event 2 delivered right after.
    assert receiver.ids() == [1] * 29 + [2]
    assert attempts(hook_id)[-1].outcome == "delivered"
    hook = hook_row(hook_id)
    assert (hook.cursor, hook.head_event, hook.head_attempts, hook.next_attempt_at) == (
        2,
        None,
        0,
        None,
    )
    state = webhooks.state(hook)
    assert [a.event_id for a in state.failed] == [1]
    assert not state.retrying and state.queued == []


def test_each_event_given_up_is_one_warning_naming_it(app, receiver, run, caplog):
    receiver.script = lambda request: 500
    hook_id, _ = new_hook(receiver.url("/h"))
    make_ddis("2078000001", "2078000002")
    run.clock.to(recorded_at(2) + delivery.GIVE_UP_AFTER)  # one failure gives each up
    with caplog.at_level(logging.INFO, logger=delivery.__name__):
        run.drain()
    assert [(a.event_id, a.outcome) for a in attempts(hook_id)] == [(1, "failed"), (2, "failed")]
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == delivery.__name__]
    assert said == [
        ("WARNING", f"webhook {hook_id}: event 1 given up after 24 h"),
        ("WARNING", f"webhook {hook_id}: event 2 given up after 24 h"),
    ]


def test_a_given_up_event_can_be_redelivered_ahead_of_the_rest(app, receiver, run):
    refuse = {1}
    receiver.script = lambda request: 500 if request.event_id in refuse else 200
    hook_id, secret = new_hook(receiver.url("/h"))
    make_ddis("2077000001")
    make_ddis("2077000002")
    # An attempt a day after the event was recorded: one failure gives it up.
    run.clock.to(recorded_at(1) + delivery.GIVE_UP_AFTER)
    run.drain()
    assert [(a.event_id, a.outcome) for a in attempts(hook_id)] == [(1, "failed"), (2, "delivered")]

    with pytest.raises(Invalid):  # nothing failed to redo
        webhooks.redeliver(OPERATOR, hook_id, 2)
    webhooks.redeliver(OPERATOR, hook_id, 1)
    state = webhooks.state(hook_row(hook_id))
    assert state.queued == [1] and state.failed == []
    with pytest.raises(Conflict):
        webhooks.redeliver(OPERATOR, hook_id, 1)
    assert webhooks.state(hook_row(hook_id)).queued == [1]

    make_ddis("2077000003")
    make_ddis("2077000004")
    refuse.clear()
    run.drain()
    assert receiver.ids() == [1, 2, 1, 3, 4]
    again = receiver.seen()[2]
    assert again.headers["webhook-id"] == "evt_1"
    assert Verifier(secret).verify(again.body, again.headers) == receiver.seen()[0].event
    state = webhooks.state(hook_row(hook_id))
    assert state.queued == [] and state.failed == [] and not state.retrying
    assert hook_row(hook_id).cursor == 4


def test_a_redelivery_that_fails_is_retried_on_schedule_and_the_rest_waits(app, receiver, run):
    refuse = {1}
    receiver.script = lambda request: 503 if request.event_id in refuse else 200
    hook_id, _ = new_hook(receiver.url("/h"))
    make_ddis("2077100001")
    run.clock.to(recorded_at(1) + delivery.GIVE_UP_AFTER)
    run.drain()
    webhooks.redeliver(OPERATOR, hook_id, 1)
    make_ddis("2077100002")
    run.clock.to(utcnow())
    run.drain()
    assert receiver.ids() == [1, 1]  # the redelivery failed; event 2 waits behind it
    hook = hook_row(hook_id)
    assert (hook.head_event, hook.head_attempts) == (1, 1)
    assert hook.next_attempt_at == run.clock.now + timedelta(seconds=5)
    state = webhooks.state(hook)
    assert state.retrying and state.queued == [1]
    refuse.clear()
    _walk_to_next_attempt(run, receiver, hook_id)
    assert receiver.ids() == [1, 1, 1, 2]
    assert webhooks.state(hook_row(hook_id)).queued == []


def test_a_redelivery_of_an_event_pruned_meanwhile_is_dropped(app, receiver, run):
    receiver.script = lambda request: 500 if request.event_id == 1 else 200
    hook_id, _ = new_hook(receiver.url("/h"))
    make_ddis("2077200001")
    run.clock.to(recorded_at(1) + delivery.GIVE_UP_AFTER)
    run.drain()
    webhooks.redeliver(OPERATOR, hook_id, 1)
    assert journal.prune(1, now=utcnow() + timedelta(days=2)) == 1
    run.drain()
    assert receiver.ids() == [1]  # not sent again: there is nothing left to send
    assert webhooks.state(hook_row(hook_id)).queued == []


# --- stopping, deleting, writers meanwhile ----------------------------------------------------


def test_a_worker_told_to_stop_saves_what_it_delivered(app, receiver, run):
    hook_id, _ = new_hook(receiver.url("/h"))
    make_ddis(*(f"20775{n:05d}" for n in range(50)))

    def script(_request: Request) -> int:
        if len(receiver.seen()) == 20:
            run.worker.stopping = True  # as SIGTERM does, during the 20th POST
        return 200

    receiver.script = script
    assert run.worker.run_once() is True
    assert receiver.ids() == list(range(1, 21))
    assert hook_row(hook_id).cursor == 20  # saved: a new worker goes on from event 21
    assert len(attempts(hook_id)) == 20
    worker = delivery.Worker(db.engine, clock=run.clock)
    worker.run(once=True)
    assert receiver.ids() == list(range(1, 51))


@pytest.mark.slow
def test_deleting_a_webhook_stops_its_deliveries_mid_way(app, receiver, run):
    doomed_id, _ = new_hook(receiver.url("/doomed"))
    new_hook(receiver.url("/kept"))
    make_ddis(*(f"20780{n:05d}" for n in range(300)))
    deleted = threading.Event()

    def script(request: Request) -> int:
        # The 40th POST to /doomed deletes its webhook before it is answered.
        if request.path == "/doomed" and len(receiver.seen("/doomed")) == 40:
            with app.app_context():
                webhooks.delete_webhook(OPERATOR, doomed_id)
                db.session.remove()
            deleted.set()
        return 200

    receiver.script = script
    run.drain()
    assert deleted.is_set()
    assert receiver.ids("/doomed") == list(range(1, 41))  # none after the one under way
    assert receiver.ids("/kept") == list(range(1, 301))
    db.session.rollback()
    assert db.session.get(Webhook, doomed_id) is None
    assert attempts(doomed_id) == []


@pytest.mark.slow
def test_delivery_saves_its_progress_while_writers_commit(app, receiver, run):
    """Writers committing all the while never make the worker lose its place (on SQLite a read
    transaction cannot become a write one after another commit): every event once, in order."""
    receiver.script = lambda _request: (200, 0.002)
    hook_id, _ = new_hook(receiver.url("/h"))
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            with app.app_context():
                n = 0
                while not stop.is_set():
                    make_ddis(f"20790{n:05d}", f"20791{n:05d}")
                    n += 1
                    # A breath between commits, in which the worker's saves get the write lock.
                    time.sleep(0.003)
                db.session.remove()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        # At least 2.5 s and over 100 events written meanwhile (a loaded machine writes
        # fewer a second), 60 s at most.
        start = time.monotonic()
        while time.monotonic() < start + 60 and (
            time.monotonic() < start + 2.5 or last_event_id() <= 100
        ):
            run.clock.to(utcnow())
            run.worker.run_once()
    finally:
        stop.set()
        writer.join(timeout=30)
    assert not errors, errors
    run.clock.to(utcnow())
    run.drain()
    total = last_event_id()
    assert total > 100
    assert receiver.ids() == list(range(1, total + 1))  # exactly once: no save was lost
    assert {a.outcome for a in attempts(hook_id)} == {"delivered"}


# --- signing secrets: rotation, and a secret no key opens -------------------------------------


def signatures(request: Request) -> list[str]:
    return request.headers["webhook-signature"].split(" ")


def accepts(secret: str, request: Request) -> bool:
    """Whether a receiver verifying with `secret` (the Standard Webhooks library) accepts it."""
    try:
        Verifier(secret).verify(request.body, request.headers)
    except WebhookVerificationError:
        return False
    return True


def test_a_rotated_secret_signs_beside_the_new_one_for_24_hours(app, receiver, run):
    hook_id, old = new_hook(receiver.url("/h"))
    make_ddis("2079000001")
    run.drain()
    [first] = receiver.seen()
    assert len(signatures(first)) == 1 and accepts(old, first)

    hook, new = webhooks.rotate_secret(OPERATOR, hook_id)
    assert new != old and new.startswith("whsec_")
    assert hook.previous_secret_until is not None
    rotated_at = hook.previous_secret_until - webhooks.PREVIOUS_SECRET_LIFE
    assert abs((rotated_at - utcnow()).total_seconds()) < 60
    # During the 24 h: both sign, the new one first; a receiver with either accepts.
    run.clock.to(hook.previous_secret_until - timedelta(seconds=1))
    make_ddis("2079000002")
    run.drain()
    during = receiver.seen()[-1]
    assert during.event_id == 2
    now = datetime.fromtimestamp(int(during.headers["webhook-timestamp"]), UTC)
    assert signatures(during) == [
        Verifier(s).sign(during.headers["webhook-id"], now, during.body.decode())
        for s in (new, old)
    ]
    assert accepts(new, during) and accepts(old, during)
    assert not accepts(webhooks.new_secret(), during)

    # From the end of the 24 h on, only the new one.
    run.clock.to(hook.previous_secret_until)
    make_ddis("2079000003")
    run.drain()
    after = receiver.seen()[-1]
    assert after.event_id == 3 and len(signatures(after)) == 1
    assert accepts(new, after) and not accepts(old, after)
    assert [a.outcome for a in attempts(hook_id)] == ["delivered"] * 3

    # The expired secret stays unused until `events prune` clears it off the disk.
    assert hook_row(hook_id).previous_secret_sealed is not None
    assert webhooks.drop_expired_secrets(utcnow()) == 0  # not yet expired by the real clock
    assert webhooks.drop_expired_secrets(run.clock.now) == 1
    row = hook_row(hook_id)
    assert (row.previous_secret_sealed, row.previous_secret_until) == (None, None)
    assert webhooks.signing_secrets(row, run.clock.now) == [new]


def test_rotating_again_within_24_hours_drops_the_oldest_at_once(app, receiver, run):
    hook_id, first = new_hook(receiver.url("/h"))
    _, second = webhooks.rotate_secret(OPERATOR, hook_id)
    _, third = webhooks.rotate_secret(OPERATOR, hook_id)
    assert len({first, second, third}) == 3
    assert webhooks.signing_secrets(hook_row(hook_id), run.clock.now) == [third, second]
    make_ddis("2079100001")
    run.drain()
    [request] = receiver.seen()
    assert accepts(third, request) and accepts(second, request)
    assert not accepts(first, request)


def test_a_rotation_reaches_a_delivery_under_way(app, world, receiver):
    """A worker catching up on a backlog signs each POST with the secrets as they are at that
    moment: the events after a rotation carry the new secret, not the one read at the start."""
    hook_id, old = new_hook(receiver.url("/h"))
    first_arrived, go_on = threading.Event(), threading.Event()

    def script(request: Request) -> int:
        if request.event_id == 1:
            first_arrived.set()
            go_on.wait(10)
        return 200

    receiver.script = script
    make_ddis("2079200001", "2079200002")

    def deliver() -> None:
        with app.app_context():
            delivery.Worker(db.engine).run(once=True)

    worker = threading.Thread(target=deliver)
    worker.start()
    try:
        assert first_arrived.wait(10)
        _, new = webhooks.rotate_secret(OPERATOR, hook_id)  # while event 1 is being answered
    finally:
        go_on.set()
        worker.join(30)
    first, second = receiver.seen()
    assert accepts(old, first) and not accepts(new, first)
    assert accepts(new, second) and accepts(old, second)  # both, for the next 24 h


def test_rotation_is_audited_without_the_secret_and_refused_to_others(world, receiver):
    from webapp.access import Principal
    from webapp.errors import Forbidden, NotFound
    from webapp.models import Account, AuditEntry

    hook_id, old = new_hook(receiver.url("/h"))
    before = hook_row(hook_id).secret_sealed
    for username in ("cadmin", "summary", "reporter", "nobody"):
        account = db.session.scalars(select(Account).where(Account.username == username)).one()
        with pytest.raises(Forbidden):
            webhooks.rotate_secret(Principal.from_account(account, "api"), hook_id)
    with pytest.raises(NotFound, match=f"There is no webhook {hook_id + 1}."):
        webhooks.rotate_secret(OPERATOR, hook_id + 1)
    db.session.rollback()
    assert hook_row(hook_id).secret_sealed == before
    assert (
        db.session.scalars(
            select(AuditEntry).where(AuditEntry.action == "webhook.rotate-secret")
        ).all()
        == []
    )

    _, new = webhooks.rotate_secret(OPERATOR, hook_id)
    db.session.rollback()
    [entry] = db.session.scalars(
        select(AuditEntry).where(AuditEntry.action == "webhook.rotate-secret")
    ).all()
    assert (entry.actor, entry.target) == (OPERATOR.username, f"webhook {hook_id}")
    assert "previous secret also signs until" in entry.detail
    stored = repr((entry.before, entry.after, entry.detail))
    for secret in (old, new):
        assert secret not in stored and secret.removeprefix("whsec_") not in stored
    assert "whsec_" not in stored


def test_a_secret_no_key_opens_is_a_failed_attempt_until_rotated(app, receiver, run, caplog):
    from cryptography.fernet import Fernet

    from webapp.database import write_transaction

    hook_id, _ = new_hook(receiver.url("/h"))
    foreign = Fernet(Fernet.generate_key()).encrypt(webhooks.new_secret().encode()).decode()
    with write_transaction() as session:  # as if SECRET_KEY had changed since
        session.get(Webhook, hook_id).secret_sealed = foreign
    make_ddis("2079200001")
    assert run.worker.run_once() is True  # no exception: the worker goes on
    assert receiver.seen() == []  # nothing is sent unsigned or signed with a guess
    [attempt] = attempts(hook_id)
    assert (attempt.status, attempt.outcome) == (None, "retry")
    assert attempt.error == delivery.SECRET_UNREADABLE
    assert attempt.error.startswith("secret unreadable")
    assert f"webhook {hook_id}: secret unreadable" in caplog.text
    hook = hook_row(hook_id)
    assert hook.head_attempts == 1 and hook.next_attempt_at is not None

    # Rotating drops the unreadable secret (it cannot sign) and the queue goes on.
    rotated, new = webhooks.rotate_secret(OPERATOR, hook_id)
    assert (rotated.previous_secret_sealed, rotated.previous_secret_until) == (None, None)
    run.clock.to(hook.next_attempt_at)
    run.drain()
    [request] = receiver.seen()
    assert request.event_id == 1 and len(signatures(request)) == 1 and accepts(new, request)
    assert [a.outcome for a in attempts(hook_id)] == ["retry", "delivered"]
