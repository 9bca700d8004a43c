"""MFA_REQUIRED (docs/security.md#required-second-factors): an account the setting covers that
has no second factor may, once signed in by its password, only set one up.

Run before every request (views.register). It concerns a browser session alone: an API token
is its own credential and unaffected, and a session signed in by single sign-on satisfies the
setting (the identity provider enforces its own factors). Such an account's pages send it to
the security page with a message, htmx requests are told to load that page instead
(HX-Redirect), and /rest/ calls with its cookie get a 403 in the API's envelope.
"""

from __future__ import annotations

from flask import current_app, flash, make_response, redirect, request
from flask.typing import ResponseReturnValue
from flask_login import current_user

from ..errors import Forbidden
from ..request_auth import bearer_token
from ..services.identity import factors
from .factors import security_page

# What such an account may still reach: setting up a factor, the security page, signing out,
# what anyone signed out may read (the API reference) and what is no page of the app's (static
# files, health probes, metrics).
OPEN_ENDPOINTS = frozenset(
    {
        "security.page",
        # Confirming who one is (asked before changing factors once the sign-in is 10 minutes
        # old): without it, enrolment would send to the confirmation and back, forever.
        "confirm.page",
        "auth.logout",
        "auth.login",
        "rest.api_docs",
        "rest.openapi_json",
        "static",
        "healthz",
        "readyz",
        "metrics",
    }
)
OPEN_BLUEPRINTS = ("factors.", "passkeys.")
MESSAGE = (
    "Your account must have a second factor: set up an authenticator app or a passkey to go on."
)


def gate() -> ResponseReturnValue | None:
    """The answer instead of the page for a covered account without a second factor; None to
    let the request through."""
    setting = current_app.config.get("MFA_REQUIRED", "none")
    if setting == "none" or _open(request.endpoint) or bearer_token() is not None:
        return None
    if not current_user.is_authenticated or current_user.session_via == "oidc":
        return None
    account = current_user._get_current_object()
    if not factors.required_for(account, setting) or factors.has_second_factor(account):
        return None
    return _refuse()


def _open(endpoint: str | None) -> bool:
    # No endpoint: no route matched, and the 404 page follows.
    return endpoint is None or endpoint in OPEN_ENDPOINTS or endpoint.startswith(OPEN_BLUEPRINTS)


def _refuse() -> ResponseReturnValue:
    if request.path == "/rest" or request.path.startswith("/rest/"):
        # The app's error handlers give it the API's envelope (webapp.register_error_handlers).
        raise Forbidden(
            "This account must set up a second factor (an authenticator app or a passkey) on "
            "/account/security before its session may use the API; API tokens are unaffected."
        )
    flash(MESSAGE, "info")
    if request.headers.get("HX-Request") == "true":
        response = make_response("", 403)
        response.headers["HX-Redirect"] = security_page()
        return response
    return redirect(security_page())
