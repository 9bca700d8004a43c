"""Turning a request's credentials into a Principal: Bearer tokens and session cookies (and
flask-login's session loader), and, knowing who reads, where a route's reads go (a replica or
the primary: `replica_reads`). The sign-in pages themselves are views/auth.py."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from flask import current_app, g, request, session
from flask_login import current_user
from flask_wtf.csrf import CSRFError, validate_csrf
from sqlalchemy.exc import SQLAlchemyError
from wtforms.validators import ValidationError

from . import replicas
from .access import Principal
from .database import WRITER_KEY, end_read_connection, reads_to_primary, route_reads
from .errors import outage_reason
from .extensions import db, login_manager
from .models import Account
from .observability import metrics
from .observability.context import note_account
from .services.identity import api_tokens, signin

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")

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


# Where a request keeps its Principal once worked out (the API's; a routed page's).
PRINCIPAL_KEY = "telephony.principal"


def api_principal() -> Principal | None:
    """Who calls the API, or None when the credentials are missing or not valid; worked out
    once per request.

    A Bearer token wins over a cookie: a cross-site page cannot set that header, so no CSRF
    check is needed for it. A session cookie is accepted too, and then a write must carry the
    CSRF token in X-CSRFToken (CSRFError otherwise).
    """
    environ = request.environ
    if PRINCIPAL_KEY in environ:
        return environ[PRINCIPAL_KEY]
    principal = environ[PRINCIPAL_KEY] = _api_principal()
    _note_writer(principal)
    return principal


def page_principal() -> Principal:
    """The signed-in account of a page as the services' Principal (pages are login_required):
    the one `replica_reads` worked out on the primary, if it did."""
    principal = request.environ.get(PRINCIPAL_KEY)
    if principal is None:
        principal = Principal.from_account(current_user, via="ui")
        _note_writer(principal)
    return principal


def _note_writer(principal: Principal | None) -> None:
    """With replicas, the request's writes are counted for `principal`'s account
    (database.write_transaction, docs/replicas.md#read-your-own-writes)."""
    if principal is not None and principal.account_id is not None and replicas.of(current_app):
        request.environ[WRITER_KEY] = principal.account_id


def _api_principal() -> Principal | None:
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


# --- Where a route's reads go (docs/replicas.md) ---------------------------------------------


def replica_reads(view: Callable[P, R]) -> Callable[P, R]:
    """Let a replica serve this route's reads (the list in docs/replicas.md): reports, lists,
    downloads, the audit log, company pages, the event feed. Without DATABASE_REPLICA_URLS it
    calls the view as it is.

    The caller's credentials and grants are read first, on the primary (a revoked token or a
    disabled account is refused at once, and no grant is older than the primary's); then the
    request's reads go to a replica `replicas.Replicas.choose` finds current enough for this
    account, else stay on the primary. A write in the view takes them back to the primary
    (database.write_transaction). A replica that fails during the view (stopped, or cancelling
    a read for what it replays) has the view run again on the primary in the same request;
    a download that has begun streaming cannot be, and is cut (docs/deploy.md, Downloads)."""

    @functools.wraps(view)
    def routed(*args: P.args, **kwargs: P.kwargs) -> R:
        chooser = replicas.of(current_app)
        # A page's form post reads to decide its write: on the primary (the API's reads that
        # are POSTs, /rest/ops/read say, are reads whatever their method).
        if chooser is None or (request.blueprint != "rest" and request.method not in SAFE_METHODS):
            return view(*args, **kwargs)
        account_id = _reader()
        replica = chooser.choose(account_id) if account_id is not None else None
        if replica is None:
            metrics.count_routed_read("primary")
            return view(*args, **kwargs)
        end_read_connection()  # the primary's, of the token check and the fence: done with
        route_reads(replica.engine)
        try:
            response = view(*args, **kwargs)
        except SQLAlchemyError as exc:
            if not chooser.failed(replica, exc):
                raise
            log.warning(
                "replica %s failed a read (%s): read again on the primary",
                replica.name,
                outage_reason(exc),
            )
            db.session.rollback()
            end_read_connection()
            reads_to_primary()
            metrics.count_routed_read("primary")
            return view(*args, **kwargs)
        metrics.count_routed_read(replica.name)
        return response

    return routed


def _reader() -> int | None:
    """The account reading, its credentials and grants read on the primary and kept for the
    request; None when the request has none valid (the view refuses it, on the primary)."""
    if request.blueprint == "rest":
        principal = api_principal()
    elif current_user.is_authenticated:
        principal = request.environ[PRINCIPAL_KEY] = Principal.from_account(current_user, "ui")
        _note_writer(principal)
    else:
        principal = None
    # End the primary's read transaction (the account's load): the view reads elsewhere, and
    # a long download must not hold the primary's oldest snapshot back meanwhile.
    if db.session.registry.has() and (own := db.session()).in_transaction():
        own.commit()
    return None if principal is None else principal.account_id
