"""Webhooks: who receives the change events (docs/events.md#webhooks). System-Admin only.

Creating, deleting, redelivering and rotating the signing secret are audited like account
changes. The delivery itself is services/events/delivery.py; the secrets are kept sealed
(services/sealing.py), and a rotation keeps the replaced one signing for
`PREVIOUS_SECRET_LIFE` (docs/events.md#signing-secrets).
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError

from ...access import Principal
from ...database import utcnow, write_transaction
from ...errors import Conflict, Invalid, NotFound
from ...extensions import db
from ...models import Company, EventTxn, Webhook, WebhookAttempt, WebhookRedelivery
from .. import sealing
from ..fields import check_format
from ..history import audit
from . import targets
from .journal import TYPES
from .journal import newest as newest_event

MAX_URL = 2000
RECENT_ATTEMPTS = 20
SECRET_BYTES = 32
MAX_COMPANIES = 1000  # a webhook's company filter; more would be every company anyway
PREVIOUS_SECRET_LIFE = timedelta(hours=24)  # a rotated-out secret signs too for this long


def parse_url(value: Any, allow: Iterable[targets.Network] | None = None) -> str:
    """A webhook's address: an absolute http or https URL with a host, without credentials,
    at most 2,000 characters, no white space or control characters, whose host resolves only
    to public addresses or ones inside `allow` (default: WEBHOOK_ALLOW_NETWORKS; targets.py);
    Invalid (field `url`) otherwise."""
    if not isinstance(value, str) or not value.strip():
        raise Invalid("Give the webhook's URL.", {"url": "required"})
    url = value.strip()
    if len(url) > MAX_URL:
        raise Invalid(f"The URL is longer than {MAX_URL} characters.", {"url": "too long"})
    if any(c.isspace() or ord(c) < 32 or 127 <= ord(c) < 160 for c in url):
        raise Invalid("The URL holds white space or a control character.", {"url": "not a URL"})
    try:
        parts = urlsplit(url)
        port = parts.port  # a port out of range raises ValueError
    except ValueError:
        parts, port = None, None
    del port
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise Invalid(
            "The URL must start with http:// or https:// and name a host.",
            {"url": "must be an http or https URL"},
        )
    try:
        targets.check(url, targets.allowed_networks() if allow is None else allow)
    except targets.Refused as refused:
        raise Invalid(refused.message, {"url": refused.category}) from None
    return url


def parse_types(values: Iterable[Any]) -> list[str]:
    """Event types to deliver, each one of events.TYPES; empty: every type."""
    chosen = []
    for value in values:
        if value not in TYPES:
            raise Invalid(
                f"Unknown event type '{value}'.", {"event": f"must be one of {', '.join(TYPES)}"}
            )
        if value not in chosen:
            chosen.append(value)
    return chosen


def parse_companies(values: Iterable[Any]) -> list[str]:
    """Company identifiers, each well formed and existing; empty: every company. Invalid
    (field `company`) names every identifier at fault, not only the first."""
    chosen: list[str] = []
    wrong: list[str] = []  # one sentence per identifier at fault, in the order given
    why_first: str | None = None
    for value in values:
        if len(chosen) > MAX_COMPANIES:
            break  # refused below, however many more were given
        if (why := check_format("company", value)) is not None:
            wrong.append(f"Company '{value}' {why}.")
            why_first = why_first or why
        elif value not in chosen:
            chosen.append(value)
    if len(chosen) > MAX_COMPANIES:
        raise Invalid(
            f"A webhook names at most {MAX_COMPANIES} companies (none: every company).",
            {"company": f"at most {MAX_COMPANIES}"},
        )
    if chosen:
        found = set(db.session.scalars(select(Company.id).where(Company.id.in_(chosen))))
        for company in chosen:
            if company not in found:
                wrong.append(f"Company '{company}' does not exist.")
                why_first = why_first or "unknown company"
    if wrong:
        raise Invalid(" ".join(wrong), {"company": why_first or "unknown company"})
    return chosen


class SettingsInvalid(Invalid):
    """A webhook's settings with one field at fault or more: `sentences` maps each of them
    (`url`, `event`, `company`) to what is wrong with it, so a form shows them all at once;
    `message` is every sentence, in that order."""

    def __init__(self, sentences: dict[str, str], fields: dict[str, str]):
        super().__init__(" ".join(sentences.values()), fields)
        self.sentences = sentences


def parse_settings(
    url: Any, event_types: Iterable[Any], companies: Iterable[Any]
) -> tuple[str, list[str], list[str]]:
    """A webhook's URL, event types and companies, each checked as parse_url, parse_types and
    parse_companies check it; SettingsInvalid naming every field at fault (not only the
    first), so whoever typed them fixes them in one go."""
    sentences: dict[str, str] = {}
    fields: dict[str, str] = {}
    parsed: dict[str, Any] = {}
    steps: tuple[tuple[str, Callable[[Any], Any], Any], ...] = (
        ("url", parse_url, url),
        ("event", parse_types, event_types),
        ("company", parse_companies, companies),
    )
    for name, parse, value in steps:
        try:
            parsed[name] = parse(value)
        except Invalid as exc:
            sentences[name] = exc.message
            fields.update(exc.fields)
    if sentences:
        raise SettingsInvalid(sentences, fields)
    return parsed["url"], parsed["event"], parsed["company"]


def new_secret() -> str:
    """A signing secret as the Standard Webhooks scheme writes it: 'whsec_' and base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def _listed(values: Sequence[str]) -> str | None:
    return ",".join(values) if values else None


