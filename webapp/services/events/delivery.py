"""Delivering the change events to the webhooks: `flask events deliver` (docs/events.md).

Each webhook has a cursor: the id of the last event it has handled. A worker takes a webhook,
POSTs the matching events after the cursor one by one, in id order, and moves the cursor on
as they are delivered (any 2xx) or given up. A failed POST (another status, no answer within
10 s, no connection) stops that webhook's queue: the same event is tried again after 5 s,
30 s, 2 min, 10 min, 1 h, then every hour, and given up (marked failed, the queue goes on)
once an attempt fails 24 h or more after the event was recorded. So events reach a webhook
in order, at least once: the cursor is saved after the POSTs that moved it, and a worker
killed in between makes the next one send those again (the `webhook-id` header lets a
receiver drop the repeat).

One worker at a time per webhook: a worker delivers only while it holds the webhook's lock,
which the operating system or the database server frees when the worker dies (a killed
worker never leaves a webhook locked). On PostgreSQL a session advisory lock on a connection
the worker keeps for the purpose; on SQLite, which only processes of the same host can open,
a POSIX record lock on a file beside the database. Several workers share the webhooks
between them: each skips one another holds.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import urllib3
from sqlalchemy import Connection, delete, exists, or_, select, text, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from standardwebhooks.webhooks import Webhook as Signer

from ...database import utcnow
from ...errors import is_outage
from ...extensions import db
from ...models import Webhook, WebhookAttempt, WebhookRedelivery
from ...observability.metrics import WEBHOOK_ATTEMPTS
from . import feed, sealing, webhooks

log = logging.getLogger(__name__)

SCHEDULE = (5, 30, 120, 600, 3600)  # seconds before the 2nd, 3rd, … attempt; then hourly
GIVE_UP_AFTER = timedelta(hours=24)
TIMEOUT_SECONDS = 10.0
BATCH = 100  # events read at a time for one webhook
SAVE_EVERY = 1.0  # seconds: the longest a worker delivers before saving its progress
IDLE_POLL = 0.2  # seconds between looks for new events when there is nothing to do
KEEP_ATTEMPTS = 200  # attempts kept per webhook besides the failed ones (the page shows 20)
LOCK_KEY = 0x5EB  # advisory lock class on PostgreSQL: (LOCK_KEY, webhook id)
# The reason an attempt stores when the webhook's secret cannot be decrypted (no POST is made).
SECRET_UNREADABLE = "secret unreadable: no configured key decrypts it; rotate the secret"  # noqa: S105


def retry_delay(attempts: int) -> timedelta:
    """How long after its `attempts`-th failed attempt an event is tried again."""
    return timedelta(seconds=SCHEDULE[attempts - 1] if attempts <= len(SCHEDULE) else 3600)


# --- one worker per webhook ------------------------------------------------------------------


class Locks:
    """Per-webhook locks that die with the process holding them (module docstring)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.postgres = engine.dialect.name == "postgresql"
        self._connection: Connection | None = None
        self._file: int | None = None
        if not self.postgres:
            path = engine.url.database
            if not path or path == ":memory:":
                raise RuntimeError("events deliver needs a database file or PostgreSQL.")
            self._path = f"{path}-webhooks.lock"
            self._lock_file()

    def try_lock(self, webhook_id: int) -> bool:
        if not self.postgres:
            try:
                fcntl.lockf(self._lock_file(), fcntl.LOCK_EX | fcntl.LOCK_NB, 1, webhook_id)
            except OSError:
                return False
            return True
        try:
            connection = self._lock_connection()
            got = connection.execute(
                text("SELECT pg_try_advisory_lock(:k, :id)"), {"k": LOCK_KEY, "id": webhook_id}
            ).scalar()
        except DBAPIError:
            self.reset()  # the server went away: its locks with it; a new connection next time
            return False
        return bool(got)

    def unlock(self, webhook_id: int) -> None:
        if not self.postgres:
            if self._file is not None:
                fcntl.lockf(self._file, fcntl.LOCK_UN, 1, webhook_id)
            return
        if self._connection is None:  # reset: the lock went with its connection
            return
        try:
            self._connection.execute(
                text("SELECT pg_advisory_unlock(:k, :id)"), {"k": LOCK_KEY, "id": webhook_id}
            )
        except DBAPIError:
            self.reset()

    def holding(self, webhook_id: int) -> bool:
        """PostgreSQL: whether the lock on the webhook is still held (its connection alive: a
        server restart ends it, and frees the lock) and the webhook still there, in one round
        trip. Not for SQLite, whose locks live as long as the process."""
        try:
            there = (
                self._lock_connection()
                .execute(text("SELECT count(*) FROM webhooks WHERE id = :id"), {"id": webhook_id})
                .scalar()
            )
        except DBAPIError:
            self.reset()
            return False
        return bool(there)

    def _lock_file(self) -> int:
        if self._file is None:
            self._file = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        return self._file

    def _lock_connection(self) -> Connection:
        if self._connection is None:
            self._connection = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        return self._connection

    def reset(self) -> None:
        if self._connection is not None:
            with suppress(Exception):
                self._connection.invalidate()
            with suppress(Exception):
                self._connection.close()
            self._connection = None

    def close(self) -> None:
        """Free every lock (a worker may take them again later: the file reopens)."""
        self.reset()
        if self._file is not None:
            os.close(self._file)
            self._file = None


