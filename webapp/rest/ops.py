"""POST /rest/ops/{create,read,update,link,delete}/ for `type` ddi and user."""

from __future__ import annotations

import json
from typing import Any

from flask import current_app, jsonify, request
from werkzeug.exceptions import UnsupportedMediaType

from ..access import Principal
from ..errors import Invalid, Unauthorized
from ..request_auth import api_principal
from ..request_body import read_body
from ..services.records import crud, ddis, record_query
from ..services.records.kinds import KINDS, Kind
from .blueprint import bp

# Routes take strict_slashes=False: scripts write /rest/ops/read and /rest/ops/read/ alike, and
# a redirect would answer with HTML.

# Top-level fields each operation accepts; anything else is an unknown field.
TOP_LEVEL = {
    "create": ("type", "values"),
    "read": ("type", "scope", "limit", "offset"),
    "update": ("type", "scope", "values"),
    "link": ("type", "scope", "values"),
    "delete": ("type", "scope"),
    "report": ("type", "scope"),
    "reopen": ("type", "scope", "reason"),
}


def require_principal() -> Principal:
    principal = api_principal()
    if principal is None:
        raise Unauthorized("Credentials are missing or not valid.")
    return principal


def json_body() -> dict[str, Any]:
    """The request body as a JSON object, or the matching 415/413/400."""
    if not request.is_json:
        raise UnsupportedMediaType()
    raw = read_body(current_app.config["MAX_CONTENT_LENGTH"])
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # bad JSON, bad UTF-8, huge ints, deep nesting
        raise Invalid("The body is not valid JSON.") from exc
    if not isinstance(body, dict):
        raise Invalid("The body must be a JSON object.")
    return body


def parse_envelope(op: str, body: dict[str, Any], types: tuple[str, ...]) -> str:
    """Check the top-level fields and return the `type`."""
    unknown = {k: "unknown field" for k in body if k not in TOP_LEVEL[op]}
    if unknown:
        raise Invalid(f"Field '{next(iter(unknown))}' is not known here.", unknown)
    kind = body.get("type")
    if kind is None:
        raise Invalid("Field 'type' is required.", {"type": "required"})
    if kind not in types:
        raise Invalid(
            f"Field 'type' must be {' or '.join(repr(t) for t in types)} here.",
            {"type": f"must be one of {', '.join(types)}"},
        )
    return kind


def _op(op: str, types: tuple[str, ...] = ("ddi", "user")) -> tuple[Principal, dict, Kind]:
    principal = require_principal()
    body = json_body()
    kind = KINDS[parse_envelope(op, body, types)]
    return principal, body, kind


@bp.post("/ops/create/", strict_slashes=False)
def create():
    principal, body, kind = _op("create")
    return _success(numrows=crud.create(principal, kind, body.get("values")))


@bp.post("/ops/read/", strict_slashes=False)
def read():
    principal, body, kind = _op("read")
    scope, limit, offset = body.get("scope"), body.get("limit"), body.get("offset")
    page = record_query.read(principal, kind, scope, limit, offset)
    return _success(values=page.rows, numrows=len(page.rows), total=page.total)


@bp.post("/ops/update/", strict_slashes=False)
def update():
    principal, body, kind = _op("update")
    return _success(numrows=crud.update(principal, kind, body.get("scope"), body.get("values")))


@bp.post("/ops/link/", strict_slashes=False)
def link():
    principal, body, _ = _op("link", types=("ddi",))
    return _success(numrows=ddis.link(principal, body.get("scope"), body.get("values")))


@bp.post("/ops/delete/", strict_slashes=False)
def delete():
    principal, body, kind = _op("delete")
    return _success(numrows=crud.delete_rows(principal, kind, body.get("scope")))


def _success(**fields: Any):
    return jsonify({"result": "success", **fields})