def named(stored: str | None) -> list[str]:
    """A webhook's stored filter (event_types, companies) in the order given; [] for 'every'."""
    return stored.split(",") if stored else []


def split(stored: str | None) -> frozenset[str] | None:
    """A webhook's stored filter as a set, or None for 'every'."""
    return frozenset(named(stored)) or None


def create(
    principal: Principal,
    url: Any,
    event_types: Iterable[Any] = (),
    companies: Iterable[Any] = (),
) -> tuple[Webhook, str]:
    """Register a webhook; return it and its signing secret (the only time it is shown).

    Guarantees: System-Admin only (Forbidden); a bad URL, type or company is SettingsInvalid
    (naming every field at fault) and nothing is written. The webhook receives the matching
    events committed after it: its cursor starts at the last id committed now."""
    principal.require_system_admin("manage webhooks")
    with write_transaction() as session:
        url, types, chosen = parse_settings(url, event_types, companies)
        secret = new_secret()
        last = newest_event()
        hook = Webhook(
            url=url,
            secret_sealed=sealing.seal(secret),
            event_types=_listed(types),
            companies=_listed(chosen),
            created_at=utcnow(),
            created_by=principal.username,
            cursor=last,
            head_attempts=0,
        )
        session.add(hook)
        session.flush()
        audit_action(principal, "webhook.create", hook, after=describe(hook))
    return hook, secret


def edit(
    principal: Principal,
    webhook_id: int,
    url: Any,
    event_types: Iterable[Any] = (),
    companies: Iterable[Any] = (),
) -> Webhook:
    """Change a webhook's URL, event types and companies (all three given: an empty list is
    every type, every company).

    Guarantees: System-Admin only (Forbidden); NotFound if there is no such webhook; the URL
    is checked as at creation (targets.py: a public address, or one WEBHOOK_ALLOW_NETWORKS
    allows), and any field at fault is SettingsInvalid naming every one, with nothing written.
    The cursor stays: the new filters apply to the events it has not handled yet. A new URL
    ends the wait of an event being retried (the next attempt is due at once). Audited as
    webhook.update with the settings before and after."""
    principal.require_system_admin("manage webhooks")
    with write_transaction() as session:
        url, types, chosen = parse_settings(url, event_types, companies)
        hook = _locked(session, webhook_id)
        before = describe(hook)
        if url != hook.url:
            hook.next_attempt_at = None
        hook.url = url
        hook.event_types = _listed(types)
        hook.companies = _listed(chosen)
        after = describe(hook)
        if after != before:
            audit_action(principal, "webhook.update", hook, before=before, after=after)
    return hook


def set_paused(principal: Principal, webhook_id: int, paused: bool) -> Webhook:
    """Pause a webhook (the worker sends it nothing, and stops after the POST under way) or
    resume it (its next attempt is due at once).

    Guarantees: System-Admin only (Forbidden); NotFound if there is no such webhook. The
    cursor stays where it is: the matching events recorded while it was paused wait, and go
    out in order once it is resumed (docs/events.md#pausing-a-webhook). Pausing a paused
    webhook, or resuming an active one, changes nothing and records nothing. Audited as
    webhook.pause and webhook.resume."""
    principal.require_system_admin("manage webhooks")
    with write_transaction() as session:
        hook = _locked(session, webhook_id)
        if paused == (hook.paused_at is not None):
            return hook
        if paused:
            hook.paused_at = utcnow()
        else:
            hook.paused_at, hook.next_attempt_at = None, None
        audit_action(principal, "webhook.pause" if paused else "webhook.resume", hook)
    return hook


def _locked(session: Any, webhook_id: int) -> Webhook:
    hook = session.get(Webhook, webhook_id, with_for_update=True)
    if hook is None:
        raise NotFound(f"There is no webhook {webhook_id}.")
    return hook


