"""/rest/call/readUserCount and /rest/call/readDDICount (POST JSON, or GET with query
parameters); closeMonth, reopenMonth and readAdjustments (POST JSON; docs/month-close.md)."""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify, request

from ..services.billing import closed_figures, month_close, report_query, reports
from .blueprint import bp
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
    answer = reports.answer(principal, kind, reports.parse_scope(scope))
    return jsonify({"result": "success", **answer})


@bp.route("/call/readUserCount", methods=["GET", "POST"])
def read_user_count() -> Response:
    return _report("user")


@bp.route("/call/readDDICount", methods=["GET", "POST"])
def read_ddi_count() -> Response:
    return _report("ddi")


@bp.post("/call/closeMonth")
def close_month() -> Response:
    principal = require_principal()
    body = json_body()
    parse_envelope("report", body, ("cdr",))
    close = month_close.close_month(principal, month_close.parse_scope(body.get("scope")))
    period = closed_figures.period_json(close.year, close.month, close)
    return jsonify({"result": "success", "period": period})


@bp.post("/call/reopenMonth")
def reopen_month() -> Response:
    principal = require_principal()
    body = json_body()
    parse_envelope("reopen", body, ("cdr",))
    request_ = month_close.parse_scope(body.get("scope"))
    close = month_close.reopen_month(principal, request_, body.get("reason"))
    period = closed_figures.period_json(close.year, close.month, close)
    return jsonify({"result": "success", "period": period})


@bp.post("/call/readAdjustments")
def read_adjustments() -> Response:
    principal = require_principal()
    body = json_body()
    parse_envelope("report", body, ("cdr",))
    answer = month_close.adjustments(principal, reports.parse_scope(body.get("scope")))
    return jsonify({"result": "success", **answer})
