"""GET /rest/openapi.json: the OpenAPI 3.1 document. Pydantic generates its schemas from the
very models the request validation uses (the services' models, the bodies of ops.py) and from
the answers' models below; OPERATIONS names what each operation takes and answers.

It reads well to a generator and to the /rest/docs page: tags, an operationId, summary and
example per operation, a named component for every body and answer. It is made when served:
the bounds that depend on today (a report month may not be in the future; only an ended month
can be closed) are today's in REPORT_TIMEZONE, as the validation's, and `servers` names the
address the request reached.
"""

import calendar
import copy
import re
from datetime import date, datetime, timedelta
from functools import cache
from typing import Annotated, Any, Literal, NotRequired

from flask import current_app, jsonify, request
from pydantic import ConfigDict, Field, TypeAdapter, WithJsonSchema, with_config
from typing_extensions import TypeAliasType, TypedDict

from ..errors import ERROR_CODES, FINER_CODES, RETRY_AFTER_SECONDS
from ..services.billing import periods
from ..services.billing.reports import ANSWER_KEYS, FUTURE_MONTH, YEAR_NEEDS_MONTH
from ..services.events import feed
from ..services.fields import MAX_DDI_DIGITS
from ..services.numbers import allocate, read, requests, reserving, stock
from ..services.records import crud, record_query
from ..services.records.kinds import KINDS
from .blueprint import bp
from .errors import MESSAGES
from .imports import DRY_RUN
from .meta import API_LABEL, package_version
from .ops import BODIES, CLOSE, REOPEN, REPORT

MONTH = {"month": 10, "year": 2025}  # the examples' month: an ended one
DDI = {"dialcode": "44", "number": "2071234567", "virt_exten": "100", "company": "acme"}
USER = {"username": "ana.kim", "virt_exten": "200", "company": "acme"}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _examples(*examples: Any) -> ConfigDict:
    return ConfigDict(json_schema_extra={"examples": list(examples)})


def _entry(kind: str) -> dict[str, Any]:
    """An example of a company's report entry for the examples' month."""
    days = calendar.monthrange(MONTH["year"], MONTH["month"])[1]
    dates = {
        date(MONTH["year"], MONTH["month"], d).isoformat(): 100 + d % 3 for d in range(1, days + 1)
    }
    total = sum(dates.values())
    per_day, for_month = ANSWER_KEYS[kind]
    return {
        "name": "Acme Telecom Ltd",
        "days": days,
        "dates": dates,
        per_day: round(total / days, 4),
        for_month: total,
    }


def _error(status: int) -> dict[str, Any]:
    """An example of the error answer with `status`."""
    if status == 400:
        why = "must be 1 to 15 digits"
        detail = {"message": f"Field 'number' {why}.", "fields": {"number": why}}
    else:
        detail = {"message": MESSAGES.get(status, "The service is unavailable; try again shortly.")}
    return {"result": "error", "error": {"code": ERROR_CODES[status], **detail}}


# --- the answers ------------------------------------------------------------------------------

Success = Annotated[Literal["success"], Field(description="Always `success` in a 200 answer.")]
Count = Annotated[int, Field(ge=0)]
OPEN = {**MONTH, "closed": False}
CLOSED = {
    **MONTH,
    "closed": True,
    "version": 1,
    "closed_at": "2025-11-01T08:00:00Z",
    "closed_by": "admin",
}


@with_config(_examples({"result": "success", "numrows": 1}))
class WriteResult(TypedDict):
    """A write's answer: how many rows it created, changed or deleted."""

    result: Success
    numrows: Count


@with_config(_examples({"result": "success", "values": [DDI], "numrows": 1, "total": 1}))
class ReadResult(TypedDict):
    """A read's answer: one page of rows, sorted by dialcode and number (phone users by company
    and username)."""

    result: Success
    values: Annotated[
        list[Any],
        WithJsonSchema(
            {
                "type": "array",
                "items": {"oneOf": [_ref(k.answer_part.name) for k in KINDS.values()]},
            }
        ),
    ]
    numrows: Annotated[int, Field(ge=0, description="Rows in this answer.")]
    total: Annotated[int, Field(ge=0, description="Rows matching the filter, on every page.")]


@with_config(_examples(OPEN))
class Period(TypedDict):
    """The month answered, and whether it is closed (docs/month-close.md): a closed month's
    figures are the ones stored at its close."""

    year: int
    month: Annotated[int, Field(ge=1, le=12)]
    closed: bool
    version: NotRequired[Annotated[int, Field(ge=1, description="While closed.")]]
    closed_at: NotRequired[Annotated[datetime, Field(description="While closed.")]]
    closed_by: NotRequired[Annotated[str, Field(description="While closed.")]]


class CountEntry(TypedDict):
    name: Annotated[str, Field(description="The company's name.")]
    days: Annotated[int, Field(ge=1, description="Days counted.")]
    dates: Annotated[
        dict[str, Count],
        Field(description="Every day of the period (YYYY-MM-DD), in order: its peak."),
    ]


PerDay = Annotated[float, Field(description="The month total / days, rounded half-up to 4 places.")]


