"""GET /rest/openapi.json: the OpenAPI 3.1 document, generated from the very specifications the
request validation uses (fields.FORMATS, the Kinds' Parts, ops.TOP_LEVEL), so the two cannot
drift apart."""

from __future__ import annotations

from typing import Any

from flask import jsonify

from ..services import ddis, event_feed, events, month_close, record_query, records
from ..services.errors import ERROR_CODES
from ..services.fields import FORMATS, Part
from ..services.reports import ANSWER_KEYS as REPORT_TOTALS
from . import bp
from .meta import API_LABEL, package_version
from .ops import SERVICES, TOP_LEVEL

FIELD_DESCRIPTIONS = {
    "dialcode": "Dialcode part of the DDI",
    "number": "Number part of the DDI (dialcode and number together at most 17 digits)",
    "virt_exten": "Linked extension",
    "company": "Company identifier",
    "username": "Phone user's name, unique within its company",
}
ERRORS = ERROR_CODES


# The import answer's counts (docs/import.md).
IMPORT_COUNTS = ("created", "updated", "moved", "unchanged")


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(part: Part) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {f: _ref(f) for f in part.allowed},
        "additionalProperties": False,
    }
    if part.required:
        schema["required"] = list(part.required)
    if part.at_least_one:
        schema["minProperties"] = 1
    return schema


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional member that may also be null, which the API takes as absent."""
    return {"anyOf": [schema, {"type": "null"}]}


def _request(op: str, kind: records.Kind) -> dict[str, Any]:
    """The body of `op` for one record type."""
    properties: dict[str, Any] = {"type": {"const": kind.name}}
    required = ["type"]
    if op == "create":
        one = _object(kind.create_part)
        properties["values"] = {
            "oneOf": [
                one,
                {"type": "array", "items": one, "minItems": 1, "maxItems": records.MAX_BATCH},
            ]
        }
        required.append("values")
    elif op == "read":
        properties["scope"] = _or_null(_object(kind.scope_part))
        properties["limit"] = _or_null(
            {
                "type": "integer",
                "minimum": 0,
                "maximum": record_query.MAX_LIMIT,
                "default": record_query.DEFAULT_LIMIT,
            }
        )
        properties["offset"] = _or_null(
            {"type": "integer", "minimum": 0, "maximum": record_query.MAX_OFFSET, "default": 0}
        )
    elif op == "update":
        properties["scope"] = _object(kind.scoped_write_part)
        properties["values"] = _object(kind.update_part)
        required += ["scope", "values"]
    elif op == "link":
        properties["scope"] = _object(ddis.LINK_SCOPE)
        properties["values"] = _object(ddis.LINK_VALUES)
        required += ["scope", "values"]
    elif op == "delete":
        properties["scope"] = _object(kind.scoped_write_part)
        required.append("scope")
    assert set(properties) <= set(TOP_LEVEL[op]), (op, properties)  # the parser's own list
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _errors(*statuses: int) -> dict[str, Any]:
    return {
        str(s): {
            "description": ERRORS[s],
            "content": {"application/json": {"schema": _ref("Error")}},
        }
        for s in statuses
    }


def _ok(schema: dict[str, Any]) -> dict[str, Any]:
    return {"200": {"description": "success", "content": {"application/json": {"schema": schema}}}}


def _report_scope() -> dict[str, Any]:
    """A report's `scope`: companies, month and year, all optional."""
    return {
        "type": "object",
        "additionalProperties": False,
        # A year names a month of that year: it needs the month.
        "if": {"properties": {"year": {"type": "integer"}}, "required": ["year"]},
        "then": {"properties": {"month": {"type": "integer"}}, "required": ["month"]},
        "properties": {
            "company": _or_null({"type": "array", "items": _ref("company")}),
            "month": _or_null({"type": "integer", "minimum": 1, "maximum": 12}),
            "year": _or_null({"type": "integer", "minimum": 1970, "maximum": 9999}),
        },
    }


