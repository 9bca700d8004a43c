"""Read replicas: which of DATABASE_REPLICA_URLS may serve a read now (docs/replicas.md).

A route a replica may serve (request_auth.replica_reads) asks `Replicas.choose` for one. A
replica is used when all of these hold, else the read goes to the primary, in the same request:

- **it answers and is a replica** (`pg_is_in_recovery()`); one that fails is left alone for
  RETRY_SECONDS, then checked again;
- **it is at most REPLICA_MAX_LAG_SECONDS behind**. Its lag is how long ago the primary was at
  the position the replica has replayed: each check reads the primary's WAL insert position,
  then the replica's replay position; a replica that has replayed the first is current
  (lag 0); otherwise its lag is the age of the newest earlier sample of the primary's position
  it has passed, an upper bound exact to within the samples' spacing (SAMPLE_SECONDS). A
  replica that has passed no sample kept (a process that has just started, or a replica
  behind every sample) is counted as lagging: its lag is unknown, not small;
- **it has the reader's own writes** (read your writes): every write transaction of a request
  adds one to its account's counter in `read_fences`, in the same transaction
  (database.write_transaction), so a replica shows the new count exactly when it has replayed
  that write; a replica whose count for the account is below the primary's does not serve it.

Each process checks each replica at most once per CHECK_SECONDS, in the request (or /readyz
probe, or /metrics scrape) that finds its last check too old; one thread checks, the others use
the last answer meanwhile. The checks run on a connection of their own whose statements time
out after CHECK_TIMEOUT_MS, so a replica that hangs cannot hold a request or a probe for long.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, current_app
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from sqlalchemy import Engine, bindparam, create_engine, select, text
from sqlalchemy.exc import SQLAlchemyError

from .database import configure_engine, read_rows
from .errors import is_outage, outage_reason
from .models import ReadFence

log = logging.getLogger(__name__)

CHECK_SECONDS = 1.0  # how old a replica's last check may be before a read checks it again
SAMPLE_SECONDS = 0.5  # the least time between two kept samples of the primary's position
SAMPLES_KEPT = 7200  # samples kept: an hour at the least spacing, more when reads are rarer
RETRY_SECONDS = 10.0  # how long a replica that failed is left alone
CONNECT_TIMEOUT = 3  # seconds to connect to a replica before it counts as not answering
CHECK_TIMEOUT_MS = 2000  # a check's statements on a replica or the primary
# TCP keepalives on replica connections: a replica host that vanishes mid-read (no reset)
# fails the read in about 25 s instead of the system's two hours; it is then read again on
# the primary.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5,
              "keepalives_count": 3}  # fmt: skip
# What a replica may raise for a read the primary would answer: a conflict with what it
# replays (serialization_failure, deadlock_detected, database_dropped), and a table or column
# a migration just added that it has not replayed yet (undefined_table, undefined_column).
READ_AGAIN = frozenset({"40001", "40P01", "57P04", "42P01", "42703"})
EXTENSION = "replicas"

_INSERT_LSN = text("SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint")
_REPLAY = text("SELECT pg_is_in_recovery(), (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint")
_WRITES = select(ReadFence.writes).where(ReadFence.account_id == bindparam("account"))


@dataclass
class Replica:
    """One replica and what this process last learned about it."""

    name: str  # replica1, replica2, ...: its place in DATABASE_REPLICA_URLS (never its URL)
    engine: Engine  # the routed reads'
    probe: Engine  # the checks', statements timing out after CHECK_TIMEOUT_MS
    state: str = "unknown"  # ok | lagging | down | unknown (never checked: the primary failed)
    lag: float | None = None  # seconds behind the primary at the last check (None: unknown)
    checked_at: float = float("-inf")  # time.monotonic() of the last check
    retry_at: float = float("-inf")  # a failed replica is not checked again before this
    lock: threading.Lock = field(default_factory=threading.Lock)


class Replicas:
    """The app's replicas (app.extensions["replicas"]), their checks and the read fences."""

    def __init__(
        self, primary: Engine, urls: tuple[str, ...], max_lag: float, options: dict[str, Any]
    ) -> None:
        self.primary = primary
        self.max_lag = max_lag
        self.replicas = [
            Replica(f"replica{place}", _engine(url, options), _engine(url, options, probe=True))
            for place, url in enumerate(urls, 1)
        ]
        self._primary_probe = _engine(primary.url.render_as_string(False), options, probe=True)
        # (monotonic time, the primary's WAL insert position then), oldest first.
        self._samples: deque[tuple[float, int]] = deque(maxlen=SAMPLES_KEPT)
        self._turn = itertools.count()

    # --- choosing ----------------------------------------------------------------------------
    def choose(self, account_id: int | None) -> Replica | None:
        """A replica that may serve `account_id`'s reads now (see the module), or None for the
        primary. Never raises for a replica's failure: such a replica is skipped."""
        usable = [r for r in self.replicas if self._fresh(r).state == "ok"]
        if not usable:
            return None
        start = next(self._turn) % len(usable)  # the reads spread over the usable replicas
        turn = usable[start:] + usable[:start]
        writes = None if account_id is None else self._writes(account_id)
        if account_id is None or writes is None:
            return turn[0]
        return next((r for r in turn if self._has_writes(r, account_id, writes)), None)

    def failed(self, replica: Replica, exc: SQLAlchemyError) -> bool:
        """Whether a read that raised `exc` while routed to `replica` should run again on the
        primary: the database did not answer (the replica is then left alone for
        RETRY_SECONDS), or the replica refused a read the primary would answer (READ_AGAIN).
        Any other error is the read's own, and the primary would raise it too."""
        if getattr(getattr(exc, "orig", None), "sqlstate", None) in READ_AGAIN:
            return True
        if is_outage(exc):
            self._down(replica, time.monotonic(), outage_reason(exc))
            return True
        return False

    def _fresh(self, replica: Replica) -> Replica:
        now = time.monotonic()
        due = max(replica.checked_at + CHECK_SECONDS, replica.retry_at)
        # One thread checks; the others go on with the last answer.
        if now >= due and replica.lock.acquire(blocking=False):
            try:
                self.check(replica)
            finally:
                replica.lock.release()
        return replica

    # --- checking ----------------------------------------------------------------------------
    def check(self, replica: Replica) -> None:
        """Ask the primary where its log is, then the replica what it has replayed, and set
        the replica's state and lag (the module says how). A primary that does not answer
        leaves the replica as it was: the reads fail on the primary anyway."""
        try:
            with self._primary_probe.connect() as connection:
                position = connection.execute(_INSERT_LSN).scalar_one()
        except SQLAlchemyError:
            return
        now = time.monotonic()
        if not self._samples or now - self._samples[-1][0] >= SAMPLE_SECONDS:
            self._samples.append((now, position))
        try:
            with replica.probe.connect() as connection:
                recovering, replayed = connection.execute(_REPLAY).one()
        except SQLAlchemyError as exc:
            self._down(replica, now, outage_reason(exc))
            return
        if not recovering or replayed is None:
            # Promoted (a failover made it a primary of its own) or not a replica at all.
            self._down(replica, now, "it is not a streaming replica (pg_is_in_recovery())")
            return
        replica.lag = self._lag(replayed, position, now)
        current = replica.lag is not None and replica.lag <= self.max_lag
        was, replica.state = replica.state, "ok" if current else "lagging"
        replica.checked_at = now
        if replica.state != was and replica.state == "lagging" and was != "unknown":
            log.warning(
                "replica %s is %s behind (REPLICA_MAX_LAG_SECONDS=%g): its reads go to the "
                "primary until it catches up",
                replica.name,
                "an unknown time" if replica.lag is None else f"{replica.lag:.1f} s",
                self.max_lag,
            )
        elif replica.state != was and was in ("lagging", "down"):
            log.info("replica %s serves reads again", replica.name)

    def _lag(self, replayed: int, position: int, now: float) -> float | None:
        """How long ago the primary was where the replica has replayed to; None when no
        sample kept is that old (a lower bound only: not known to be small)."""
        if replayed >= position:
            return 0.0
        # A copy first: another replica's check may append meanwhile (list() of a deque is atomic).
        passed = [at for at, lsn in list(self._samples) if lsn <= replayed]
        return now - passed[-1] if passed else None

    def _down(self, replica: Replica, now: float, reason: str) -> None:
        if replica.state != "down":
            log.warning(
                "replica %s does not serve reads (%s): they go to the primary; checked again "
                "in %g s",
                replica.name,
                reason,
                RETRY_SECONDS,
            )
        replica.state, replica.lag = "down", None
        replica.checked_at, replica.retry_at = now, now + RETRY_SECONDS

    # --- read fences -------------------------------------------------------------------------
    def _writes(self, account_id: int) -> int | None:
        """How many fenced writes `account_id` has made (None: none), from the primary, on the
        request's read connection."""
        rows = read_rows(_WRITES, {"account": account_id})
        return rows[0][0] if rows else None

    def _has_writes(self, replica: Replica, account_id: int, writes: int) -> bool:
        """Whether `replica` shows `writes` of the account's writes: it has replayed the
        transaction of the last one (the count is written in it)."""
        try:
            with replica.probe.connect() as connection:
                shown = connection.execute(_WRITES, {"account": account_id}).scalar()
        except SQLAlchemyError as exc:
            self._down(replica, time.monotonic(), outage_reason(exc))
            return False
        return shown is not None and shown >= writes

    # --- reporting ---------------------------------------------------------------------------
    def states(self) -> list[dict[str, Any]]:
        """Each replica's name, state and lag, checked if its last check is older than
        CHECK_SECONDS (what /readyz answers and /metrics exports)."""
        return [
            {
                "name": r.name,
                "state": r.state,
                "lag_seconds": None if r.lag is None else round(r.lag, 3),
            }
            for r in map(self._fresh, self.replicas)
        ]

    def dispose(self) -> None:
        self._primary_probe.dispose()
        for replica in self.replicas:
            replica.engine.dispose()
            replica.probe.dispose()


