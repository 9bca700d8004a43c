"""A report request as query parameters (`company`, repeatable; `month`; `year`) turned into the
scope reports.parse_scope takes: parsed once for GET /rest/call/read…Count and the report pages.

The two read the same parameters and differ only in what they forgive and how they word a
mistake: the API refuses what it does not know, while a page's picker form sends empty fields
and other parameters, which mean nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import Invalid

PARAMS = ("company", "month", "year")
SMALL_INT = re.compile(r"[0-9]{1,4}")  # [0-9], not str.isdigit(), which admits other digits
EXAMPLES = {"month": "10", "year": "2026"}


@dataclass(frozen=True)
class QueryStyle:
    """What one surface forgives in the query string and how it words a mistake. A message is
    a format string with {name} (the parameter) and {example} (a valid value of it)."""

    unknown: tuple[str, str] | None  # (message, field reason); None: other parameters ignored
    blank_is_absent: bool  # an empty value is no value; spaces around a number are dropped
    twice: tuple[str, str]
    not_number: tuple[str, str]


API = QueryStyle(
    unknown=("Query parameter '{name}' is not known here.", "unknown field"),
    blank_is_absent=False,
    twice=("Query parameter '{name}' is given more than once.", "given twice"),
    not_number=("Query parameter '{name}' must be a whole number.", "must be an integer"),
)
PAGE = QueryStyle(
    unknown=None,
    blank_is_absent=True,
    twice=("Give '{name}' only once.", "given more than once"),
    not_number=(
        "The {name} must be a whole number, such as {example}.",
        "must be a whole number",
    ),
)


def _invalid(wording: tuple[str, str], name: str) -> Invalid:
    message, why = wording
    return Invalid(message.format(name=name, example=EXAMPLES.get(name, "")), {name: why})


def scope_from_query(args: Mapping[str, Sequence[str]], style: QueryStyle) -> dict[str, Any]:
    """The scope of a report query: each parameter's values in the order given (e.g. Werkzeug's
    `request.args.to_dict(flat=False)`). Invalid for an unknown parameter (API), a month or
    year given twice or not made of at most four ASCII digits. Ranges (month 1-12, a year
    with its month, not in the future) are reports.parse_scope's to check."""
    if style.unknown is not None:
        unknown = [name for name in args if name not in PARAMS]
        if unknown:
            raise _invalid(style.unknown, unknown[0])
    scope: dict[str, Any] = {}
    companies = list(args.get("company", ()))
    if style.blank_is_absent:
        companies = [c for c in companies if c != ""]
    if companies:
        scope["company"] = companies
    for name in ("month", "year"):
        values = list(args.get(name, ()))
        if style.blank_is_absent:
            values = [v.strip() for v in values if v.strip() != ""]
        if len(values) > 1:
            raise _invalid(style.twice, name)
        if values:
            if not SMALL_INT.fullmatch(values[0]):
                raise _invalid(style.not_number, name)
            scope[name] = int(values[0])
    return scope
