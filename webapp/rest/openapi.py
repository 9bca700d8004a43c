"""GET /rest/openapi.json: the OpenAPI 3.1 document, generated from the very specifications the
request validation uses (fields.FORMATS, the Kinds' Parts, ops.TOP_LEVEL, the limits of each
service), so the two cannot drift apart.

What a generated client and the /rest/docs page need is here too: tags grouping the
operations, an operationId, summary and example per operation, and a named component schema
for every body and answer (`Ddi`, `PhoneUser`, `Error`, `DdiCountEntry`, ...), never an inline
object a generator would have to name `CreateBodyType0`.

The document is made when it is served: the bounds that depend on today (a report month may
not be in the future; only an ended month can be closed) are today's in REPORT_TIMEZONE, the
same day the validation uses, and `servers` names the address the request reached.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from datetime import date
from typing import Any

from flask import current_app, jsonify, request

from ..errors import ERROR_CODES, RETRY_AFTER_SECONDS
from ..services.billing import month_close, periods
from ..services.billing.reports import ANSWER_KEYS as REPORT_TOTALS
from ..services.billing.reports import MIN_YEAR
from ..services.events import feed, journal
from ..services.fields import FORMATS, MAX_DDI_DIGITS, Part
from ..services.records import crud, ddis, record_query
from ..services.records.kinds import KINDS, Kind
from .blueprint import bp
from .errors import MESSAGES
from .imports import DRY_RUN
from .meta import API_LABEL, package_version
from .ops import TOP_LEVEL

ERRORS = ERROR_CODES

# Tags in the order the /rest/docs page and a generated client's modules present them.
TAGS: list[dict[str, str]] = [
    {
        "name": "records",
        "description": "DDIs and phone users: one set of operations, `type` says which "
        "(`ddi` or `user`). Phone users are the people a company is billed for per day, not "
        "the sign-in accounts of this application.",
    },
    {
        "name": "imports",
        "description": "Bring the DDIs to the states a CSV file lists (docs/import.md).",
    },
    {
        "name": "reports",
        "description": "Billing counts: per company and day, the peak number of DDIs or phone "
        "users active at the same moment, in REPORT_TIMEZONE (docs/reports.md).",
    },
    {
        "name": "month close",
        "description": "Close an ended month so its reports keep their figures; reopen it; "
        "see what changed since (docs/month-close.md).",
    },
    {
        "name": "events",
        "description": "The change events, in id order, for scripts that follow every change "
        "(docs/events.md).",
    },
    {
        "name": "meta",
        "description": "The version, this document and its page; health checks. No "
        "credentials needed.",
    },
]

# The component schema of each field format, and what it is.
FIELD_SCHEMAS = {
    "dialcode": "Dialcode",
    "number": "Number",
    "virt_exten": "Extension",
    "company": "CompanyId",
    "username": "Username",
}
FIELD_DESCRIPTIONS = {
    "dialcode": "Dialcode part of the DDI, 1 to 7 ASCII digits.",
    "number": "Number part of the DDI, 1 to 15 ASCII digits; dialcode and number together at "
    f"most {MAX_DDI_DIGITS} digits.",
    "virt_exten": "Linked extension, 1 to 10 ASCII digits.",
    "company": "Company identifier: 1 to 64 of a-z 0-9 . _ -. In a write it must name an "
    "existing company (400 for a System-Admin, 403 for a Company-Admin).",
    "username": "Phone user's name, 1 to 64 of a-z 0-9 . _ - @, unique within its company.",
}
FIELD_EXAMPLES = {
    "dialcode": "44",
    "number": "2071234567",
    "virt_exten": "100",
    "company": "acme",
    "username": "ana.kim",
}
KIND_SCHEMAS = {"ddi": "Ddi", "user": "PhoneUser"}
KIND_LABELS = {"ddi": "DDIs", "user": "phone users"}
# A record of each type as the examples show it.
EXAMPLE_RECORDS = {
    "ddi": {"dialcode": "44", "number": "2071234567", "virt_exten": "100", "company": "acme"},
    "user": {"username": "ana.kim", "virt_exten": "200", "company": "acme"},
}
REPORT_PATHS = {"ddi": "readDDICount", "user": "readUserCount"}

# The import answer's counts (docs/import.md).
IMPORT_COUNTS = ("created", "updated", "moved", "unchanged")

FUTURE_MONTH = (
    "A month in the future is refused (400): `year` is at most the current year in "
    "REPORT_TIMEZONE and, in that year, `month` at most the current month. This document is "
    "made when it is served, so those bounds are today's."
)
YEAR_NEEDS_MONTH = "A `year` without a `month` is refused (400)."


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional member that may also be null, which the API takes as absent."""
    return {"anyOf": [schema, {"type": "null"}]}


def _success() -> dict[str, Any]:
    return {"const": "success", "description": "Always `success` in a 200 answer."}


def _max_digits(field: str) -> int:
    """The most digits FORMATS allows `field` (its pattern is [0-9]{1,N})."""
    match = re.fullmatch(r"\[0-9\]\{1,(\d+)\}", FORMATS[field][0].pattern)
    assert match, FORMATS[field]
    return int(match[1])


def _ddi_length_rule() -> dict[str, Any]:
    """Dialcode and number together at most MAX_DDI_DIGITS digits, as JSON Schema: with a
    dialcode, one of "dialcode at most k digits and number at most 17 - k" holds. Only
    dialcodes longer than 17 - 15 digits narrow the number."""
    longest_dialcode, longest_number = _max_digits("dialcode"), _max_digits("number")
    free = MAX_DDI_DIGITS - longest_number  # a dialcode this long leaves the number all its digits
    options: list[dict[str, Any]] = [{"properties": {"dialcode": {"maxLength": free}}}]
    options += [
        {
            "properties": {
                "dialcode": {"maxLength": k},
                "number": {"maxLength": MAX_DDI_DIGITS - k},
            }
        }
        for k in range(free + 1, longest_dialcode + 1)
    ]
    return {"dialcode": {"anyOf": options}}


