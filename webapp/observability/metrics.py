"""Prometheus metrics, served at /metrics to the scrapers METRICS_TOKEN and METRICS_ALLOW admit
(docs/observe.md#metrics).

Under gunicorn every worker is its own process: prometheus-client's multiprocess mode keeps
each process's values in a file of PROMETHEUS_MULTIPROC_DIR (gunicorn.conf.py makes and empties
it at start, and forgets a worker's live gauges when it exits), and a scrape, whichever worker
answers it, sums them all. Without that variable (`flask run`, tests) the values live in the
process. Either way this module must be imported after the variable is set, which
gunicorn.conf.py does before it imports anything of the app.

Every label has a bounded set of values: a request is counted under its Flask endpoint (the
route's name, never the path a client sent), its status, a report's kind and entry point.
"""

from __future__ import annotations

import functools
import hmac
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address
from typing import Any, ParamSpec, TypeVar

from flask import Flask, Response, current_app, request
from prometheus_client import REGISTRY, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from sqlalchemy import event
from sqlalchemy.engine import Engine

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
REPORT_KINDS = ("ddi", "user")
SIGN_IN_ENDPOINT = "auth.login"

REQUESTS = Counter(
    "telephony_http_requests",
    "HTTP requests answered, by Flask endpoint ('unmatched': no route) and status.",
    ["endpoint", "status"],
)
LATENCY = Histogram(
    "telephony_http_request_duration_seconds",
    "Time from a request's start to its response (a streamed body not included), by endpoint.",
    ["endpoint"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
RATE_LIMITED = Counter(
    "telephony_rate_limited",
    "Requests refused with 429, by limit: sign_in (failed sign-ins), api (API_RATE_LIMIT).",
    ["limit"],
)
# Live sums: a worker that exits takes its share with it (gunicorn.conf.py's child_exit).
POOL_CHECKED_OUT = Gauge(
    "telephony_db_pool_checked_out",
    "Database connections in use, summed over the processes serving.",
    multiprocess_mode="livesum",
)
POOL_SIZE = Gauge(
    "telephony_db_pool_size",
    "Connections the processes' pools keep open (SQLAlchemy pool_size; each may open "
    "max_overflow more under load), summed over the processes serving.",
    multiprocess_mode="livesum",
)
REPORT_SECONDS = Histogram(
    "telephony_report_duration_seconds",
    "Time to compute a billing report (services/billing/reports.py), by kind (ddi, user) and entry "
    "point (answer: the API; ranking, rows: the pages and downloads; peaks: company pages).",
    ["kind", "entry"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
IMPORT_SECONDS = Histogram(
    "telephony_ddi_import_duration_seconds",
    "Time to preview (plan) or apply a DDI import, whether it succeeded or not.",
    ["mode"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)
WEBHOOK_ATTEMPTS = Counter(
    "telephony_webhook_attempts",
    "Webhook POSTs made by `flask events deliver`, by outcome: delivered, retry, failed.",
    ["outcome"],
)

ROUTED_READS = Counter(
    "telephony_routed_reads",
    "Requests of the routes a replica may serve (docs/replicas.md), by the database that "
    "served them: primary, or replica1, replica2, ... in DATABASE_REPLICA_URLS' order.",
    ["database"],
)


def count_routed_read(database: str) -> None:
    """Count one request of a route a replica may serve, by the database that served it."""
    ROUTED_READS.labels(database).inc()


def enabled(app: Flask) -> bool:
    """Whether /metrics is served (METRICS_TOKEN or METRICS_ALLOW set): only then are the
    per-request metrics kept, so an app without metrics pays nothing for them."""
    return bool(app.config.get("METRICS_TOKEN") or app.config.get("METRICS_ALLOW"))


def init_app(app: Flask, engine: Engine) -> None:
    """Serve /metrics and watch the database pool, when enabled (`enabled`)."""
    if not enabled(app):
        return
    app.add_url_rule("/metrics", "metrics", metrics_view)
    watch_pool(engine)


# (endpoint, status) -> the request counter's and the latency histogram's series: labels()
# validates and locks on every call, a lookup here does not (the set is bounded, as above).
_series: dict[tuple[str | None, int], tuple[Any, Any]] = {}


def record_request(endpoint: str | None, status: int, seconds: float) -> None:
    """Count one answered request (observability.finish_request calls it)."""
    series = _series.get((endpoint, status))
    if series is None:
        name = endpoint or "unmatched"
        series = _series[(endpoint, status)] = (
            REQUESTS.labels(name, str(status)),
            LATENCY.labels(name),
        )
    series[0].inc()
    series[1].observe(seconds)
    if status == 429:
        RATE_LIMITED.labels("sign_in" if endpoint == SIGN_IN_ENDPOINT else "api").inc()


def watch_pool(engine: Engine) -> None:
    """Keep POOL_CHECKED_OUT and POOL_SIZE for this process's pool. Each checkout and checkin
    sets the gauge from the pool's own count (rather than adding and subtracting one), so a
    checkout that fails halfway can never leave it off by one for good."""
    pool = engine.pool
    checked_out: Callable[[], int] | None = getattr(pool, "checkedout", None)
    size: Callable[[], int] | None = getattr(pool, "size", None)
    if checked_out is None or size is None:  # a pool without counts (SQLite in memory)
        return
    POOL_SIZE.set(size())

    def on_checkout(*_args: Any) -> None:
        POOL_CHECKED_OUT.set(checked_out())

    def on_checkin(*_args: Any) -> None:
        # Called before the connection is back in the pool: it still counts as checked out.
        POOL_CHECKED_OUT.set(max(checked_out() - 1, 0))

    event.listen(engine, "checkout", on_checkout)
    event.listen(engine, "checkin", on_checkin)


@contextmanager
def timed(histogram: Histogram, *labels: str) -> Iterator[None]:
    """Observe how long the block takes under `labels`, whether it succeeds or raises."""
    start = time.perf_counter()
    try:
        yield
    finally:
        histogram.labels(*labels).observe(time.perf_counter() - start)


def timed_report(entry: str, kind_at: int) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a report entry point: REPORT_SECONDS observes each call under its report kind
    (the argument at position `kind_at`) and `entry`."""

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(func)
        def timed_call(*args: P.args, **kwargs: P.kwargs) -> R:
            kind = args[kind_at] if len(args) > kind_at else kwargs.get("kind")
            label = kind if kind in REPORT_KINDS else "other"  # a bounded label
            with timed(REPORT_SECONDS, str(label), entry):
                return func(*args, **kwargs)

        return timed_call

    return decorate


def forget_this_process() -> None:
    """In multiprocess mode, drop this process's live gauges: gunicorn's master calls it after
    building an app only to check the configuration, so that its pool is not counted beside
    the workers'."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client.multiprocess import mark_process_dead

        mark_process_dead(os.getpid())


# --- /metrics -------------------------------------------------------------------------------


def _admitted() -> Response | None:
    """None when this scrape may read the metrics, else the refusal: 403 from an address
    METRICS_ALLOW does not list, 401 without the METRICS_TOKEN Bearer token."""
    config = current_app.config
    allow: tuple[IPv4Network | IPv6Network, ...] | None = config.get("METRICS_ALLOW")
    if allow and not _address_in(request.remote_addr, allow):
        return Response("Forbidden\n", 403, mimetype="text/plain")
    token: str | None = config.get("METRICS_TOKEN")
    if token:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), token.encode()
        ):
            return Response(
                "Unauthorized\n",
                401,
                mimetype="text/plain",
                headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
            )
    return None


def _address_in(address: str | None, networks: tuple[IPv4Network | IPv6Network, ...]) -> bool:
    try:
        addr: IPv4Address | IPv6Address = ip_address(address or "")
    except ValueError:
        return False
    if isinstance(addr, IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped  # ::ffff:10.0.0.1 from a dual-stack socket is 10.0.0.1
    return any(addr in network for network in networks)


def metrics_view() -> Response:
    """The metrics in Prometheus's text format: every process's (multiprocess mode) or this
    one's, and the event backlog read from the database now."""
    if (refusal := _admitted()) is not None:
        return refusal
    return Response(generate_latest(_Scrape()), content_type=CONTENT_TYPE_PLAIN_0_0_4)


# Metrics read afresh at each scrape from the application's state (the event backlog,
# services/events/backlog.py), registered by create_app: this package sits below the services.
SOURCES: list[Callable[[], Iterator[Metric]]] = []


def add_source(source: Callable[[], Iterator[Metric]]) -> None:
    """Read `source` at every scrape too (once, however many apps register it)."""
    if source not in SOURCES:
        SOURCES.append(source)


class _Scrape:
    """What one scrape reads (a collector for generate_latest)."""

    def collect(self) -> Iterator[Metric]:
        if path := os.environ.get(MULTIPROC_ENV):
            yield from MultiProcessCollector(None, path=path).collect()
        else:
            yield from REGISTRY.collect()
        for source in SOURCES:
            yield from source()
