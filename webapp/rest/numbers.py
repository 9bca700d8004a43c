"""POST /rest/numbers/{stock,read,reserve,release,allocate,retire}: the number inventory's
calls (docs/numbers.md). Each body is a JSON object checked by its service's model (unknown
fields 400); a success is `{"result": "success", "numrows": N, …}`."""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify

from ..request_auth import replica_reads
from ..services.numbers import allocate, read, reserving, retiring, stock
from .blueprint import bp
from .ops import json_body, require_principal


def success(numrows: int, **fields: Any) -> Response:
    """The answer of every /rest/numbers/ call."""
    return jsonify({"result": "success", "numrows": numrows, **fields})


@bp.post("/numbers/allocate", strict_slashes=False)
def allocate_numbers() -> Response:
    principal = require_principal()
    values = allocate.allocate(principal, json_body())
    return success(len(values), values=values)


@bp.post("/numbers/read", strict_slashes=False)
@replica_reads
def read_numbers() -> Response:
    principal = require_principal()
    query = read.parse(json_body())
    page = read.read(principal, query)
    return success(len(page.values), values=page.values, next=page.next)


@bp.post("/numbers/reserve", strict_slashes=False)
def reserve_numbers() -> Response:
    values = reserving.reserve(require_principal(), json_body())
    return success(len(values), values=values)


@bp.post("/numbers/release", strict_slashes=False)
def release_numbers() -> Response:
    return success(reserving.release(require_principal(), json_body()))


@bp.post("/numbers/retire", strict_slashes=False)
def retire_numbers() -> Response:
    return success(retiring.retire(require_principal(), json_body()))


@bp.post("/numbers/stock", strict_slashes=False)
def stock_numbers() -> Response:
    principal = require_principal()
    return success(stock.stock(principal, json_body()))