def _object(part: Part, description: str, example: dict[str, Any]) -> dict[str, Any]:
    """The schema of one request object (a `scope` or `values`) the validation checks with
    `part`."""
    schema: dict[str, Any] = {
        "type": "object",
        "description": description,
        "properties": {f: _ref(FIELD_SCHEMAS[f]) for f in part.allowed},
        "additionalProperties": False,
    }
    if part.required:
        schema["required"] = list(part.required)
    if part.at_least_one:
        schema["minProperties"] = 1
    if "dialcode" in part.allowed and "number" in part.allowed:
        schema["dependentSchemas"] = _ddi_length_rule()
    schema["examples"] = [example]
    return schema


def _any_case_trimmed(words: Iterable[str]) -> str:
    """An ECMA pattern for `words` as `value.strip().lower()` reads them: letters in any case,
    Python's white space (not quite ECMA's `\\s`) around. Every such character is below
    U+3001."""
    space = "".join(
        f"\\u{run[0]:04x}" + (f"-\\u{run[-1]:04x}" if len(run) > 1 else "")
        for run in _runs(c for c in range(0x3001) if chr(c).isspace())
    )
    choices = "|".join(
        "".join(f"[{ch.upper()}{ch}]" if ch.isalpha() else re.escape(ch) for ch in word)
        for word in words
    )
    return f"^[{space}]*(?:{choices})[{space}]*$"


