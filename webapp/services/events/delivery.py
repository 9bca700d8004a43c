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

Webhooks do not wait for each other: a worker delivers to up to `concurrency` webhooks at once
(default 8), each on a thread of its own with its own database session, so a receiver slow to
answer (or not answering until the 10 s timeout) holds one thread, not the others' events. A
dispatcher (the thread that called `run`) looks for webhooks with something due every
IDLE_POLL seconds and hands each one not already being served to a free thread, which serves
it as one webhook was served before: in id order, saving as it goes.

One thread at a time per webhook: a thread delivers only while the worker holds the webhook's
lock, which the operating system or the database server frees when the worker dies (a killed
worker never leaves a webhook locked). On PostgreSQL a session advisory lock on a connection
the worker keeps for the purpose; on SQLite, which only processes of the same host can open,
a POSIX record lock on a file beside the database. Both are the process's (a session's
advisory lock can be taken again by the same session; a record lock by the same process), so
the worker also notes which webhooks its own threads hold and refuses a second one; the lock
connection and file are used by one thread at a time. Several workers share the webhooks
between them: each skips one another holds.

Every POST goes to an address checked just before (targets.py: public, or in
WEBHOOK_ALLOW_NETWORKS), reads at most 64 KB of the answer, and a failure is stored as a
category ("connection refused", "timeout", "address not allowed", …), never the error's text.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import random
import signal
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import urllib3
from flask import Flask, current_app
from sqlalchemy import Connection, Row, delete, exists, func, or_, select, text, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from standardwebhooks.webhooks import Webhook as Signer
from urllib3 import BaseHTTPResponse, HTTPConnectionPool, HTTPSConnectionPool
from urllib3.connection import HTTPConnection, HTTPSConnection

from ...database import utcnow
from ...errors import is_outage
from ...extensions import db
from ...models import Webhook, WebhookAttempt, WebhookRedelivery
from ...observability.logs import FIELDS
from ...observability.metrics import WEBHOOK_ATTEMPTS
from ...wording import counted
from .. import sealing
from . import deadline, feed, targets, webhooks

log = logging.getLogger(__name__)

MAX_ANSWER = 64 * 1024  # bytes of a receiver's answer read; the rest is dropped unread
READ_CHUNK = 16 * 1024
MAX_POOLS = 50  # kept-alive connection pools, one per (scheme, host, address, port)
SCHEDULE = (5, 30, 120, 600, 3600)  # seconds before the 2nd, 3rd, … attempt; then hourly
GIVE_UP_AFTER = timedelta(hours=24)
TIMEOUT_SECONDS = 10.0
BATCH = 100  # events read at a time for one webhook
SAVE_EVERY = 1.0  # seconds: the longest a worker delivers before saving its progress
IDLE_POLL = 0.2  # seconds between looks for new events when there is nothing to do
KEEP_ATTEMPTS = 200  # attempts kept per webhook besides the failed ones (the page shows 20)
LOCK_KEY = 0x5EB  # advisory lock class on PostgreSQL: (LOCK_KEY, webhook id)
DEFAULT_CONCURRENCY = 8  # webhooks a worker delivers to at once (--concurrency)
# Each delivery thread uses a database connection while it serves its webhook, besides the
# dispatcher's and the lock connection: SQLAlchemy's pool holds 15 (5, and 10 more on demand).
MAX_CONCURRENCY = 12
# Connections kept per address: several webhooks on one receiver are served at once by the
# worker's threads, each on a connection of its own.
PER_ADDRESS = MAX_CONCURRENCY
# The reason an attempt stores when the webhook's secret cannot be decrypted (no POST is made).
SECRET_UNREADABLE = "secret unreadable: no configured key decrypts it; rotate the secret"  # noqa: S105


