"""Schemathesis hooks (loaded with SCHEMATHESIS_HOOKS=tests.schemathesis_hooks; Schemathesis
applies them in its examples and fuzzing phases).

The DDI import's CSV body is replaced by a file of DDIs (any string fits its schema).

A System-Admin's write naming a company that does not exist is a documented 400
(docs/api.md#errors), which no static schema can express. So a well-formed company identifier in
a generated body is replaced by one that exists; malformed ones are left alone, and the
negative checks still see them.
"""

from __future__ import annotations

import os
import random
import re
from datetime import date

import schemathesis

COMPANIES = os.environ.get("ST_COMPANIES", "acme,globex").split(",")
PATTERN = re.compile(r"[a-z0-9._-]{1,64}")


def _existing(value):
    if isinstance(value, str) and PATTERN.fullmatch(value):
        return random.choice(COMPANIES)
    if isinstance(value, list):
        return [_existing(v) for v in value]
    return value


def _past_year(scope: dict) -> None:
    """A month in the future is a documented 400 the schema cannot express: use last year."""
    year = scope.get("year")
    if isinstance(year, int | float) and not isinstance(year, bool) and year >= date.today().year:
        scope["year"] = date.today().year - 1


def _ddi_length(record: dict) -> None:
    """Dialcode and number together at most 17 digits: a cross-field rule JSON Schema lacks."""
    dialcode, number = record.get("dialcode"), record.get("number")
    if isinstance(dialcode, str) and isinstance(number, str) and len(dialcode) + len(number) > 17:
        record["number"] = number[: max(1, 17 - len(dialcode))]


@schemathesis.hook
def map_query(context, query):
    if isinstance(query, dict) and "year" in query:
        _past_year(query)
        query.setdefault("month", 1)  # a year alone is a documented 400
    return query


def _import_file(text: str) -> str:
    """The DDI import's body: any string fits its schema, but only a CSV of DDIs is a file
    (docs/import.md), which no schema can express. The generated text picks the rows'
    digits, so each run still imports something different."""
    digits = "".join(c for c in text if c in "0123456789") or "1"
    rows = [
        f"{7 + i % 2},{digits[:10]}{i},{(digits + str(i))[:10]},{random.choice(COMPANIES)}"
        for i in range(1 + len(text) % 3)
    ]
    return "dialcode,number,virt_exten,company\n" + "".join(r + "\n" for r in rows)


@schemathesis.hook
def map_body(context, body):
    if isinstance(body, str) and context.operation.path.endswith("/import/"):
        return _import_file(body)
    if isinstance(body, dict) and context.operation.path.endswith("/events/read"):
        # A long poll waits up to 30 s when no event comes: the same checks, without the wait.
        wait = body.get("wait")
        if isinstance(wait, int | float) and not isinstance(wait, bool) and 0 <= wait <= 30:
            body["wait"] = 0
    if isinstance(body, dict) and isinstance(body.get("scope"), dict):
        _past_year(body["scope"])
    if isinstance(body, dict):
        for part in ("scope", "values"):
            inner = body.get(part)
            rows = inner if isinstance(inner, list) else [inner]
            for row in rows:
                if isinstance(row, dict):
                    _ddi_length(row)
                    if "company" in row:
                        row["company"] = _existing(row["company"])
    return body
