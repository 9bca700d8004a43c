"""Change events and webhooks (docs/events.md): what recording, delivering and reading the
events cost, on the bench data set, every figure against a reference measured in the same run.

python -m bench.events [--quick] [--dir DIR] [--explain]   (bench.db in DIR, and
BENCH_DATABASE_URL when set, as `make bench` runs them)

The data set first gets the event table a provider's would hold: one event per change of the
generated history in the last 90 days (the default retention), 2,050,559 at full size, by one
INSERT ... SELECT (`fill`, once per data set; a create at each interval's start, a delete at
each end, an update where an interval starts as another of the record ends: 292,454 of them
moves between companies), so every row below writes to and reads from a table of that size.
Then, through the API in process (Flask's test client, a System-Admin's Bearer token) unless
said otherwise:

- **Reads** (`POST /rest/events/read`, p95 of the requests after a warm-up, interleaved): a
  Company-Admin up to date (`after` = the newest event of its company, so the answer is empty:
  what a reader polling its feed asks most of the time), for the largest company and for the
  median one; the System-Admin reading 1,000 events from the middle of the table. Reference:
  the System-Admin up to date (`after` = the newest event: one index probe, an empty answer),
  the fixed cost of the call. Bound: 50 ms (p95), the bench's own line for a slow read (the
  contract sets none); a slower read prints its query plan.
- **Batch create with events**: 1,000-DDI `POST /rest/ops/create` batches, rows/s, against the
  same batches with `webapp.services.events.journal.record` replaced by a no-op (nothing else
  changed), the two alternating request by request (ABBA), the rows deleted again after each
  run of 20; each side's figure from its median request. Target: recording events keeps at
  least 85% of the throughput (contract: costs at most 15%).
- **Delivery**: one webhook, N events committed (N DDIs created), one `delivery.Worker`
  `run(once=True)` in this process delivering them to a receiver on 127.0.0.1 (a threaded
  `http.server` with HTTP/1.1 keep-alive, in its own process): events/s, against the same
  POSTs (same bodies, same signed headers) sent by a plain urllib3 loop: the receiver and the
  transport alone. The webhook's cursor is set back between the rounds. Target 300 events/s.
- **Commit to delivery**: `flask events deliver` running as a subprocess, single-DDI creates
  at a steady rate; the latency of each event is its arrival at the receiver (its clock) minus
  the moment the writer's commit returned (an `after_commit` hook in the writer); p95. The
  reference is the worker's idle poll interval (`delivery.IDLE_POLL`): how long a commit may
  wait before an idle worker looks. Target 2 s.
- **Beside a slow webhook**: the same, with 19 webhooks answering at once, p95 over every
  (webhook, event), then again with a 20th webhook answering each POST in 2 s (its backlog
  grows all the while); the first is the reference. Target 2 s: webhooks do not wait for
  each other.

The run leaves the data set as it found it: the DDIs it made are deleted through the API, its
webhooks are deleted, and the events its own accounts recorded (creates and deletes of the
bench company) are deleted with them, then the event tables vacuumed on PostgreSQL (`tidy`);
the filled events stay.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from .http import ensure_account
from .table import Result, render

ROOT = Path(__file__).resolve().parent.parent
RETENTION_DAYS = 90  # the fill's window: EVENTS_RETENTION_DAYS' default
FILL_ACTORS = 7  # the filled events' actors: api-operator-0 .. -6, as bench/audit_log.py's
BATCH_COMPANY = "bench-batch"  # bench/http.py's company for created rows
DIALCODE = "997"  # not the generator's (44) nor bench/http.py's (999, 998)
BATCH_ROWS = 1000
SYSADMIN = "bench-events"
ADMINS = ("bench-events-admin-1", "bench-events-admin-2")
READ_BOUND_MS = 50.0
SLOW_ANSWER = 2.0  # seconds the slow webhook of the many-webhooks row takes to answer
MANY_WEBHOOKS = 20  # that row's webhooks, the slow one among them
UNLIMITED = "1000000000 per minute"
LOOPBACK = "127.0.0.0/8"  # webhooks may go to the receiver on 127.0.0.1 (WEBHOOK_ALLOW_NETWORKS)


@dataclass(frozen=True)
class Settings:
    batches: int  # pairs of 1,000-DDI batches (one each way) per batch-create run
    rounds: int  # batch-create runs, each deleting its rows after (and a warm-up pair before)
    deliver: int  # events committed for the delivery scenario
    deliver_rounds: int
    rate: float  # creates a second for the latency scenario
    seconds: float  # how long the latency scenario writes
    reads: int  # requests per read row
    beside_slow_seconds: float  # how long each half of the many-webhooks row writes


FULL = Settings(
    batches=10,
    rounds=6,
    deliver=5000,
    deliver_rounds=3,
    rate=20,
    seconds=30,
    reads=100,
    beside_slow_seconds=15,
)
QUICK = Settings(
    batches=2,
    rounds=2,
    deliver=300,
    deliver_rounds=1,
    rate=20,
    seconds=2,
    reads=5,
    beside_slow_seconds=2,
)


# --- the event table of the data set's history -------------------------------------------------


def _columns_sql(dialect: str) -> str:
    """A staged change's record in the events table's columns (models.Event: its key, its
    extension before and after, NULL for a create / a delete). Extensions as bench/generate.py
    gives them (the DDI's serial, the user's number)."""
    if dialect == "postgresql":
        dialcode, number = "split_part(key, ':', 1)", "split_part(key, ':', 2)"
    else:
        dialcode, number = "substr(key, 1, instr(key, ':') - 1)", "substr(key, instr(key, ':') + 1)"
    exten = (
        f"CASE WHEN kind = 'ddi' "
        f"THEN CAST((CAST({number} AS BIGINT) - 1000000000) % 9000 + 100 AS VARCHAR(10)) "
        f"ELSE CAST(CAST(substr(key, 2) AS BIGINT) % 9000 + 200 AS VARCHAR(10)) END"
    )
    return (
        f"CASE WHEN kind = 'ddi' THEN {dialcode} END, "
        f"CASE WHEN kind = 'ddi' THEN {number} END, "
        f"CASE WHEN kind = 'user' THEN key END, "
        f"CASE WHEN before_company IS NULL THEN NULL ELSE {exten} END, "
        f"CASE WHEN after_company IS NULL THEN NULL ELSE {exten} END"
    )


# The changes of the generated history (source 'bench') since :since, as the app would have
# recorded them: an interval starting where another of the same record ends is a move (an
# update naming the company it left), else a create; an end no interval starts at is a delete.
_CHANGES = """
SELECT s.start_at AS at, s.kind AS kind, s.key AS key,
       CASE WHEN p.id IS NULL THEN s.kind || '.created' ELSE s.kind || '.updated' END AS type,
       s.company AS company,
       CASE WHEN p.company <> s.company THEN p.company END AS other_company,
       p.company AS before_company, s.company AS after_company