@with_config(_examples(_entry("ddi")))
class DdiCountEntry(CountEntry):
    """One company's DDIs for the month: each day's peak, their sum and that sum per day."""

    billableDDIDaysPerDay: PerDay
    billableDDIDaysForMonth: Count


@with_config(_examples(_entry("user")))
class UserCountEntry(CountEntry):
    """One company's phone users for the month: each day's peak, their sum and that sum per
    day."""

    billableUserDaysPerDay: PerDay
    billableUserDaysForMonth: Count


Entries = Field(description="Company identifier: its entry.")


@with_config(_examples({"result": "success", "period": OPEN, "values": {"acme": _entry("ddi")}}))
class DdiCountReport(TypedDict):
    """The DDIs report: an entry per company."""

    result: Success
    period: Period
    values: Annotated[dict[str, DdiCountEntry], Entries]


@with_config(_examples({"result": "success", "period": OPEN, "values": {"acme": _entry("user")}}))
class UserCountReport(TypedDict):
    """The phone users report: an entry per company."""

    result: Success
    period: Period
    values: Annotated[dict[str, UserCountEntry], Entries]


@with_config(_examples({"result": "success", "period": CLOSED}))
class PeriodResult(TypedDict):
    """The month closed or reopened, as it is now."""

    result: Success
    period: Period


@with_config(_examples({"closed": 5, "now": 6}))
class FigurePair(TypedDict):
    """A figure as stored at the close, and as the history gives it now."""

    closed: int
    now: int


Differing = Annotated[
    dict[str, FigurePair], Field(description="Only the days whose figure differs.")
]


class DdiAdjustment(TypedDict):
    """Where the DDIs figures differ: the days, and the month total."""

    dates: Differing
    billableDDIDaysForMonth: FigurePair


class UserAdjustment(TypedDict):
    """Where the phone users figures differ: the days, and the month total."""

    dates: Differing
    billableUserDaysForMonth: FigurePair


@with_config(json_schema_extra={"additionalProperties": False})
class CompanyAdjustments(TypedDict, total=False):
    """One company's differences, by report (only those that differ)."""

    ddi: DdiAdjustment
    user: UserAdjustment


ADJUSTED = {
    "dates": {"2025-10-03": {"closed": 5, "now": 6}},
    "billableDDIDaysForMonth": {"closed": 150, "now": 151},
}


@with_config(
    _examples({"result": "success", "period": CLOSED, "values": {"acme": {"ddi": ADJUSTED}}})
)
class Adjustments(TypedDict):
    """readAdjustments' answer: only the companies whose figures differ."""

    result: Success
    period: Period
    values: dict[str, CompanyAdjustments]


Fields = Annotated[
    dict[str, str | None],
    Field(description="A record's fields as they were (`before`) or became (`after`)."),
]
EventRecord = TypeAliasType("EventRecord", Fields)


class Event(TypedDict):
    """One change: the record before and after it (null: not there)."""

    id: Annotated[int, Field(ge=1)]
    at: datetime
    type: feed.EventType
    actor: Annotated[str, Field(description="The account that made it.")]
    company: Annotated[str | None, Field(description="Null where the reader may not see it.")]
    key: Annotated[dict[str, str | None], Field(description="The record's key fields.")]
    before: EventRecord | None
    after: EventRecord | None


EVENT = {
    "id": 7,
    "at": "2026-11-24T09:12:03Z",
    "type": "ddi.updated",
    "actor": "admin",
    "company": "acme",
}
EVENT |= {
    "key": {"dialcode": "44", "number": "2071234567"},
    "before": DDI,
    "after": {**DDI, "virt_exten": "101"},
}


@with_config(_examples({"result": "success", "values": [EVENT], "numrows": 1, "last": 7}))
class Events(TypedDict):
    """readEvents' answer; ask again with `after` set to `last`."""

    result: Success
    values: list[Event]
    numrows: Count
    last: Annotated[int, Field(ge=0, description="The id of the last event returned, or `after`.")]


@with_config(
    _examples(
        {
            "result": "success",
            "created": 1,
            "updated": 1,
            "moved": 1,
            "unchanged": 0,
            "dry_run": True,
        }
    )
)
class ImportResult(TypedDict):
    """How many DDIs the import created, updated, moved to another company, and left alone."""

    result: Success
    created: Count
    updated: Count
    moved: Count
    unchanged: Count
    dry_run: bool


@with_config(_examples({"result": "success", "version": API_LABEL, "api": "0.1.0"}))
class Version(TypedDict):
    result: Success
    version: Annotated[str, WithJsonSchema({"const": API_LABEL})]
    api: Annotated[str, Field(description="The package version.")]


NUMBER = {
    "dialcode": "44",
    "number": "2071230000",
    "state": "reserved",
    "company": "acme",
    "virt_exten": None,
    "description": "",
    "reserved_until": "2027-01-31",
    "aging_until": None,
    "previous_company": None,
}
IN_SERVICE = {**NUMBER, "number": "2071230001", "state": "in_service", "virt_exten": "2001"}
IN_SERVICE |= {"reserved_until": None}
Applies = "Null where it does not apply."


