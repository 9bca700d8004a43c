"""Field formats and request shapes (docs/api.md#field-formats), checked once for the API and
the pages.

Every value must already be a string: a JSON number is refused, never converted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import Invalid

# fullmatch + explicit [0-9]: `\d` would admit other scripts' digits and `$` a trailing newline.
FORMATS: dict[str, tuple[re.Pattern[str], str]] = {
    "dialcode": (re.compile(r"[0-9]{1,7}"), "must be 1 to 7 digits"),
    "number": (re.compile(r"[0-9]{1,15}"), "must be 1 to 15 digits"),
    "virt_exten": (re.compile(r"[0-9]{1,10}"), "must be 1 to 10 digits"),
    "company": (re.compile(r"[a-z0-9._-]{1,64}"), "must be 1 to 64 of a-z 0-9 . _ -"),
    "username": (re.compile(r"[a-z0-9._@-]{1,64}"), "must be 1 to 64 of a-z 0-9 . _ - @"),
}
MAX_DDI_DIGITS = 17
# A calendar day as YYYY-MM-DD (date.fromisoformat alone also takes other ISO forms).
ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def check_format(field: str, value: Any) -> str | None:
    """Why `value` is not a valid `field`, or None when it is."""
    if not isinstance(value, str):
        return "must be a string"
    pattern, why = FORMATS[field]
    return None if pattern.fullmatch(value) else why


@dataclass(frozen=True)
class Part:
    """One object of a request (`scope` or `values`): which fields it may and must hold."""

    allowed: tuple[str, ...]
    required: tuple[str, ...] = ()
    not_editable: tuple[str, ...] = ()  # named in the error as "field not editable"
    at_least_one: bool = False


def parse_part(part: Part, data: Any, name: str, prefix: str = "") -> dict[str, str]:
    """Validate one request object against `part`; return its fields or raise Invalid.

    `name` is the object's place in the request (for the message); `prefix` goes before field
    names in `fields` (batch rows use 'values[3].').
    """
    if data is None and not prefix:  # an absent scope or values object is an empty one
        data = {}
    if not isinstance(data, Mapping):
        where = prefix.rstrip(".") or name
        raise Invalid(f"'{where}' must be an object.", {where: "must be an object"})
    problems: dict[str, str] = {}
    for key, value in data.items():
        if key in part.not_editable:
            problems[prefix + key] = "field not editable"
        elif key not in part.allowed:
            problems[prefix + key] = "unknown field"
        elif (why := check_format(key, value)) is not None:
            problems[prefix + key] = why
    for key in part.required:
        if key not in data:
            problems[prefix + key] = "required"
    if part.at_least_one and not problems and not any(k in data for k in part.allowed):
        problems[prefix + name] = f"must hold at least one of {', '.join(part.allowed)}"
    if (
        not problems
        and "dialcode" in data
        and "number" in data
        and len(data["dialcode"]) + len(data["number"]) > MAX_DDI_DIGITS
    ):
        problems[prefix + "number"] = "dialcode and number together must be at most 17 digits"
    if problems:
        raise Invalid(_message(problems), problems)
    return dict(data)


def _message(problems: dict[str, str]) -> str:
    field, why = next(iter(problems.items()))
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"Field '{field}' {why}{more}."


def parse_int(
    value: Any, name: str, low: int, high: int, default: int | None, label: str | None = None
) -> int | None:
    """A JSON integer within [low, high], `default` when absent or null.

    JSON has one number type, so 5.0 is the integer 5 (as JSON Schema says too); 5.5, booleans
    and numbers in strings are refused. `label` is how the message names the field.
    """
    label = label or name
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(f"'{label}' must be an integer.", {name: "must be an integer"})
    if not low <= value <= high:
        why = f"must be {low} to {high}"
        raise Invalid(f"'{label}' {why}.", {name: why})
    return value
