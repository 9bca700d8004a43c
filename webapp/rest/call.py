"""/rest/call/readUserCount and /rest/call/readDDICount: POST JSON, or GET with query parameters."""

from __future__ import annotations

import re
from typing import Any

from flask import jsonify, request

from ..services import reports
from ..services.errors import Invalid
from . import bp
from .ops import json_body, parse_envelope, require_principal

QUERY_PARAMS = ("company", "month", "year")
SMALL_INT = re.compile(r"[0-9]{1,4}")


def _scope_from_query() -> dict[str, Any]:
    """The GET form: company (repeatable), month, year, as the same scope the POST form takes."""
    unknown = [k for k in request.args if k not in QUERY_PARAMS]
    if unknown:
        raise Invalid(
            f"Query parameter '{unknown[0]}' is not known here.", {unknown[0]: "unknown field"}
        )
    scope: dict[str, Any] = {}
    if "company" in request.args:
        scope["company"] = request.args.getlist("company")
    for name in ("month", "year"):
        values = request.args.getlist(name)
        if len(values) > 1:
            raise Invalid(
                f"Query parameter '{name}' is given more than once.", {name: "given twice"}
            )
        if values:
            if not SMALL_INT.fullmatch(values[0]):
                raise Invalid(
                    f"Query parameter '{name}' must be a whole number.",
                    {name: "must be an integer"},
                )
            scope[name] = int(values[0])
    return scope


def _report(kind: str):
    principal = require_principal()
    if request.method == "GET":
        scope = _scope_from_query()
    else:
        body = json_body()
        parse_envelope("report", body, ("cdr",))
        scope = body.get("scope")
    values = reports.report(principal, kind, reports.parse_scope(scope))
    return jsonify({"result": "success", "values": values})


@bp.route("/call/readUserCount", methods=["GET", "POST"])
def read_user_count():
    return _report("user")


@bp.route("/call/readDDICount", methods=["GET", "POST"])
def read_ddi_count():
    return _report("ddi")