def _runs(numbers: Iterable[int]) -> list[list[int]]:
    """Ascending numbers grouped into runs of consecutive ones."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and runs[-1][-1] == n - 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return runs


def _last_month(today: date) -> tuple[int, int]:
    return (today.year, today.month - 1) if today.month > 1 else (today.year - 1, 12)


class Builder:
    """The document for one day: its component schemas, filled in as the paths name them."""

    def __init__(self, today: date):
        self.today = today
        self.schemas: dict[str, Any] = {}
        self.paths: dict[str, Any] = {}
        self.example_year, self.example_month = _last_month(today)

    # --- component schemas --------------------------------------------------------------

    def fields(self) -> None:
        for field, (pattern, _why) in FORMATS.items():
            self.schemas[FIELD_SCHEMAS[field]] = {
                "type": "string",
                "pattern": f"^{pattern.pattern}$",
                "description": FIELD_DESCRIPTIONS[field],
                "examples": [FIELD_EXAMPLES[field]],
            }

    def record_schemas(self, kinds: dict[str, Kind]) -> None:
        """Per record type: the record, the read filter, the scope of an update or delete,
        and the request bodies of create, read, update and delete."""
        changes = next(iter(kinds.values())).update_part
        # One schema serves both types: they may change the same fields (what each calls not
        # editable differs only in the message, and the schema refuses any other field).
        assert all(k.update_part.allowed == changes.allowed for k in kinds.values())
        self.schemas["RecordChanges"] = _object(
            changes,
            "An update's new values: at least one of these. A record's key (a DDI's dialcode "
            "and number, a phone user's username) is not editable.",
            {"virt_exten": "101"},
        )
        for name, kind in kinds.items():
            label, schema = KIND_LABELS[name], KIND_SCHEMAS[name]
            example = EXAMPLE_RECORDS[name]
            self.schemas[schema] = _object(
                kind.create_part, f"One of the {label}, every field given.", example
            )
            self.schemas[f"{schema}Filter"] = _object(
                kind.scope_part,
                f"Which {label} a read returns: each field given is an exact-match filter; "
                "none, every visible one.",
                {"company": example["company"]},
            )
            self.schemas[f"{schema}Scope"] = _object(
                kind.scoped_write_part,
                f"Which {label} an update or delete touches: `company` required, every other "
                "field narrows.",
                {"company": example["company"], "virt_exten": example["virt_exten"]},
            )
            self._record_requests(name, kind)
        self.schemas["DdiKey"] = _object(
            ddis.LINK_SCOPE,
            "The DDI a link names.",
            {"dialcode": "44", "number": "2071234567"},
        )
        self.schemas["DdiLink"] = _object(
            ddis.LINK_VALUES,
            "Where a link puts the DDI: both the extension and the company.",
            {"virt_exten": "200", "company": "globex"},
        )
        self.schemas["LinkDdiRequest"] = self._body(
            "link",
            "ddi",
            {"scope": _ref("DdiKey"), "values": _ref("DdiLink")},
            ["scope", "values"],
            "The body of linkDdi.",
        )
        self.schemas["WriteResult"] = {
            "type": "object",
            "description": "A write's answer: how many rows it created, changed or deleted.",
            "required": ["result", "numrows"],
            "properties": {
                "result": _success(),
                "numrows": {"type": "integer", "minimum": 0},
            },
            "examples": [{"result": "success", "numrows": 1}],
        }
        self.schemas["ReadResult"] = {
            "type": "object",
            "description": "A read's answer: one page of rows, sorted by dialcode and number "
            "(phone users by company and username).",
            "required": ["result", "values", "numrows", "total"],
            "properties": {
                "result": _success(),
                "values": {
                    "type": "array",
                    "items": {"oneOf": [_ref(KIND_SCHEMAS[t]) for t in kinds]},
                },
                "numrows": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Rows in this answer.",
                },
                "total": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Rows matching the filter, on every page.",
                },
            },
            "examples": [
                {"result": "success", "values": [EXAMPLE_RECORDS["ddi"]], "numrows": 1, "total": 1}
            ],
        }

    def _body(
        self,
        op: str,
        kind: str,
        properties: dict[str, Any],
        required: list[str],
        description: str,
    ) -> dict[str, Any]:
        properties = {"type": {"const": kind}, **properties}
        assert set(properties) <= set(TOP_LEVEL[op]), (op, properties)  # the parser's own list
        return {
            "type": "object",
            "description": description,
            "properties": properties,
            "required": ["type", *required],
            "additionalProperties": False,
        }

    def _record_requests(self, name: str, kind: Kind) -> None:
        schema, label = KIND_SCHEMAS[name], KIND_LABELS[name]
        self.schemas[f"Create{schema}Request"] = self._body(
            "create",
            name,
            {
                "values": {
                    "oneOf": [
                        _ref(schema),
                        {
                            "type": "array",
                            "items": _ref(schema),
                            "minItems": 1,
                            "maxItems": crud.MAX_BATCH,
                        },
                    ],
                    "description": f"One record, or up to {crud.MAX_BATCH:,} created all "
                    "or nothing.",
                }
            },
            ["values"],
            f"The body of createRecords for {label}.",
        )
        self.schemas[f"Read{schema}Request"] = self._body(
            "read",
            name,
            {
                "scope": _or_null(_ref(f"{schema}Filter")),
                "limit": _or_null(
                    {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": record_query.MAX_LIMIT,
                        "default": record_query.DEFAULT_LIMIT,
                        "description": "Rows in the page.",
                    }
                ),
                "offset": _or_null(
                    {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": record_query.MAX_OFFSET,
                        "default": 0,
                        "description": "Matching rows skipped before the page.",
                    }
                ),
            },
            [],
            f"The body of readRecords for {label}.",
        )
        self.schemas[f"Update{schema}Request"] = self._body(
            "update",
            name,
            {"scope": _ref(f"{schema}Scope"), "values": _ref("RecordChanges")},
            ["scope", "values"],
            f"The body of updateRecords for {label}.",
        )
        self.schemas[f"Delete{schema}Request"] = self._body(
            "delete",
            name,
            {"scope": _ref(f"{schema}Scope")},
            ["scope"],
            f"The body of deleteRecords for {label}.",
        )

    def month_bounds(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(month, year) schemas of a report month: integers, the year from MIN_YEAR to this
        one."""
        month = {"type": "integer", "minimum": 1, "maximum": 12}
        year = {"type": "integer", "minimum": MIN_YEAR, "maximum": self.today.year}
        return month, year

    def _not_future(self) -> dict[str, Any]:
        """In the current year, a month up to the current one."""
        return {
            "if": {"properties": {"year": {"const": self.today.year}}, "required": ["year"]},
            "then": {"properties": {"month": {"maximum": self.today.month}}},
        }

    def report_schemas(self) -> None:
        month, year = self.month_bounds()
        example_scope = {
            "company": ["acme"],
            "month": self.example_month,
            "year": self.example_year,
        }
        self.schemas["ReportScope"] = {
            "type": "object",
            "description": "Which companies and month a report covers. No month: the current "
            "month to date; a month without a year: its most recent occurrence that is not in "
            f"the future. {YEAR_NEEDS_MONTH} {FUTURE_MONTH}",
            "additionalProperties": False,
            "properties": {
                "company": _or_null(
                    {
                        "type": "array",
                        "items": _ref("CompanyId"),
                        "description": "The companies (default: every company the caller may "
                        "see); unknown or invisible ones are left out.",
                    }
                ),
                "month": _or_null(month),
                "year": _or_null(year),
            },
            # A year names a month of that year: it needs the month, and may not be in the future.
            "if": {"properties": {"year": {"type": "integer"}}, "required": ["year"]},
            "then": {
                "properties": {"month": {"type": "integer"}},
                "required": ["month"],
                **self._not_future(),
            },
            "examples": [example_scope],
        }
        self.schemas["ReportRequest"] = {
            "type": "object",
            "description": "The body of a report: `type` is always `cdr`.",
            "required": ["type"],
            "additionalProperties": False,
            "properties": {"type": {"const": "cdr"}, "scope": _or_null(_ref("ReportScope"))},
        }
        self.schemas["Period"] = {
            "type": "object",
            "description": "The month answered, and whether it is closed (docs/month-close.md): "
            "a closed month's figures are the ones stored at its close.",
            "required": ["year", "month", "closed"],
            "properties": {
                "year": {"type": "integer"},
                "month": {"type": "integer", "minimum": 1, "maximum": 12},
                "closed": {"type": "boolean"},
                "version": {"type": "integer", "minimum": 1, "description": "While closed."},
                "closed_at": {
                    "type": "string",
                    "format": "date-time",
                    "description": "While closed.",
                },
                "closed_by": {"type": "string", "description": "While closed."},
            },
            "examples": [{"year": self.example_year, "month": self.example_month, "closed": False}],
        }
        for kind, name in (("ddi", "Ddi"), ("user", "User")):
            per_day, for_month = REPORT_TOTALS[kind]
            self.schemas[f"{name}CountEntry"] = {
                "type": "object",
                "description": f"One company's {KIND_LABELS[kind]} for the month: each day's "
                "peak, their sum and that sum per day.",
                "required": ["name", "days", "dates", per_day, for_month],
                "properties": {
                    "name": {"type": "string", "description": "The company's name."},
                    "days": {"type": "integer", "minimum": 1, "description": "Days counted."},
                    "dates": {
                        "type": "object",
                        "description": "Every day of the period (YYYY-MM-DD), in order: its peak.",
                        "additionalProperties": {"type": "integer", "minimum": 0},
                    },
                    per_day: {
                        "type": "number",
                        "description": "The month total / days, rounded half-up to 4 places.",
                    },
                    for_month: {"type": "integer", "minimum": 0},
                },
                "examples": [self._entry_example(kind)],
            }
            self.schemas[f"{name}CountReport"] = {
                "type": "object",
                "description": f"The {KIND_LABELS[kind]} report: an entry per company.",
                "required": ["result", "period", "values"],
                "properties": {
                    "result": _success(),
                    "period": _ref("Period"),
                    "values": {
                        "type": "object",
                        "description": "Company identifier: its entry.",
                        "additionalProperties": _ref(f"{name}CountEntry"),
                    },
                },
            }

    def _entry_example(self, kind: str) -> dict[str, Any]:
        per_day, for_month = REPORT_TOTALS[kind]
        days = calendar.monthrange(self.example_year, self.example_month)[1]
        dates = {
            date(self.example_year, self.example_month, d).isoformat(): 100 + d % 3
            for d in range(1, days + 1)
        }
        total = sum(dates.values())
        return {
            "name": "Acme Telecom Ltd",
            "days": days,
            "dates": dates,
            per_day: round(total / days, 4),
            for_month: total,
        }

    def month_close_schemas(self) -> None:
        month, year = self.month_bounds()
        today = self.today
        closable: dict[str, Any] = {
            "type": "object",
            "description": "An ended month: the current month (to date) and future ones cannot "
            "be closed (400). Without a year, the month's most recent occurrence that is not "
            "in the future, so not the current month. This document is made when it is "
            "served, so these bounds are today's in REPORT_TIMEZONE.",
            "additionalProperties": False,
            "required": ["month"],
            "properties": {"month": month, "year": _or_null(year)},
            "examples": [{"month": self.example_month, "year": self.example_year}],
        }
        if today.month == 1:  # nothing of this year has ended
            closable["properties"]["year"] = _or_null({**year, "maximum": today.year - 1})
            closable["if"] = {"properties": {"year": {"type": "integer"}}, "required": ["year"]}
            closable["else"] = {"properties": {"month": {"not": {"const": today.month}}}}
        else:
            closable["if"] = {"properties": {"year": {"type": "integer"}}, "required": ["year"]}
            closable["then"] = {
                "if": {"properties": {"year": {"const": today.year}}},
                "then": {"properties": {"month": {"maximum": today.month - 1}}},
            }
            closable["else"] = {"properties": {"month": {"not": {"const": today.month}}}}
        self.schemas["ClosableMonth"] = closable
        self.schemas["Month"] = {
            "type": "object",
            "description": "A month: without a year, its most recent occurrence that is not in "
            f"the future. {FUTURE_MONTH}",
            "additionalProperties": False,
            "required": ["month"],
            "properties": {"month": month, "year": _or_null(year)},
            **self._not_future(),
            "examples": [{"month": self.example_month, "year": self.example_year}],
        }
        self.schemas["CloseMonthRequest"] = {
            "type": "object",
            "description": "The body of closeMonth.",
            "required": ["type", "scope"],
            "additionalProperties": False,
            "properties": {"type": {"const": "cdr"}, "scope": _ref("ClosableMonth")},
        }
        self.schemas["ReopenMonthRequest"] = {
            "type": "object",
            "description": "The body of reopenMonth.",
            "required": ["type", "scope", "reason"],
            "additionalProperties": False,
            "properties": {
                "type": {"const": "cdr"},
                "scope": _ref("Month"),
                "reason": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 500,
                    "pattern": month_close.REASON_PATTERN,
                    "description": "Why the month is reopened: not only white space, no "
                    "control character but line breaks and tabs.",
                },
            },
        }
        self.schemas["PeriodResult"] = {
            "type": "object",
            "description": "The month closed or reopened, as it is now.",
            "required": ["result", "period"],
            "properties": {"result": _success(), "period": _ref("Period")},
        }
        self.schemas["FigurePair"] = {
            "type": "object",
            "description": "A figure as stored at the close, and as the history gives it now.",
            "required": ["closed", "now"],
            "properties": {"closed": {"type": "integer"}, "now": {"type": "integer"}},
            "examples": [{"closed": 5, "now": 6}],
        }
        for kind, name in (("ddi", "Ddi"), ("user", "User")):
            _, for_month = REPORT_TOTALS[kind]
            self.schemas[f"{name}Adjustment"] = {
                "type": "object",
                "description": f"Where the {KIND_LABELS[kind]} figures differ: the days, and "
                "the month total.",
                "required": ["dates", for_month],
                "properties": {
                    "dates": {
                        "type": "object",
                        "description": "Only the days whose figure differs.",
                        "additionalProperties": _ref("FigurePair"),
                    },
                    for_month: _ref("FigurePair"),
                },
            }
        self.schemas["CompanyAdjustments"] = {
            "type": "object",
            "description": "One company's differences, by report (only those that differ).",
            "additionalProperties": False,
            "properties": {"ddi": _ref("DdiAdjustment"), "user": _ref("UserAdjustment")},
        }
        self.schemas["Adjustments"] = {
            "type": "object",
            "description": "readAdjustments' answer: only the companies whose figures differ.",
            "required": ["result", "period", "values"],
            "properties": {
                "result": _success(),
                "period": _ref("Period"),
                "values": {
                    "type": "object",
                    "additionalProperties": _ref("CompanyAdjustments"),
                },
            },
        }

    def event_schemas(self) -> None:
        self.schemas["EventRecord"] = {
            "type": "object",
            "description": "A record's fields as they were (`before`) or became (`after`).",
            "additionalProperties": {"type": ["string", "null"]},
        }
        self.schemas["EventType"] = {
            "enum": list(journal.TYPES),
            "description": "What happened to which kind of record.",
        }
        self.schemas["Event"] = {
            "type": "object",
            "description": "One change: the record before and after it (null: not there).",
            "required": ["id", "at", "type", "actor", "company", "key", "before", "after"],
            "properties": {
                "id": {"type": "integer", "minimum": 1},
                "at": {"type": "string", "format": "date-time"},
                "type": _ref("EventType"),
                "actor": {"type": "string", "description": "The account that made it."},
                "company": _or_null(
                    {"type": "string", "description": "Null where the reader may not see it."}
                ),
                "key": {
                    "type": "object",
                    "description": "The record's key fields.",
                    "additionalProperties": {"type": ["string", "null"]},
                },
                "before": _or_null(_ref("EventRecord")),
                "after": _or_null(_ref("EventRecord")),
            },
        }
        self.schemas["EventScope"] = {
            "type": "object",
            "description": "Only the events of these companies and types.",
            "additionalProperties": False,
            "properties": {
                "company": {"type": "array", "items": _ref("CompanyId")},
                "type": {"type": "array", "items": _ref("EventType")},
            },
        }
        self.schemas["ReadEventsRequest"] = {
            "type": "object",
            "description": "The body of readEvents: every member optional.",
            "additionalProperties": False,
            "properties": {
                "after": _or_null(
                    {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": feed.MAX_ID,
                        "description": "The last id already read (default 0).",
                    }
                ),
                "limit": _or_null(
                    {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": feed.MAX_LIMIT,
                        "default": feed.DEFAULT_LIMIT,
                    }
                ),
                "wait": _or_null(
                    {
                        "type": "number",
                        "minimum": 0,
                        "maximum": feed.MAX_WAIT,
                        "description": "Seconds to wait for an event when none is there yet.",
                    }
                ),
                "scope": _or_null(_ref("EventScope")),
            },
        }
        self.schemas["Events"] = {
            "type": "object",
            "description": "readEvents' answer; ask again with `after` set to `last`.",
            "required": ["result", "values", "numrows", "last"],
            "properties": {
                "result": _success(),
                "values": {"type": "array", "items": _ref("Event")},
                "numrows": {"type": "integer", "minimum": 0},
                "last": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "The id of the last event returned, or `after`.",
                },
            },
        }

    def other_schemas(self) -> None:
        counts = {f: {"type": "integer", "minimum": 0} for f in IMPORT_COUNTS}
        self.schemas["ImportResult"] = {
            "type": "object",
            "description": "How many DDIs the import created, updated, moved to another "
            "company, and left alone.",
            "required": ["result", *IMPORT_COUNTS, "dry_run"],
            "properties": {"result": _success(), **counts, "dry_run": {"type": "boolean"}},
        }
        self.schemas["Version"] = {
            "type": "object",
            "required": ["result", "version", "api"],
            "properties": {
                "result": _success(),
                "version": {"const": API_LABEL},
                "api": {"type": "string", "description": "The package version."},
            },
        }
        self.schemas["OpenApiDocument"] = {
            "type": "object",
            "description": "An OpenAPI 3.1 document: this one.",
            "required": ["openapi", "info", "paths"],
        }
        self.schemas["Liveness"] = {
            "type": "object",
            "description": "The process answers.",
            "required": ["status"],
            "properties": {"status": {"const": "ok"}},
        }
        self.schemas["Readiness"] = {
            "type": "object",
            "description": "Whether each dependency a request needs answers: the database and, "
            "unless RATELIMIT_STORAGE_URI is memory://, the rate-limit store "
            "(`rate_limit_storage`). Why one failed is logged, not answered.",
            "required": ["status", "checks"],
            "properties": {
                "status": {"enum": ["ok", "unavailable"]},
                "checks": {
                    "type": "object",
                    "required": ["database"],
                    "additionalProperties": {"enum": ["ok", "failed"]},
                },
            },
        }
        self.schemas["ErrorDetail"] = {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string", "enum": sorted(set(ERRORS.values()))},
                "message": {"type": "string", "description": "One sentence."},
                "fields": {
                    "type": "object",
                    "description": "Only when a field is at fault: each faulty field (rows of "
                    "a batch as `values[3].number`) and why.",
                    "additionalProperties": {"type": "string"},
                },
            },
        }
        self.schemas["Error"] = {
            "type": "object",
            "description": "Every error answer, whatever the status; never a traceback.",
            "required": ["result", "error"],
            "properties": {"result": {"const": "error"}, "error": _ref("ErrorDetail")},
            "examples": [_error_example(400)],
        }

    # --- paths --------------------------------------------------------------------------

    def operation(
        self,
        path: str,
        method: str,
        operation_id: str,
        tag: str,
        summary: str,
        description: str,
        answer: str,
        answer_example: Any,
        statuses: list[int],
        body: dict[str, Any] | None = None,
        examples: dict[str, Any] | None = None,
        parameters: list[dict[str, Any]] | None = None,
        media_type: str = "application/json",
        public: bool = False,
    ) -> None:
        operation: dict[str, Any] = {
            "operationId": operation_id,
            "tags": [tag],
            "summary": summary,
            "description": description,
        }
        if parameters:
            operation["parameters"] = parameters
        if body is not None:
            content: dict[str, Any] = {"schema": body}
            if examples:
                content["examples"] = {
                    name: {"summary": name, "value": value} for name, value in examples.items()
                }
            operation["requestBody"] = {"required": True, "content": {media_type: content}}
        ok: dict[str, Any] = {"schema": _ref(answer)}
        if answer_example is not None:
            ok["example"] = answer_example
        operation["responses"] = {
            "200": {"description": "Success.", "content": {"application/json": ok}},
            **_errors(*statuses),
        }
        if public:
            operation["security"] = []
        self.paths.setdefault(path, {})[method] = operation


