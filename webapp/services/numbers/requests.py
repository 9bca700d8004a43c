"""The bodies of reserve, release and retire (docs/numbers.md): typed models (pydantic,
strict, unknown members refused) and the rules across their members, worded as the API's
error envelope (a 400 naming the member at fault in `fields`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Annotated, Any, NotRequired

from pydantic import (
    AfterValidator,
    ConfigDict,
    PlainValidator,
    Strict,
    TypeAdapter,
    WithJsonSchema,
    with_config,
)
from pydantic_core import PydanticCustomError
from typing_extensions import TypedDict

from ...errors import Invalid
from .. import fields, inventory
from ..fields import (
    DDI_DIGITS,
    ISO_DATE,
    MAX_DDI_DIGITS,
    OVERRIDE_RULES,
    REASON_PATTERN,
    STRICT,
    TYPES,
    Bounded,
    CompanyId,
    Where,
    validated,
)

MAX_COUNT = 10_000  # numbers one reserve by prefix takes
REASON_MAX = fields.REASON_MAX
COUNT = Bounded(1, MAX_COUNT, why=f"must be 1 to {MAX_COUNT:,}")
PREFIX = re.compile(r"[0-9]{1,15}")


def _prefix(value: str) -> str:
    if not PREFIX.fullmatch(value):
        raise PydanticCustomError("prefix", "must be 1 to 15 digits")
    return value


def _day(value: str) -> date:
    if ISO_DATE.fullmatch(value):
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    raise PydanticCustomError("day", "must be a date written YYYY-MM-DD")


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise PydanticCustomError("flag", "must be true or false")
    return value


def _reason(value: Any) -> str:
    """A reason as the audit log keeps it: fields.parse_reason's one rule."""
    try:
        return fields.parse_reason(value, inventory.FORCE_ASKED)
    except Invalid as exc:
        raise PydanticCustomError("reason", exc.fields["reason"]) from None


if TYPE_CHECKING:
    Dialcode = str
    NumberDigits = str
else:
    Dialcode, NumberDigits = TYPES["dialcode"], TYPES["number"]
Prefix = Annotated[
    str,
    Strict(),
    AfterValidator(_prefix),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": "^[0-9]{1,15}$",
            "description": "Digits the number starts with.",
        }
    ),
]
Day = Annotated[
    date,
    PlainValidator(lambda v: _day(v) if isinstance(v, str) else _not_text()),
    WithJsonSchema({"type": "string", "format": "date", "description": "A day, YYYY-MM-DD."}),
]
Flag = Annotated[bool, PlainValidator(_flag), WithJsonSchema({"type": "boolean"})]
Reason = Annotated[
    str,
    PlainValidator(_reason),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": REASON_MAX,
            "pattern": REASON_PATTERN,
            "description": "Why a number held for a company is taken (1 to 500 characters, "
            "not only white space, no control character but tabs and line breaks); kept in "
            "the audit log. Only with `force`: true.",
        }
    ),
]


def _not_text() -> date:
    raise PydanticCustomError("day", "must be a string")


# The rules across a scope's members (_target), as JSON Schema: a number or a prefix, never
# both; dialcode and number together at most MAX_DDI_DIGITS digits (a prefix has no such
# bound here: a longer one matches no number).
ONE_NUMBER = {"required": ["number"], "not": {"required": ["prefix"]}}
BY_PREFIX = {"required": ["prefix"], "not": {"required": ["number"]}}
SCOPE_RULES: dict[str, Any] = {"oneOf": [ONE_NUMBER, BY_PREFIX], "dependentSchemas": DDI_DIGITS}
# A reserve's count comes exactly with a prefix.
RESERVE_SCOPE_RULES: dict[str, Any] = {
    "oneOf": [
        {**ONE_NUMBER, "not": {"anyOf": [{"required": ["prefix"]}, {"required": ["count"]}]}},
        {**BY_PREFIX, "required": ["prefix", "count"]},
    ],
    "dependentSchemas": DDI_DIGITS,
}


@with_config(ConfigDict(**STRICT, json_schema_extra=SCOPE_RULES))
class NumberOrPrefix(TypedDict):
    """One number (`number`) or every number starting with `prefix`, of `dialcode`: exactly
    one of `number` and `prefix`."""

    dialcode: Dialcode
    number: NotRequired[NumberDigits]
    prefix: NotRequired[Prefix]


@with_config(ConfigDict(**STRICT, json_schema_extra=RESERVE_SCOPE_RULES))
class ReserveScope(TypedDict):
    """One number, or the `count` lowest available numbers starting with `prefix`: exactly
    one of `number` and `prefix`, and `count` exactly with `prefix`."""

    dialcode: Dialcode
    number: NotRequired[NumberDigits]
    prefix: NotRequired[Prefix]
    count: NotRequired[Annotated[int, COUNT]]


