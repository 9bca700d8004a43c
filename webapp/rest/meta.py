"""Unauthenticated endpoints: the version, and the health probes (docs/operations.md#health-checks).

`/healthz` (liveness) says only that the process answers: it asks nothing else, so a database
outage never makes an orchestrator restart healthy processes. `/readyz` (readiness) asks what
a request needs: the database and, when one is configured, the shared rate-limit store, so a
load balancer sends traffic only to processes that can serve it. Neither reads the session
cookie, loads an account or sets a cookie.
"""

import logging
from importlib.metadata import PackageNotFoundError, version

from flask import Response, current_app, jsonify
from sqlalchemy import text

from ..extensions import db, limiter
from ..request_auth import act_for_nobody
from ..services.errors import outage_reason
from . import bp

log = logging.getLogger(__name__)

API_LABEL = "Development"


def package_version() -> str:
    try:
        return version("telephony-admin")
    except PackageNotFoundError:  # running from a checkout that was never installed
        return "0+unknown"


@bp.get("/version")
def get_version():
    return jsonify({"result": "success", "version": API_LABEL, "api": package_version()})


def healthz() -> Response:
    """Liveness: 200 while the process answers requests; no database or store is asked."""
    act_for_nobody()  # the response headers would otherwise load the cookie's account
    return jsonify({"status": "ok"})


def readyz() -> tuple[Response, int]:
    """Readiness: 200 when the database answers and, unless RATELIMIT_STORAGE_URI is
    memory:// (counted in this process, nothing to ask), the rate-limit store answers; 503
    otherwise. `checks` names each dependency with "ok" or "failed"; why one failed is logged,
    not answered (the probe is public)."""
    act_for_nobody()
    checks = {"database": _check_database()}
    if not str(current_app.config["RATELIMIT_STORAGE_URI"]).startswith("memory://"):
        checks["rate_limit_storage"] = _check_rate_limit_storage()
    ready = all(result == "ok" for result in checks.values())
    body = {"status": "ok" if ready else "unavailable", "checks": checks}
    return jsonify(body), 200 if ready else 503


def _check_database() -> str:
    # A connection of its own from the pool (the checkout check replaces a dead one), one
    # round trip, and back to the pool: the request's session is left alone.
    try:
        with db.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # whatever fails, the database cannot serve requests
        log.error("readiness: %s", outage_reason(exc))
        return "failed"
    return "ok"


def _check_rate_limit_storage() -> str:
    # flask-limiter's storage check (a PING for Redis); it answers False rather than raising.
    try:
        healthy = limiter.storage.check()
    except Exception as exc:  # a storage whose check raises is not healthy either
        log.error("readiness: the rate-limit store does not answer: %s", exc)
        return "failed"
    if not healthy:
        log.error("readiness: the rate-limit store does not answer")
        return "failed"
    return "ok"
