"""Unauthenticated endpoints: the version, and the health probes (docs/observe.md#health-checks).

`/healthz` (liveness) says only that the process answers: it asks nothing else, so a database
outage never makes an orchestrator restart healthy processes. `/readyz` (readiness) asks what
a request needs: the database and, when one is configured, the shared rate-limit store, so a
load balancer sends traffic only to processes that can serve it. Neither reads the session
cookie, loads an account or sets a cookie.
"""

import functools
import logging
from importlib.metadata import PackageNotFoundError, version

from flask import Response, current_app, jsonify
from sqlalchemy import text

from .. import replicas
from ..errors import is_outage, outage_reason
from ..extensions import db, limiter
from ..request_auth import act_for_nobody
from .blueprint import bp

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
    """Readiness: 200 when the database answers with the schema this code needs (its Alembic
    revision is the code's newest: `db upgrade` has run) and, unless RATELIMIT_STORAGE_URI is
    memory:// (counted in this process, nothing to ask), the rate-limit store answers; 503
    otherwise. `checks` names each with "ok" or "failed"; why one failed is logged, not
    answered (the probe is public). With DATABASE_REPLICA_URLS, `replicas` lists each replica
    by name (replica1, ...) with its state (ok, lagging, down) and lag in seconds, checked now;
    a replica's state never makes the app unready (docs/replicas.md)."""
    act_for_nobody()
    database, schema = _check_database()
    checks = {"database": database, "schema": schema}
    if not str(current_app.config["RATELIMIT_STORAGE_URI"]).startswith("memory://"):
        checks["rate_limit_storage"] = _check_rate_limit_storage()
    ready = all(result == "ok" for result in checks.values())
    body: dict[str, object] = {"status": "ok" if ready else "unavailable", "checks": checks}
    if chooser := replicas.of(current_app):
        # Named, never failing the probe: without them the primary serves every read.
        body["replicas"] = chooser.states()
    return jsonify(body), 200 if ready else 503


@functools.cache
def code_revision(directory: str) -> str | None:
    """The newest migration this code has (the revision `db upgrade` brings a database to)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", directory)
    return ScriptDirectory.from_config(config).get_current_head()


def _check_database() -> tuple[str, str]:
    """(database, schema): whether the database answers, and whether its schema is the one
    this code needs. One round trip on a connection of its own from the pool (the checkout
    check replaces a dead one); the request's session is left alone. A database that answers
    without the schema (never migrated, or behind the code after an upgrade) cannot serve
    either: its requests would fail on the first missing table or column."""
    needed = code_revision(current_app.extensions["migrate"].directory)
    try:
        with db.engine.connect() as conn:
            found = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except Exception as exc:  # whatever fails, the database cannot serve requests
        if is_outage(exc):
            log.error("readiness: %s", outage_reason(exc))
            return "failed", "failed"
        found = None  # it answered: no alembic_version table, the schema was never made
    if found != needed:
        log.error(
            "readiness: the database schema is at %s, this code needs %s: run db upgrade",
            found or "nothing",
            needed,
        )
        return "ok", "failed"
    return "ok", "ok"


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
