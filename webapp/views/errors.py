"""The pages' error answers: an error page with a status, one sentence and a way back.

Registered on the app (see `webapp.register_error_handlers`), so they also answer what no page
blueprint routed: unknown addresses, refused methods, and what `refuse_unreadable_input`
turns away before any page sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from flask import flash, make_response, render_template, request
from flask.typing import ResponseReturnValue
from flask_limiter.errors import RateLimitExceeded
from flask_wtf.csrf import CSRFError
from limits.errors import StorageError
from sqlalchemy.exc import SQLAlchemyError
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from ..errors import RETRY_AFTER_SECONDS, ServiceError, is_outage, outage_reason
from ..request_auth import act_for_nobody

log = logging.getLogger(__name__)

PAGE_TITLES: dict[int, str] = {
    400: "Cannot do that",
    403: "Not allowed",
    404: "Not found",
    405: "Not allowed",
    409: "Conflict",
    413: "Too large",
    429: "Too many attempts",
    500: "Something went wrong",
    503: "Briefly unavailable",
}


def error_page(status: int, message: str) -> tuple[str, int]:
    """The page a browser sees for an error: a status, one sentence, a way back."""
    title = PAGE_TITLES.get(status, "Error")
    return render_template("errors/error.html", status=status, title=title, message=message), status


def _service_error(exc: ServiceError) -> ResponseReturnValue:
    return error_page(exc.status, exc.message)


def _csrf_error(exc: CSRFError) -> ResponseReturnValue:
    if request.headers.get("HX-Request") == "true":
        # An htmx form whose token expired: reload the page (and so the token) instead of
        # swapping an error page into the form.
        flash("The form had expired; the page was reloaded, please try again.", "error")
        response = make_response("", 400)
        response.headers["HX-Refresh"] = "true"
        return response
    return error_page(400, "The form has expired or is not valid; reload the page and try again.")


def _rate_limited(exc: RateLimitExceeded) -> ResponseReturnValue:
    return error_page(429, "Too many attempts; wait a few minutes and try again.")


def _http_error(exc: HTTPException) -> ResponseReturnValue:
    if exc.code in PAGE_TITLES:
        response = make_response(error_page(exc.code, exc.description or exc.name))
        if isinstance(exc, MethodNotAllowed) and exc.valid_methods:
            # HTTP requires a 405 to say which methods the address takes.
            response.headers["Allow"] = ", ".join(exc.valid_methods)
        return response
    return exc  # Flask's own answer for the rest (e.g. 415)


def _database_error(exc: SQLAlchemyError | StorageError) -> ResponseReturnValue:
    """A database outage: the app's own error page, 503 with Retry-After. It is rendered for an
    anonymous visitor (no navigation, no account name) whoever was signed in: finding out who
    that is, and what the navigation may show them, needs the database that just failed."""
    if not is_outage(exc):
        return _unexpected(exc)
    log.error("%s (%s %s)", outage_reason(exc), request.method, request.path)
    act_for_nobody()
    response = make_response(
        error_page(503, "The service is briefly unavailable; try again in a few seconds.")
    )
    response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def _unexpected(exc: Exception) -> ResponseReturnValue:
    # Logged with its traceback for the operator; the browser sees one plain sentence.
    log.exception("unhandled error on %s %s", request.method, request.path)
    return error_page(500, "Something went wrong on our side; it has been logged.")


# Exception class -> its page; Flask picks the most specific class an error is.
HANDLERS: dict[type[Exception], Callable[[Any], ResponseReturnValue]] = {
    ServiceError: _service_error,
    CSRFError: _csrf_error,
    RateLimitExceeded: _rate_limited,
    HTTPException: _http_error,
    SQLAlchemyError: _database_error,
    StorageError: _database_error,  # the rate-limit store: an outage like the database's
    Exception: _unexpected,
}


# The pages that take a file: they read the upload themselves, under their own size limit
# (reading it here would apply the app's 1 MiB), and check the file's content.
UPLOAD_ENDPOINTS = frozenset({"imports.upload", "numbers.stock_file_preview"})


def refuse_unreadable_input():
    """Pages take url-encoded text only, except UPLOAD_ENDPOINTS. A NUL byte (PostgreSQL
    refuses it in text, so it would surface as a 500 deep in a query) or an uploaded file is
    answered 400 before any view. The API validates its JSON fields itself."""
    if request.path.startswith("/rest/"):
        return None
    values = [*request.args.values(), *(request.view_args or {}).values()]
    if request.method == "POST" and request.endpoint not in UPLOAD_ENDPOINTS:
        if request.files:
            return error_page(400, "This form takes text, not files.")
        values += request.form.values()
    if any("\x00" in str(value) for value in values):
        return error_page(400, "The request holds a NUL character.")
    return None
