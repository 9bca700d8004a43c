"""gunicorn's settings for this app (docs/deploy.md, Running under gunicorn).

In a checkout: `gunicorn -c gunicorn.conf.py` (the top-level file imports this one); from an
installed wheel, anywhere: `gunicorn -c python:webapp.gunicorn_conf`. Either serves
`webapp.wsgi:app` unless given another target. A command-line flag or GUNICORN_CMD_ARGS
overrides any setting here (`--workers 8`, `--timeout 120`).

- Logs: gunicorn's own lines (start, worker boots and exits, timeouts) in the app's format
  (LOG_FORMAT, LOG_LEVEL); its access log stays off, as the app writes one line per request.
- Workers: WEB_CONCURRENCY processes (default 2 per CPU + 1, at most 8), GUNICORN_THREADS
  threads each (default 8: gthread workers, so that the long polls of /rest/events/read,
  at most EVENTS_MAX_WAITING per account, leave threads for pages and health checks;
  docs/deploy.md, Long polls, has the arithmetic; 1: sync workers).
- Metrics: prometheus-client's multiprocess mode. PROMETHEUS_MULTIPROC_DIR (a private new
  directory under /dev/shm when not set) is emptied at start, and a worker's live gauges are
  dropped when it exits.
- At start, before any worker: the configuration checked as create_app checks it (a bad
  setting: one line, exit 1), and the warnings for this many workers logged.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import sys
import tempfile
from typing import Any

# First of all: prometheus-client chooses multiprocess mode when it is imported, which happens
# in the app (and, with --preload, in this process); neither the imports above nor the webapp
# package (which Python imports before this module) load it, and the check below keeps it so.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# Memory-backed when the system has it. Only new private directories (mkdtemp: mode 0700, a
# random name) and gunicorn's own unlinked heartbeat files go there, never a fixed name.
SHM = "/dev/shm" if os.path.isdir("/dev/shm") else None  # noqa: S108
_OWN_METRICS_DIR: str | None = None
if not os.environ.get(MULTIPROC_ENV):
    _OWN_METRICS_DIR = tempfile.mkdtemp(prefix="telephony-admin-metrics-", dir=SHM)
    os.environ[MULTIPROC_ENV] = _OWN_METRICS_DIR
    _MADE_BY = os.getpid()

    @atexit.register
    def _remove_own_metrics_dir() -> None:
        """Removed when this process exits whichever way it can (a stop, a failed start,
        --check-config), and by on_exit in a daemonized master; the workers, forked from
        it, inherit this hook and must not run it."""
        if os.getpid() == _MADE_BY and _OWN_METRICS_DIR is not None:
            shutil.rmtree(_OWN_METRICS_DIR, ignore_errors=True)

    if "prometheus_client.values" in sys.modules:  # too late: each worker would count alone
        sys.exit("gunicorn_conf: prometheus_client was imported before PROMETHEUS_MULTIPROC_DIR")

from webapp.config import parse_log_format, parse_log_level  # noqa: E402
from webapp.observability.logs import gunicorn_logconfig  # noqa: E402


def _env_int(name: str, default: int, low: int, high: int) -> int:
    """An integer setting from the environment; a bad one stops gunicorn with one line."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit() or not low <= int(text) <= high:
        print(
            f"Configuration error: {name}: {text!r} is not a whole number from {low} to {high}",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(1)
    return int(text)


def _env_choice(name: str, default: str, parse: Any) -> str:
    # A bad value is reported by the check at start (on_starting), with the app's message.
    try:
        return str(parse(os.environ.get(name, default)))
    except ValueError:
        return default


def _default_workers() -> int:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    # Each worker keeps its own database pool: 8 keep well under PostgreSQL's default
    # max_connections (100) even with threads; more processes rarely help one database.
    return min(2 * (cpus or 1) + 1, 8)


wsgi_app = "webapp.wsgi:app"
proc_name = "telephony-admin"
workers = _env_int("WEB_CONCURRENCY", _default_workers(), 1, 64)
# Threads: a waiting read of the events holds one for up to 30 s, without a database
# connection. A gthread worker accepts connections whether or not a thread is free (they queue
# for one), so the bound that matters is per worker: 8 threads hold the waiting reads of three
# accounts at their limit of 2 and still serve two requests, even were all six on one worker.
# At most 8 database connections per worker follow (8 workers: 64, under PostgreSQL's 100).
threads = _env_int("GUNICORN_THREADS", 8, 1, 64)
# gthread for threads, with connections closed by the request threads rather than the main
# loop (webapp/gunicorn_worker.py: a client holding its end open would otherwise stall the
# heartbeat and get the worker killed, downloads and all); 1 thread: sync workers, which
# accept only when free, rather than one thread with a queue in front of it.
worker_class = "webapp.gunicorn_worker.StreamingThreadWorker" if threads > 1 else "sync"
# A worker silent this long is killed and replaced (a sync worker is silent while it serves a
# request, so it cuts any answer longer than this, a streamed download too; a threaded worker
# only when its main loop is stuck: give a long import or download on sync workers more with
# --timeout, or run an import with `flask ddis import`).
timeout = 30
# On SIGTERM (or HUP), workers finish the requests under way for up to this long, then exit.
graceful_timeout = 30
# Seconds an idle kept-alive connection stays open (threaded workers; sync workers close).
keepalive = 5
# The workers' heartbeat files: in memory, as a disk-backed /tmp can stall them (containers).
worker_tmp_dir = SHM
# gunicorn 25+'s control socket would be one per user ($HOME/.gunicorn/gunicorn.ctl): two
# servers of one user would take each other's, and a service user's home may be read-only.
control_socket_disable = True

LOG_LEVEL = _env_choice("LOG_LEVEL", "INFO", parse_log_level)
loglevel = LOG_LEVEL.lower()
errorlog = "-"
accesslog = None  # the app's own access line (webapp/observability), never two per request
logconfig_dict = gunicorn_logconfig(LOG_LEVEL, _env_choice("LOG_FORMAT", "text", parse_log_format))


def on_starting(server: Any) -> None:
    """In the master, before any worker: an empty metrics directory, then the app's start-up
    check (webapp.check_startup). A bad setting stops gunicorn here, with one line."""
    path = os.environ[MULTIPROC_ENV]
    os.makedirs(path, exist_ok=True)
    for stale in glob.glob(os.path.join(path, "*.db")):  # a previous run's values
        os.remove(stale)

    from webapp import check_startup
    from webapp.config import ConfigError, exit_with

    try:
        warnings = check_startup(server.cfg.workers, server.cfg.threads)
    except ConfigError as error:
        exit_with(error)
    from webapp.observability.metrics import forget_this_process

    # The check's app counted its database pool as this process's: the workers' alone count.
    forget_this_process()
    for warning in warnings:
        server.log.warning(warning)


def child_exit(server: Any, worker: Any) -> None:
    """A worker exited: its live gauges (connections in use) stop counting; its counters stay,
    as Prometheus counters must never go down."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server: Any) -> None:
    """gunicorn stops: the metrics directory it made goes too (one it was given stays)."""
    if _OWN_METRICS_DIR is not None:
        shutil.rmtree(_OWN_METRICS_DIR, ignore_errors=True)
