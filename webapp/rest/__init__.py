"""The JSON API under /rest/: parse the body, call a service, wrap the answer."""

from flask import Blueprint, current_app

from ..extensions import csrf, limiter
from ..request_auth import rate_limit_key

bp = Blueprint("rest", __name__, url_prefix="/rest")
# CSRF applies only to cookie-authenticated writes; request_auth.api_principal checks it there.
csrf.exempt(bp)
# One bucket per caller for the whole API: the limit counts requests, whatever the endpoint.
limiter.shared_limit(
    lambda: current_app.config["API_RATE_LIMIT"], scope="api", key_func=rate_limit_key
)(bp)

from . import call, docs, errors, events, imports, meta, openapi, ops  # noqa: E402,F401  (routes register on import)
