"""A test event: one POST to a webhook, on request, to see that its receiver answers and checks
the signature (docs/events.md#test-events).

It goes out the way every delivery does: through delivery.Sender (the URL checked again, the
POST to an address that check accepted, the 10 s deadline, at most 64 KB of the answer read),
signed with the webhook's secrets as they are now, the Standard Webhooks headers. It is sent at
once, in the request that asked for it, not queued for the worker: it is not part of the feed,
moves no cursor and is never retried, so it has no place in the webhook's queue (and a paused
webhook can be tested too). It is recorded as an attempt of event 0 with outcome `test`.
"""

from __future__ import annotations

import secrets
from datetime import UTC
from typing import Any

from ...access import Principal
from ...database import utcnow, write_transaction
from ...extensions import db
from ...models import WebhookAttempt
from .. import sealing
from . import webhooks
from .delivery import SECRET_UNREADABLE, Answer, Sender

TYPE = "webhook.test"
EVENT_ID = 0  # no event of the feed has it: the feed's ids start at 1


def event_body(actor: str, at_iso: str) -> dict[str, Any]:
    """The body of a test event: an event's fields, with type `webhook.test`, id 0, nothing
    changed (no company, key, before or after)."""
    return {
        "id": EVENT_ID,
        "at": at_iso,
        "type": TYPE,
        "actor": actor,
        "company": None,
        "key": None,
        "before": None,
        "after": None,
    }


def send_test(
    principal: Principal, webhook_id: int, sender: Sender | None = None
) -> WebhookAttempt:
    """POST a test event to the webhook now, signed like every delivery, and record the attempt
    (event 0, outcome `test`, its answer's status or why there was none); return it.

    Guarantees: System-Admin only (Forbidden); NotFound if there is no such webhook. Each test
    has a webhook-id of its own (`test_<random>`), so a receiver that drops repeats takes each
    one. A secret no key decrypts sends nothing and records that reason. Audited as
    webhook.test, with the answer."""
    hook = webhooks.get(principal, webhook_id)
    now = utcnow()
    event = event_body(principal.username, now.replace(tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    url = hook.url
    try:
        signing: list[str] | None = webhooks.signing_secrets(hook, now)
    except sealing.Unreadable:
        signing = None
    db.session.rollback()  # no transaction held open while the receiver takes its time
    if signing is None:
        answer = Answer(None, 0, SECRET_UNREADABLE)
    else:
        message_id = f"test_{secrets.token_hex(8)}"
        answer = (sender or Sender()).send(url, signing, event, message_id=message_id)
    with write_transaction() as session:
        hook = webhooks.get(principal, webhook_id)  # deleted meanwhile: NotFound, nothing kept
        attempt = WebhookAttempt(
            webhook_id=webhook_id,
            event_id=EVENT_ID,
            at=utcnow(),
            status=answer.status,
            duration_ms=answer.duration_ms,
            error=answer.error,
            outcome="test",
        )
        session.add(attempt)
        said = f"HTTP {answer.status}" if answer.status is not None else answer.error
        webhooks.audit_action(principal, "webhook.test", hook, detail=f"answer: {said}")
    return attempt
