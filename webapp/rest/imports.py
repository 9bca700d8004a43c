"""POST /rest/ops/import/: the DDI import over the API (docs/import.md), a CSV body."""

from __future__ import annotations

from flask import jsonify, request

from ..errors import Invalid, TooLarge, UnsupportedMedia
from ..services.imports import ddi_import
from .blueprint import bp
from .ops import require_principal

DRY_RUN = {"1": True, "true": True, "0": False, "false": False}


@bp.post("/ops/import/", strict_slashes=False)
def import_ddis():
    principal = require_principal()
    principal.require_system_admin("import DDIs")
    if request.mimetype != "text/csv":
        raise UnsupportedMedia("The body must be declared as text/csv.")
    dry_run = request.args.get("dry_run", "0").strip().lower()
    if dry_run not in DRY_RUN:
        raise Invalid("'dry_run' must be 1 or 0.", {"dry_run": "must be 1 or 0"})
    data = _body(ddi_import.MAX_BYTES)
    source = ddi_import.bytes_source(data)
    if DRY_RUN[dry_run]:
        outcome = ddi_import.plan(principal, source)
    else:
        outcome = ddi_import.apply(principal, source)
    return jsonify({"result": "success", **outcome.as_json()})


def _body(limit: int) -> bytes:
    """The body, or 413 past `limit` (with or without a Content-Length)."""
    too_large = TooLarge(f"An import body holds at most {limit // (1024 * 1024)} MiB.")
    if request.content_length is not None and request.content_length > limit:
        raise too_large
    request.max_content_length = limit  # this request's own limit, instead of the API's 1 MiB
    stream = request.stream
    chunks, size = [], 0
    while size <= limit:
        chunk = stream.read(min(1 << 20, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise too_large
    return b"".join(chunks)
