"""POST /rest/ops/{create,read,update,link,delete}/ for `type` ddi and user, and the request
bodies of every JSON operation: the envelope (`type` and the members each takes) around the
services' own models, which validate each member (services/fields.py)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, NotRequired, get_args

from flask import Response, current_app, jsonify, request
from pydantic import ConfigDict, Field
from pydantic_core import PydanticSerializationError, to_json
from typing_extensions import TypedDict
from werkzeug.exceptions import UnsupportedMediaType

from ..access import Principal
from ..errors import Invalid, Unauthorized
from ..request_auth import api_principal, replica_reads
from ..request_body import read_body
from ..services import fields
from ..services.billing import month_close, reports
from ..services.fields import STRICT
from ..services.records import crud, ddis, record_query
from ..services.records.kinds import KINDS, Kind
from .blueprint import bp

# Routes take strict_slashes=False: scripts write /rest/ops/read and /rest/ops/read/ alike, and
# a redirect would answer with HTML.


def _body(name: str, doc: str, kind: str, rules: dict[str, Any] | None = None, **members: Any):
    """A request body: its `type` and `members`, a member that may be null also absent;
    `rules`, what JSON Schema says across its members (added to its schema as they are)."""
    fields = {k: NotRequired[t] if type(None) in get_args(t) else t for k, t in members.items()}
    typed_dict: Any = TypedDict  # a model made from data: the type checker cannot follow it
    model = typed_dict(name, {"type": Literal.__getitem__(kind), **fields})
    config = STRICT if rules is None else ConfigDict(**STRICT, json_schema_extra=rules)
    model.__doc__, model.__pydantic_config__ = doc, config
    return model


# An override's two members come together: one rule for every body that takes them.
OVERRIDE_RULES = fields.OVERRIDE_RULES


def _record_bodies(kind: Kind) -> dict[str, Any]:
    """createRecords', readRecords', updateRecords' and deleteRecords' bodies for `kind`."""
    name, label, record = kind.schema, f"{kind.label}s", kind.create_part.model
    batch = Annotated[list[record], Field(min_length=1, max_length=crud.MAX_BATCH)]  # type: ignore[valid-type]
    rows = f"One record, or up to {crud.MAX_BATCH:,} created all or nothing."
    override: dict[str, Any] = {}
    if kind.numbered:  # docs/numbers.md, "Override"
        override = {
            "force": Annotated[
                bool,
                Field(description="Take numbers held for another company (System-Admin)."),
            ]
            | None,
            "reason": Annotated[
                str,
                Field(
                    min_length=1,
                    max_length=fields.REASON_MAX,
                    pattern=fields.REASON_PATTERN,
                    description="Why the held numbers are taken (with force; audited).",
                ),
            ]
            | None,
        }
    return {
        "create": _body(
            f"Create{name}Request",
            f"The body of createRecords for {label}.",
            kind.name,
            rules=OVERRIDE_RULES if kind.numbered else None,
            values=Annotated[record | batch, Field(description=rows)],
            **override,
        ),
        "read": _body(
            f"Read{name}Request",
            f"The body of readRecords for {label}.",
            kind.name,
            scope=kind.scope_part.model | None,
            limit=Annotated[int, record_query.LIMIT, Field(description="Rows in the page.")] | None,
            offset=Annotated[
                int,
                record_query.OFFSET,
                Field(description="Matching rows skipped before the page."),
            ]
            | None,
        ),
        "update": _body(
            f"Update{name}Request",
            f"The body of updateRecords for {label}.",
            kind.name,
            scope=kind.scoped_write_part.model,
            values=kind.changes_part.model,
        ),
        "delete": _body(
            f"Delete{name}Request",
            f"The body of deleteRecords for {label}.",
            kind.name,
            scope=kind.scoped_write_part.model,
        ),
    }


# Each operation's body, by `type` (records) or by name.
BODIES = {name: _record_bodies(kind) for name, kind in KINDS.items()}
LINK = BODIES["ddi"]["link"] = _body(
    "LinkDdiRequest",
    "The body of linkDdi.",
    "ddi",
    scope=ddis.LINK_SCOPE.model,
    values=ddis.LINK_VALUES.model,
)
REPORT = _body(
    "ReportRequest",
    "The body of a report: `type` is always `cdr`.",
    "cdr",
    scope=reports.ReportScope | None,
)
CLOSE = _body(
    "CloseMonthRequest", "The body of closeMonth.", "cdr", scope=month_close.ClosableMonth
)
REOPEN = _body(
    "ReopenMonthRequest",
    "The body of reopenMonth.",
    "cdr",
    scope=month_close.Month,
    reason=month_close.Reason,
)


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


def parse_envelope(body: dict[str, Any], model: Any, types: tuple[str, ...]) -> str:
    """Check the top-level fields against the body `model`'s members and return the `type`,
    one of `types`; its members are the services' to check."""
    unknown = {k: "unknown field" for k in body if k not in model.__annotations__}
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
    kind = KINDS[parse_envelope(body, BODIES["ddi"][op], types)]
    return principal, body, kind


@bp.post("/ops/create/", strict_slashes=False)
def create():
    principal, body, kind = _op("create")
    values, force, reason = body.get("values"), body.get("force"), body.get("reason")
    return _success(numrows=crud.create(principal, kind, values, force, reason))


@bp.post("/ops/read/", strict_slashes=False)
@replica_reads
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


def _success(**fields: Any) -> Response:
    return json_response({"result": "success", **fields})


def json_response(payload: dict[str, Any]) -> Response:
    """`jsonify(payload)`, byte for byte, encoded by pydantic_core: Python's encoder took a
    tenth of an API read of 100 rows (issue 30). Only for a payload of str, int, bool, None,
    lists and dicts (the operations' answers), as pydantic_core writes some floats (1e-07), a
    datetime, a Decimal or a set otherwise than Flask's provider. What the two would write
    differently even then (a DEL character, which json escapes, a lone surrogate, which
    pydantic_core refuses) and debug mode's indented answers go through jsonify."""
    if current_app.debug:
        return jsonify(payload)
    try:
        body = to_json(payload, ensure_ascii=True)
    except PydanticSerializationError:
        return jsonify(payload)
    if b"\x7f" in body:
        return jsonify(payload)
    # jsonify's answer: its mimetype, compact separators, a newline at the end.
    return current_app.response_class(body + b"\n", mimetype="application/json")