def _month_close_paths(paths: dict[str, Any]) -> None:
    """closeMonth, reopenMonth and readAdjustments (docs/month-close.md)."""
    month = {"type": "integer", "minimum": 1, "maximum": 12}
    year = _or_null({"type": "integer", "minimum": 1970, "maximum": 9999})
    month_scope = {
        "type": "object",
        "additionalProperties": False,
        "required": ["month"],
        "properties": {"month": month, "year": year},
    }
    # readAdjustments takes a report's scope (no month: the current one, never closed: 409).
    report_scope = _report_scope()
    period_answer = {
        "type": "object",
        "required": ["result", "period"],
        "properties": {"result": {"const": "success"}, "period": _ref("Period")},
    }
    pair = {
        "type": "object",
        "required": ["closed", "now"],
        "properties": {"closed": {"type": "integer"}, "now": {"type": "integer"}},
    }
    kinds = {
        kind: {
            "type": "object",
            "required": ["dates", for_month],
            "properties": {
                "dates": {"type": "object", "additionalProperties": pair},
                for_month: pair,
            },
        }
        for kind, (_, for_month) in REPORT_TOTALS.items()
    }
    adjustments = {
        "type": "object",
        "required": ["result", "period", "values"],
        "properties": {
            "result": {"const": "success"},
            "period": _ref("Period"),
            "values": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": kinds,
                },
            },
        },
    }
    operations: tuple[tuple[str, str, dict[str, Any], dict[str, Any], dict[str, Any]], ...] = (
        (
            "closeMonth",
            "Close an ended month: store both reports as they are",
            month_scope,
            {},
            period_answer,
        ),
        (
            "reopenMonth",
            "Reopen a closed month, with a reason (System-Admin)",
            month_scope,
            {
                "reason": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 500,
                    "pattern": month_close.REASON_PATTERN,
                    "description": "Why the month is reopened: not only white space, no "
                    "control character but line breaks and tabs.",
                }
            },
            period_answer,
        ),
        (
            "readAdjustments",
            "Where a closed month's figures differ from the history now",
            report_scope,
            {},
            adjustments,
        ),
    )
    for name, summary, scope, extra, answer in operations:
        body = {
            "type": "object",
            # readAdjustments without a scope asks about the current month: never closed, 409.
            "required": ["type", *([] if name == "readAdjustments" else ["scope"]), *extra],
            "additionalProperties": False,
            "properties": {"type": {"const": "cdr"}, "scope": scope, **extra},
        }
        paths[f"/rest/call/{name}"] = {
            "post": {
                "operationId": name,
                "summary": summary,
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": body}},
                },
                "responses": {**_ok(answer), **_errors(400, 401, 403, 409, 413, 415, 429)},
            }
        }


def _events_path(paths: dict[str, Any]) -> None:
    """POST /rest/events/read (docs/events.md)."""
    company = _or_null({"type": "string"})
    record = _or_null({"type": "object", "additionalProperties": {"type": ["string", "null"]}})
    event = {
        "type": "object",
        "required": ["id", "at", "type", "actor", "company", "key", "before", "after"],
        "properties": {
            "id": {"type": "integer", "minimum": 1},
            "at": {"type": "string", "format": "date-time"},
            "type": {"enum": list(events.TYPES)},
            "actor": {"type": "string"},
            "company": company,
            "key": {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
            "before": record,
            "after": record,
        },
    }
    body = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "after": _or_null({"type": "integer", "minimum": 0, "maximum": event_feed.MAX_ID}),
            "limit": _or_null({"type": "integer", "minimum": 1, "maximum": event_feed.MAX_LIMIT}),
            "wait": _or_null({"type": "number", "minimum": 0, "maximum": event_feed.MAX_WAIT}),
            "scope": _or_null(
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "company": {"type": "array", "items": _ref("company")},
                        "type": {"type": "array", "items": {"enum": list(events.TYPES)}},
                    },
                }
            ),
        },
    }
    answer = {
        "type": "object",
        "required": ["result", "values", "numrows", "last"],
        "properties": {
            "result": {"const": "success"},
            "values": {"type": "array", "items": event},
            "numrows": {"type": "integer", "minimum": 0},
            "last": {"type": "integer", "minimum": 0},
        },
    }
    paths["/rest/events/read"] = {
        "post": {
            "operationId": "readEvents",
            "summary": "The change events after an id, in id order; waits up to `wait` s for one",
            "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
            "responses": {**_ok(answer), **_errors(400, 401, 403, 413, 415, 429)},
        }
    }


def _numrows() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["result", "numrows"],
        "properties": {"result": {"const": "success"}, "numrows": {"type": "integer"}},
    }