FROM history_intervals s
LEFT JOIN history_intervals p
  ON p.kind = s.kind AND p.key = s.key AND p.end_at = s.start_at AND p.source = 'bench'
WHERE s.source = 'bench' AND s.start_at >= :since
UNION ALL
SELECT e.end_at, e.kind, e.key, e.kind || '.deleted', e.company, NULL, e.company, NULL
FROM history_intervals e
WHERE e.source = 'bench' AND e.end_at IS NOT NULL AND e.end_at >= :since
  AND NOT EXISTS (
    SELECT 1 FROM history_intervals n
    WHERE n.kind = e.kind AND n.key = e.key AND n.start_at = e.end_at AND n.source = 'bench')
"""


def filled(engine: Engine) -> bool:
    with engine.connect() as conn:
        query = text("SELECT 1 FROM event_txns WHERE actor = 'api-operator-0' LIMIT 1")
        return conn.execute(query).first() is not None


def fill(engine: Engine, days: int = RETENTION_DAYS) -> int:
    """Write the events of the history's changes of the last `days` days, one transaction
    each, ids in time order after those already given; returns how many."""
    dialect = engine.dialect.name
    actor = f"'api-operator-' || CAST(rn % {FILL_ACTORS} AS VARCHAR(8))"
    with engine.begin() as conn:
        latest = conn.execute(text("SELECT max(start_at) FROM history_intervals")).scalar()
        if latest is None:
            return 0
        if isinstance(latest, str):  # SQLite answers an aggregate of datetimes as text
            latest = datetime.fromisoformat(latest)
        since = latest - timedelta(days=days)
        # Every piece is a constant of this module: no value from outside is formatted in.
        conn.execute(
            text(
                "CREATE TEMPORARY TABLE bench_event_stage AS "  # noqa: S608
                "SELECT row_number() OVER (ORDER BY at, kind, key) AS rn, c.* "
                f"FROM ({_CHANGES}) c"
            ),
            {"since": since},
        )
        count = conn.execute(text("SELECT count(*) FROM bench_event_stage")).scalar_one()
        # The counter row, locked to the commit as the app's own writers take it.
        last = conn.execute(
            text("UPDATE event_counter SET last_id = last_id + :n WHERE id = 1 RETURNING last_id"),
            {"n": count},
        ).scalar_one()
        first_id = last - count
        first_txn = conn.execute(text("SELECT coalesce(max(id), 0) FROM event_txns")).scalar_one()
        params = {"id0": first_id, "txn0": first_txn}
        conn.execute(
            text(
                "INSERT INTO event_txns (id, first_id, last_id, at, actor) "  # noqa: S608
                f"SELECT :txn0 + rn, :id0 + rn, :id0 + rn, at, {actor} "
                "FROM bench_event_stage"
            ),
            params,
        )
        columns = _columns_sql(dialect)
        conn.execute(
            text(
                "INSERT INTO events (txn_id, seq, type, company, other_company, dialcode, "  # noqa: S608
                "number, username, before_exten, after_exten) "
                f"SELECT :txn0 + rn, 0, type, company, other_company, {columns} "
                "FROM bench_event_stage"
            ),
            params,
        )
        conn.execute(text("DROP TABLE bench_event_stage"))
        if dialect == "postgresql":  # ids given above: the serial goes on after them
            conn.execute(
                text(
                    "SELECT setval(pg_get_serial_sequence('event_txns', 'id'), "
                    "(SELECT max(id) FROM event_txns))"
                )
            )
        else:
            conn.execute(text("ANALYZE event_txns"))
            conn.execute(text("ANALYZE events"))
    tidy(engine)  # as autovacuum would have left it: hint bits set, the visibility map filled
    return count


def ensure_filled(url: str) -> None:
    """Fill the data set's events unless done before; vacuumed either way (tidy)."""
    from sqlalchemy import create_engine

    engine = create_engine(url)
    try:
        if filled(engine):
            tidy(engine)  # an interrupted run's deletions
        else:
            started = time.perf_counter()
            written = fill(engine)
            print(
                f"  events of the history: {written:,} in {time.perf_counter() - started:.0f} s",
                flush=True,
            )
    finally:
        engine.dispose()