@with_config(STRICT)
class ReserveValues(TypedDict):
    """The company the numbers are reserved for and their last day held."""

    company: CompanyId
    until: NotRequired[Day]


@with_config(ConfigDict(**STRICT, json_schema_extra=OVERRIDE_RULES))
class ReserveRequest(TypedDict):
    """The body of reserveNumbers. `reason` only with `force`: true, and `force`: true only
    with a `reason`."""

    scope: ReserveScope
    values: ReserveValues
    force: NotRequired[Flag]
    reason: NotRequired[Reason]


@with_config(STRICT)
class ReleaseRequest(TypedDict):
    """The body of releaseNumbers."""

    scope: NumberOrPrefix


@with_config(ConfigDict(**STRICT, json_schema_extra=OVERRIDE_RULES))
class RetireRequest(TypedDict):
    """The body of retireNumbers. `reason` only with `force`: true, and `force`: true only
    with a `reason`."""

    scope: NumberOrPrefix
    force: NotRequired[Flag]
    reason: NotRequired[Reason]


RESERVE, RELEASE, RETIRE = (
    TypeAdapter(ReserveRequest),
    TypeAdapter(ReleaseRequest),
    TypeAdapter(RetireRequest),
)


@dataclass(frozen=True)
class Target:
    """What a scope names: one number (`number`), or the numbers starting with `prefix`
    (`count` of them for a reserve)."""

    dialcode: str
    number: str | None = None
    prefix: str | None = None
    count: int | None = None

    @property
    def key(self) -> tuple[str, str]:
        assert self.number is not None
        return (self.dialcode, self.number)


@dataclass(frozen=True)
class Override:
    """`force` with its `reason`: take a number held for another company (docs/numbers.md,
    "Override"). `reason` is None when not forced."""

    force: bool = False
    reason: str | None = None


@dataclass(frozen=True)
class Reservation:
    target: Target
    company: str
    until: date | None  # None: the default, 30 days ahead
    override: Override


def parse_reserve(body: Any) -> Reservation:
    """reserveNumbers' body checked: Invalid naming the first member at fault."""
    values = validated(RESERVE, body, _invalid)
    return Reservation(
        _target(values["scope"], counted=True),
        values["values"]["company"],
        values["values"].get("until"),
        _override(values),
    )


def parse_release(body: Any) -> Target:
    """releaseNumbers' body checked: Invalid naming the first member at fault."""
    return _target(validated(RELEASE, body, _invalid)["scope"], counted=False)


def parse_retire(body: Any) -> tuple[Target, Override]:
    """retireNumbers' body checked: Invalid naming the first member at fault."""
    values = validated(RETIRE, body, _invalid)
    return _target(values["scope"], counted=False), _override(values)


def _target(scope: dict[str, Any], counted: bool) -> Target:
    """The rules across a scope's members: a number or a prefix, not both; a count exactly
    with a prefix (reserve only); dialcode and number together at most 17 digits."""
    number, prefix, count = scope.get("number"), scope.get("prefix"), scope.get("count")
    if number is not None and prefix is not None:
        _refuse("Give 'scope.number' or 'scope.prefix', not both.", "prefix", "not with number")
    if number is None and prefix is None:
        _refuse("'scope' must hold a 'number' or a 'prefix'.", "number", "required (or prefix)")
    if counted and prefix is not None and count is None:
        _refuse("'scope.count' is required with a prefix.", "count", "required with prefix")
    if counted and number is not None and count is not None:
        _refuse("'scope.count' goes with a prefix, not a number.", "count", "only with prefix")
    if number is not None and len(scope["dialcode"]) + len(number) > MAX_DDI_DIGITS:
        why = f"dialcode and number together must be at most {MAX_DDI_DIGITS} digits"
        _refuse(f"Field 'scope.number': {why}.", "number", why)
    return Target(scope["dialcode"], number, prefix, count)


def _override(values: dict[str, Any]) -> Override:
    """`force` and `reason` come together or not at all (`force: false` alone is none), as
    inventory.parse_override says for every door that takes them."""
    reason = inventory.parse_override(values.get("force"), values.get("reason"))
    return Override(reason is not None, reason)


def _refuse(message: str, field: str, why: str) -> None:
    raise Invalid(message, {field: why})


def _invalid(where: Where, why: str) -> Invalid:
    path = ".".join(str(k) for k in where)
    name = next((str(k) for k in reversed(where) if isinstance(k, str)), path)
    if why == "unknown field":
        return Invalid(f"Unknown field '{path}'.", {name: why})
    if why == "required":
        return Invalid(f"Field '{path}' is required.", {name: why})
    return Invalid(f"Field '{path}' {why}.", {name: why})
