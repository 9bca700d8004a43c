"""Domain errors. Each carries the HTTP status and code of the table in docs/api.md#errors."""

from __future__ import annotations


class ServiceError(Exception):
    status = 400
    code = "bad_request"

    def __init__(self, message: str, fields: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.fields = fields or {}


class Invalid(ServiceError):
    """The request is malformed or a field is at fault; `fields` says which and why."""


class Forbidden(ServiceError):
    status = 403
    code = "forbidden"


class NotFound(ServiceError):
    status = 404
    code = "not_found"


class Conflict(ServiceError):
    status = 409
    code = "conflict"