@with_config(_examples(NUMBER))
class InventoryNumber(TypedDict):
    """A number of the inventory as every numbers operation answers it (docs/numbers.md),
    in the state its dates give at the moment of the request."""

    dialcode: str
    number: str
    state: read.NumberState
    company: Annotated[
        str | None,
        Field(description=f"In service: its DDI's company; reserved: the company. {Applies}"),
    ]
    virt_exten: Annotated[str | None, Field(description=f"In service only. {Applies}")]
    description: str
    reserved_until: Annotated[
        date | None, Field(description=f"Reserved: its last day held. {Applies}")
    ]
    aging_until: Annotated[date | None, Field(description=f"Aging: its last day held. {Applies}")]
    previous_company: Annotated[
        str | None,
        Field(description="The company it last left; always null for a Company-Admin."),
    ]


@with_config(_examples({"result": "success", "numrows": 1, "values": [NUMBER]}))
class NumbersResult(TypedDict):
    """The numbers reserved or allocated, in dialcode and number order."""

    result: Success
    numrows: Annotated[int, Field(ge=0, description="Numbers in `values`.")]
    values: list[InventoryNumber]


CURSOR = "WyI0NCIsIjIwNzEyMzAwMDYiXQ"


@with_config(
    _examples({"result": "success", "numrows": 2, "values": [NUMBER, IN_SERVICE], "next": CURSOR})
)
class NumbersPage(TypedDict):
    """One page of numbers, sorted by dialcode then number; ask again with `after` set to
    `next` for the following one."""

    result: Success
    numrows: Annotated[int, Field(ge=0, description="Numbers in this page.")]
    values: list[InventoryNumber]
    next: Annotated[
        str | None, Field(description="The cursor of the next page; null after the last.")
    ]


class OpenApiDocument(TypedDict):
    """An OpenAPI 3.1 document: this one."""

    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]


@with_config(_examples({"status": "ok"}))
class Liveness(TypedDict):
    """The process answers."""

    status: Literal["ok"]


@with_config(_examples({"status": "ok", "checks": {"database": "ok", "rate_limit_storage": "ok"}}))
class Readiness(TypedDict):
    """Whether each dependency a request needs answers: the database and, unless
    RATELIMIT_STORAGE_URI is memory://, the rate-limit store (`rate_limit_storage`). Why one
    failed is logged, not answered."""

    status: Literal["ok", "unavailable"]
    checks: dict[str, Literal["ok", "failed"]]


FAULTS = Field(
    description="Only when a field is at fault: each faulty field (rows of a batch as "
    "`values[3].number`) and why."
)


class ErrorDetail(TypedDict):
    code: Annotated[
        str,
        WithJsonSchema({"type": "string", "enum": sorted(set(ERROR_CODES.values()) | FINER_CODES)}),
    ]
    message: Annotated[str, Field(description="One sentence.")]
    fields: NotRequired[Annotated[dict[str, str], FAULTS]]


@with_config(_examples(_error(400)))
class Error(TypedDict):
    """Every error answer, whatever the status; never a traceback."""

    result: Literal["error"]
    error: ErrorDetail


MODELS = [*(body for bodies in BODIES.values() for body in bodies.values()), REPORT, CLOSE, REOPEN]
MODELS += [feed.ReadEventsRequest, WriteResult, ReadResult, DdiCountReport, UserCountReport]
MODELS += [PeriodResult, Adjustments, Events, ImportResult, Version, OpenApiDocument, Liveness]
MODELS += [Readiness, Error, stock.StockRequest, read.ReadNumbersRequest, requests.ReserveRequest]
MODELS += [requests.ReleaseRequest, allocate.AllocateRequest, requests.RetireRequest]
MODELS += [InventoryNumber, NumbersResult, NumbersPage]
# The records as a read answers them (a DDI's without its number's description).
MODELS += [k.answer_part.model for k in KINDS.values() if k.answer_part is not k.create_part]


@cache
def _schemas() -> dict[str, Any]:
    """Every named schema as pydantic generates it, without its titles (a generator would name
    types after them) and with descriptions on one line."""
    inputs = [(m, "validation", TypeAdapter(m)) for m in MODELS]
    _, top = TypeAdapter.json_schemas(inputs, ref_template="#/components/schemas/{model}")  # type: ignore[arg-type]
    schemas: dict[str, Any] = top["$defs"]
    _tidy(schemas)
    return schemas


def _tidy(node: Any) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("title"), str):
            del node["title"]
        if isinstance(node.get("description"), str):
            node["description"] = " ".join(node["description"].split())
        for value in node.values():
            _tidy(value)
    elif isinstance(node, list):
        for value in node:
            _tidy(value)


# --- the operations ---------------------------------------------------------------------------

