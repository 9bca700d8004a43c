"""/rest/call/readUserCount and /rest/call/readDDICount: POST JSON, or GET with query parameters."""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify, request

from ..services import report_query, reports
from . import bp
from .ops import json_body, parse_envelope, require_principal


def _report(kind: str) -> Response:
    principal = require_principal()
    scope: Any  # the POST body's is unchecked JSON: parse_scope says what is wrong with it
    if request.method == "GET":
        scope = report_query.scope_from_query(request.args.to_dict(flat=False), report_query.API)
    else:
        body = json_body()
        parse_envelope("report", body, ("cdr",))
        scope = body.get("scope")
    values = reports.report(principal, kind, reports.parse_scope(scope))
    return jsonify({"result": "success", "values": values})


@bp.route("/call/readUserCount", methods=["GET", "POST"])
def read_user_count() -> Response:
    return _report("user")


@bp.route("/call/readDDICount", methods=["GET", "POST"])
def read_ddi_count() -> Response:
    return _report("ddi")