def _error_example(status: int) -> dict[str, Any]:
    if status == 400:
        return {
            "result": "error",
            "error": {
                "code": ERRORS[400],
                "message": "Field 'number' must be 1 to 15 digits.",
                "fields": {"number": "must be 1 to 15 digits"},
            },
        }
    message = MESSAGES.get(status, "The service is unavailable; try again shortly.")
    return {"result": "error", "error": {"code": ERRORS[status], "message": message}}


# When each error status answers, in the words of docs/api.md#errors.
ERROR_WHEN = {
    400: "The body or a field is not valid; `fields` says which and why.",
    401: "Credentials are missing or not valid.",
    403: "Authenticated, but this account may not do this (or a cookie-authenticated POST "
    "without a valid X-CSRFToken).",
    404: "The record named does not exist or is not visible to this account.",
    409: "This conflicts with what is stored.",
    413: "The body is too large.",
    415: "The body is not declared with the media type this operation takes.",
    429: "Over the request limit; Retry-After says when to try again.",
    503: "The database does not answer; Retry-After says when to try again.",
}


def _errors(*statuses: int) -> dict[str, Any]:
    answers: dict[str, Any] = {}
    for status in sorted(s for s in statuses if s in ERRORS):
        answer: dict[str, Any] = {
            "description": f"`{ERRORS[status]}`: {ERROR_WHEN[status]}",
            "content": {
                "application/json": {"schema": _ref("Error"), "example": _error_example(status)}
            },
        }
        if status in (429, 503):
            answer["headers"] = {
                "Retry-After": {
                    "description": "Seconds to wait before trying again"
                    + (f" ({RETRY_AFTER_SECONDS} for a 503)." if status == 503 else "."),
                    "schema": {"type": "integer", "minimum": 0},
                }
            }
        answers[str(status)] = answer
    return answers