# A webhook's signing secrets, read again before each POST (Worker._may_go_on).
# With them, whether it was paused meanwhile: a pause stops a delivery under way.
SECRETS = (
    Webhook.secret_sealed,
    Webhook.previous_secret_sealed,
    Webhook.previous_secret_until,
    Webhook.paused_at,
)
Secrets = Row[str, str | None, datetime | None, datetime | None]


def retry_delay(attempts: int) -> timedelta:
    """How long after its `attempts`-th failed attempt an event is tried again."""
    return timedelta(seconds=SCHEDULE[attempts - 1] if attempts <= len(SCHEDULE) else 3600)


# --- one worker per webhook ------------------------------------------------------------------


class Locks:
    """Per-webhook locks that die with the process holding them (module docstring), shared by
    the worker's threads: at most one thread of the process holds a webhook."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.postgres = engine.dialect.name == "postgresql"
        self._connection: Connection | None = None
        self._file: int | None = None
        # One thread at a time on the lock connection (a connection is not for two threads)
        # and on _held. Each lock is noted with the generation of the connection it was taken
        # on: a reset (the connection gone, and every lock with it) starts a new generation,
        # so a thread whose lock went with the old connection learns it (holding) instead of
        # asking a new connection that never held it.
        self._mutex = threading.Lock()
        self._held: dict[int, int] = {}  # webhook id -> the generation it was taken in
        self._generation = 0
        if not self.postgres:
            path = engine.url.database
            if not path or path == ":memory:":
                raise RuntimeError("events deliver needs a database file or PostgreSQL.")
            self._path = f"{path}-webhooks.lock"
            self._lock_file()

    def try_lock(self, webhook_id: int) -> bool:
        """Take the webhook's lock for the calling thread; False if another worker, or another
        thread of this one, holds it (or the database is out of reach)."""
        with self._mutex:
            if webhook_id in self._held:  # the process's own lock: the OS or server says yes
                return False
            if not self.postgres:
                try:
                    fcntl.lockf(self._lock_file(), fcntl.LOCK_EX | fcntl.LOCK_NB, 1, webhook_id)
                except OSError:
                    return False
            else:
                try:
                    got = (
                        self._lock_connection()
                        .execute(
                            text("SELECT pg_try_advisory_lock(:k, :id)"),
                            {"k": LOCK_KEY, "id": webhook_id},
                        )
                        .scalar()
                    )
                except DBAPIError:
                    self._reset()  # the server went away: its locks with it; a new connection
                    return False
                if not got:
                    return False
            self._held[webhook_id] = self._generation
            return True

    def unlock(self, webhook_id: int) -> None:
        with self._mutex:
            generation = self._held.pop(webhook_id, None)
            if generation is None:
                return
            if not self.postgres:
                if self._file is not None:
                    fcntl.lockf(self._file, fcntl.LOCK_UN, 1, webhook_id)
                return
            if self._connection is None or generation != self._generation:
                return  # the lock went with the connection it was taken on
            try:
                self._connection.execute(
                    text("SELECT pg_advisory_unlock(:k, :id)"), {"k": LOCK_KEY, "id": webhook_id}
                )
            except DBAPIError:
                self._reset()

    def holding(self, webhook_id: int) -> Secrets | None:
        """PostgreSQL: whether the lock on the webhook is still held (its connection alive: a
        server restart ends it, and frees the lock) and the webhook still there, in one round
        trip: the webhook's signing secrets (SECRETS) if so, else None. Not for SQLite, whose
        locks live as long as the process."""
        with self._mutex:
            if self._held.get(webhook_id) != self._generation:
                return None  # its connection was reset since: the lock is gone
            try:
                return (
                    self._lock_connection()
                    .execute(select(*SECRETS).where(Webhook.id == webhook_id))
                    .first()
                )
            except DBAPIError:
                self._reset()
                return None

    def _lock_file(self) -> int:
        if self._file is None:
            self._file = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        return self._file

    def _lock_connection(self) -> Connection:
        if self._connection is None:
            self._connection = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        return self._connection

    def reset(self) -> None:
        """Drop the lock connection (a database outage): every lock taken on it is gone."""
        with self._mutex:
            self._reset()

    def _reset(self) -> None:
        if self._connection is not None:
            with suppress(Exception):
                self._connection.invalidate()
            with suppress(Exception):
                self._connection.close()
            self._connection = None
        self._generation += 1

    def close(self) -> None:
        """Free every lock (a worker may take them again later: the file reopens). Only once
        no thread is delivering: closing the file frees the process's every record lock on it."""
        with self._mutex:
            self._reset()
            self._held.clear()
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
    """POSTs events, signed, to checked addresses only (targets.py), over kept-alive
    connections; reads at most MAX_ANSWER bytes of an answer. Safe to share between threads.

    Each POST checks its URL again (the setting, or the name's addresses, may have changed
    since the webhook was created) and connects to an address that check accepted, never to
    a second lookup of the name (DNS rebinding); the Host header, TLS's server name and the
    certificate check use the URL's host. `allow`: the networks allowed besides the public
    ones (default: WEBHOOK_ALLOW_NETWORKS of the app in context)."""

    def __init__(
        self,
        timeout: float = TIMEOUT_SECONDS,
        user_agent: str = "telephony-admin",
        allow: Iterable[targets.Network] | None = None,
        ca_certs: str | None = None,
    ):
        self.timeout = timeout
        self.user_agent = user_agent
        self.allow = targets.allowed_networks() if allow is None else tuple(allow)
        self.ca_certs = ca_certs  # None: the system's trusted certificates
        self._pools: OrderedDict[tuple[str, str, str, int], HTTPConnectionPool] = OrderedDict()
        self._pools_lock = threading.Lock()

    def send(
        self,
        url: str,
        secrets: Sequence[str],
        event: dict[str, Any],
        message_id: str | None = None,
    ) -> Answer:
        """POST `event`, signed with each of `secrets` (newest first): Standard Webhooks puts
        the signatures in one header, separated by spaces, and a receiver accepts any.
        `message_id`: the webhook-id header (default `evt_<event id>`)."""
        body = json.dumps(event, separators=(",", ":"))
        message_id = message_id or f"evt_{event['id']}"
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
            status = self._post(url, body.encode(), headers, started + self.timeout)
        except Exception as exc:  # every way a POST can fail is one failed attempt
            spent = int((time.monotonic() - started) * 1000)
            log.debug("webhook POST to %s failed: %s: %s", url, type(exc).__name__, exc)
            return Answer(None, spent, _category(exc))
        spent = int((time.monotonic() - started) * 1000)
        return Answer(status, spent, None)

    def _post(self, url: str, body: bytes, headers: dict[str, str], until: float) -> int:
        """POST to the first checked address that takes the connection; the answer's status.
        The whole of it, connection to the last byte read, ends at `until` (deadline.py): past
        it, a timeout."""
        target = targets.check(url, self.allow)
        headers = {**headers, "host": target.host_header}
        failure: Exception | None = None
        with deadline.watching(until) as watch:
            try:
                for address in target.addresses:
                    left = until - time.monotonic()
                    if left <= 0:
                        break
                    try:
                        response = self._pool(target, address).urlopen(
                            "POST",
                            target.path,
                            body=body,
                            headers=headers,
                            retries=False,
                            redirect=False,
                            assert_same_host=False,
                            preload_content=False,
                            timeout=urllib3.Timeout(total=left),
                        )
                    except urllib3.exceptions.NewConnectionError as exc:  # refused: the next one
                        failure = exc
                        continue
                    _read_at_most(response, MAX_ANSWER, until)
                    return response.status
            except Exception as exc:
                if watch.expired:  # cut at the deadline: whatever broke, it was too slow
                    raise urllib3.exceptions.TimeoutError("past the deadline") from exc
                raise
        raise failure or urllib3.exceptions.ConnectTimeoutError("no time left to connect")

    def _pool(self, target: targets.Target, address: str) -> HTTPConnectionPool:
        """The kept-alive connections to one checked address, for one host name."""
        key = (target.scheme, target.host, address, target.port)
        with self._pools_lock:
            pool = self._pools.get(key)
            if pool is not None:
                self._pools.move_to_end(key)
                return pool
            if target.scheme == "https":
                pool = _TLSPool(
                    address,
                    target.port,
                    retries=False,
                    maxsize=PER_ADDRESS,
                    cert_reqs="CERT_REQUIRED",
                    ca_certs=self.ca_certs,
                    server_hostname=target.host,
                    assert_hostname=target.host,
                )
            else:
                pool = _Pool(address, target.port, retries=False, maxsize=PER_ADDRESS)
            self._pools[key] = pool
            while len(self._pools) > MAX_POOLS:  # the least recently used goes
                # Not closed: another thread may be about to POST through it; its
                # connections close when the last one lets go of it.
                self._pools.popitem(last=False)
            return pool