# --- the receiver ------------------------------------------------------------------------------


class _Hook(BaseHTTPRequestHandler):
    """POST /hook: a webhook delivery, kept with its arrival time (time.time()) and answered
    200 at once; POST /many/<name>: the same, kept with its path, for the rows with many
    webhooks; POST /slow/<name>: answered 200 after SLOW_ANSWER seconds, not kept; GET /log and
    GET /many: the deliveries so far as JSON; POST /reset: forget them."""

    protocol_version = "HTTP/1.1"  # keep-alive: every answer has a Content-Length
    arrivals: list[tuple[float, str, str]] = []
    routed: list[tuple[float, str, str]] = []  # (arrival, path, body)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path == "/hook":
            self.arrivals.append((time.time(), self.headers.get("webhook-id") or "", body.decode()))
        elif self.path.startswith("/many/"):
            self.routed.append((time.time(), self.path, body.decode()))
        elif self.path.startswith("/slow/"):
            time.sleep(SLOW_ANSWER)
        elif self.path == "/reset":
            self.arrivals.clear()
            self.routed.clear()
        self._answer(b"")

    def do_GET(self) -> None:
        self._answer(json.dumps(self.routed if self.path == "/many" else self.arrivals).encode())

    def _answer(self, payload: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


def serve_receiver() -> None:
    """`python -m bench.events --receiver`: serve on a free loopback port, print it, run until
    stdin closes (the bench ending, however it ends)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()
    server.shutdown()


class Receiver:
    """The receiver process, its port, and what it received."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.events", "--receiver"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}/hook"
        import urllib3

        self.http = urllib3.PoolManager(retries=False)

    def reset(self) -> None:
        self.http.request("POST", f"http://127.0.0.1:{self.port}/reset")

    def arrivals(self) -> list[tuple[float, str, str]]:
        answer = self.http.request("GET", f"http://127.0.0.1:{self.port}/log")
        return [tuple(a) for a in json.loads(answer.data)]

    def routed(self) -> list[tuple[float, str, str]]:
        """The deliveries to /many/<name> so far: (arrival, path, body)."""
        answer = self.http.request("GET", f"http://127.0.0.1:{self.port}/many")
        return [tuple(a) for a in json.loads(answer.data)]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


# --- principals, the API in process ------------------------------------------------------------


@dataclass
class Setup:
    app: Any
    operator: Any
    sysadmin: str  # Bearer tokens
    admins: dict[str, str]  # company -> its Company-Admin's token
    token_ids: list[int]


def _prepare(url: str, companies: list[str]) -> Setup:
    from sqlalchemy import select

    from webapp import create_app
    from webapp.access import Principal
    from webapp.extensions import db
    from webapp.models import ApiToken, Company
    from webapp.services import companies as company_service
    from webapp.services.identity import api_tokens

    app = create_app(
        {
            "SQLALCHEMY_DATABASE_URI": url,
            "SECRET_KEY": "bench-secret-key-not-secret",
            "API_RATE_LIMIT": UNLIMITED,
            "WEBHOOK_ALLOW_NETWORKS": LOOPBACK,  # the bench's receiver
        }
    )
    operator = Principal.cli("cli:bench")
    with app.app_context():
        if db.session.get(Company, BATCH_COMPANY) is None:
            company_service.create(operator, BATCH_COMPANY, "Bench batch creates")
        ensure_account(operator, SYSADMIN, system_admin=True)
        tokens = {"": api_tokens.create(operator, SYSADMIN, "bench")}
        for username, company in zip(ADMINS, companies, strict=False):
            ensure_account(operator, username, admin_of=[company])
            tokens[company] = api_tokens.create(operator, username, "bench")
        hashes = [api_tokens.hash_token(t) for t in tokens.values()]
        ids = list(db.session.scalars(select(ApiToken.id).where(ApiToken.token_hash.in_(hashes))))
        db.session.remove()
    sysadmin = tokens.pop("")
    return Setup(app, operator, sysadmin, tokens, ids)


