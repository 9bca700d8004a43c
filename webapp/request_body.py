"""Reading a request's body under a limit of its own: the one reader for the API's JSON
bodies, the API's CSV import and the import page's upload."""

from __future__ import annotations

from flask import request
from werkzeug.exceptions import RequestEntityTooLarge

READ_CHUNK = 1 << 20
# Where a request keeps its body once read: a view run again (a replica failed its read,
# request_auth.replica_reads) reads the same body, which the stream gives only once.
BODY_KEY = "telephony.body"


def allow_body(limit: int) -> None:
    """Let this request's body be up to `limit` bytes instead of the app's MAX_CONTENT_LENGTH;
    RequestEntityTooLarge at once when its Content-Length already says more."""
    if request.content_length is not None and request.content_length > limit:
        raise RequestEntityTooLarge()
    request.max_content_length = limit


def read_body(limit: int) -> bytes:
    """The whole body, or RequestEntityTooLarge past `limit` bytes, with or without a
    Content-Length. A chunked body has no length, and reading it whole through Werkzeug would
    silently stop at the limit (a cut document then looks merely malformed), so it is read
    here to limit + 1 bytes. Read once per request; a second call answers the same bytes."""
    if (kept := request.environ.get(BODY_KEY)) is not None:
        return kept
    allow_body(limit)
    stream = request.stream
    chunks, size = [], 0
    while size <= limit:
        chunk = stream.read(min(READ_CHUNK, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise RequestEntityTooLarge()
    body = request.environ[BODY_KEY] = b"".join(chunks)
    return body
