"""Domain errors. Each carries the HTTP status and code of the table in docs/api.md#errors."""

from __future__ import annotations

from limits.errors import StorageError
from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

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
    503: "service_unavailable",
}
# The finer codes some answers give instead of their status's own (docs/numbers.md): all 409s,
# a number held for another company or too few numbers to take. The OpenAPI document lists them.
# And a 403 of a sensitive action from a browser session not confirmed lately
# (docs/security.md#confirmation).
FINER_CODES = frozenset(
    {"number_reserved", "number_aging", "not_enough_numbers", "confirmation_required"}
)
# What a 503 answer's Retry-After says: a database restart or failover takes seconds, and a
# client retrying sooner only adds load to a server coming back.
RETRY_AFTER_SECONDS = 5


class ServiceError(Exception):
    status = 400
    code = ERROR_CODES[status]
    retry_after: int | None = None  # seconds, for the Retry-After header of a 429 or 503

    def __init__(self, message: str, fields: dict[str, str] | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.fields = fields or {}
        if code is not None:  # a finer code than the status's own (docs/api.md#errors)
            self.code = code


class Invalid(ServiceError):
    """The request is malformed or a field is at fault; `fields` says which and why."""


class FileRejected(Invalid):
    """A file refused for the problems of its lines (an import), all found in one pass.

    `listed`: (line, why) pairs in line order, each `why` naming its field first; `total`: how
    many problems there are, the listed ones included. `problems` holds what every door shows,
    one string each: 'line N: why' for the listed ones, then 'and N more' for the rest. One
    problem keeps the one-line message it always had ('line 7: why; nothing was imported.');
    several are counted in the message and named by `problems`. `fields` maps 'line N' to its
    problems (joined by '; ' when a line has several), in line order, and 'more' to
    'and N more' when not all are listed."""

    def __init__(self, listed: list[tuple[int, str]], total: int):
        fields: dict[str, str] = {}
        for line, why in listed:
            key = f"line {line}"
            fields[key] = f"{fields[key]}; {why}" if key in fields else why
        self.problems = [f"line {line}: {why}" for line, why in listed]
        self.total = total
        if total > len(listed):
            fields["more"] = f"and {total - len(listed)} more"
            self.problems.append(fields["more"])
        if total == 1 and listed:
            message = f"{self.problems[0]}; nothing was imported."
        else:
            message = f"The file has {total} problems; nothing was imported."
        super().__init__(message, fields)


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


class TooManyRequests(ServiceError):
    """More of something at once than this caller may have; `retry_after` says when to try
    again."""

    status = 429
    code = ERROR_CODES[status]

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


def is_outage(exc: BaseException) -> bool:
    """Whether a database error means the database is unavailable, not that the request or the
    code is at fault: it could not be reached or the connection was lost (OperationalError, in
    DB-API terms "errors related to the database's operation": refused or dropped connections,
    a server shutting down, SQLite unable to open or lock its file), or no pooled connection
    was free within the pool's timeout. Such a request may succeed if retried: 503 with
    Retry-After (docs/observe.md#outages). Any other database error is a fault: 500."""
    if isinstance(exc, OperationalError) and _missing_schema(exc):
        return False
    if isinstance(exc, OperationalError | PoolTimeout | DisconnectionError | StorageError):
        return True  # StorageError: the rate-limit store (Redis) could not be reached
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


def _missing_schema(exc: OperationalError) -> bool:
    # SQLite reports a table or column the schema lacks (a database never migrated, or behind
    # the code) as an OperationalError too; it is not unavailability but a missing
    # `db upgrade`, which /readyz reports (PostgreSQL raises ProgrammingError for it).
    text = str(exc.orig)
    return text.startswith(("no such table", "no such column"))


def outage_reason(exc: BaseException) -> str:
    """One line for the log about an outage: what is unavailable and the driver's first line
    (e.g. "database unavailable: connection refused"), without the SQL and parameters
    SQLAlchemy appends."""
    if isinstance(exc, StorageError):
        cause: object = exc.storage_error
        what = "rate-limit store unavailable"
    else:
        cause = getattr(exc, "orig", None) or exc
        what = "database unavailable"
    return f"{what}: " + (str(cause).strip().splitlines() or [type(cause).__name__])[0]