def _finish(setup: Setup) -> None:
    """Revoke the run's tokens, delete its webhooks and the events the bench's accounts
    recorded (this run's, and an interrupted run's)."""
    from sqlalchemy import bindparam

    from webapp.extensions import db
    from webapp.services.identity import api_tokens

    with setup.app.app_context():
        for token_id in setup.token_ids:
            api_tokens.revoke(setup.operator, token_id)
        _drop_webhooks(setup)
        for statement in (
            "DELETE FROM events WHERE txn_id IN (SELECT id FROM event_txns WHERE actor IN :actors)",
            "DELETE FROM event_txns WHERE actor IN :actors",
        ):
            db.session.execute(
                text(statement).bindparams(bindparam("actors", expanding=True)),
                {"actors": (SYSADMIN, *ADMINS)},
            )
        db.session.commit()
        db.session.remove()
        tidy(db.engine)
        db.engine.dispose()


def tidy(engine: Engine) -> None:
    """On PostgreSQL, VACUUM (ANALYZE) the event tables, as autovacuum would in time: the rows
    a run deletes are the newest, and until vacuumed the planner wades through their dead index
    entries at the top of ix_event_txns_last_id on every read (4 ms of planning a call)."""
    if engine.dialect.name != "postgresql":
        return
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM (ANALYZE) event_txns"))
        conn.execute(text("VACUUM (ANALYZE) events"))


def _drop_webhooks(setup: Setup) -> None:
    """Delete every webhook pointing at a loopback receiver made by the bench (this run's, or an
    interrupted run's): a worker would otherwise keep trying it."""
    from webapp.extensions import db
    from webapp.models import Webhook
    from webapp.services.events import webhooks

    for hook in list(db.session.query(Webhook).all()):
        if hook.created_by == setup.operator.username and hook.url.startswith("http://127.0.0.1:"):
            webhooks.delete_webhook(setup.operator, hook.id)
    db.session.remove()


