"""POST /rest/numbers/{stock,read,reserve,release,allocate,retire}: the number inventory's
calls (docs/numbers.md). Each body is a JSON object checked by its service's model (unknown
fields 400); a success is `{"result": "success", "numrows": N, …}`."""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify

from ..services.numbers import stock
from .blueprint import bp
from .ops import json_body, require_principal


def success(numrows: int, **fields: Any) -> Response:
    """The answer of every /rest/numbers/ call."""
    return jsonify({"result": "success", "numrows": numrows, **fields})


@bp.post("/numbers/stock")
def stock_numbers() -> Response:
    principal = require_principal()
    return success(stock.stock(principal, json_body()))
