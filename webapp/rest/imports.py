"""POST /rest/ops/import/: the DDI import over the API (docs/import.md), a CSV body."""

from __future__ import annotations

from flask import jsonify, request
from werkzeug.exceptions import RequestEntityTooLarge

from ..errors import Invalid, TooLarge, UnsupportedMedia
from ..request_body import read_body
from ..services.imports import ddi_import
from .blueprint import bp
from .ops import require_principal

DRY_RUN = {"1": True, "true": True, "0": False, "false": False}


@bp.post("/ops/import/", strict_slashes=False)
def import_ddis():
    principal = require_principal()
    principal.require_system_admin("import DDIs")
    if request.mimetype != "text/csv":
        raise UnsupportedMedia("The body must be declared as text/csv.")
    dry_run = request.args.get("dry_run", "0").strip().lower()
    if dry_run not in DRY_RUN:
        raise Invalid("'dry_run' must be 1 or 0.", {"dry_run": "must be 1 or 0"})
    limit = ddi_import.MAX_BYTES
    try:
        data = read_body(limit)
    except RequestEntityTooLarge:
        raise TooLarge(f"An import body holds at most {limit // (1024 * 1024)} MiB.") from None
    source = ddi_import.bytes_source(data)
    if DRY_RUN[dry_run]:
        outcome = ddi_import.plan(principal, source)
    else:
        outcome = ddi_import.apply(principal, source)
    return jsonify({"result": "success", **outcome.as_json()})
