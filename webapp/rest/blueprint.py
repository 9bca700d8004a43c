"""The /rest/ blueprint, which every route module of the API registers on."""

from flask import Blueprint

from ..extensions import csrf

bp = Blueprint("rest", __name__, url_prefix="/rest")
# CSRF applies only to cookie-authenticated writes; request_auth.api_principal checks it there.
csrf.exempt(bp)
# The request limit, one bucket per caller for the whole API, is rate_limit.py's.