TAGS = {
    "records": "DDIs and phone users: one set of operations, `type` says which (`ddi` or `user`). "
    "Phone users are the people a company is billed for per day, not the sign-in accounts of "
    "this application.",
    "imports": "Bring the DDIs to the states a CSV file lists (docs/import.md).",
    "reports": "Billing counts: per company and day, the peak number of DDIs or phone users "
    "active at the same moment, in REPORT_TIMEZONE (docs/reports.md).",
    "month close": "Close an ended month so its reports keep their figures; reopen it; see what "
    "changed since (docs/month-close.md).",
    "numbers": "The provider's number inventory: numbers in stock, reserved, in service or "
    "aging (docs/numbers.md).",
    "events": "The change events, in id order, for scripts that follow every change "
    "(docs/events.md).",
    "meta": "The version, this document and its page; health checks. No credentials needed.",
}
READERS = (
    "System-Admin and Billing Call-Summary see every company; Billing / Call Reporting only "
    "the companies it is granted (others are silently left out); anyone else gets 403."
)
BY_QUERY = (
    "The same report as the POST, with `company` (repeatable), `month` and `year` in the query. "
    f"{READERS} {YEAR_NEEDS_MONTH} {FUTURE_MONTH}"
)
ACME, BO_LEE = {"company": "acme"}, {"username": "bo.lee", "virt_exten": "201"}
CSV = "dialcode,number,virt_exten,company\n44,2071234567,100,globex\n44,2071234599,7,acme\n"
# operationId: ("method path tag answer [body] statuses", summary, description, examples of the
# body). Statuses: `json` stands for a JSON body's (400 413 415), `auth` for those of every call
# with credentials. A body `records` is the records operation's, one by `type` (ops.BODIES).
OPERATIONS: dict[str, tuple[str, str, str, dict[str, Any]]] = {
    "createRecords": (
        "post /rest/ops/create/ records WriteResult records json auth 409",
        "Create DDIs or phone users",
        "System-Admin; phone users also their Company-Admin. `values` is one record or an array "
        f"of up to {crud.MAX_BATCH:,} created all or nothing: a duplicate anywhere is a 409 and "
        "nothing is created.",
        {
            "one DDI": {"type": "ddi", "values": DDI},
            "two phone users": {"type": "user", "values": [USER, {**USER, **BO_LEE}]},
        },
    ),
    "readRecords": (
        "post /rest/ops/read/ records ReadResult records json auth",
        "Read DDIs or phone users",
        "System-Admin; a Company-Admin reads its companies' records (others are silently left "
        f"out). `limit` 0 to {record_query.MAX_LIMIT:,} (default "
        f"{record_query.DEFAULT_LIMIT:,}), `offset` skips matching rows.",
        {"a page of acme's DDIs": {"type": "ddi", "scope": ACME, "limit": 2, "offset": 0}},
    ),
    "updateRecords": (
        "post /rest/ops/update/ records WriteResult records json auth 409",
        "Update DDIs or phone users",
        "System-Admin; a Company-Admin within its companies. `numrows` counts the rows whose "
        "values actually changed.",
        {
            "move acme's extension 100 to 101": {
                "type": "ddi",
                "scope": {**ACME, "virt_exten": "100"},
                "values": {"virt_exten": "101"},
            }
        },
    ),
    "linkDdi": (
        "post /rest/ops/link/ records WriteResult records json auth 404",
        "Link a DDI to an extension and company",
        "System-Admin; a Company-Admin within its companies; DDIs only. A DDI that does not "
        "exist or is not visible is a 404. `numrows` is 1.",
        {
            "link a DDI to globex": {
                "type": "ddi",
                "scope": {"dialcode": "44", "number": "2071234567"},
                "values": {"virt_exten": "200", "company": "globex"},
            }
        },
    ),
    "deleteRecords": (
        "post /rest/ops/delete/ records WriteResult records json auth",
        "Delete DDIs or phone users",
        "System-Admin; phone users also their Company-Admin. No match is success with `numrows` 0.",
        {"delete a phone user": {"type": "user", "scope": {**ACME, "username": "bo.lee"}}},
    ),
    "importDdis": (
        "post /rest/ops/import/ imports ImportResult csv json auth 409",
        "Bring DDIs to the states a CSV lists",
        "System-Admin. The whole file is checked first and applied all or nothing; a bad file "
        "is a 400 whose `fields` name every problem by its line (`line 7`), the first 100, "
        "then `more` (`and N more`). `?dry_run=1` only counts.",
        {"two DDIs": CSV},
    ),
    "readDdiCount": (
        "post /rest/call/readDDICount reports DdiCountReport ReportRequest json auth",
        "The DDIs report for a month",
        f"{READERS} Every day of the period is listed; a day's value is its peak.",
        {"acme, one month": {"type": "cdr", "scope": {"company": ["acme"], **MONTH}}},
    ),
    "readDdiCountByQuery": (
        "get /rest/call/readDDICount reports DdiCountReport 400 auth",
        "The DDIs report for a month, asked with query parameters",
        BY_QUERY,
        {},
    ),
    "readUserCount": (
        "post /rest/call/readUserCount reports UserCountReport ReportRequest json auth",
        "The phone users report for a month",
        f"{READERS} Every day of the period is listed; a day's value is its peak.",
        {"acme, one month": {"type": "cdr", "scope": {"company": ["acme"], **MONTH}}},
    ),
    "readUserCountByQuery": (
        "get /rest/call/readUserCount reports UserCountReport 400 auth",
        "The phone users report for a month, asked with query parameters",
        BY_QUERY,
        {},
    ),
    "closeMonth": (
        "post /rest/call/closeMonth month_close PeriodResult CloseMonthRequest json auth 409",
        "Close an ended month: store both reports as they are",
        "System-Admin and Billing Call-Summary. Closing a closed month is a 409.",
        {"last month": {"type": "cdr", "scope": MONTH}},
    ),
    "reopenMonth": (
        "post /rest/call/reopenMonth month_close PeriodResult ReopenMonthRequest json auth 409",
        "Reopen a closed month, with a reason",
        "System-Admin. A month that is not closed is a 409; its next close is the next version.",
        {"late records": {"type": "cdr", "scope": MONTH, "reason": "late CDRs of the 3rd"}},
    ),
    "readAdjustments": (
        "post /rest/call/readAdjustments month_close Adjustments ReportRequest json auth 409",
        "Where a closed month's figures differ from the history now",
        f"{READERS} A month that is not closed is a 409 (so is the current month, the default); "
        "`values` is empty while the history still gives the closed figures.",
        {"last month": {"type": "cdr", "scope": MONTH}},
    ),
    "stockNumbers": (
        "post /rest/numbers/stock numbers WriteResult StockRequest json auth 409",
        "Add numbers to the stock, available",
        "System-Admin. Exactly one of `values` (1 to 10,000 numbers, each with an optional "
        "description) and `block` (`count` consecutive numbers from `first`, as wide as "
        "`first`), all or nothing: a number already in the inventory, in any state, is a 409 "
        "whose `fields` name the first few, and nothing is stocked.",
        {
            "two numbers": {
                "values": [
                    {"dialcode": "44", "number": "2071230000", "description": "Reception"},
                    {"dialcode": "44", "number": "2071230001"},
                ]
            },
            "a block of 1,000": {"block": {"dialcode": "44", "first": "2071231000", "count": 1000}},
        },
    ),
    "readNumbers": (
        "post /rest/numbers/read numbers NumbersPage ReadNumbersRequest json auth",
        "Read the numbers of the inventory, a page at a time",
        "System-Admin: every number, in every state. Company-Admin: only numbers in service "
        "for or reserved for its companies (stock and aging numbers do not exist for it; "
        "`previous_company` is always null; a `scope.company` it does not administer finds "
        "nothing). Every member is optional: `scope.state` the states as the dates give them "
        "today (a hold past its last day is `available`), `scope.prefix` the digits the number "
        f"starts with (with `scope.dialcode`, together at most {MAX_DDI_DIGITS} digits), "
        f"`limit` 1 to {read.MAX_LIMIT:,} (default {read.DEFAULT_LIMIT}), `after` the `next` "
        "of a previous answer (any other string is a 400).",
        {
            "available numbers starting with 20712": {
                "scope": {"state": ["available"], "dialcode": "44", "prefix": "20712"},
                "limit": 2,
            },
            "the page after": {
                "scope": {"state": ["available"], "dialcode": "44", "prefix": "20712"},
                "limit": 2,
                "after": CURSOR,
            },
        },
    ),
    "reserveNumbers": (
        "post /rest/numbers/reserve numbers NumbersResult ReserveRequest json auth 404 409",
        "Reserve numbers for a company until a day",
        "System-Admin. `scope` names one `number` or, with `prefix` and `count` (1 to "
        f"{requests.MAX_COUNT:,}, only with a prefix), the `count` lowest available numbers "
        "that start with it; never both. `values.until`: a day (YYYY-MM-DD, REPORT_TIMEZONE) "
        f"from today to {reserving.MAX_DAYS} days ahead, {reserving.DEFAULT_DAYS} days ahead "
        "when left out. All or nothing. By number: one in service is a 409 `conflict`; one "
        "reserved for another company a 409 `number_reserved`, aging after leaving another "
        "company a 409 `number_aging`, unless `force`: true with a `reason` (one without the "
        "other is a 400); one not in the inventory a 404. By prefix: too few available is a "
        "409 `not_enough_numbers` whose `fields.count` says how many are.",
        {
            "ten numbers by prefix": {
                "scope": {"dialcode": "44", "prefix": "20712", "count": 10},
                "values": {"company": "acme"},
            },
            "one number, until a day": {
                "scope": {"dialcode": "44", "number": "2071230000"},
                "values": {"company": "acme", "until": "(30 days ahead)"},
            },
            "taken over from another company": {
                "scope": {"dialcode": "44", "number": "2071230000"},
                "values": {"company": "globex"},
                "force": True,
                "reason": "contract moved to globex, ticket 4711",
            },
        },
    ),
    "releaseNumbers": (
        "post /rest/numbers/release numbers WriteResult ReleaseRequest json auth 404 409",
        "Give reserved numbers back to the stock",
        "System-Admin. `scope` names one `number` or every number starting with `prefix`, "
        "never both. By number: one not reserved today is a 409 `conflict` saying what it is, "
        "one not in the inventory a 404. By prefix: every number reserved today that starts "
        "with it, whichever company it is for; none is a success with `numrows` 0.",
        {
            "one number": {"scope": {"dialcode": "44", "number": "2071230000"}},
            "every reservation of a prefix": {"scope": {"dialcode": "44", "prefix": "20712"}},
        },
    ),
    "allocateNumbers": (
        "post /rest/numbers/allocate numbers NumbersResult AllocateRequest json auth 409",
        "Put numbers from the stock in service for a company",
        "System-Admin. The `count` lowest numbers of `dialcode` (starting with `prefix`, if "
        "given) reserved for `values.company`, then the lowest available ones, go in service "
        "for it in one transaction, with extensions counting up from `virt_exten` in number "
        "order, keeping its width; extensions that would pass 10 digits are a 400. With "
        "`force`: true and a `reason` (one without the other is a 400), numbers held for other "
        "companies may be taken after those. Too few: 409 `not_enough_numbers`, `fields.count` "
        "saying how many there are, nothing changed.",
        {
            "three numbers by prefix": {
                "scope": {"dialcode": "44", "prefix": "20712", "count": 3},
                "values": {"company": "acme", "virt_exten": "2001"},
            },
            "held numbers too": {
                "scope": {"dialcode": "44", "count": 2},
                "values": {"company": "globex", "virt_exten": "300"},
                "force": True,
                "reason": "numbers promised in the contract",
            },
        },
    ),
    "retireNumbers": (
        "post /rest/numbers/retire numbers WriteResult RetireRequest json auth 404 409",
        "Remove available or aging numbers from the inventory",
        "System-Admin. `scope` names one `number` or every number starting with `prefix`, "
        "never both; an aging number leaves only with `force`: true and a `reason` (one "
        "without the other is a 400). Their history and audit entries stay. By number: in "
        "service or reserved is a 409 `conflict`, aging without force a 409 `number_aging`, "
        "not in the inventory a 404. By prefix: every available number that starts with it "
        "(aging ones too when forced; one aging number without force is the 409 and nothing "
        "is retired); numbers in service or reserved are left as they are.",
        {
            "one number": {"scope": {"dialcode": "44", "number": "2071230000"}},
            "a block returned to the carrier": {
                "scope": {"dialcode": "44", "prefix": "207123"},
                "force": True,
                "reason": "block returned to the carrier",
            },
        },
    ),
    "readEvents": (
        "post /rest/events/read events Events ReadEventsRequest json auth",
        "The change events after an id, in id order",
        "System-Admin; a Company-Admin reads its companies' events. With none after `after` yet, "
        f"the answer waits up to `wait` seconds (at most {feed.MAX_WAIT}) for one. An account "
        "has at most EVENTS_MAX_WAITING (default 2) such reads waiting at once: one more that "
        "would wait is a 429 with Retry-After, at once.",
        {
            "updates after event 6, waiting up to 30 s": {
                "after": 6,
                "limit": 100,
                "scope": {"type": ["ddi.updated"]},
                "wait": 30,
            }
        },
    ),
    "getVersion": (
        "get /rest/version meta Version 429",
        "The API label and the package version",
        "No credentials needed.",
        {},
    ),
    "getOpenapi": (
        "get /rest/openapi.json meta OpenApiDocument 429",
        "This document",
        "No credentials needed. Its page for people is /rest/docs.",
        {},
    ),
    "getApiDocs": (
        "get /rest/docs meta page 429",
        "This document as a page for people",
        "No credentials needed, like the document itself.",
        {},
    ),
    "getLiveness": (
        "get /healthz meta Liveness",
        "Liveness: the process answers",
        "No credentials needed. 200 whenever the process answers; it asks neither the database "
        "nor any other service, so an outage never gets healthy processes restarted.",
        {},
    ),
    "getReadiness": (
        "get /readyz meta Readiness",
        "Readiness: the database and the rate-limit store answer",
        "No credentials needed. What a load balancer asks before sending requests to this process.",
        {},
    ),
}
# When each error status answers, in the words of docs/api.md#errors.
ERROR_WHEN = {
    400: "The body or a field is not valid; `fields` says which and why.",
    401: "Credentials are missing or not valid.",
    403: "Authenticated, but this account may not do this (or a cookie-authenticated POST "
    "without a valid X-CSRFToken; or, code confirmation_required, a sensitive call from a "
    "session not confirmed in the last 10 minutes).",
    404: "The record named does not exist or is not visible to this account.",
    409: "This conflicts with what is stored.",
    413: "The body is too large.",
    415: "The body is not declared with the media type this operation takes.",
    429: "Over the request limit; Retry-After says when to try again.",
    503: "The database does not answer; Retry-After says when to try again.",
}
STATUSES = {"json": (400, 413, 415), "auth": (401, 403, 429, 503)}
# An operation's own further cases of an error status, after ERROR_WHEN's words.
ALSO_WHEN = {
    "readEvents": {
        429: "Or this account already has EVENTS_MAX_WAITING reads waiting and this one would "
        "wait (`code` `rate_limited` too; docs/events.md#limits)."
    }
}
CSV_BODY = {
    # The file's bytes (UTF-8, a byte order mark allowed): `format: binary` is how generators
    # (openapi-python-client among them) know to send a file as it is.
    "type": "string",
    "format": "binary",
    "contentMediaType": "text/csv",
    "description": "Header dialcode,number,virt_exten,company; a row per DDI as it should be; "
    "up to 1,000,000 rows and 64 MiB.",
}


