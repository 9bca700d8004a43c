"""POST /rest/events/read: the change events after an id, waiting for one if asked
(docs/events.md)."""

from __future__ import annotations

from flask import Response, jsonify

from ..request_auth import replica_reads
from ..services.events import feed
from .blueprint import bp
from .ops import json_body, require_principal


@bp.post("/events/read")
@replica_reads
def read_events() -> Response:
    principal = require_principal()
    query = feed.parse(json_body())
    page = feed.read(principal, query)
    return jsonify(
        {"result": "success", "values": page.values, "numrows": len(page.values), "last": page.last}
    )