# Every call with credentials can meet these.
AUTHENTICATED = [401, 403, 429, 503]
JSON_BODY = [400, 413, 415]

# Who may call each records operation (docs/api.md#roles).
RECORD_OPERATIONS = {
    "create": (
        "createRecords",
        "Create DDIs or phone users",
        "System-Admin; phone users also their Company-Admin. `values` is one record or an "
        f"array of up to {crud.MAX_BATCH:,} created all or nothing: a duplicate anywhere is a "
        "409 and nothing is created.",
    ),
    "read": (
        "readRecords",
        "Read DDIs or phone users",
        "System-Admin; a Company-Admin reads its companies' records (others are silently left "
        f"out). `limit` 0 to {record_query.MAX_LIMIT:,} (default "
        f"{record_query.DEFAULT_LIMIT:,}), `offset` skips matching rows.",
    ),
    "update": (
        "updateRecords",
        "Update DDIs or phone users",
        "System-Admin; a Company-Admin within its companies. `numrows` counts the rows whose "
        "values actually changed.",
    ),
    "link": (
        "linkDdi",
        "Link a DDI to an extension and company",
        "System-Admin; a Company-Admin within its companies; DDIs only. A DDI that does not "
        "exist or is not visible is a 404. `numrows` is 1.",
    ),
    "delete": (
        "deleteRecords",
        "Delete DDIs or phone users",
        "System-Admin; phone users also their Company-Admin. No match is success with `numrows` 0.",
    ),
}