def _answer(status: int, schema: str, example: Any = None) -> dict[str, Any]:
    """One answer of an operation: `schema`, `example` if any."""
    said = "Success." if status == 200 else f"`{ERROR_CODES[status]}`: {ERROR_WHEN[status]}"
    shown = {"schema": _ref(schema)} | ({"example": example} if example is not None else {})
    answer: dict[str, Any] = {"description": said, "content": {"application/json": shown}}
    if status in (429, 503):
        wait = f" ({RETRY_AFTER_SECONDS} for a 503)." if status == 503 else "."
        schema_ = {"type": "integer", "minimum": 0}
        retry = {"description": f"Seconds to wait before trying again{wait}", "schema": schema_}
        answer["headers"] = {"Retry-After": retry}
    return answer


def _request(path: str, body: str) -> dict[str, Any]:
    """The operation's body: a named schema, the records operation's by `type`, or the CSV."""
    if body == "csv":
        return {"text/csv": {"schema": CSV_BODY}}
    if body != "records":
        return {"application/json": {"schema": _ref(body)}}
    op = path.split("/")[3]
    names = {t: bodies[op].__name__ for t, bodies in BODIES.items() if op in bodies}
    if len(names) == 1:
        return {"application/json": {"schema": _ref(*names.values())}}
    mapping = {t: f"#/components/schemas/{n}" for t, n in names.items()}
    choice = {"oneOf": [_ref(n) for n in names.values()]}
    choice["discriminator"] = {"propertyName": "type", "mapping": mapping}  # type: ignore[assignment]
    return {"application/json": {"schema": choice}}