class _Watched(HTTPConnection):
    """A connection whose sockets the POST's deadline may cut (deadline.py): a new one as it
    is opened (before a TLS handshake), a kept-alive one as a request starts on it."""

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        deadline.note(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        deadline.note(self.sock)
        super().request(*args, **kwargs)


class _WatchedTLS(_Watched, HTTPSConnection):
    pass


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Watched


class _TLSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedTLS


def _read_at_most(response: BaseHTTPResponse, limit: int, until: float) -> None:
    """Read at most `limit` bytes of the answer's body, and no longer than until `until`,
    then let the connection go: back to its pool if the body was read to its end, else closed
    (the rest is never read, so a receiver answering gigabytes costs nothing)."""
    read = 0
    complete = False
    try:
        while read <= limit and time.monotonic() < until:
            chunk = response.read(min(READ_CHUNK, limit + 1 - read), decode_content=False)
            if not chunk:
                complete = True
                break
            read += len(chunk)
    except Exception:  # the answer broke off after its status: the status stands
        complete = False
    if not complete:
        response.close()
    deadline.release()  # back to the pool: the next POST's to cut, not this one's
    response.release_conn()


def _category(exc: Exception) -> str:
    """What a failed attempt stores and shows: a category, never the error's own text (which
    would tell what listens at an address: a port scanner)."""
    if isinstance(exc, targets.Refused):
        return exc.category
    if isinstance(exc, urllib3.exceptions.SSLError):
        return "TLS error"
    # NewConnectionError first: urllib3 makes it a subclass of ConnectTimeoutError.
    if isinstance(exc, urllib3.exceptions.NewConnectionError):
        if isinstance(exc.__cause__, ConnectionRefusedError):
            return "connection refused"
        return "connection failed"
    if isinstance(exc, urllib3.exceptions.TimeoutError):
        return "timeout"
    return "connection failed"


# --- the worker --------------------------------------------------------------------------------


@dataclass
class Item:
    """The next thing to send to a webhook: an event, by itself or as a redelivery."""

    event: dict[str, Any]
    recorded_at: datetime  # the event's, or the redelivery's request: the 24 h count from it
    redelivery: bool


@dataclass
class _Progress:
    """What the POSTs to one webhook since its last save leave to write (_save): their
    attempts, and the redeliveries done with (delivered or given up, or their event pruned).
    One per webhook being served: each thread has its own."""

    pending: list[dict[str, Any]] = field(default_factory=list)
    unqueued: list[int] = field(default_factory=list)


@dataclass
class Worker:
    """Delivers what is due to every webhook, up to `concurrency` webhooks at once, each on a
    thread of its own (module docstring). `delivered` and `attempts` count every thread's."""

    engine: Engine
    sender: Sender = field(default_factory=Sender)
    clock: Callable[[], datetime] = utcnow
    concurrency: int = DEFAULT_CONCURRENCY
    stopping: bool = False
    delivered: int = 0
    attempts: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.concurrency <= MAX_CONCURRENCY:
            raise ValueError(f"concurrency must be 1 to {MAX_CONCURRENCY}, not {self.concurrency}")
        self.locks = Locks(self.engine)
        self._counts = threading.Lock()  # the threads' += on delivered and attempts

    def run(self, once: bool = False) -> None:
        """Deliver until stopped (SIGTERM, SIGINT: after the POSTs under way, each thread's
        progress saved), or with `once` until nothing is due. A database outage (a restart) is
        logged once and the loop goes on until the database is back; any other database
        error, or an outage with `once`, is raised (the command turns it into one line and
        exit 1) once the other threads have stopped and saved. Call it in an app context: each
        thread pushes one of its own for its session.

        Until stopped, it logs one line as it starts (the webhooks, the concurrency, the pid)
        and one as it stops, however it stops (what it delivered of how many attempts); with
        `once` the caller reports (the command prints one line)."""
        handlers: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():  # signals reach only it
            for sig in (signal.SIGTERM, signal.SIGINT):
                handlers[sig] = signal.signal(sig, self._stop)
        try:
            if once:
                try:
                    while not self.stopping and self.run_once():
                        pass
                except DBAPIError:
                    # An outage or not, a single pass (--once, from cron) ends: the command's one
                    # line and exit 1, not a loop.
                    db.session.rollback()
                    db.session.remove()
                    raise
            else:
                self._log_start()
                try:
                    self._dispatch()
                finally:
                    log.info(
                        "delivery worker stopped: %s delivered of %s",
                        self.delivered,
                        counted(self.attempts, "attempt"),
                        extra={FIELDS: {"delivered": self.delivered, "attempts": self.attempts}},
                    )
        finally:
            self.locks.close()
            for caught, handler in handlers.items():  # the caller's own back (a run in-process)
                signal.signal(caught, handler)

    def _stop(self, _signum: int, _frame: Any) -> None:
        self.stopping = True

    def _log_start(self) -> None:
        """The start line: how many webhooks there are (unknown while the database is out of
        reach: the dispatcher then waits for it, and says so), the concurrency, the pid."""
        try:
            hooks: int | None = db.session.scalar(select(func.count()).select_from(Webhook))
        except DBAPIError:
            db.session.rollback()
            hooks = None
        finally:
            db.session.remove()
        fields: dict[str, Any] = {"concurrency": self.concurrency, "pid": os.getpid()}
        if hooks is not None:
            fields = {"webhooks": hooks, **fields}
        log.info(
            "delivery worker started: %s, concurrency %s, pid %s",
            "webhooks unknown" if hooks is None else counted(hooks, "webhook"),
            self.concurrency,
            os.getpid(),
            extra={FIELDS: fields},
        )

    def _dispatch(self) -> None:
        """Until stopped: hand each webhook with something due, and not being served, to a free
        thread; look again when a thread is done, or every IDLE_POLL seconds."""
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        serving: dict[int, Future[bool]] = {}
        down_since: float | None = None
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="webhook-delivery") as pool:
            try:
                while not self.stopping:
                    outage = self._reap(serving)
                    if outage is None and len(serving) < self.concurrency:
                        try:
                            self._hand_out(pool, app, serving)
                        except DBAPIError as exc:
                            db.session.rollback()
                            db.session.remove()
                            if not is_outage(exc):  # no schema yet (`db upgrade` was not run)
                                raise
                            outage = exc
                        else:
                            if down_since is not None:
                                log.warning(
                                    "database back after %.0f s", time.monotonic() - down_since
                                )
                                down_since = None
                    if outage is not None:
                        self.locks.reset()  # the server's end of it is gone, the locks with it
                        if down_since is None:  # one line per outage, not one a second
                            log.warning(
                                "database unavailable, retrying: %s", str(outage.orig)[:200]
                            )
                            down_since = time.monotonic()
                        time.sleep(1)
                        continue
                    if serving:
                        wait(serving.values(), timeout=IDLE_POLL, return_when=FIRST_COMPLETED)
                    else:
                        time.sleep(IDLE_POLL)
            finally:
                # Stopped, or an error on its way up: each thread finishes its POST under way,
                # saves and returns; leaving the pool's block waits for them.
                self.stopping = True

    def _reap(self, serving: dict[int, Future[bool]]) -> DBAPIError | None:
        """Forget the webhooks whose thread is done; a database outage one met, if any (any
        other error is raised)."""
        outage = None
        for webhook_id, future in list(serving.items()):
            if not future.done():
                continue
            del serving[webhook_id]
            exc = future.exception()
            if isinstance(exc, DBAPIError) and is_outage(exc):
                outage = exc
            elif exc is not None:
                raise exc
        return outage

    def _hand_out(
        self, pool: ThreadPoolExecutor, app: Flask, serving: dict[int, Future[bool]]
    ) -> None:
        due = [webhook_id for webhook_id in self._due() if webhook_id not in serving]
        random.shuffle(due)  # several workers: start each on a different webhook
        for webhook_id in due:
            if self.stopping or len(serving) >= self.concurrency:
                return
            # Locked here, not in the thread: a webhook another worker holds takes no thread.
            if self.locks.try_lock(webhook_id):
                serving[webhook_id] = pool.submit(self._serve_locked, app, webhook_id)

    def run_once(self) -> bool:
        """One pass over the webhooks with something due, up to `concurrency` at once, back
        when each is done; whether any attempt was made. An error a thread met is raised
        once every thread is done."""
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        due = self._due()
        if not due:
            return False
        random.shuffle(due)  # several workers: start each on a different webhook
        threads = min(self.concurrency, len(due))
        with ThreadPoolExecutor(threads, thread_name_prefix="webhook-delivery") as pool:
            futures = [pool.submit(self._serve_if_free, app, webhook_id) for webhook_id in due]
        worked = False
        for future in futures:  # all done: the pool's block waited for them
            worked |= future.result()
        return worked

    def _serve_if_free(self, app: Flask, webhook_id: int) -> bool:
        if self.stopping or not self.locks.try_lock(webhook_id):
            return False
        return self._serve_locked(app, webhook_id)

    def _serve_locked(self, app: Flask, webhook_id: int) -> bool:
        """On a delivery thread: serve the webhook, whose lock the worker took for this thread,
        in an app context of the thread's own (db.session is scoped to it), then unlock."""
        try:
            with app.app_context():
                try:
                    return self._serve(webhook_id)
                finally:
                    db.session.rollback()
                    db.session.remove()
        finally:
            self.locks.unlock(webhook_id)

    def _due(self) -> list[int]:
        newest = webhooks.newest_event()
        queued = exists().where(WebhookRedelivery.webhook_id == Webhook.id)
        query = select(Webhook.id).where(
            or_(Webhook.cursor < newest, queued),
            or_(Webhook.next_attempt_at.is_(None), Webhook.next_attempt_at <= self.clock()),
            Webhook.paused_at.is_(None),
        )
        ids = list(db.session.scalars(query))
        db.session.rollback()
        return ids

    def _serve(self, webhook_id: int) -> bool:
        """Deliver what is due to one webhook, whose lock the worker holds for this thread."""
        hook = db.session.get(Webhook, webhook_id)
        if hook is None or hook.paused_at is not None:
            return False
        if hook.next_attempt_at and hook.next_attempt_at > self.clock():
            return False
        # A plain object from here: _save writes its progress with one UPDATE, which finds
        # nothing (and saves nothing) if the webhook was deleted meanwhile.
        db.session.expunge(hook)
        progress = _Progress()
        worked = False
        for batch, complete_to in self._batches(hook, progress):
            saved = time.monotonic()
            for item in batch:
                if self.stopping:
                    self._save(hook, progress)
                    return worked
                if not self._may_go_on(hook):  # lock lost (nothing saved) or deleted
                    return worked
                if hook.paused_at is not None:  # paused meanwhile: keep what was done
                    self._save(hook, progress)
                    return worked
                worked = True
                if not self._attempt(hook, item, progress):
                    self._save(hook, progress)
                    return worked
                if time.monotonic() - saved > SAVE_EVERY:
                    if not self._save(hook, progress):
                        return worked
                    saved = time.monotonic()
            if complete_to is not None:
                hook.cursor = max(hook.cursor, complete_to)
            if not self._save(hook, progress):
                return worked
        return worked

    def _may_go_on(self, hook: Webhook) -> bool:
        """Before each POST: whether the worker still holds the webhook's lock and the webhook
        is still there (deleted, nothing more is sent to it after the POST under way); and its
        signing secrets as they are now, so a rotation reaches a delivery under way, and
        whether it was paused meanwhile (`hook.paused_at`)."""
        if self.locks.postgres:
            now = self.locks.holding(hook.id)  # all in one round trip
        else:
            db.session.rollback()  # a fresh look: the reads so far see the database as it was
            now = db.session.execute(select(*SECRETS).where(Webhook.id == hook.id)).first()
        if now is None:
            return False
        hook.secret_sealed = now.secret_sealed
        hook.previous_secret_sealed = now.previous_secret_sealed
        hook.previous_secret_until = now.previous_secret_until
        hook.paused_at = now.paused_at
        return True

    def _batches(
        self, hook: Webhook, progress: _Progress
    ) -> Iterator[tuple[list[Item], int | None]]:
        """What to send, in order: queued redeliveries, then the matching events after the
        cursor, a batch at a time. With each batch, the id every event up to which has been
        read (the cursor may move there once the batch is delivered), or None. A webhook with a
        company filter receives each event as a Company-Admin of those companies reads it; one
        without, as a System-Admin (feed.shape)."""
        types, companies = webhooks.split(hook.event_types), webhooks.split(hook.companies)
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
                    items.append(Item(feed.shape(rows[0], companies), requested_at, True))
                else:  # pruned meanwhile: nothing to send
                    progress.unqueued.append(event_id)
            yield items, None
        while True:
            newest = webhooks.newest_event()  # before the read (feed.read)
            rows = feed.select_rows(hook.cursor, BATCH, companies, types)
            items = [Item(feed.shape(r, companies), r.at, False) for r in rows]
            complete = len(rows) < BATCH
            yield items, newest if complete else None
            if complete or self.stopping:
                return

    def _attempt(self, hook: Webhook, item: Item, progress: _Progress) -> bool:
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
        with self._counts:
            self.attempts += 1
            if answer.delivered:
                self.delivered += 1
        if answer.delivered:
            outcome = "delivered"
        elif now - item.recorded_at >= GIVE_UP_AFTER:
            outcome = "failed"
            log.warning("webhook %s: event %s given up after 24 h", hook.id, event_id)
        else:
            outcome = "retry"
        WEBHOOK_ATTEMPTS.labels(outcome).inc()
        progress.pending.append(
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
            progress.unqueued.append(event_id)
        else:
            hook.cursor = max(hook.cursor, event_id)
        return True

    def _save(self, hook: Webhook, progress: _Progress) -> bool:
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
            if progress.pending:
                db.session.execute(WebhookAttempt.__table__.insert(), progress.pending)
            if progress.unqueued:
                done = (a for a in progress.pending if a["event_id"] in progress.unqueued)
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
                        WebhookRedelivery.event_id.in_(progress.unqueued),
                    )
                )
            _trim(hook.id)
            db.session.commit()
        except BaseException:
            db.session.rollback()
            raise
        progress.pending, progress.unqueued = [], []
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
