"""GET /rest/docs: the OpenAPI document as a page for people, rendered on the server from the
very document /rest/openapi.json serves (templates/api/docs.html). No script, nothing from
another site: the Content-Security-Policy forbids inline scripts and styles, and the page
must work offline.

Like the document, the page needs no credentials: it describes the API, never data, and a
script's author should be able to read it before holding a token.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from flask import render_template
from markupsafe import Markup, escape

from .blueprint import bp
from .openapi import served_document

METHODS = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True)
class Piece:
    """A run of a type's description: plain text, or a link to a named schema."""

    text: str
    href: str | None = None


@dataclass
class Row:
    """One member of an object (or one parameter): its name, type, whether it is required."""

    name: str
    type: list[Piece]
    required: bool
    description: str = ""


@dataclass
class Example:
    name: str
    text: str  # JSON pretty-printed, or the text itself (a CSV body)


@dataclass
class Answer:
    status: str
    description: str
    type: list[Piece]
    headers: list[str] = field(default_factory=list)


@dataclass
class Operation:
    anchor: str
    method: str
    path: str
    operation_id: str
    summary: str
    description: str
    public: bool
    parameters: list[Row]
    body_type: list[Piece] | None
    body_media_type: str
    body_description: str
    body_examples: list[Example]
    answers: list[Answer]
    answer_example: str | None


@dataclass
class Group:
    name: str
    anchor: str
    description: str
    operations: list[Operation]


@dataclass
class Schema:
    name: str
    anchor: str
    description: str
    type: list[Piece]
    rows: list[Row]
    notes: list[str]
    example: str | None


# `text` in a description: code, as in Markdown (the document's descriptions use it).
CODE_SPAN = re.compile(r"`([^`]+)`")


def code(text: str) -> Markup:
    """`text` escaped, with its `spans` set as code."""
    # Safe: the text is escaped first, and only the <code> tags added here are markup.
    return Markup(CODE_SPAN.sub(r"<code>\1</code>", str(escape(text))))  # noqa: S704


def schema_anchor(name: str) -> str:
    return f"schema-{name}"


def _name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and abs(value) >= 10_000 else str(value)


def _bounds(low: Any, high: Any, unit: str = "") -> str:
    if low is not None and high is not None:
        return f"{_number(low)} to {_number(high)}{unit}"
    if low is not None:
        return f"at least {_number(low)}{unit}"
    return f"at most {_number(high)}{unit}"


def describe(schema: dict[str, Any]) -> list[Piece]:
    """A short account of a schema's type and bounds, naming referenced schemas as links."""
    if "$ref" in schema:
        name = _name(schema["$ref"])
        return [Piece(name, "#" + schema_anchor(name))]
    for combinator in ("oneOf", "anyOf"):
        # A choice of types; beside `properties` it is a rule across an object's members.
        if combinator in schema and "properties" not in schema:
            options = schema[combinator]
            nullable = {"type": "null"} in options
            pieces: list[Piece] = []
            for i, option in enumerate(o for o in options if o != {"type": "null"}):
                if i:
                    pieces.append(Piece(" or "))
                pieces += describe(option)
            return pieces + ([Piece(" or null")] if nullable else [])
    if "const" in schema:
        return [Piece(json.dumps(schema["const"]))]
    if "enum" in schema:
        return [Piece("one of " + ", ".join(json.dumps(v) for v in schema["enum"]))]
    kind = schema.get("type")
    if isinstance(kind, list):
        return [Piece(" or ".join(kind))]
    if kind == "array":
        pieces = [Piece("array of "), *describe(schema.get("items", {}))]
        if "minItems" in schema or "maxItems" in schema:
            count = _bounds(schema.get("minItems"), schema.get("maxItems"), " items")
            pieces.append(Piece(f" ({count})"))
        return pieces
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and "properties" not in schema:
            return [Piece("object, each member "), *describe(extra)]
        return [Piece("object")]
    return [Piece(_scalar(schema))]


def _scalar(schema: dict[str, Any]) -> str:
    kind = schema.get("type", "any")
    text = str(kind)
    if kind in ("integer", "number"):
        if "minimum" in schema or "maximum" in schema:
            text += " " + _bounds(schema.get("minimum"), schema.get("maximum"))
    elif kind == "string":
        if "format" in schema:
            text += f" ({schema['format']})"
        if "pattern" in schema:
            text += f" matching {schema['pattern']}"
        elif "minLength" in schema or "maxLength" in schema:
            text += ", " + _bounds(schema.get("minLength"), schema.get("maxLength"), " characters")
    if "default" in schema:
        text += f"; default {_number(schema['default'])}"
    return text


