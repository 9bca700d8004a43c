"""Unauthenticated endpoints: the version and the health check."""

from importlib.metadata import PackageNotFoundError, version

from flask import jsonify
from sqlalchemy import text

from ..extensions import db
from . import bp

API_LABEL = "Development"


def package_version() -> str:
    try:
        return version("telephony-admin")
    except PackageNotFoundError:  # running from a checkout that was never installed
        return "0+unknown"


@bp.get("/version")
def get_version():
    return jsonify({"result": "success", "version": API_LABEL, "api": package_version()})


def healthz():
    """200 when the database answers, 503 when it does not."""
    try:
        db.session.execute(text("SELECT 1"))
    except Exception:  # any database failure means "not healthy"
        db.session.rollback()
        return jsonify({"status": "unavailable"}), 503
    return jsonify({"status": "ok"})