# --- sending one event -----------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    status: int | None
    duration_ms: int
    error: str | None

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class Sender:
    """POSTs events, signed, over kept-alive connections (urllib3's pool)."""

    def __init__(self, timeout: float = TIMEOUT_SECONDS, user_agent: str = "telephony-admin"):
        self.timeout = timeout
        self.user_agent = user_agent
        self.http = urllib3.PoolManager(
            num_pools=50,
            retries=False,
            timeout=urllib3.Timeout(total=timeout),
        )

    def send(self, url: str, secrets: Sequence[str], event: dict[str, Any]) -> Answer:
        """POST `event`, signed with each of `secrets` (newest first): Standard Webhooks puts
        the signatures in one header, separated by spaces, and a receiver accepts any."""
        body = json.dumps(event, separators=(",", ":"))
        message_id = f"evt_{event['id']}"
        now = datetime.now(UTC)  # the signer takes an instant in UTC
        headers = {
            "content-type": "application/json",
            "user-agent": self.user_agent,
            "webhook-id": message_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": " ".join(Signer(s).sign(message_id, now, body) for s in secrets),
        }
        started = time.monotonic()
        try:
            response = self.http.request(
                "POST", url, body=body.encode(), headers=headers, redirect=False
            )
        except Exception as exc:  # every way a POST can fail is one failed attempt
            spent = int((time.monotonic() - started) * 1000)
            return Answer(None, spent, _reason(exc))
        spent = int((time.monotonic() - started) * 1000)
        return Answer(response.status, spent, None)


def _reason(exc: Exception) -> str:
    # NewConnectionError first: urllib3 makes it a subclass of ConnectTimeoutError.
    if isinstance(exc, urllib3.exceptions.NewConnectionError):
        return "could not connect"
    if isinstance(exc, urllib3.exceptions.TimeoutError):
        return "no answer in time"
    text_ = f"{type(exc).__name__}: {exc}"
    return text_[:200]


# --- the worker --------------------------------------------------------------------------------


@dataclass
class Item:
    """The next thing to send to a webhook: an event, by itself or as a redelivery."""

    event: dict[str, Any]
    recorded_at: datetime  # the event's, or the redelivery's request: the 24 h count from it
    redelivery: bool


