"""The /rest/ blueprint, which every route module of the API registers on."""

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
