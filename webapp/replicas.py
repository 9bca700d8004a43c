"""Read replicas: which of DATABASE_REPLICA_URLS may serve a read now (docs/replicas.md).

A route a replica may serve (request_auth.replica_reads) asks `Replicas.choose` for one. A
replica is used when all of these hold, else the read goes to the primary, in the same request:

- **it answers and is a replica** (`pg_is_in_recovery()`); one that fails is left alone for
  RETRY_SECONDS, then checked again;
- **it is at most REPLICA_MAX_LAG_SECONDS behind**. Its lag is how long ago the primary was at
  the position the replica has replayed: each check reads the primary's WAL insert position,
  then the replica's replay position; a replica that has replayed the first is current
  (lag 0), otherwise its lag is the age of the newest earlier sample of the primary's position
  it has passed (an upper bound, exact to within CHECK_SECONDS). A lagging replica is checked
  again at each CHECK_SECONDS and used as soon as it is back within the bound;
- **it has replayed the reader's own last write** (read your writes): after each request that
  wrote, the account's position in the primary's log, `pg_current_wal_insert_lsn()` read
  after the commit, is stored in `read_fences`; a replica whose replay position is before it
  does not serve that account.

Each process checks each replica at most once per CHECK_SECONDS, in the request that finds
its last check too old (one thread checks, the others use the last answer meanwhile).
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
from sqlalchemy import (
    BigInteger,
    Engine,
    bindparam,
    create_engine,
    func,
    literal_column,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import SQLAlchemyError

from .config import engine_options
from .database import configure_engine, read_rows
from .errors import outage_reason
from .models import ReadFence

log = logging.getLogger(__name__)

CHECK_SECONDS = 1.0  # how old a replica's last check may be before a read checks it again
RETRY_SECONDS = 10.0  # how long a replica that failed is left alone
CONNECT_TIMEOUT = 3  # seconds to connect to a replica before it counts as not answering
SAMPLES_KEPT = 3600  # the primary's positions kept for the lag (one per check at most)
EXTENSION = "replicas"

# A WAL position as a number of bytes: pg_lsn minus its origin is numeric, cast to bigint.
_POSITION = literal_column("(pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint", BigInteger)
_INSERT_LSN = text("SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint")
_REPLAY = text("SELECT pg_is_in_recovery(), (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint")
_FENCE = select(ReadFence.lsn).where(ReadFence.account_id == bindparam("account"))


@dataclass
class Replica:
    """One replica and what this process last learned about it."""

    name: str  # replica1, replica2, ...: its place in DATABASE_REPLICA_URLS (never its URL)
    engine: Engine
    state: str = "unknown"  # ok | lagging | down | unknown (not checked yet)
    lag: float | None = None  # seconds behind the primary, at the last check
    replayed: int = 0  # its replay position at the last check (bytes)
    checked_at: float = float("-inf")  # time.monotonic() of the last check
    retry_at: float = float("-inf")  # a failed replica is not checked again before this
    lock: threading.Lock = field(default_factory=threading.Lock)


class Replicas:
    """The app's replicas (app.extensions["replicas"]), their checks and the read fences."""

    def __init__(self, primary: Engine, urls: tuple[str, ...], max_lag: float) -> None:
        self.primary = primary
        self.max_lag = max_lag
        self.replicas = [
            Replica(f"replica{place}", _engine(url)) for place, url in enumerate(urls, 1)
        ]
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
        fence = self._fence(account_id) if account_id is not None else None
        start = next(self._turn) % len(usable)  # the reads spread over the usable replicas
        for replica in usable[start:] + usable[:start]:
            if fence is None or replica.replayed >= fence or self._replayed(replica, fence):
                return replica
        return None

    def failed(self, replica: Replica, exc: SQLAlchemyError) -> bool:
        """Whether a read that raised `exc` while routed to `replica` should run again on the
        primary: the replica does not answer now (it is then left alone for RETRY_SECONDS), or
        it cancelled the read for a conflict with what it replays (SQLSTATE 40001, a long read
        on a hot standby). Any other error is the read's own, and the primary would raise it
        too."""
        if getattr(getattr(exc, "orig", None), "sqlstate", None) == "40001":
            return True
        self.check(replica)
        return replica.state == "down"

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
            with self.primary.connect() as connection:
                position = connection.execute(_INSERT_LSN).scalar_one()
        except SQLAlchemyError:
            return
        now = time.monotonic()
        self._samples.append((now, position))
        try:
            with replica.engine.connect() as connection:
                recovering, replayed = connection.execute(_REPLAY).one()
        except SQLAlchemyError as exc:
            self._down(replica, now, outage_reason(exc))
            return
        if not recovering or replayed is None:
            # Promoted (a failover made it a primary of its own) or not a replica at all.
            self._down(replica, now, "it is not a streaming replica (pg_is_in_recovery())")
            return
        replica.replayed = max(replica.replayed, replayed)
        replica.lag = self._lag(replayed, position, now)
        was, replica.state = replica.state, "ok" if replica.lag <= self.max_lag else "lagging"
        replica.checked_at = now
        if replica.state != was and replica.state == "lagging":
            log.warning(
                "replica %s is %.1f s behind (REPLICA_MAX_LAG_SECONDS=%g): its reads go to "
                "the primary until it catches up",
                replica.name,
                replica.lag,
                self.max_lag,
            )
        elif replica.state != was and was in ("lagging", "down"):
            log.info("replica %s serves reads again", replica.name)

    def _lag(self, replayed: int, position: int, now: float) -> float:
        if replayed >= position:
            return 0.0
        # A copy first: another replica's check may append meanwhile (list() of a deque is atomic).
        samples = list(self._samples)
        passed = [at for at, lsn in samples if lsn <= replayed]
        # Before the oldest sample kept: at least that far behind.
        return now - (passed[-1] if passed else samples[0][0])

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

    def _replayed(self, replica: Replica, fence: int) -> bool:
        """Whether `replica` has replayed up to `fence` now (asked, when its last check had not
        got that far)."""
        try:
            with replica.engine.connect() as connection:
                replayed = connection.execute(_REPLAY).one()[1]
        except SQLAlchemyError as exc:
            self._down(replica, time.monotonic(), outage_reason(exc))
            return False
        replica.replayed = max(replica.replayed, replayed or 0)
        return replica.replayed >= fence

    # --- read fences -------------------------------------------------------------------------
    def _fence(self, account_id: int) -> int | None:
        """Where `account_id`'s last write ended in the primary's log (None: no write kept),
        from the primary, on the request's read connection."""
        rows = read_rows(_FENCE, {"account": account_id})
        return rows[0][0] if rows else None

    def fence(self, account_id: int) -> None:
        """Record that `account_id` has just written: its reads wait for a replica that has
        replayed the primary's log up to here (called after the write has committed)."""
        statement = insert(ReadFence).values(account_id=account_id, lsn=_POSITION)
        statement = statement.on_conflict_do_update(
            index_elements=[ReadFence.account_id],
            set_={"lsn": func.greatest(ReadFence.lsn, statement.excluded.lsn)},
        )
        with self.primary.connect() as connection:
            connection.execute(statement)
            connection.commit()

    # --- reporting ---------------------------------------------------------------------------
    def states(self) -> list[dict[str, Any]]:
        """Each replica checked now: its name, state and lag (what /readyz answers)."""
        for replica in self.replicas:
            with replica.lock:
                if time.monotonic() >= replica.retry_at:
                    self.check(replica)
        return [
            {
                "name": r.name,
                "state": r.state,
                "lag_seconds": None if r.lag is None else round(r.lag, 3),
            }
            for r in self.replicas
        ]

    def dispose(self) -> None:
        for replica in self.replicas:
            replica.engine.dispose()


def _engine(url: str) -> Engine:
    options: Any = engine_options(url)
    options["connect_args"] = {
        **options.get("connect_args", {}),
        "connect_timeout": CONNECT_TIMEOUT,
    }
    engine = create_engine(url, **options)
    configure_engine(engine)
    return engine


def init_app(app: Flask, primary: Engine) -> None:
    """Set up DATABASE_REPLICA_URLS' replicas for `app` (none: nothing is set up, and every
    read goes to the primary as before)."""
    if urls := app.config.get("DATABASE_REPLICA_URLS"):
        app.extensions[EXTENSION] = Replicas(primary, urls, app.config["REPLICA_MAX_LAG_SECONDS"])


def of(app: Flask) -> Replicas | None:
    """The app's replicas, or None when it has none."""
    return app.extensions.get(EXTENSION)


def metrics() -> Iterator[Metric]:
    """Each replica's lag and whether it serves reads, checked at the scrape (docs/observe.md)."""
    replicas = of(current_app)
    if replicas is None:
        return
    lag = GaugeMetricFamily(
        "telephony_replica_lag_seconds",
        "How far a replica is behind the primary (docs/replicas.md); absent while it does not "
        "answer.",
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