def _description(schema: dict[str, Any]) -> str:
    """A member's description, looking through `X or null`."""
    if "description" in schema:
        return str(schema["description"])
    for option in schema.get("anyOf", ()):
        if option != {"type": "null"} and "description" in option:
            return str(option["description"])
    return ""


def rows(schema: dict[str, Any], prefix: str = "") -> list[Row]:
    """The members of an object schema; an inline object member's own members follow it,
    named `member.inner`."""
    found = []
    required = set(schema.get("required", ()))
    for name, member in schema.get("properties", {}).items():
        found.append(Row(prefix + name, describe(member), name in required, _description(member)))
        if member.get("type") == "object" and "properties" in member:
            found += rows(member, f"{prefix}{name}.")
    return found


def _notes(schema: dict[str, Any]) -> list[str]:
    """What the member table cannot show: rules across members, and open objects."""
    notes = []
    extra = schema.get("additionalProperties")
    if schema.get("type") == "object" and "properties" in schema:
        if extra is False:
            notes.append("No other member is allowed.")
        elif isinstance(extra, dict):
            notes.append("Other members: " + "".join(p.text for p in describe(extra)) + ".")
    if schema.get("minProperties"):
        notes.append(f"At least {schema['minProperties']} member.")
    if digits := schema.get("dependentSchemas", {}).get("dialcode"):
        # The member whose length the dialcode's bounds (number, a block's first, a prefix).
        other = next(m for m in digits["anyOf"][0]["properties"] if m != "dialcode")
        notes.append(f"dialcode and {other} together hold at most 17 digits.")
    if any(rule in schema for rule in ("if", "oneOf", "allOf")):
        notes.append("Rules across members: see the description above.")
    return notes


def _pretty(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


def _operation(path: str, method: str, op: dict[str, Any]) -> Operation:
    parameters = [  # every parameter is a query parameter (the page's heading says so)
        Row(
            p["name"],
            describe(p.get("schema", {})),
            bool(p.get("required")),
            p.get("description", ""),
        )
        for p in op.get("parameters", ())
    ]
    body_type, media_type, body_description, examples = None, "", "", []
    if "requestBody" in op:
        media_type, content = next(iter(op["requestBody"]["content"].items()))
        body_type = describe(content["schema"])
        body_description = content["schema"].get("description", "")
        examples = [
            Example(e.get("summary", name), _pretty(e["value"]))
            for name, e in content.get("examples", {}).items()
        ]
    answers, answer_example = [], None
    for status, answer in op["responses"].items():
        content = answer.get("content", {})
        media: dict[str, Any] = next(iter(content.values()), {})
        if "schema" in media:
            kind = describe(media["schema"])
        else:  # a page: its media type says what it is
            kind = [Piece(media_type) for media_type in content]
        headers = [f"{name}: {h['description']}" for name, h in answer.get("headers", {}).items()]
        answers.append(Answer(status, answer["description"], kind, headers))
        if status == "200" and "example" in media:
            answer_example = _pretty(media["example"])
    return Operation(
        anchor=f"op-{op['operationId']}",
        method=method.upper(),
        path=path,
        operation_id=op["operationId"],
        summary=op.get("summary", ""),
        description=op.get("description", ""),
        public=op.get("security") == [],
        parameters=parameters,
        body_type=body_type,
        body_media_type=media_type,
        body_description=body_description,
        body_examples=examples,
        answers=answers,
        answer_example=answer_example,
    )


def reference(document: dict[str, Any]) -> dict[str, Any]:
    """What the page shows, from the document: its operations grouped by tag in the
    document's tag order, then every named schema."""
    groups = {
        t["name"]: Group(t["name"], "tag-" + t["name"].replace(" ", "-"), t["description"], [])
        for t in document["tags"]
    }
    for path, item in document["paths"].items():
        for method in METHODS:
            if method in item:
                op = item[method]
                groups[op["tags"][0]].operations.append(_operation(path, method, op))
    schemas = [
        Schema(
            name=name,
            anchor=schema_anchor(name),
            description=schema.get("description", ""),
            type=describe({k: v for k, v in schema.items() if k != "description"}),
            rows=rows(schema),
            notes=_notes(schema),
            example=_pretty(schema["examples"][0]) if schema.get("examples") else None,
        )
        for name, schema in document["components"]["schemas"].items()
    ]
    return {
        "info": document["info"],
        "servers": document["servers"],
        "security": document["components"]["securitySchemes"],
        "groups": list(groups.values()),
        "schemas": schemas,
    }


@bp.get("/docs")
def api_docs() -> str:
    return render_template("api/docs.html", ref=reference(served_document()), code=code)