def _record_paths(b: Builder, kinds: dict[str, Kind]) -> None:
    ddi, user = EXAMPLE_RECORDS["ddi"], EXAMPLE_RECORDS["user"]
    bodies: dict[str, dict[str, Any]] = {
        "create": {
            "one DDI": {"type": "ddi", "values": ddi},
            "two phone users": {
                "type": "user",
                "values": [user, {**user, "username": "bo.lee", "virt_exten": "201"}],
            },
        },
        "read": {
            "a page of acme's DDIs": {
                "type": "ddi",
                "scope": {"company": "acme"},
                "limit": 2,
                "offset": 0,
            }
        },
        "update": {
            "move acme's extension 100 to 101": {
                "type": "ddi",
                "scope": {"company": "acme", "virt_exten": "100"},
                "values": {"virt_exten": "101"},
            }
        },
        "link": {
            "link a DDI to globex": {
                "type": "ddi",
                "scope": {"dialcode": "44", "number": "2071234567"},
                "values": {"virt_exten": "200", "company": "globex"},
            }
        },
        "delete": {
            "delete a phone user": {
                "type": "user",
                "scope": {"company": "acme", "username": "bo.lee"},
            }
        },
    }
    for op, (operation_id, summary, description) in RECORD_OPERATIONS.items():
        types = ["ddi"] if op == "link" else list(kinds)
        names = {t: f"{op.title()}{KIND_SCHEMAS[t]}Request" for t in types}
        if len(types) == 1:
            body: dict[str, Any] = _ref(names[types[0]])
        else:
            body = {
                "oneOf": [_ref(n) for n in names.values()],
                "discriminator": {
                    "propertyName": "type",
                    "mapping": {t: f"#/components/schemas/{n}" for t, n in names.items()},
                },
            }
        extra = {"create": [409], "link": [404], "update": [409]}.get(op, [])
        b.operation(
            f"/rest/ops/{op}/",
            "post",
            operation_id,
            "records",
            summary,
            description,
            "ReadResult" if op == "read" else "WriteResult",
            None,  # the answer schemas carry their own examples
            [*JSON_BODY, *AUTHENTICATED, *extra],
            body=body,
            examples=bodies[op],
        )


REPORT_READERS = (
    "System-Admin and Billing Call-Summary see every company; Billing / Call Reporting only "
    "the companies it is granted (others are silently left out); anyone else gets 403."
)