# The query parameters (what each is, an example), their schemas the models': a report's
# scope (`ByQuery`), the import's dry_run.
PARAMETERS: dict[str, dict[str, tuple[str, Any]]] = {
    "ByQuery": {
        "company": (
            "A company to report on; repeat it for several (default: every company the caller "
            "may see).",
            ["acme"],
        ),
        "month": ("1 to 12 (default: the current month, to date).", MONTH["month"]),
        "year": (f"Only with `month`. {FUTURE_MONTH}", MONTH["year"]),
    },
    "importDdis": {
        "dry_run": (
            "1 (or true): count only, write nothing. 0 (or false, the default): apply. Letters "
            "in any case; white space around the value is ignored.",
            "1",
        )
    },
}


def _parameters(operation_id: str, schemas: dict[str, Any]) -> list[dict[str, Any]]:
    schema = {k: v.get("anyOf", [v])[0] for k, v in schemas["ReportScope"]["properties"].items()}
    schema["dry_run"] = {"type": "string", "pattern": _any_case_trimmed(DRY_RUN)}
    named = PARAMETERS.get(operation_id) or PARAMETERS.get(operation_id[-7:], {})
    return [
        {"name": name, "in": "query", "description": what, "schema": schema[name], "example": e}
        for name, (what, e) in named.items()
    ]