def _post(client: Any, token: str, path: str, body: dict[str, Any] | bytes) -> dict[str, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = client.post(
        path,
        data=data,
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, (path, response.get_data(as_text=True)[:500])
    return response.get_json()


def _delete_created(client: Any, token: str) -> int:
    """Delete the DDIs the bench created, through the API as they were made."""
    scope = {"company": BATCH_COMPANY, "dialcode": DIALCODE}
    return _post(client, token, "/rest/ops/delete", {"type": "ddi", "scope": scope})["numrows"]


def _bodies(count: int, prefix: str = "7") -> list[bytes]:
    """`count` bodies of 1,000 new DDIs each, the same keys every run (deleted after)."""
    return [
        json.dumps(
            {
                "type": "ddi",
                "values": [
                    {
                        "dialcode": DIALCODE,
                        "number": f"{prefix}{b:04d}{i:05d}",
                        "virt_exten": "100",
                        "company": BATCH_COMPANY,
                    }
                    for i in range(BATCH_ROWS)
                ],
            }
        ).encode()
        for b in range(count)
    ]


def p95(values: list[float]) -> float:
    """Nearest rank, as bench/pages.py reports it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


# --- the scenarios -----------------------------------------------------------------------------


@contextlib.contextmanager
def events_not_recorded() -> Iterator[None]:
    """The reference: the change path with `journal.record` a no-op, nothing else changed."""
    from webapp.services.events import journal

    saved = journal.record
    journal.record = lambda *_args, **_kwargs: 0  # type: ignore[assignment]
    try:
        yield
    finally:
        journal.record = saved  # type: ignore[assignment]


def batch_create(label: str, setup: Setup, s: Settings) -> list[Result]:
    """Batches with and without events alternate request by request (ABBA), so a machine that
    slows down for a moment slows both sides alike; each side's figure is 1,000 rows over its
    median request time."""
    client = setup.app.test_client()
    bodies = _bodies(2 * s.batches)

    def post(body: bytes, recorded: bool) -> float:
        started = time.perf_counter()
        if recorded:
            created = _post(client, setup.sysadmin, "/rest/ops/create", body)["numrows"]
        else:
            with events_not_recorded():
                created = _post(client, setup.sysadmin, "/rest/ops/create", body)["numrows"]
        spent = time.perf_counter() - started
        assert created == BATCH_ROWS, created
        return spent

    _delete_created(client, setup.sysadmin)  # an interrupted earlier run's
    times: dict[bool, list[float]] = {True: [], False: []}
    for round_ in range(s.rounds + 1):
        pairs = 1 if round_ == 0 else s.batches  # round 0: a warm-up pair, not counted
        for pair in range(pairs):
            order = (True, False) if pair % 2 == 0 else (False, True)
            for recorded, body in zip(order, bodies[2 * pair : 2 * pair + 2], strict=True):
                spent = post(body, recorded)
                if round_:
                    times[recorded].append(spent)
        assert _delete_created(client, setup.sysadmin) == 2 * pairs * BATCH_ROWS
    requests = len(times[True])
    return [
        Result(
            label,
            f"batch create with events, {BATCH_ROWS:,} DDIs a request ({requests} requests "
            "each way, alternating; API in process)",
            BATCH_ROWS / statistics.median(times[True]),
            BATCH_ROWS / statistics.median(times[False]),
            "same batches, journal.record a no-op",
            "rows/s",
            target=0.85,
            higher_is_better=True,
        )
    ]


def _create_events(client: Any, token: str, count: int) -> None:
    """`count` events committed: DDIs created in 1,000-row batches (and a remainder)."""
    bodies = _bodies(math.ceil(count / BATCH_ROWS), prefix="6")
    left = count
    for body in bodies:
        if left < BATCH_ROWS:
            values = json.loads(body)["values"][:left]
            body = json.dumps({"type": "ddi", "values": values}).encode()
        left -= _post(client, token, "/rest/ops/create", body)["numrows"]


def _signed(received: list[tuple[float, str, str]], secret: str) -> list[tuple[bytes, dict]]:
    """The receiver's deliveries as the reference POSTs them: same bodies, same headers."""
    from standardwebhooks.webhooks import Webhook as Signer

    now = datetime.now(UTC)
    signer = Signer(secret)
    posts = []
    for _, message_id, body in received:
        headers = {
            "content-type": "application/json",
            "user-agent": "telephony-admin",
            "webhook-id": message_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signer.sign(message_id, now, body),
        }
        posts.append((body.encode(), headers))
    return posts


def _check_order(received: list[tuple[float, str, str]], first: int, count: int) -> None:
    ids = [int(message_id.removeprefix("evt_")) for _, message_id, _ in received]
    assert ids == list(range(first + 1, first + count + 1)), (
        f"delivered {len(ids)} events, not ids {first + 1}..{first + count} in order"
    )


def delivery(label: str, setup: Setup, receiver: Receiver, s: Settings) -> list[Result]:
    import urllib3

    from webapp.extensions import db
    from webapp.models import Webhook
    from webapp.services.events import delivery as delivery_service
    from webapp.services.events import webhooks

    client = setup.app.test_client()
    with setup.app.app_context():
        _drop_webhooks(setup)
        others = db.session.query(Webhook).count()
        assert others == 0, f"{others} webhooks in the data set: the worker would serve them too"
        hook, secret = webhooks.create(setup.operator, receiver.url)
        hook_id, start = hook.id, hook.cursor
        db.session.remove()
    _create_events(client, setup.sysadmin, s.deliver)
    pool = urllib3.PoolManager(retries=False)
    worker_rates, reference_rates = [], []
    try:
        for _ in range(s.deliver_rounds):
            with setup.app.app_context():
                db.session.execute(
                    text(
                        "UPDATE webhooks SET cursor = :c, head_event = NULL, head_attempts = 0, "
                        "next_attempt_at = NULL WHERE id = :i"
                    ),
                    {"c": start, "i": hook_id},
                )
                db.session.commit()
                receiver.reset()
                worker = delivery_service.Worker(db.engine)
                handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
                started = time.perf_counter()
                try:
                    worker.run(once=True)
                finally:
                    seconds = time.perf_counter() - started
                    for sig, handler in handlers.items():  # Worker.run took them over
                        signal.signal(sig, handler)
                db.session.remove()
            assert worker.delivered == s.deliver, (worker.delivered, worker.attempts)
            received = receiver.arrivals()
            _check_order(received, start, s.deliver)
            worker_rates.append(s.deliver / seconds)
            posts = _signed(received, secret)
            receiver.reset()
            started = time.perf_counter()
            for body, headers in posts:
                answer = pool.request("POST", receiver.url, body=body, headers=headers)
                assert answer.status == 200
            reference_rates.append(len(posts) / (time.perf_counter() - started))
            assert len(receiver.arrivals()) == s.deliver
    finally:
        pool.clear()
        with setup.app.app_context():
            webhooks.delete_webhook(setup.operator, hook_id)
            db.session.remove()
        _delete_created(client, setup.sysadmin)
    return [
        Result(
            label,
            f"one worker delivers {s.deliver:,} events to a local receiver",
            statistics.median(worker_rates),
            statistics.median(reference_rates),
            "the same POSTs from a urllib3 loop: receiver alone",
            "events/s",
            higher_is_better=True,
            absolute_target=300.0,
        )
    ]


@contextlib.contextmanager
def _worker_process(url: str, log: Path) -> Iterator[subprocess.Popen]:
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "SECRET_KEY": os.environ.get("SECRET_KEY", "bench-secret-key-not-secret"),
        "WEBHOOK_ALLOW_NETWORKS": LOOPBACK,  # the bench's receiver
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "flask", "--app", "app", "events", "deliver"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            yield proc
        finally:
            proc.send_signal(signal.SIGTERM)  # it ends after the POST under way
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def _wait_for(receiver: Receiver, numbers: set[str], seconds: float) -> dict[str, float]:
    """First arrival time of each created number's event, waiting up to `seconds` for all."""
    deadline = time.monotonic() + seconds
    while True:
        first: dict[str, float] = {}
        for at, _, body in receiver.arrivals():
            event = json.loads(body)
            number = (event.get("after") or {}).get("number")
            if event["type"] == "ddi.created" and number in numbers:
                first.setdefault(number, at)
        if len(first) == len(numbers) or time.monotonic() > deadline:
            return first
        time.sleep(0.2)


@contextlib.contextmanager
def _timed_creates(setup: Setup) -> Iterator[Callable[[str], float]]:
    """A function creating one DDI through the API and answering when its commit returned (the
    request's last commit), for the latency rows; the commit listener is removed on leaving."""
    from sqlalchemy import event as sa_event
    from sqlalchemy.orm import Session

    client = setup.app.test_client()
    committed: list[float] = []

    def on_commit(_session: Session) -> None:
        committed.append(time.time())

    def create(number: str) -> float:
        committed.clear()
        value = {"dialcode": DIALCODE, "number": number, "virt_exten": "100"}
        body = {"type": "ddi", "values": [{**value, "company": BATCH_COMPANY}]}
        assert _post(client, setup.sysadmin, "/rest/ops/create", body)["numrows"] == 1
        return committed[-1]

    sa_event.listen(Session, "after_commit", on_commit)
    try:
        yield create
    finally:
        sa_event.remove(Session, "after_commit", on_commit)


def _paced(create: Callable[[str], float], numbers: list[str], rate: float) -> dict[str, float]:
    """Create `numbers` at `rate` a second; each one's commit time."""
    commits: dict[str, float] = {}
    started = time.monotonic()
    for i, number in enumerate(numbers):
        pause = started + i / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        commits[number] = create(number)
    return commits


def latency(label: str, setup: Setup, receiver: Receiver, url: str, s: Settings) -> list[Result]:
    from webapp.extensions import db
    from webapp.services.events import delivery as delivery_service
    from webapp.services.events import webhooks

    client = setup.app.test_client()
    with setup.app.app_context():
        _drop_webhooks(setup)
        hook, _ = webhooks.create(setup.operator, receiver.url)
        hook_id = hook.id
        db.session.remove()
    total = int(s.rate * s.seconds)
    try:
        with (
            tempfile.TemporaryDirectory() as folder,
            _worker_process(url, Path(folder) / "w.log"),
            _timed_creates(setup) as create,
        ):
            receiver.reset()
            warm = "800000000"  # the worker is up once this one has arrived
            create(warm)
            got = _wait_for(receiver, {warm}, 60)
            assert got, (
                f"the worker delivered nothing in 60 s: {(Path(folder) / 'w.log').read_text()}"
            )
            receiver.reset()
            commits = _paced(create, [f"81{i:08d}" for i in range(total)], s.rate)
            arrived = _wait_for(receiver, set(commits), 30)
    finally:
        with setup.app.app_context():
            webhooks.delete_webhook(setup.operator, hook_id)
            db.session.remove()
        _delete_created(client, setup.sysadmin)
    assert len(arrived) == len(commits), f"{len(commits) - len(arrived)} events never arrived"
    waits = [(arrived[n] - commits[n]) * 1000 for n in commits]
    return [
        Result(
            label,
            f"commit to delivery p95, worker running, {s.rate:g} creates/s for {s.seconds:g} s "
            f"({total:,} events; p50 {statistics.median(waits):.0f} ms, max {max(waits):.0f} ms)",
            p95(waits),
            delivery_service.IDLE_POLL * 1000,
            "the worker's idle poll interval",
            "ms",
            absolute_target=2000.0,
        )
    ]


def beside_slow(
    label: str, setup: Setup, receiver: Receiver, url: str, s: Settings
) -> list[Result]:
    """Many webhooks, one slow: one `flask events deliver` process (its default concurrency),
    MANY_WEBHOOKS - 1 webhooks answering at once, single-DDI creates at a steady rate; the
    commit-to-delivery p95 over every (webhook, event), first with those webhooks alone (the
    reference), then with one more webhook answering each POST in SLOW_ANSWER seconds, its
    backlog growing all the while. Target: 2 s, whatever the slow one does."""
    from webapp.extensions import db
    from webapp.services.events import webhooks

    client = setup.app.test_client()
    base = f"http://127.0.0.1:{receiver.port}"
    paths = [f"/many/{n}" for n in range(MANY_WEBHOOKS - 1)]
    with setup.app.app_context():
        _drop_webhooks(setup)
        for path in paths:
            webhooks.create(setup.operator, base + path)
        db.session.remove()

    def waits(create: Callable[[str], float], prefix: str, count: int) -> list[float]:
        """`count` creates at s.rate a second; each (webhook, event)'s wait in ms."""
        receiver.reset()
        commits = _paced(create, [f"{prefix}{i:07d}" for i in range(count)], s.rate)
        first = _routed_arrivals(receiver, set(commits), len(paths), 30)
        assert len(first) == len(commits) * len(paths), (
            f"{len(commits) * len(paths) - len(first)} deliveries never arrived"
        )
        return [(at - commits[number]) * 1000 for (_, number), at in first.items()]

    count = int(s.rate * s.beside_slow_seconds)
    try:
        with (
            tempfile.TemporaryDirectory() as folder,
            _worker_process(url, Path(folder) / "w.log"),
            _timed_creates(setup) as create,
        ):
            create("830000000")  # the worker is up once this one has arrived everywhere
            up = _routed_arrivals(receiver, {"830000000"}, len(paths), 60)
            assert len(up) == len(paths), (
                f"the worker delivered {len(up)} of {len(paths)} in 60 s: "
                f"{(Path(folder) / 'w.log').read_text()}"
            )
            alone = waits(create, "831", count)
            with setup.app.app_context():
                webhooks.create(setup.operator, f"{base}/slow/0")
                db.session.remove()
            beside = waits(create, "832", count)
    finally:
        with setup.app.app_context():
            _drop_webhooks(setup)
        _delete_created(client, setup.sysadmin)
    return [
        Result(
            label,
            f"commit to delivery p95, {MANY_WEBHOOKS} webhooks, one answering in "
            f"{SLOW_ANSWER:g} s: the other {len(paths)}, {s.rate:g} creates/s for "
            f"{s.beside_slow_seconds:g} s ({count * len(paths):,} deliveries; p50 "
            f"{statistics.median(beside):.0f} ms, max {max(beside):.0f} ms)",
            p95(beside),
            p95(alone),
            f"the same {len(paths)} webhooks, no slow one",
            "ms",
            absolute_target=2000.0,
        )
    ]


def _routed_arrivals(
    receiver: Receiver, numbers: set[str], webhooks: int, seconds: float
) -> dict[tuple[str, str], float]:
    """First arrival time of each created number's event at each /many/ webhook, waiting up to
    `seconds` for all of them."""
    deadline = time.monotonic() + seconds
    while True:
        first: dict[tuple[str, str], float] = {}
        for at, path, body in receiver.routed():
            event = json.loads(body)
            number = (event.get("after") or {}).get("number")
            if event["type"] == "ddi.created" and number in numbers:
                first.setdefault((path, number), at)
        if len(first) == len(numbers) * webhooks or time.monotonic() > deadline:
            return first
        time.sleep(0.2)


def _pick_companies(url: str) -> list[tuple[str, int]]:
    """The largest company by events, and the median one: (company, its events)."""
    from sqlalchemy import create_engine

    engine = create_engine(url)
    with engine.connect() as conn:
        counts = conn.execute(
            text(
                "SELECT company, count(*) FROM events WHERE company LIKE 'c%' "
                "GROUP BY company ORDER BY count(*) DESC, company"
            )
        ).all()
    engine.dispose()
    assert counts, "no events: the fill did not run"
    return [tuple(counts[0]), tuple(counts[len(counts) // 2])]  # type: ignore[list-item]


def _newest(company: str | None = None) -> int:
    """The id of the newest event (of `company`, either side of a move)."""
    from webapp.extensions import db

    if company is None:
        return int(db.session.execute(text("SELECT last_id FROM event_counter")).scalar_one())
    return int(
        db.session.execute(
            text(
                "SELECT coalesce(max(t.first_id + e.seq), 0) FROM events e "
                "JOIN event_txns t ON t.id = e.txn_id "
                "WHERE e.company = :c OR e.other_company = :c"
            ),
            {"c": company},
        ).scalar_one()
    )


def _middle() -> int:
    """An id halfway through the events kept (earlier runs' own events are deleted: the
    counter's head may be past the last kept one)."""
    from webapp.extensions import db

    low, high = db.session.execute(
        text("SELECT coalesce(min(first_id), 0), coalesce(max(last_id), 0) FROM event_txns")
    ).one()
    return (int(low) + int(high)) // 2


def _explain(setup: Setup, token: str, body: dict[str, Any]) -> str:
    """The query plan of the read's statements, run again with their own parameters."""
    from sqlalchemy import event as sa_event

    from webapp.extensions import db

    seen: list[tuple[str, Any]] = []

    def capture(_conn, _cursor, statement, parameters, _context, _many):
        if "FROM event_txns JOIN events" in statement:
            seen.append((statement, parameters))

    with setup.app.app_context():
        engine = db.engine
    sa_event.listen(engine, "before_cursor_execute", capture)
    try:
        _post(setup.app.test_client(), token, "/rest/events/read", body)
    finally:
        sa_event.remove(engine, "before_cursor_execute", capture)
    prefix = (
        "EXPLAIN (ANALYZE, BUFFERS) "
        if engine.dialect.name == "postgresql"
        else "EXPLAIN QUERY PLAN "
    )
    out = []
    with engine.connect() as conn:
        for statement, parameters in seen:
            rows = conn.exec_driver_sql(prefix + statement, parameters).all()
            out.append("\n".join("    " + " ".join(str(c) for c in r) for r in rows))
    return "\n".join(out)


def reads(label: str, setup: Setup, s: Settings, picked: list[tuple[str, int]]) -> list[Result]:
    from webapp.extensions import db

    client = setup.app.test_client()
    with setup.app.app_context():
        head = _newest()
        afters = {company: _newest(company) for company, _ in picked}
        behind = _middle()
        db.session.remove()
    calls: dict[str, tuple[str, dict[str, Any], int]] = {  # name: (token, body, rows expected)
        "sysadmin up to date": (setup.sysadmin, {"after": head}, 0),
        "sysadmin behind": (setup.sysadmin, {"after": behind, "limit": 1000}, 1000),
    }
    for company, _ in picked:
        calls[company] = (setup.admins[company], {"after": afters[company]}, 0)
    times: dict[str, list[float]] = {name: [] for name in calls}
    for round_ in range(s.reads + 1):
        for name, (token, body, rows) in calls.items():
            started = time.perf_counter()
            answer = _post(client, token, "/rest/events/read", body)
            spent = (time.perf_counter() - started) * 1000
            assert answer["numrows"] == rows, (name, answer["numrows"], rows)
            if round_:  # round 0: the warm-up
                times[name].append(spent)
    reference = p95(times["sysadmin up to date"])
    results = []
    for (company, events), size in zip(picked, ("largest", "median"), strict=True):
        results.append(
            Result(
                label,
                f"events read, Company-Admin of the {size} company ({company}, {events:,} "
                f"events), up to date: p95",
                p95(times[company]),
                reference,
                "System-Admin up to date",
                "ms",
                absolute_target=READ_BOUND_MS,
            )
        )
    results.append(
        Result(
            label,
            f"events read, System-Admin, 1,000 events from far behind (after {behind:,} of "
            f"{head:,}): p95",
            p95(times["sysadmin behind"]),
            reference,
            "System-Admin up to date",
            "ms",
            absolute_target=READ_BOUND_MS,
        )
    )
    slow = {
        "sysadmin behind": times["sysadmin behind"],
        **{c: times[c] for c, _ in picked},
    }
    for name, spent in slow.items():
        if p95(spent) > READ_BOUND_MS:
            token, body, _ = calls[name]
            print(f"  {label}: read '{name}' p95 {p95(spent):.0f} ms; its plan:", flush=True)
            print(_explain(setup, token, body), flush=True)
    return results


def event_scenarios(url: str, label: str, quick: bool = False) -> list[Result]:
    """Every row of this module on the data set at `url` (module docstring)."""
    s = QUICK if quick else FULL
    ensure_filled(url)
    picked = _pick_companies(url)
    setup = _prepare(url, [c for c, _ in picked])
    receiver = Receiver()
    try:
        results = reads(label, setup, s, picked)
        results += batch_create(label, setup, s)
        results += delivery(label, setup, receiver, s)
        results += latency(label, setup, receiver, url, s)
        results += beside_slow(label, setup, receiver, url, s)
    finally:
        receiver.close()
        _finish(setup)
    return results


def explain_reads(url: str) -> None:
    """`--explain`: the plans of the read rows' queries on `url`."""
    picked = _pick_companies(url)
    setup = _prepare(url, [c for c, _ in picked])
    try:
        from webapp.extensions import db

        with setup.app.app_context():
            head = _newest()
            bodies = {c: (setup.admins[c], {"after": _newest(c)}) for c, _ in picked}
            middle = _middle()
            db.session.remove()
        bodies["System-Admin behind"] = (setup.sysadmin, {"after": middle, "limit": 1000})
        bodies["System-Admin up to date"] = (setup.sysadmin, {"after": head})
        for name, (token, body) in bodies.items():
            print(f"{name}: {json.dumps(body)}")
            print(_explain(setup, token, body))
    finally:
        _finish(setup)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The change-event rows of make bench.")
    parser.add_argument("--quick", action="store_true", help="small runs, for a smoke test")
    parser.add_argument("--dir", type=Path, default=ROOT, help="where bench.db lives")
    parser.add_argument("--ddis", type=int, default=1_000_000)
    parser.add_argument("--companies", type=int, default=10_000)
    parser.add_argument("--explain", action="store_true", help="print the reads' query plans")
    parser.add_argument("--receiver", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.receiver:
        serve_receiver()
        return 0
    from .data import ensure_data

    os.environ.setdefault("SECRET_KEY", "bench-secret-key-not-secret")
    os.environ.setdefault("INSTANCE_PATH", str(args.dir / "instance-bench"))
    databases = [("sqlite", f"sqlite:///{args.dir / 'bench.db'}")]
    if os.environ.get("BENCH_DATABASE_URL"):
        databases.append(("postgresql", os.environ["BENCH_DATABASE_URL"]))
    results: list[Result] = []
    for label, url in databases:
        ensure_data(url, args.ddis, args.companies)
        if args.explain:
            ensure_filled(url)
            explain_reads(url)
            continue
        results += event_scenarios(url, label, quick=args.quick)
    if results:
        print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
