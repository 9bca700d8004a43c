"""/rest/call/readUserCount and /rest/call/readDDICount (POST JSON, or GET with query
parameters); closeMonth, reopenMonth and readAdjustments (POST JSON; docs/month-close.md)."""

from __future__ import annotations

from typing import Any

from flask import Response, current_app, jsonify, request
from flask.json.provider import DefaultJSONProvider

from ..errors import Forbidden
from ..request_auth import confirmation_missing, replica_reads
from ..services.billing import closed_figures, month_close, report_query, reports
from .blueprint import bp
from .ops import CLOSE, REOPEN, REPORT, json_body, parse_envelope, require_principal


def _body(model: Any) -> dict[str, Any]:
    body = json_body()
    parse_envelope(body, model, ("cdr",))
    return body


def _report(kind: str) -> Response:
    principal = require_principal()
    scope: Any  # the POST body's is unchecked JSON: parse_scope says what is wrong with it
    if request.method == "GET":
        scope = report_query.scope_from_query(request.args.to_dict(flat=False), report_query.API)
    else:
        scope = _body(REPORT).get("scope")
    request_ = reports.parse_scope(scope)
    provider = current_app.json
    if isinstance(provider, DefaultJSONProvider) and _compact(provider):
        # What jsonify writes, without building the answer's dicts (10,000 companies' days).
        text = reports.answer_json(principal, kind, request_, ensure_ascii=provider.ensure_ascii)
        return current_app.response_class(f"{text}\n", mimetype=provider.mimetype)
    # Debug mode's indented JSON, or keys sorted: the dicts, encoded by the provider.
    return jsonify({"result": "success", **reports.answer(principal, kind, request_)})


def _compact(provider: DefaultJSONProvider) -> bool:
    """Whether jsonify writes with separators (",", ":") and the keys in their order, as
    reports.answer_json does: outside debug mode, keys unsorted (webapp/__init__.py)."""
    compact = provider.compact or (provider.compact is None and not current_app.debug)
    return bool(compact) and not provider.sort_keys


@bp.route("/call/readUserCount", methods=["GET", "POST"])
@replica_reads
def read_user_count() -> Response:
    return _report("user")


@bp.route("/call/readDDICount", methods=["GET", "POST"])
@replica_reads
def read_ddi_count() -> Response:
    return _report("ddi")


@bp.post("/call/closeMonth")
def close_month() -> Response:
    principal = require_principal()
    body = _body(CLOSE)
    close = month_close.close_month(principal, month_close.parse_scope(body.get("scope")))
    return _period(close)


@bp.post("/call/reopenMonth")
def reopen_month() -> Response:
    principal = require_principal()
    if confirmation_missing():  # a sensitive action (docs/security.md#confirmation)
        raise Forbidden(
            "Reopening a month from a browser session needs a fresh confirmation: confirm at "
            "/account/confirm, or use an API token.",
            code="confirmation_required",
        )
    body = _body(REOPEN)
    request_ = month_close.parse_scope(body.get("scope"))
    return _period(month_close.reopen_month(principal, request_, body.get("reason")))


@bp.post("/call/readAdjustments")
@replica_reads
def read_adjustments() -> Response:
    principal = require_principal()
    scope = reports.parse_scope(_body(REPORT).get("scope"))
    return jsonify({"result": "success", **month_close.adjustments(principal, scope)})


def _period(close: closed_figures.Close) -> Response:
    period = closed_figures.period_json(close.year, close.month, close)
    return jsonify({"result": "success", "period": period})