def _report_paths(b: Builder) -> None:
    month, year = b.month_bounds()
    scope = {"company": ["acme"], "month": b.example_month, "year": b.example_year}
    for kind, path in REPORT_PATHS.items():
        name = "Ddi" if kind == "ddi" else "User"
        label = KIND_LABELS[kind]
        answer_example = {
            "result": "success",
            "period": {"year": b.example_year, "month": b.example_month, "closed": False},
            "values": {"acme": b._entry_example(kind)},
        }
        b.operation(
            f"/rest/call/{path}",
            "post",
            f"read{name}Count",
            "reports",
            f"The {label} report for a month",
            f"{REPORT_READERS} Every day of the period is listed; a day's value is its peak.",
            f"{name}CountReport",
            answer_example,
            [*JSON_BODY, *AUTHENTICATED],
            body=_ref("ReportRequest"),
            examples={"acme, one month": {"type": "cdr", "scope": scope}},
        )
        b.operation(
            f"/rest/call/{path}",
            "get",
            f"read{name}CountByQuery",
            "reports",
            f"The {label} report for a month, asked with query parameters",
            f"The same report as the POST, with `company` (repeatable), `month` and `year` "
            f"in the query. {REPORT_READERS} {YEAR_NEEDS_MONTH} {FUTURE_MONTH}",
            f"{name}CountReport",
            answer_example,
            [400, *AUTHENTICATED],
            parameters=[
                {
                    "name": "company",
                    "in": "query",
                    "description": "A company to report on; repeat it for several "
                    "(default: every company the caller may see).",
                    "schema": {"type": "array", "items": _ref("CompanyId")},
                    "style": "form",
                    "explode": True,
                    "example": ["acme"],
                },
                {
                    "name": "month",
                    "in": "query",
                    "description": "1 to 12 (default: the current month, to date).",
                    "schema": month,
                    "example": b.example_month,
                },
                {
                    "name": "year",
                    "in": "query",
                    "description": f"Only with `month`. {FUTURE_MONTH}",
                    "schema": year,
                    "example": b.example_year,
                },
            ],
        )


def _month_close_paths(b: Builder) -> None:
    """closeMonth, reopenMonth and readAdjustments (docs/month-close.md)."""
    period = {"year": b.example_year, "month": b.example_month}
    closed = {
        **period,
        "closed": True,
        "version": 1,
        "closed_at": f"{date(b.today.year, b.today.month, 1).isoformat()}T08:00:00Z",
        "closed_by": "admin",
    }
    b.operation(
        "/rest/call/closeMonth",
        "post",
        "closeMonth",
        "month close",
        "Close an ended month: store both reports as they are",
        "System-Admin and Billing Call-Summary. Closing a closed month is a 409.",
        "PeriodResult",
        {"result": "success", "period": closed},
        [*JSON_BODY, *AUTHENTICATED, 409],
        body=_ref("CloseMonthRequest"),
        examples={"last month": {"type": "cdr", "scope": period}},
    )
    b.operation(
        "/rest/call/reopenMonth",
        "post",
        "reopenMonth",
        "month close",
        "Reopen a closed month, with a reason",
        "System-Admin. A month that is not closed is a 409; its next close is the next version.",
        "PeriodResult",
        {"result": "success", "period": {**period, "closed": False}},
        [*JSON_BODY, *AUTHENTICATED, 409],
        body=_ref("ReopenMonthRequest"),
        examples={
            "late records": {"type": "cdr", "scope": period, "reason": "late CDRs of the 3rd"}
        },
    )
    b.operation(
        "/rest/call/readAdjustments",
        "post",
        "readAdjustments",
        "month close",
        "Where a closed month's figures differ from the history now",
        f"{REPORT_READERS} A month that is not closed is a 409 (so is the current month, the "
        "default); `values` is empty while the history still gives the closed figures.",
        "Adjustments",
        {
            "result": "success",
            "period": closed,
            "values": {
                "acme": {
                    "ddi": {
                        "dates": {
                            date(b.example_year, b.example_month, 3).isoformat(): {
                                "closed": 5,
                                "now": 6,
                            }
                        },
                        REPORT_TOTALS["ddi"][1]: {"closed": 150, "now": 151},
                    }
                }
            },
        },
        [*JSON_BODY, *AUTHENTICATED, 409],
        body=_ref("ReportRequest"),
        examples={"last month": {"type": "cdr", "scope": period}},
    )


def _event_paths(b: Builder) -> None:
    """POST /rest/events/read (docs/events.md)."""
    before = {**EXAMPLE_RECORDS["ddi"]}
    b.operation(
        "/rest/events/read",
        "post",
        "readEvents",
        "events",
        "The change events after an id, in id order",
        "System-Admin; a Company-Admin reads its companies' events. With none after `after` "
        f"yet, the answer waits up to `wait` seconds (at most {feed.MAX_WAIT}) for one.",
        "Events",
        {
            "result": "success",
            "values": [
                {
                    "id": 7,
                    "at": "2026-11-24T09:12:03Z",
                    "type": "ddi.updated",
                    "actor": "admin",
                    "company": "acme",
                    "key": {"dialcode": before["dialcode"], "number": before["number"]},
                    "before": before,
                    "after": {**before, "virt_exten": "101"},
                }
            ],
            "numrows": 1,
            "last": 7,
        },
        [*JSON_BODY, *AUTHENTICATED],
        body=_ref("ReadEventsRequest"),
        examples={
            "updates after event 6, waiting up to 30 s": {
                "after": 6,
                "limit": 100,
                "scope": {"type": ["ddi.updated"]},
                "wait": 30,
            }
        },
    )


