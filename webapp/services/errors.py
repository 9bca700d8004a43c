"""Domain errors. Each carries the HTTP status and code of the table in docs/api.md#errors."""

from __future__ import annotations

# The error codes of the JSON envelope by HTTP status: the one table the error classes below,
# the API's error handlers and the OpenAPI document take them from.
ERROR_CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}


class ServiceError(Exception):
    status = 400
    code = ERROR_CODES[status]

    def __init__(self, message: str, fields: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.fields = fields or {}


class Invalid(ServiceError):
    """The request is malformed or a field is at fault; `fields` says which and why."""


class Unauthorized(ServiceError):
    """The API caller's credentials are missing or not valid."""

    status = 401
    code = ERROR_CODES[status]


class Forbidden(ServiceError):
    status = 403
    code = ERROR_CODES[status]


class NotFound(ServiceError):
    status = 404
    code = ERROR_CODES[status]


class Conflict(ServiceError):
    status = 409
    code = ERROR_CODES[status]


class TooLarge(ServiceError):
    """A body or upload over the size its door accepts."""

    status = 413
    code = ERROR_CODES[status]


class UnsupportedMedia(ServiceError):
    """A body not declared as the media type the endpoint takes."""

    status = 415
    code = ERROR_CODES[status]