def _engine(url: str, options: dict[str, Any], probe: bool = False) -> Engine:
    """An engine on `url` with the app's engine options (SQLALCHEMY_ENGINE_OPTIONS: pool sizes,
    recycling), a connect timeout and TCP keepalives; a probe's keeps one connection and times
    its statements out after CHECK_TIMEOUT_MS."""
    connect_args = {
        **options.get("connect_args", {}),
        "connect_timeout": CONNECT_TIMEOUT,
        **KEEPALIVES,
    }
    settings = {**options, "connect_args": connect_args}
    if probe:
        connect_args["options"] = f"-c statement_timeout={CHECK_TIMEOUT_MS}"
        settings.update(pool_size=1, max_overflow=2)
    engine = create_engine(url, **settings)
    configure_engine(engine)
    return engine


def init_app(app: Flask, primary: Engine) -> None:
    """Set up DATABASE_REPLICA_URLS' replicas for `app` (none: nothing is set up, and every
    read goes to the primary as before)."""
    if urls := app.config.get("DATABASE_REPLICA_URLS"):
        app.extensions[EXTENSION] = Replicas(
            primary,
            urls,
            app.config["REPLICA_MAX_LAG_SECONDS"],
            dict(app.config.get("SQLALCHEMY_ENGINE_OPTIONS") or {}),
        )


def of(app: Flask) -> Replicas | None:
    """The app's replicas, or None when it has none."""
    return app.extensions.get(EXTENSION)


def metrics() -> Iterator[Metric]:
    """Each replica's lag and whether it serves reads (docs/observe.md)."""
    replicas = of(current_app)
    if replicas is None:
        return
    lag = GaugeMetricFamily(
        "telephony_replica_lag_seconds",
        "How far a replica is behind the primary (docs/replicas.md); absent while unknown.",
        labels=["replica"],
    )
    serving = GaugeMetricFamily(
        "telephony_replica_serving",
        "1 while a replica serves reads, 0 while it is skipped (lagging or not answering).",
        labels=["replica"],
    )
    for state in replicas.states():
        if state["lag_seconds"] is not None:
            lag.add_metric([state["name"]], state["lag_seconds"])
        serving.add_metric([state["name"]], 1 if state["state"] == "ok" else 0)
    yield lag
    yield serving