def _import_path(b: Builder) -> None:
    b.operation(
        "/rest/ops/import/",
        "post",
        "importDdis",
        "imports",
        "Bring DDIs to the states a CSV lists",
        "System-Admin. The whole file is checked first and applied all or nothing; a bad row "
        "is a 400 whose `fields` name its line. `?dry_run=1` only counts.",
        "ImportResult",
        {
            "result": "success",
            "created": 1,
            "updated": 1,
            "moved": 1,
            "unchanged": 0,
            "dry_run": True,
        },
        [*JSON_BODY, *AUTHENTICATED, 409],
        # The file's bytes (UTF-8, a byte order mark allowed): `format: binary` is how
        # generators (openapi-python-client among them) know to send a file as it is.
        body={
            "type": "string",
            "format": "binary",
            "contentMediaType": "text/csv",
            "description": "Header dialcode,number,virt_exten,company; a row per DDI as it "
            "should be; up to 1,000,000 rows and 64 MiB.",
        },
        examples={
            "two DDIs": "dialcode,number,virt_exten,company\n"
            "44,2071234567,100,globex\n44,2071234599,7,acme\n"
        },
        parameters=[
            {
                "name": "dry_run",
                "in": "query",
                "description": "1 (or true): count only, write nothing. 0 (or false, the "
                "default): apply. Letters in any case; white space around the value is "
                "ignored.",
                "schema": {"type": "string", "pattern": _any_case_trimmed(DRY_RUN)},
                "example": "1",
            }
        ],
        media_type="text/csv",
    )


def _meta_paths(b: Builder) -> None:
    b.operation(
        "/rest/version",
        "get",
        "getVersion",
        "meta",
        "The API label and the package version",
        "No credentials needed.",
        "Version",
        {"result": "success", "version": API_LABEL, "api": "0.1.0"},
        [429],
        public=True,
    )
    b.operation(
        "/rest/openapi.json",
        "get",
        "getOpenapi",
        "meta",
        "This document",
        "No credentials needed. Its page for people is /rest/docs.",
        "OpenApiDocument",
        None,
        [429],
        public=True,
    )
    b.paths["/rest/docs"] = {
        "get": {
            "operationId": "getApiDocs",
            "tags": ["meta"],
            "summary": "This document as a page for people",
            "description": "No credentials needed, like the document itself.",
            "security": [],
            "responses": {
                "200": {"description": "An HTML page.", "content": {"text/html": {}}},
                **_errors(429),
            },
        }
    }
    b.paths["/healthz"] = {
        "get": {
            "operationId": "getLiveness",
            "tags": ["meta"],
            "summary": "Liveness: the process answers",
            "description": "No credentials needed. 200 whenever the process answers; it asks "
            "neither the database nor any other service, so an outage never gets healthy "
            "processes restarted.",
            "security": [],
            "responses": _ok("Liveness", {"status": "ok"}),
        }
    }
    ready: dict[str, Any] = {
        "status": "ok",
        "checks": {"database": "ok", "rate_limit_storage": "ok"},
    }
    b.paths["/readyz"] = {
        "get": {
            "operationId": "getReadiness",
            "tags": ["meta"],
            "summary": "Readiness: the database and the rate-limit store answer",
            "description": "No credentials needed. What a load balancer asks before sending "
            "requests to this process.",
            "security": [],
            "responses": {
                **_ok("Readiness", ready),
                "503": {
                    "description": "A dependency does not answer; `checks` says which.",
                    "content": {
                        "application/json": {
                            "schema": _ref("Readiness"),
                            "example": {
                                "status": "unavailable",
                                "checks": {**ready["checks"], "database": "failed"},
                            },
                        }
                    },
                },
            },
        }
    }


def _ok(schema: str, example: Any) -> dict[str, Any]:
    return {
        "200": {
            "description": "Success.",
            "content": {"application/json": {"schema": _ref(schema), "example": example}},
        }
    }


def document(today: date, server: str) -> dict[str, Any]:
    """The OpenAPI document as of `today` (in REPORT_TIMEZONE), for the app at `server`.

    Guarantees: every body the validation accepts fits its schema and every body it refuses
    does not, except where JSON Schema cannot say it (then the description does: a report's
    `year` without `month` in a query string, a company that must exist); each operation has
    an operationId, one tag, a summary and an example of its request and answer; every body
    and answer schema is a named component."""
    b = Builder(today)
    b.fields()
    kinds = KINDS
    b.record_schemas(kinds)
    b.report_schemas()
    b.month_close_schemas()
    b.event_schemas()
    b.other_schemas()
    _record_paths(b, kinds)
    _import_path(b)
    _report_paths(b)
    _month_close_paths(b)
    _event_paths(b)
    _meta_paths(b)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "telephony-admin",
            "version": API_LABEL,
            "x-package-version": package_version(),
            "description": "DDI administration and billing counts. Every answer is JSON; "
            "errors always use the `Error` envelope. Send `Authorization: Bearer <token>` "
            "(a token from /account/tokens or `flask --app app tokens create`); a browser "
            "session cookie works too, and then every POST needs `X-CSRFToken`.",
        },
        "servers": [{"url": server, "description": "This server, as the request reached it."}],
        "tags": TAGS,
        "security": [{"bearer": []}, {"session": []}],
        "components": {
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API token from /account/tokens or "
                    "`flask --app app tokens create`.",
                },
                "session": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": "session",
                    "description": "A browser session; every POST then needs X-CSRFToken.",
                },
            },
            "schemas": b.schemas,
        },
        "paths": b.paths,
    }


def served_document() -> dict[str, Any]:
    """The document for this request: today in REPORT_TIMEZONE, this server's address."""
    today = periods.today_in(periods.zone(current_app.config["REPORT_TIMEZONE"]))
    return document(today, request.url_root.rstrip("/"))


@bp.get("/openapi.json")
def openapi_json():
    return jsonify(served_document())