@dataclass
class Worker:
    """Delivers what is due to every webhook, one webhook at a time (module docstring)."""

    engine: Engine
    sender: Sender = field(default_factory=Sender)
    clock: Callable[[], datetime] = utcnow
    stopping: bool = False
    delivered: int = 0
    attempts: int = 0

    def __post_init__(self) -> None:
        self.locks = Locks(self.engine)
        # What the POSTs since the last save leave to write (_save): their attempts, and the
        # redeliveries done with (delivered or given up, or their event pruned).
        self._pending: list[dict[str, Any]] = []
        self._unqueued: list[int] = []

    def run(self, once: bool = False) -> None:
        """Deliver until stopped (SIGTERM, SIGINT: after the POST under way), or with `once`
        until nothing is due. A database outage (a restart) is logged once and the loop goes on
        until the database is back; any other database error, or an outage with `once`, is
        raised (the command turns it into one line and exit 1)."""
        handlers: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():  # signals reach only it
            for sig in (signal.SIGTERM, signal.SIGINT):
                handlers[sig] = signal.signal(sig, self._stop)
        down_since: float | None = None
        try:
            while not self.stopping:
                try:
                    worked = self.run_once()
                except DBAPIError as exc:
                    db.session.rollback()
                    db.session.remove()
                    self.locks.reset()
                    # Not an outage (no schema yet: `db upgrade` was not run) or a single pass
                    # (--once, from cron): the command's one line and exit 1, not a loop.
                    if once or not is_outage(exc):
                        raise
                    if down_since is None:  # one line per outage, not one a second
                        log.warning("database unavailable, retrying: %s", str(exc.orig)[:200])
                        down_since = time.monotonic()
                    time.sleep(1)
                    continue
                if down_since is not None:
                    log.warning("database back after %.0f s", time.monotonic() - down_since)
                    down_since = None
                if once and not worked:
                    return
                if not worked:
                    time.sleep(IDLE_POLL)
        finally:
            self.locks.close()
            for caught, handler in handlers.items():  # the caller's own back (a run in-process)
                signal.signal(caught, handler)

    def _stop(self, _signum: int, _frame: Any) -> None:
        self.stopping = True

    def run_once(self) -> bool:
        """One pass over the webhooks with something due; whether any attempt was made."""
        due = self._due()
        random.shuffle(due)  # several workers: start each on a different webhook
        worked = False
        for webhook_id in due:
            if self.stopping:
                break
            if self.locks.try_lock(webhook_id):
                try:
                    worked |= self._serve(webhook_id)
                finally:
                    db.session.rollback()
                    self.locks.unlock(webhook_id)
        return worked

    def _due(self) -> list[int]:
        newest = webhooks.newest_event()
        queued = exists().where(WebhookRedelivery.webhook_id == Webhook.id)
        query = select(Webhook.id).where(
            or_(Webhook.cursor < newest, queued),
            or_(Webhook.next_attempt_at.is_(None), Webhook.next_attempt_at <= self.clock()),
        )
        ids = list(db.session.scalars(query))
        db.session.rollback()
        return ids

    def _serve(self, webhook_id: int) -> bool:
        """Deliver what is due to one webhook, whose lock the worker holds."""
        hook = db.session.get(Webhook, webhook_id)
        if hook is None or (hook.next_attempt_at and hook.next_attempt_at > self.clock()):
            return False
        # A plain object from here: _save writes its progress with one UPDATE, which finds
        # nothing (and saves nothing) if the webhook was deleted meanwhile.
        db.session.expunge(hook)
        self._pending, self._unqueued = [], []
        worked = False
        for batch, complete_to in self._batches(hook):
            saved = time.monotonic()
            for item in batch:
                if self.stopping:
                    self._save(hook)
                    return worked
                if not self._may_go_on(hook.id):  # lock lost (nothing saved) or deleted
                    return worked
                worked = True
                if not self._attempt(hook, item):
                    self._save(hook)
                    return worked
                if time.monotonic() - saved > SAVE_EVERY:
                    if not self._save(hook):
                        return worked
                    saved = time.monotonic()
            if complete_to is not None:
                hook.cursor = max(hook.cursor, complete_to)
            if not self._save(hook):
                return worked
        return worked

    def _may_go_on(self, webhook_id: int) -> bool:
        """Before each POST: whether the worker still holds the webhook's lock and the webhook
        is still there (deleted, nothing more is sent to it after the POST under way)."""
        if self.locks.postgres:
            return self.locks.holding(webhook_id)  # both in one round trip
        db.session.rollback()  # a fresh look: the reads so far see the database as it was
        return db.session.scalar(select(Webhook.id).where(Webhook.id == webhook_id)) is not None

    def _batches(self, hook: Webhook) -> Iterator[tuple[list[Item], int | None]]:
        """What to send, in order: queued redeliveries, then the matching events after the
        cursor, a batch at a time. With each batch, the id every event up to which has been
        read (the cursor may move there once the batch is delivered), or None."""
        redeliveries = db.session.execute(
            select(WebhookRedelivery.event_id, WebhookRedelivery.requested_at)
            .where(WebhookRedelivery.webhook_id == hook.id)
            .order_by(WebhookRedelivery.requested_at, WebhookRedelivery.event_id)
        ).all()
        if redeliveries:
            items = []
            for event_id, requested_at in redeliveries:
                rows = feed.select_rows(event_id - 1, 1, None)
                if rows and rows[0].id == event_id:
                    items.append(Item(feed.shape(rows[0]), requested_at, True))
                else:  # pruned meanwhile: nothing to send
                    self._unqueued.append(event_id)
            yield items, None
        types, companies = webhooks.split(hook.event_types), webhooks.split(hook.companies)
        while True:
            newest = webhooks.newest_event()  # before the read (feed.read)
            rows = feed.select_rows(hook.cursor, BATCH, companies, types)
            items = [Item(feed.shape(r), r.at, False) for r in rows]
            complete = len(rows) < BATCH
            yield items, newest if complete else None
            if complete or self.stopping:
                return

    def _attempt(self, hook: Webhook, item: Item) -> bool:
        """POST one item and record the attempt; whether the queue may go on (delivered, or
        given up)."""
        event_id = item.event["id"]
        if hook.head_event != event_id:
            hook.head_event, hook.head_attempts = event_id, 0
        try:
            secrets = webhooks.signing_secrets(hook, self.clock())
        except sealing.Unreadable:  # a failed attempt, retried as any other: never a crash
            log.warning("webhook %s: %s", hook.id, SECRET_UNREADABLE)
            answer = Answer(None, 0, SECRET_UNREADABLE)
        else:
            answer = self.sender.send(hook.url, secrets, item.event)
        now = self.clock()
        self.attempts += 1
        if answer.delivered:
            outcome = "delivered"
            self.delivered += 1
        elif now - item.recorded_at >= GIVE_UP_AFTER:
            outcome = "failed"
            log.warning("webhook %s: event %s given up after 24 h", hook.id, event_id)
        else:
            outcome = "retry"
        WEBHOOK_ATTEMPTS.labels(outcome).inc()
        self._pending.append(
            {
                "webhook_id": hook.id,
                "event_id": event_id,
                "at": now,
                "status": answer.status,
                "duration_ms": answer.duration_ms,
                "error": answer.error,
                "outcome": outcome,
            }
        )
        if outcome == "retry":
            hook.head_attempts += 1
            hook.next_attempt_at = now + retry_delay(hook.head_attempts)
            return False
        hook.head_event, hook.head_attempts, hook.next_attempt_at = None, 0, None
        if item.redelivery:
            self._unqueued.append(event_id)
        else:
            hook.cursor = max(hook.cursor, event_id)
        return True

    def _save(self, hook: Webhook) -> bool:
        """Commit the webhook's progress and attempts; whether it is still there (a webhook
        deleted meanwhile is left deleted: its progress has nowhere to go).

        Every write of a delivery is here, in a write transaction of its own, so the worker
        holds no write lock while it POSTs (SQLite has one for the whole database) and never
        turns a read into a write (which SQLite refuses once another writer has committed).
        The webhook's row first, as delete_webhook locks it: the two never deadlock."""
        db.session.rollback()  # end the reads: nothing was written in them
        db.session.connection(execution_options={"write_lock": True})
        try:
            still = db.session.execute(
                update(Webhook)
                .where(Webhook.id == hook.id)
                .values(
                    cursor=hook.cursor,
                    head_event=hook.head_event,
                    head_attempts=hook.head_attempts,
                    next_attempt_at=hook.next_attempt_at,
                )
                .execution_options(synchronize_session=False)
            )
            if not getattr(still, "rowcount", 1):
                db.session.rollback()
                return False
            if self._pending:
                db.session.execute(WebhookAttempt.__table__.insert(), self._pending)
            if self._unqueued:
                done = (a for a in self._pending if a["event_id"] in self._unqueued)
                # A failure a redelivery made good is no longer one to redeliver.
                made_good = [a["event_id"] for a in done if a["outcome"] == "delivered"]
                if made_good:
                    db.session.execute(
                        delete(WebhookAttempt).where(
                            WebhookAttempt.webhook_id == hook.id,
                            WebhookAttempt.event_id.in_(made_good),
                            WebhookAttempt.outcome == "failed",
                        )
                    )
                db.session.execute(
                    delete(WebhookRedelivery).where(
                        WebhookRedelivery.webhook_id == hook.id,
                        WebhookRedelivery.event_id.in_(self._unqueued),
                    )
                )
            _trim(hook.id)
            db.session.commit()
        except BaseException:
            db.session.rollback()
            raise
        self._pending, self._unqueued = [], []
        return True


def _trim(webhook_id: int) -> None:
    """Keep a webhook's newest KEEP_ATTEMPTS attempts and every failed one."""
    edge = db.session.scalar(
        select(WebhookAttempt.id)
        .where(WebhookAttempt.webhook_id == webhook_id)
        .order_by(WebhookAttempt.id.desc())
        .offset(KEEP_ATTEMPTS)
        .limit(1)
    )
    if edge is not None:
        db.session.execute(
            delete(WebhookAttempt).where(
                WebhookAttempt.webhook_id == webhook_id,
                WebhookAttempt.id <= edge,
                WebhookAttempt.outcome != "failed",
            )
        )