def document() -> dict[str, Any]:
    kinds = {name: service.KIND for name, service in SERVICES.items()}
    schemas: dict[str, Any] = {
        field: {
            "type": "string",
            "pattern": f"^{pattern.pattern}$",
            "description": FIELD_DESCRIPTIONS[field],
        }
        for field, (pattern, _why) in FORMATS.items()
    }
    schemas["Period"] = {
        "type": "object",
        "description": "The month answered, and whether it is closed (docs/month-close.md).",
        "required": ["year", "month", "closed"],
        "properties": {
            "year": {"type": "integer"},
            "month": {"type": "integer", "minimum": 1, "maximum": 12},
            "closed": {"type": "boolean"},
            "version": {"type": "integer", "minimum": 1},
            "closed_at": {"type": "string", "format": "date-time"},
            "closed_by": {"type": "string"},
        },
    }
    schemas["Error"] = {
        "type": "object",
        "required": ["result", "error"],
        "properties": {
            "result": {"const": "error"},
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string", "enum": sorted(set(ERRORS.values()))},
                    "message": {"type": "string"},
                    "fields": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            },
        },
    }
    paths: dict[str, Any] = {}
    for op in ("create", "read", "update", "link", "delete"):
        types = ["ddi"] if op == "link" else list(kinds)
        body: dict[str, Any] = {"oneOf": [_request(op, kinds[t]) for t in types]}
        if op == "read":
            row = {
                "oneOf": [
                    _object(Part(allowed=kinds[t].fields, required=kinds[t].fields)) for t in types
                ]
            }
            answer = {
                "type": "object",
                "required": ["result", "values", "numrows", "total"],
                "properties": {
                    "result": {"const": "success"},
                    "values": {"type": "array", "items": row},
                    "numrows": {"type": "integer"},
                    "total": {"type": "integer"},
                },
            }
        else:
            answer = _numrows()
        statuses = [400, 401, 403, 413, 415, 429]
        statuses += {"create": [409], "link": [404], "update": [409]}.get(op, [])
        paths[f"/rest/ops/{op}/"] = {
            "post": {
                "operationId": op,
                "summary": f"{op.title()} {' or '.join(types)} records",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": body}},
                },
                "responses": {**_ok(answer), **_errors(*sorted(statuses))},
            }
        }
    for path, kind in (("readUserCount", "user"), ("readDDICount", "ddi")):
        per_day, for_month = REPORT_TOTALS[kind]
        entry = {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "days": {"type": "integer"},
                "dates": {"type": "object", "additionalProperties": {"type": "integer"}},
                per_day: {"type": "number"},
                for_month: {"type": "integer"},
            },
        }
        answer = {
            "type": "object",
            "required": ["result", "period", "values"],
            "properties": {
                "result": {"const": "success"},
                "period": _ref("Period"),
                "values": {"type": "object", "additionalProperties": entry},
            },
        }
        scope = _report_scope()
        body = {
            "type": "object",
            "required": ["type"],
            "additionalProperties": False,
            "properties": {"type": {"const": "cdr"}, "scope": _or_null(scope)},
        }
        responses = {**_ok(answer), **_errors(400, 401, 403, 429)}
        paths[f"/rest/call/{path}"] = {
            "post": {
                "operationId": f"{path}Post",
                "responses": {**responses, **_errors(413, 415)},
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": body}},
                },
            },
            "get": {
                "operationId": f"{path}Get",
                "responses": responses,
                "parameters": [
                    {
                        "name": "company",
                        "in": "query",
                        "schema": {"type": "array", "items": _ref("company")},
                        "style": "form",
                        "explode": True,
                    },
                    {
                        "name": "month",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 12},
                    },
                    {
                        "name": "year",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1970, "maximum": 9999},
                    },
                ],
            },
        }
    _month_close_paths(paths)
    _events_path(paths)
    counts = {f: {"type": "integer", "minimum": 0} for f in IMPORT_COUNTS}
    paths["/rest/ops/import/"] = {
        "post": {
            "operationId": "importDdis",
            "summary": "Bring DDIs to the states a CSV lists (docs/import.md)",
            "parameters": [
                {
                    "name": "dry_run",
                    "in": "query",
                    "description": "1: count only, write nothing.",
                    "schema": {"type": "string", "enum": ["0", "1", "true", "false"]},
                }
            ],
            "requestBody": {
                "required": True,
                "content": {
                    "text/csv": {
                        "schema": {
                            "type": "string",
                            "description": "Header dialcode,number,virt_exten,company; a row "
                            "per DDI as it should be; up to 1,000,000 rows and 64 MiB.",
                        }
                    }
                },
            },
            "responses": {
                **_ok(
                    {
                        "type": "object",
                        "required": ["result", *IMPORT_COUNTS, "dry_run"],
                        "properties": {
                            "result": {"const": "success"},
                            **counts,
                            "dry_run": {"type": "boolean"},
                        },
                    }
                ),
                **_errors(400, 401, 403, 409, 413, 415, 429),
            },
        }
    }
    paths["/rest/version"] = {
        "get": {
            "operationId": "version",
            "security": [],
            "responses": _ok(
                {
                    "type": "object",
                    "properties": {
                        "result": {"const": "success"},
                        "version": {"const": API_LABEL},
                        "api": {"type": "string"},
                    },
                }
            ),
        }
    }
    paths["/rest/openapi.json"] = {
        "get": {"operationId": "openapi", "security": [], "responses": _ok({"type": "object"})}
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "telephony-admin",
            "version": API_LABEL,
            "x-package-version": package_version(),
            "description": "DDI administration and billing counts. Errors always use the "
            "Error envelope; see the README for the status table.",
        },
        "security": [{"bearer": []}, {"session": []}],
        "components": {
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API token from `flask --app app tokens create`.",
                },
                "session": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": "session",
                    "description": "A browser session; every POST then needs X-CSRFToken.",
                },
            },
            "schemas": schemas,
        },
        "paths": paths,
    }


@bp.get("/openapi.json")
def openapi_json():
    return jsonify(document())