def _operation(operation_id: str, schemas: dict[str, Any]) -> dict[str, Any]:
    """The operation as OPERATIONS says it; `schemas` are today's."""
    spec, summary, description, examples = OPERATIONS[operation_id]
    _method, path, tag, answer, *rest = spec.split()
    op: dict[str, Any] = {"operationId": operation_id, "tags": [tag.replace("_", " ")]}
    op |= {"summary": summary, "description": description}
    if tag == "meta":
        op["security"] = []
    if parameters := _parameters(operation_id, schemas):
        op["parameters"] = parameters
    if body := next((t for t in rest if t[0].isalpha() and t not in STATUSES), None):
        content = _request(path, body)
        shown = {name: {"summary": name, "value": value} for name, value in examples.items()}
        next(iter(content.values()))["examples"] = shown
        op["requestBody"] = {"required": True, "content": content}
    page = {"description": "An HTML page.", "content": {"text/html": {}}}
    examples_ = schemas.get(answer, {}).get("examples", [None])
    ok = page if answer == "page" else _answer(200, answer, examples_[0])
    codes = (int(c) for t in rest if t in STATUSES or t.isdigit() for c in STATUSES.get(t, (t,)))
    op["responses"] = {
        "200": ok,
        **{str(c): _answer(c, "Error", _error(c)) for c in sorted(codes)},
    }
    for status, more in ALSO_WHEN.get(operation_id, {}).items():
        op["responses"][str(status)]["description"] += f" {more}"
    if answer == "Readiness":  # unready: a 503 that says which dependency failed
        failed = {
            "status": "unavailable",
            "checks": {"database": "failed", "rate_limit_storage": "ok"},
        }
        said = "A dependency does not answer; `checks` says which."
        op["responses"]["503"] = {**_answer(200, "Readiness", failed), "description": said}
    return op


def _any_case_trimmed(words: Any) -> str:
    """An ECMA pattern for `words` as `value.strip().lower()` reads them: letters in any case,
    Python's white space (not quite ECMA's `\\s`) around; every such character is below
    U+3001."""
    space = "".join(f"\\u{c:04x}" for c in range(0x3001) if chr(c).isspace())
    choices = "|".join(
        "".join(f"[{ch.upper()}{ch}]" if ch.isalpha() else re.escape(ch) for ch in word)
        for word in words
    )
    return f"^[{space}]*(?:{choices})[{space}]*$"


