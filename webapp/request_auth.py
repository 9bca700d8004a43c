"""Turning a request's credentials into a Principal: Bearer tokens and session cookies (and
flask-login's session loader). The sign-in pages themselves are views/auth.py."""

from __future__ import annotations

from flask import g, request, session
from flask_login import current_user
from flask_wtf.csrf import CSRFError, validate_csrf
from wtforms.validators import ValidationError

from .access import Principal
from .extensions import login_manager
from .models import Account
from .observability.context import note_account
from .services.identity import api_tokens, signin

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@login_manager.user_loader
def _load_user(session_id: str) -> Account | None:
    # The account and its sign-in session, checked in one query (services/identity/signin.py).
    return signin.session_account(session_id)


def act_for_nobody() -> None:
    """Make `current_user` anonymous for the rest of this request, without loading the account
    a session cookie names: for answers that must not touch the database (the health probes,
    the error page of a database outage), which the templates and the response headers would
    otherwise do by asking current_user."""
    g._login_user = login_manager.anonymous_user()


# Where a request keeps its Bearer token and the token's hash, worked out once for the limiter's
# bucket and the token check: the WSGI environ lives exactly as long as the request.
BEARER_KEY = "telephony.bearer"


def bearer_token() -> str | None:
    """The raw token of an `Authorization: Bearer …` header, "" if the header is malformed."""
    return _bearer()[0]


def bearer_digest() -> str | None:
    """The stored form of the request's Bearer token (api_tokens.hash_token), hashed once per
    request; None without a token."""
    return _bearer()[1]


def _bearer() -> tuple[str | None, str | None]:
    environ = request.environ
    found: tuple[str | None, str | None] | None = environ.get(BEARER_KEY)
    if found is None:
        header = environ.get("HTTP_AUTHORIZATION")
        token = None
        if header is not None:
            scheme, _, token = header.partition(" ")
            token = token.strip() if scheme.lower() == "bearer" else ""
        found = environ[BEARER_KEY] = (token, api_tokens.hash_token(token) if token else None)
    return found


def api_principal() -> Principal | None:
    """Who calls the API, or None when the credentials are missing or not valid.

    A Bearer token wins over a cookie: a cross-site page cannot set that header, so no CSRF
    check is needed for it. A session cookie is accepted too, and then a write must carry the
    CSRF token in X-CSRFToken (CSRFError otherwise).
    """
    token = bearer_token()
    principal = None
    if token is not None:
        principal = (
            api_tokens.authenticate(token, via="api", digest=bearer_digest()) if token else None
        )
        if principal is not None:
            note_account(principal.username)  # the token's owner, for the access line
    elif current_user.is_authenticated:
        if request.method not in SAFE_METHODS:
            try:
                validate_csrf(request.headers.get("X-CSRFToken"))
            except ValidationError as exc:
                raise CSRFError(str(exc)) from exc
        principal = Principal.from_account(current_user, via="api")
    return principal


def confirmation_missing() -> bool:
    """Whether this API request is signed in by a session cookie whose session was not
    confirmed within signin.CONFIRM_FOR (docs/security.md#confirmation); a Bearer token is its
    own credential and never needs it."""
    if bearer_token() is not None or not current_user.is_authenticated:
        return False
    return not signin.confirmation_fresh(current_user._get_current_object())


def rate_limit_key() -> str:
    """Rate-limit bucket: the token (hashed), else the session account, else the address."""
    if digest := bearer_digest():
        return "token:" + digest
    # The session's account id as stored in the cookie: no database query just to pick a bucket.
    if account := session.get("_user_id"):
        return f"account:{account.partition(':')[0]}"
    return "addr:" + (request.remote_addr or "unknown")
