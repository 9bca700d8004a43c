"""Logs, request ids and metrics: what an operator reads to see how the service runs
(docs/observe.md, sections Logging and Metrics).

- context: the request id (X-Request-ID, taken or made) and the account of a request;
- logs: one line format for the app, gunicorn and the delivery worker (LOG_FORMAT, LOG_LEVEL);
- metrics: Prometheus metrics at /metrics (METRICS_TOKEN, METRICS_ALLOW), multiprocess-safe.

`init_app` wires them into an app: every request's start is noted, and when its response is
ready, the response carries the request id, one access line is written, and (metrics on)
the request is counted.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from flask import Flask, Response, request
from sqlalchemy.engine import Engine

from . import logs
from .context import HEADER, STARTED_KEY, account, request_id

access_log = logging.getLogger(logs.ACCESS_LOGGER)


def init_app(app: Flask, engine: Engine) -> None:
    """Install the logging format and the request hooks on `app`, and /metrics if enabled."""
    logs.configure(app.config["LOG_LEVEL"], app.config["LOG_FORMAT"])
    from . import metrics  # not at import: gunicorn.conf.py sets PROMETHEUS_MULTIPROC_DIR first

    metrics.init_app(app, engine)
    count = metrics.record_request if metrics.enabled(app) else None

    def finish_request(response: Response) -> Response:
        """The response carries the request id; one access line; the request counted."""
        environ = request.environ
        started = environ.get(STARTED_KEY)
        seconds = time.perf_counter() - started if started is not None else 0.0
        rid = request_id()
        response.headers.add(HEADER, rid)  # add: no view sets it, no search for one
        status = response.status_code
        if access_log.isEnabledFor(logging.INFO):
            method, path = environ["REQUEST_METHOD"], request.path
            fields = {
                "method": method,
                "path": path,
                "status": status,
                "duration_ms": round(seconds * 1000, 2),
                "account": account(environ),
                # The client's address, as ProxyFix set it behind trusted proxies.
                "client": environ.get("REMOTE_ADDR") or "-",
                "request_id": rid,
            }
            # The record made and handed on directly: logger.info() would also walk the stack
            # for the caller's file and line, which no line shows, on every request.
            access_log.handle(
                access_log.makeRecord(
                    access_log.name,
                    logging.INFO,
                    __file__,
                    0,
                    "%s %s %s",
                    (method, path, status),
                    None,
                    extra={logs.FIELDS: fields},
                )
            )
        if count is not None:
            count(request.endpoint, status, seconds)
        return response

    # The start time is taken before Flask sees the request (its context, the session), by a
    # WSGI wrapper: no before_request function, whose call through Flask costs more than the
    # rest of it. The request id is chosen on first use (context.request_id). Last of the
    # after_request functions (Flask runs them in reverse): the access line shows the final
    # status.
    app.wsgi_app = Stamped(app.wsgi_app)  # type: ignore[method-assign]
    app.after_request_funcs.setdefault(None, []).insert(0, finish_request)


class Stamped:
    """A WSGI app that notes when each request started (observability's duration)."""

    def __init__(self, wsgi_app: Any) -> None:
        self.wsgi_app = wsgi_app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        environ[STARTED_KEY] = time.perf_counter()
        return self.wsgi_app(environ, start_response)