def _today(schemas: dict[str, Any], today: date) -> None:
    """Today's bounds: no report month in the future, and only an ended month closed (as
    periods.resolve and month_close.ended_period check them)."""
    for name in ("ReportScope", "Month", "ClosableMonth"):
        schemas[name]["properties"]["year"]["anyOf"][0]["maximum"] = today.year
        schemas[name]["examples"] = [
            {"company": ["acme"], **MONTH} if name == "ReportScope" else MONTH
        ]
    this_year = {"properties": {"year": {"const": today.year}}, "required": ["year"]}
    not_future = {"if": this_year, "then": {"properties": {"month": {"maximum": today.month}}}}
    schemas["Month"] |= not_future
    # A year names a month of that year: it needs the month, and may not be in the future.
    a_year = {"properties": {"year": {"type": "integer"}}, "required": ["year"]}
    month = {"properties": {"month": {"type": "integer"}}, "required": ["month"]}
    schemas["ReportScope"] |= {"if": a_year, "then": {**month, **not_future}}
    closable = schemas["ClosableMonth"]
    closable |= {"if": a_year, "else": {"properties": {"month": {"not": {"const": today.month}}}}}
    if today.month == 1:  # nothing of this year has ended
        closable["properties"]["year"]["anyOf"][0]["maximum"] = today.year - 1
    else:
        ended = {"properties": {"month": {"maximum": today.month - 1}}}
        closable["then"] = {"if": {"properties": {"year": {"const": today.year}}}, "then": ended}


def _days_pattern(first: date, last: date) -> str:
    """An ECMA pattern matching exactly the days from `first` to `last` written YYYY-MM-DD:
    per month, its days grouped by their tens digit."""
    months: dict[tuple[int, int], list[int]] = {}
    day = first
    while day <= last:
        months.setdefault((day.year, day.month), []).append(day.day)
        day += timedelta(days=1)
    choices = []
    for (year, month), days in months.items():
        tens: dict[int, list[int]] = {}
        for d in days:
            tens.setdefault(d // 10, []).append(d % 10)
        parts = [f"{t}{u[0]}" if len(u) == 1 else f"{t}[{u[0]}-{u[-1]}]" for t, u in tens.items()]
        choices.append(f"{year:04d}-{month:02d}-(?:{'|'.join(parts)})")
    return f"^(?:{'|'.join(choices)})$"


def _reservable(schemas: dict[str, Any], today: date) -> None:
    """A reservation's `until`: today to MAX_DAYS ahead (reserving._until), as a pattern of
    today's days: JSON Schema compares no dates."""
    last = today + timedelta(days=reserving.MAX_DAYS)
    schemas["ReserveValues"]["properties"]["until"] = {
        "type": "string",
        "pattern": _days_pattern(today, last),
        "description": f"The last day held, YYYY-MM-DD in REPORT_TIMEZONE: from today "
        f"({today.isoformat()}) to {reserving.MAX_DAYS} days ahead ({last.isoformat()}); "
        f"{reserving.DEFAULT_DAYS} days ahead when left out.",
    }


def _dated_examples(paths: dict[str, Any], today: date) -> None:
    """The examples that name a day, on today's calendar (a fixed day would leave the range
    the document states)."""
    content = paths["/rest/numbers/reserve"]["post"]["requestBody"]["content"]
    for example in content["application/json"]["examples"].values():
        values = example["value"].get("values", {})
        if "until" in values:
            values["until"] = (today + timedelta(days=reserving.DEFAULT_DAYS)).isoformat()


def document(today: date, server: str) -> dict[str, Any]:
    """The OpenAPI document as of `today` (in REPORT_TIMEZONE), for the app at `server`.

    Guarantees: every body the validation accepts fits its schema and every body it refuses
    does not, except where JSON Schema cannot say it (then the description does: a report's
    `year` without `month` in a query string, a company that must exist); each operation has
    an operationId, one tag, a summary and an example of its request and answer; every body
    and answer schema is a named component."""
    schemas = copy.deepcopy(_schemas())
    _today(schemas, today)
    _reservable(schemas, today)
    paths: dict[str, Any] = {}
    for operation_id, (spec, *_) in OPERATIONS.items():
        method, path = spec.split()[:2]
        paths.setdefault(path, {})[method] = _operation(operation_id, schemas)
    _dated_examples(paths, today)
    bearer = "An API token from /account/tokens or `flask --app app tokens create`."
    session = "A browser session; every POST then needs X-CSRFToken."
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
        "tags": [{"name": name, "description": text} for name, text in TAGS.items()],
        "security": [{"bearer": []}, {"session": []}],
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": bearer},
                "session": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": "session",
                    "description": session,
                },
            },
            "schemas": schemas,
        },
        "paths": paths,
    }


def served_document() -> dict[str, Any]:
    """The document for this request: today in REPORT_TIMEZONE, this server's address."""
    today = periods.today_in(periods.zone(current_app.config["REPORT_TIMEZONE"]))
    return document(today, request.url_root.rstrip("/"))


@bp.get("/openapi.json")
def openapi_json():
    return jsonify(served_document())
