"""POST /rest/numbers/{stock,read,reserve,release,allocate,retire}: the number inventory's
calls (docs/numbers.md). Each body is a JSON object checked by its service's model (unknown
fields 400); a success is `{"result": "success", "numrows": N, …}`."""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify

from .blueprint import bp  # noqa: F401 (each call's route registers on it)
from .ops import json_body, require_principal  # noqa: F401


def success(numrows: int, **fields: Any) -> Response:
    """The answer of every /rest/numbers/ call."""
    return jsonify({"result": "success", "numrows": numrows, **fields})
