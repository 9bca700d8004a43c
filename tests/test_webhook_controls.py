"""Pausing a webhook and sending it a test event, at the worker and the receiver
(docs/events.md#pausing-a-webhook, docs/events.md#test-events).

A paused webhook gets nothing, and a pause reaches a delivery under way after its POST; on
resume the events recorded meanwhile go out in order. A test event is POSTed at once through
the delivery's Sender, signed as every delivery (verified here as a receiver verifies, with the
Standard Webhooks library and the secret shown at creation; during a rotation's 24 h by either
secret), recorded as an attempt of event 0, never retried and moving no cursor; from the page,
the answer is said in the flash message.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from bs4 import BeautifulSoup
from standardwebhooks.webhooks import Webhook as Verifier

from webapp.extensions import db
from webapp.services.events import delivery, ping, webhooks

from .factories import OPERATOR
from .test_delivery import (
    Clock,
    Request,
    Run,
    accepts,
    attempts,
    hook_row,
    last_event_id,
    make_ddis,
    new_hook,
    running_receiver,
)

# The receivers listen on 127.0.0.1, which webhooks may target only when allowed.
pytestmark = pytest.mark.usefixtures("allow_loopback_webhooks")
receiver = pytest.fixture(running_receiver, name="receiver")


@pytest.fixture
def run(world) -> Iterator[Run]:
    """A worker on the test database with a clock of the test's (test_delivery.py's own)."""
    clock = Clock()
    worker = delivery.Worker(db.engine, clock=clock)
    yield Run(worker, clock)
    worker.locks.close()


def test_a_paused_webhook_gets_nothing_until_resumed_then_everything_in_order(app, receiver, run):
    hook_id, _ = new_hook(receiver.url("/p"))
    new_hook(receiver.url("/other"))
    make_ddis("2071230001")
    run.drain()
    first = last_event_id()
    webhooks.set_paused(OPERATOR, hook_id, True)
    make_ddis("2071230002", "2071230003")
    assert run.drain() >= 1  # the other webhook is served
    assert receiver.ids("/p") == [first]
    assert receiver.ids("/other") == [first, first + 1, first + 2]
    assert hook_row(hook_id).cursor == first  # its place waits
    webhooks.set_paused(OPERATOR, hook_id, False)
    run.drain()
    assert receiver.ids("/p") == [first, first + 1, first + 2]
    assert hook_row(hook_id).cursor == first + 2


def test_a_pause_stops_a_delivery_under_way_after_its_post(app, world, receiver):
    """A worker catching up on a backlog looks before each POST: paused while the first is
    answered, it sends no second one, and saves what was delivered."""
    hook_id, _ = new_hook(receiver.url("/p"))
    make_ddis("2071230001", "2071230002", "2071230003")
    first = last_event_id() - 2
    first_arrived, go_on = threading.Event(), threading.Event()

    def script(request: Request) -> int:
        if request.event_id == first:
            first_arrived.set()
            go_on.wait(10)
        return 200

    receiver.script = script

    def deliver() -> None:
        with app.app_context():
            delivery.Worker(db.engine).run(once=True)

    worker = threading.Thread(target=deliver)
    worker.start()
    try:
        assert first_arrived.wait(10)
        webhooks.set_paused(OPERATOR, hook_id, True)  # while the first is being answered
    finally:
        go_on.set()
        worker.join(30)
    assert receiver.ids("/p") == [first]
    assert hook_row(hook_id).cursor == first  # what was delivered is saved
    webhooks.set_paused(OPERATOR, hook_id, False)
    with app.app_context():
        delivery.Worker(db.engine).run(once=True)
    assert receiver.ids("/p") == [first, first + 1, first + 2]


def test_a_test_event_is_signed_and_recorded_as_an_attempt(app, receiver, run):
    hook_id, secret = new_hook(receiver.url("/t"))
    cursor = hook_row(hook_id).cursor
    attempt = ping.send_test(OPERATOR, hook_id)
    [request] = receiver.seen("/t")
    # As docs/events.md tells a receiver to check it: the Standard Webhooks library, the secret.
    event = Verifier(secret).verify(request.body, request.headers)
    assert event["type"] == "webhook.test" and event["id"] == 0
    assert (event["company"], event["key"], event["before"], event["after"]) == (None,) * 4
    assert request.headers["webhook-id"].startswith("test_")
    assert (attempt.event_id, attempt.status, attempt.outcome) == (0, 200, "test")
    [stored] = attempts(hook_id)
    assert (stored.event_id, stored.status, stored.outcome, stored.error) == (0, 200, "test", None)
    hook = hook_row(hook_id)
    assert hook.cursor == cursor and hook.head_attempts == 0  # not part of the queue
    # Each test has a webhook-id of its own; a failed one is recorded and never retried.
    receiver.script = lambda _request: 503
    failed = ping.send_test(OPERATOR, hook_id)
    assert (failed.status, failed.outcome) == (503, "test")
    ids = [r.headers["webhook-id"] for r in receiver.seen("/t")]
    assert len(set(ids)) == 2
    assert run.drain() == 0 and len(receiver.seen("/t")) == 2
    assert webhooks.state(hook_row(hook_id)).failed == []
    # During a rotation's 24 h both secrets sign it.
    receiver.script = lambda _request: 204
    _, new = webhooks.rotate_secret(OPERATOR, hook_id)
    ping.send_test(OPERATOR, hook_id)
    last = receiver.seen("/t")[-1]
    assert accepts(secret, last) and accepts(new, last)


def test_a_test_event_to_a_refused_address_is_not_sent(app, receiver):
    hook_id, _ = new_hook(receiver.url("/t"))
    app.config["WEBHOOK_ALLOW_NETWORKS"] = ()  # loopback no longer allowed: the Sender refuses
    attempt = ping.send_test(OPERATOR, hook_id, delivery.Sender(allow=()))
    assert (attempt.status, attempt.error) == (None, "address not allowed")
    assert receiver.seen("/t") == []


def test_the_page_sends_a_test_event_and_says_the_answer(world, receiver):
    hook_id, secret = new_hook(receiver.url("/t"))
    browser = world.browser("root")
    page = BeautifulSoup(browser.get(f"/admin/webhooks/{hook_id}").text, "html.parser")
    form = page.select_one(f"form[action='/admin/webhooks/{hook_id}/test']")
    assert form.select_one("button").get_text(strip=True) == "Send a test event"
    response = browser.post(form["action"], data={"csrf_token": browser.csrf})
    assert response.status_code == 302
    [request] = receiver.seen("/t")
    assert Verifier(secret).verify(request.body, request.headers)["type"] == "webhook.test"
    after = BeautifulSoup(browser.get(f"/admin/webhooks/{hook_id}").text, "html.parser")
    flash = after.select_one("#flashes").get_text(" ", strip=True)
    assert f"Test event delivered to webhook {hook_id}: HTTP 200." in flash
    row = after.select_one("#attempts tbody tr")
    cells = [td.get_text(" ", strip=True) for td in row.select("td")]
    assert cells[0] == "test" and cells[2] == "HTTP 200" and cells[4].startswith("test event")
    db.session.rollback()
    [entry] = [a for a in webhooks_audit() if a.action == "webhook.test"]
    assert entry.detail == "answer: HTTP 200" and "whsec_" not in repr(entry.detail)
    receiver.down()
    browser.post(form["action"], data={"csrf_token": browser.csrf})
    after = BeautifulSoup(browser.get(f"/admin/webhooks/{hook_id}").text, "html.parser")
    flash = after.select_one("#flashes").get_text(" ", strip=True)
    assert f"Test event not delivered to webhook {hook_id}: connection refused." in flash


def webhooks_audit():
    from sqlalchemy import select

    from webapp.models import AuditEntry

    return list(db.session.scalars(select(AuditEntry).order_by(AuditEntry.id)))


def test_pause_and_resume_at_the_command_line(world, flask):
    hook_id, _ = new_hook("https://93.184.215.14/in")
    paused = flask("webhooks", "pause", str(hook_id))
    assert paused.returncode == 0, paused.stderr
    assert (
        paused.stdout.strip() == f"Paused webhook {hook_id}: its events wait until it is resumed."
    )
    assert hook_row(hook_id).paused_at is not None
    assert flask("webhooks", "list").stdout.strip().endswith(", paused")
    resumed = flask("webhooks", "resume", str(hook_id))
    assert resumed.returncode == 0 and resumed.stdout.strip() == f"Resumed webhook {hook_id}."
    assert hook_row(hook_id).paused_at is None
    unknown = flask("webhooks", "pause", str(hook_id + 1))
    assert unknown.returncode == 1 and f"There is no webhook {hook_id + 1}." in unknown.stderr
