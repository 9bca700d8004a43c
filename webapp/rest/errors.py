"""Error handlers: the JSON envelope under /rest/ (docs/api.md#errors), an error page elsewhere."""

from __future__ import annotations

import logging

from flask import Flask, flash, jsonify, make_response, request
from flask_limiter.errors import RateLimitExceeded
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException

from ..services.errors import ServiceError
from ..views.common import PAGE_TITLES, error_page

log = logging.getLogger(__name__)

HTTP_CODES = {
    400: ("bad_request", "The request is not valid."),
    401: ("unauthorized", "Credentials are missing or not valid."),
    403: ("forbidden", "This account may not do this."),
    404: ("not_found", "There is nothing at this address."),
    405: ("method_not_allowed", "This method is not allowed here."),
    409: ("conflict", "This conflicts with what is stored."),
    413: ("too_large", "The request body is larger than 1 MiB."),
    415: ("unsupported_media_type", "The body must be declared as application/json."),
    429: ("rate_limited", "Too many requests; try again later."),
}


def error_response(status: int, code: str, message: str, fields: dict[str, str] | None = None):
    error: dict[str, object] = {"code": code, "message": message}
    if fields:
        error["fields"] = fields
    response = jsonify({"result": "error", "error": error})
    response.status_code = status
    return response


def _is_api() -> bool:
    return request.path == "/rest" or request.path.startswith("/rest/")


def register(app: Flask) -> None:
    """App-level handlers (a blueprint's own never see unknown paths or 405s); pages fall
    through to the default handling."""

    @app.errorhandler(ServiceError)
    def _service_error(exc: ServiceError):
        if _is_api():
            return error_response(exc.status, exc.code, exc.message, exc.fields)
        return error_page(exc.status, exc.message)

    @app.errorhandler(CSRFError)
    def _csrf_error(exc: CSRFError):
        if _is_api():
            return error_response(403, "forbidden", "The CSRF token is missing or not valid.")
        if request.headers.get("HX-Request") == "true":
            # An htmx form whose token expired: reload the page (and so the token) instead of
            # swapping an error page into the form.
            flash("The form had expired; the page was reloaded, please try again.", "error")
            response = make_response("", 400)
            response.headers["HX-Refresh"] = "true"
            return response
        return error_page(
            400, "The form has expired or is not valid; reload the page and try again."
        )

    @app.errorhandler(RateLimitExceeded)
    def _rate_limited(exc: RateLimitExceeded):
        if _is_api():
            response = error_response(429, *HTTP_CODES[429])
            retry = exc.get_response().headers.get("Retry-After")
            if retry:
                response.headers["Retry-After"] = retry
            return response
        return error_page(429, "Too many attempts; wait a few minutes and try again.")

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        if not _is_api():
            if exc.code in PAGE_TITLES:
                return error_page(exc.code, exc.description or exc.name)
            return exc
        code, message = HTTP_CODES.get(exc.code or 500, ("error", exc.name))
        response = error_response(exc.code or 500, code, message)
        if exc.code == 405 and exc.valid_methods:
            response.headers["Allow"] = ", ".join(exc.valid_methods)
        return response

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):
        # Logged with its traceback for the operator; the caller sees one plain sentence.
        log.exception("unhandled error on %s %s", request.method, request.path)
        if _is_api():
            return error_response(500, "internal_error", "Something went wrong on our side.")
        return error_page(500, "Something went wrong on our side; it has been logged.")
