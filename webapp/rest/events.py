"""POST /rest/events/read: the change events after an id, waiting for one if asked
(docs/events.md)."""

from __future__ import annotations

from flask import Response, jsonify

from ..services import event_feed
from . import bp
from .ops import json_body, require_principal


@bp.post("/events/read")
def read_events() -> Response:
    principal = require_principal()
    query = event_feed.parse(json_body())
    feed = event_feed.read(principal, query)
    return jsonify(
        {"result": "success", "values": feed.values, "numrows": len(feed.values), "last": feed.last}
    )
