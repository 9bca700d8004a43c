"""The API's error answers: every error under /rest/ as the JSON envelope (docs/api.md#errors).

The handlers are registered on the /rest/ blueprint. A request under /rest/ that matched no
route (an unknown address, a method the address does not take) belongs to no blueprint, so
Flask asks only the app's handlers about it; those hand it to `HANDLERS` here (see
`webapp.register_error_handlers`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from flask import Response, jsonify, request
from flask_limiter.errors import RateLimitExceeded
from flask_wtf.csrf import CSRFError
from limits.errors import StorageError
from sqlalchemy.exc import SQLAlchemyError
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from ..errors import ERROR_CODES, RETRY_AFTER_SECONDS, ServiceError, is_outage, outage_reason
from .blueprint import bp

log = logging.getLogger(__name__)

# What the envelope says for an HTTP error no service raised; the codes are ERROR_CODES'.
MESSAGES: dict[int, str] = {
    400: "The request is not valid.",
    401: "Credentials are missing or not valid.",
    403: "This account may not do this.",
    404: "There is nothing at this address.",
    405: "This method is not allowed here.",
    409: "This conflicts with what is stored.",
    413: "The request body is larger than 1 MiB.",
    415: "The body must be declared as application/json.",
    429: "Too many requests; try again later.",
    503: "The service is briefly unavailable; try again in a few seconds.",
}


def error_response(
    status: int, code: str, message: str, fields: dict[str, str] | None = None
) -> Response:
    error: dict[str, object] = {"code": code, "message": message}
    if fields:
        error["fields"] = fields
    response = jsonify({"result": "error", "error": error})
    response.status_code = status
    return response


def is_api_request() -> bool:
    """Whether the request's address is the API's, whether or not a route matched it."""
    return request.path == "/rest" or request.path.startswith("/rest/")


@bp.errorhandler(ServiceError)
def _service_error(exc: ServiceError) -> Response:
    response = error_response(exc.status, exc.code, exc.message, exc.fields)
    if exc.retry_after is not None:  # a 429 of a service (too many reads of the events waiting)
        response.headers["Retry-After"] = str(exc.retry_after)
    return response


@bp.errorhandler(CSRFError)
def _csrf_error(exc: CSRFError) -> Response:
    return error_response(403, ERROR_CODES[403], "The CSRF token is missing or not valid.")


@bp.errorhandler(RateLimitExceeded)
def _rate_limited(exc: RateLimitExceeded) -> Response:
    response = error_response(429, ERROR_CODES[429], MESSAGES[429])
    retry = exc.get_response().headers.get("Retry-After")
    if retry:
        response.headers["Retry-After"] = retry
    return response


@bp.errorhandler(HTTPException)
def _http_error(exc: HTTPException) -> Response:
    status = exc.code or 500
    if status in ERROR_CODES:
        response = error_response(status, ERROR_CODES[status], MESSAGES[status])
    else:
        response = error_response(status, "error", exc.name)
    if isinstance(exc, MethodNotAllowed) and exc.valid_methods:
        response.headers["Allow"] = ", ".join(exc.valid_methods)
    return response


@bp.errorhandler(SQLAlchemyError)
@bp.errorhandler(StorageError)
def _database_error(exc: SQLAlchemyError | StorageError) -> Response:
    """A database outage is the server's temporary state, not a fault in the request: 503 with
    Retry-After, so clients and proxies retry instead of reporting a bug. One log line, no
    traceback: during an outage every request would log the same one."""
    if not is_outage(exc):
        return _unexpected(exc)
    log.error("%s (%s %s)", outage_reason(exc), request.method, request.path)
    response = error_response(503, ERROR_CODES[503], MESSAGES[503])
    response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


@bp.errorhandler(Exception)
def _unexpected(exc: Exception) -> Response:
    # Logged with its traceback for the operator; the caller sees one plain sentence.
    log.exception("unhandled error on %s %s", request.method, request.path)
    return error_response(500, "internal_error", "Something went wrong on our side.")


# The same handlers by exception class, for what reaches only the app's handlers (above).
HANDLERS: dict[type[Exception], Callable[[Any], Response]] = {
    ServiceError: _service_error,
    CSRFError: _csrf_error,
    RateLimitExceeded: _rate_limited,
    HTTPException: _http_error,
    SQLAlchemyError: _database_error,
    StorageError: _database_error,  # the rate-limit store: an outage like the database's
    Exception: _unexpected,
}