def signing_secrets(hook: Webhook, now: datetime) -> list[str]:
    """The secrets a delivery at `now` is signed with, newest first: the current one, and the
    one a rotation replaced while `now` is before its end. Raises sealing.Unreadable if the
    current one cannot be decrypted (the delivery fails with that reason); a previous one
    that cannot be is left out."""
    secrets_ = [sealing.unseal(hook.secret_sealed)]
    until = hook.previous_secret_until
    if hook.previous_secret_sealed and until is not None and now < until:
        with suppress(sealing.Unreadable):
            secrets_.append(sealing.unseal(hook.previous_secret_sealed))
    return secrets_


def rotate_secret(principal: Principal, webhook_id: int) -> tuple[Webhook, str]:
    """Give a webhook a new signing secret; return the webhook and the secret (the only time
    it is shown).

    Guarantees: System-Admin only (Forbidden); NotFound if there is no such webhook, and
    nothing is written. From the commit on, deliveries are signed with the new secret first
    and, for PREVIOUS_SECRET_LIFE, with the one it replaces too, so the receiver can change
    over without losing a delivery. Rotating again within that time keeps only the secret in
    force then as the previous one (with a new 24 h): the one before it stops signing at once.
    A current secret that cannot be decrypted is not kept. Audited as webhook.rotate-secret,
    never with a secret."""
    principal.require_system_admin("manage webhooks")
    with write_transaction() as session:
        hook = session.get(Webhook, webhook_id, with_for_update=True)
        if hook is None:
            raise NotFound(f"There is no webhook {webhook_id}.")
        now = utcnow()
        secret = new_secret()
        try:
            previous: str | None = sealing.reseal(hook.secret_sealed)
        except sealing.Unreadable:
            previous = None
        hook.previous_secret_sealed = previous
        hook.previous_secret_until = now + PREVIOUS_SECRET_LIFE if previous else None
        hook.secret_sealed = sealing.seal(secret)
        if hook.previous_secret_until is not None:
            until = hook.previous_secret_until.strftime("%Y-%m-%d %H:%M:%S")
            detail = f"the previous secret also signs until {until} UTC"
        else:
            detail = "the previous secret could not be decrypted: dropped"
        audit_action(principal, "webhook.rotate-secret", hook, detail=detail)
    return hook, secret


def rekey(principal: Principal) -> tuple[int, list[int]]:
    """Seal every webhook's secrets again with the first configured key (after a key was added
    to WEBHOOK_SECRET_KEYS); return how many webhooks were re-sealed and the ids of those whose
    current secret no key opens (left as they are: rotate them). A previous secret that
    cannot be opened is dropped. System-Admin only; one transaction."""
    principal.require_system_admin("manage webhooks")
    done, unreadable = 0, []
    with write_transaction() as session:
        for hook in session.scalars(select(Webhook).order_by(Webhook.id).with_for_update()):
            try:
                hook.secret_sealed = sealing.reseal(hook.secret_sealed)
            except sealing.Unreadable:
                unreadable.append(hook.id)
                continue
            if hook.previous_secret_sealed:
                try:
                    hook.previous_secret_sealed = sealing.reseal(hook.previous_secret_sealed)
                except sealing.Unreadable:
                    hook.previous_secret_sealed, hook.previous_secret_until = None, None
            done += 1
    return done, unreadable


def drop_expired_secrets(now: datetime | None = None) -> int:
    """Clear the rotated-out secrets whose 24 h are over (they no longer sign: this only takes
    them off the disk); return how many. `flask events prune` runs it."""
    with write_transaction() as session:
        result = session.execute(
            update(Webhook)
            .where(
                Webhook.previous_secret_sealed.is_not(None),
                Webhook.previous_secret_until <= (now or utcnow()),
            )
            .values(previous_secret_sealed=None, previous_secret_until=None)
            .execution_options(synchronize_session=False)
        )
    return int(getattr(result, "rowcount", 0) or 0)


def describe(hook: Webhook) -> dict[str, Any]:
    """What the audit log and `webhooks list` say of a webhook (never its secret)."""
    return {
        "url": hook.url,
        "events": named(hook.event_types) or "all",
        "companies": named(hook.companies) or "all",
    }


def audit_action(principal: Principal, action: str, hook: Webhook, **values: Any) -> None:
    """Record an action on a webhook in the audit log (in the transaction under way)."""
    audit.record(db.session(), [audit.entry(principal, action, f"webhook {hook.id}", **values)])


def listed(principal: Principal) -> list[Webhook]:
    """Every webhook, oldest first (System-Admin only)."""
    principal.require_system_admin("manage webhooks")
    return list(db.session.scalars(select(Webhook).order_by(Webhook.id)))


def get(principal: Principal, webhook_id: int) -> Webhook:
    principal.require_system_admin("manage webhooks")
    hook = db.session.get(Webhook, webhook_id)
    if hook is None:
        raise NotFound(f"There is no webhook {webhook_id}.")
    return hook


def delete_webhook(principal: Principal, webhook_id: int) -> None:
    """Delete a webhook with its attempts and queued redeliveries; NotFound if there is none.
    A delivery under way finishes its current POST and then finds it gone."""
    principal.require_system_admin("manage webhooks")
    with write_transaction() as session:
        hook = session.get(Webhook, webhook_id, with_for_update=True)
        if hook is None:
            raise NotFound(f"There is no webhook {webhook_id}.")
        audit_action(principal, "webhook.delete", hook, before=describe(hook))
        session.delete(hook)


def redeliver(principal: Principal, webhook_id: int, event_id: int) -> None:
    """Queue an event for delivery again to a webhook, ahead of the events still to come.

    Guarantees: only an event whose delivery failed (given up) and is still kept may be
    queued (else Invalid); queuing it twice is a Conflict."""
    principal.require_system_admin("manage webhooks")
    with write_transaction() as session:
        hook = session.get(Webhook, webhook_id)
        if hook is None:
            raise NotFound(f"There is no webhook {webhook_id}.")
        failed = session.scalar(
            select(func.count())
            .select_from(WebhookAttempt)
            .where(
                WebhookAttempt.webhook_id == webhook_id,
                WebhookAttempt.event_id == event_id,
                WebhookAttempt.outcome == "failed",
            )
        )
        if not failed or not _event_kept(event_id):
            raise Invalid(f"Event {event_id} has no failed delivery to this webhook to redo.")
        session.add(
            WebhookRedelivery(
                webhook_id=webhook_id,
                event_id=event_id,
                requested_at=utcnow(),
                requested_by=principal.username,
            )
        )
        try:
            session.flush()
        except IntegrityError as exc:
            raise Conflict(f"Event {event_id} is already queued for this webhook.") from exc
        audit_action(principal, "webhook.redeliver", hook, detail=f"event {event_id}")


def _event_kept(event_id: int) -> bool:
    return (
        db.session.scalar(
            select(func.count())
            .select_from(EventTxn)
            .where(EventTxn.first_id <= event_id, EventTxn.last_id >= event_id)
        )
        or 0
    ) > 0


@dataclass(frozen=True)
class State:
    """A webhook as the page and `webhooks list` show it."""

    hook: Webhook
    newest: int  # the last event id committed
    retrying: bool
    failed: list[WebhookAttempt]  # given up, newest first, with no redelivery queued
    queued: list[int]  # event ids queued for redelivery
    recent: list[WebhookAttempt]  # newest first


def state(hook: Webhook, recent: int = RECENT_ATTEMPTS) -> State:
    """The webhook's delivery state: how far it is, what failed, its recent attempts."""
    queued = list(
        db.session.scalars(
            select(WebhookRedelivery.event_id)
            .where(WebhookRedelivery.webhook_id == hook.id)
            .order_by(WebhookRedelivery.requested_at)
        )
    )
    failed = db.session.scalars(
        select(WebhookAttempt)
        .where(WebhookAttempt.webhook_id == hook.id, WebhookAttempt.outcome == "failed")
        .order_by(WebhookAttempt.id.desc())
        .limit(100)
    ).all()
    attempts = db.session.scalars(
        select(WebhookAttempt)
        .where(WebhookAttempt.webhook_id == hook.id)
        .order_by(WebhookAttempt.id.desc())
        .limit(recent)
    ).all()
    return State(
        hook=hook,
        newest=newest_event(),
        retrying=hook.head_attempts > 0,
        failed=_newest_per_event(failed, queued),
        queued=queued,
        recent=list(attempts),
    )


def _newest_per_event(failed: Sequence[WebhookAttempt], queued: list[int]) -> list[WebhookAttempt]:
    """One failed attempt per event (the newest: an event redelivered that failed again has
    two), leaving out the events queued for redelivery."""
    seen = set(queued)
    kept = []
    for attempt in failed:  # newest first
        if attempt.event_id not in seen:
            seen.add(attempt.event_id)
            kept.append(attempt)
    return kept


def prune_attempts(before: datetime) -> int:
    """Delete delivery attempts older than `before` (the events' retention); return how many."""
    with write_transaction() as session:
        result = session.execute(delete(WebhookAttempt).where(WebhookAttempt.at < before))
    return int(getattr(result, "rowcount", 0) or 0)
