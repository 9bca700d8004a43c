"""Field formats and request shapes (docs/api.md#field-formats), checked once for the API and
the pages, as typed models (pydantic, strict): the same definitions validate a request and
state its schema in the OpenAPI document (webapp/rest/openapi.py).

Every value must already be a string: a JSON number is refused, never converted. Pydantic's
errors are worded here, so every door answers with the messages and `fields` of the API's
error envelope.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, NotRequired

from pydantic import ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError, core_schema
from typing_extensions import TypeAliasType, TypedDict

from ..errors import Invalid

# A reason an operator gives for an exceptional act (a month reopened, a held number taken):
# 1 to REASON_MAX characters, not only white space, no control character but tab and line
# breaks (a NUL cannot be stored on PostgreSQL). REASON_PATTERN says the same as a JSON Schema
# (ECMA) pattern, for the OpenAPI document.
REASON_MAX = 500
_CONTROLS = r"\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"  # C0 and C1, but tab and line breaks
CONTROL = re.compile(f"[{_CONTROLS}]")
REASON_PATTERN = rf"^[^{_CONTROLS}]*[^\s{_CONTROLS}][^{_CONTROLS}]*$"
# An override's two members come together (inventory.parse_override), as JSON Schema: a reason
# only with "force": true, and "force": true only with a reason.
OVERRIDE_RULES: dict[str, Any] = {
    "allOf": [
        {
            "if": {"properties": {"reason": {"type": "string"}}, "required": ["reason"]},
            "then": {"properties": {"force": {"const": True}}, "required": ["force"]},
        },
        {
            "if": {"properties": {"force": {"const": True}}, "required": ["force"]},
            "then": {"properties": {"reason": {"type": "string"}}, "required": ["reason"]},
        },
    ]
}


def parse_reason(value: Any, asked: str) -> str:
    """`value` as a reason (REASON_MAX above), kept as given; Invalid on `reason` otherwise,
    `asked` saying what the reason is for when it is missing ("say why the month is
    reopened")."""
    if value is not None and not isinstance(value, str):
        raise Invalid("'reason' must be a string.", {"reason": "must be a string"})
    if not value or all(ch.isspace() or ch == "\ufeff" for ch in value):
        raise Invalid(f"'reason' is required: {asked}.", {"reason": "required"})
    if CONTROL.search(value):
        why = "must not contain control characters"
        raise Invalid(f"'reason' {why}.", {"reason": why})
    if len(value) > REASON_MAX:
        why = f"must be at most {REASON_MAX} characters"
        raise Invalid(f"'reason' {why}.", {"reason": why})
    return value


# A number's description (docs/numbers.md, "Description"): any text of at most MAX_DESCRIPTION
# characters but control characters other than tab and line breaks (NUL cannot be stored on
# PostgreSQL). Stock, create, update, link and the edit form check it alike.
MAX_DESCRIPTION = 200
DESCRIPTION_PATTERN = f"^[^{_CONTROLS}]*$"
NO_CONTROLS = "must not contain control characters but tabs and line breaks"
# A description's words, as the number search matches them (record_query): runs of letters
# and digits, in lower case.
_WORD = re.compile(r"[^\W_]+")


def words_of(text: str) -> list[str]:
    """The distinct words of `text` in lower case, sorted: what number_words keeps of a
    description, and what a search's words are matched against (by their starts)."""
    return sorted(set(_WORD.findall(text.lower())))


# fullmatch + explicit [0-9]: `\d` would admit other scripts' digits and `$` a trailing newline.
FORMATS: dict[str, tuple[re.Pattern[str], str]] = {
    "dialcode": (re.compile(r"[0-9]{1,7}"), "must be 1 to 7 digits"),
    "number": (re.compile(r"[0-9]{1,15}"), "must be 1 to 15 digits"),
    "virt_exten": (re.compile(r"[0-9]{1,10}"), "must be 1 to 10 digits"),
    "company": (re.compile(r"[a-z0-9._-]{1,64}"), "must be 1 to 64 of a-z 0-9 . _ -"),
    "username": (re.compile(r"[a-z0-9._@-]{1,64}"), "must be 1 to 64 of a-z 0-9 . _ - @"),
    # The digits a number starts with (the number inventory's scopes; docs/numbers.md).
    "prefix": (re.compile(r"[0-9]{1,15}"), "must be 1 to 15 digits"),
}
MAX_DIALCODE, MAX_NUMBER, MAX_DDI_DIGITS = 7, 15, 17
# The most company identifiers one request may list (a report's or the event feed's
# `scope.company`): ten times the largest provider's companies, and well within the bind
# parameters one statement may carry (PostgreSQL's 65,535), so a longer list is the client's
# mistake (400), never an outage (503).
MAX_COMPANIES = 10_000
# A calendar day as YYYY-MM-DD (date.fromisoformat alone also takes other ISO forms).
ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
# Request objects refuse unknown members and convert nothing.
STRICT = ConfigDict(extra="forbid", strict=True)


# Each format's schema: its name in the OpenAPI document, what it is, an example.
SCHEMAS = {
    "dialcode": ("Dialcode", "Dialcode part of the DDI, 1 to 7 ASCII digits.", "44"),
    "number": (
        "Number",
        "Number part of the DDI, 1 to 15 ASCII digits; dialcode and number together at most "
        f"{MAX_DDI_DIGITS} digits.",
        "2071234567",
    ),
    "virt_exten": ("Extension", "Linked extension, 1 to 10 ASCII digits.", "100"),
    "company": (
        "CompanyId",
        "Company identifier: 1 to 64 of a-z 0-9 . _ -. In a write it must name an existing "
        "company (400 for a System-Admin, 403 for a Company-Admin).",
        "acme",
    ),
    "username": (
        "Username",
        "Phone user's name, 1 to 64 of a-z 0-9 . _ - @, unique within its company.",
        "ana.kim",
    ),
    "prefix": ("NumberPrefix", "Digits the number starts with, 1 to 15.", "20712"),
}
# Each format as a named type: a strict string matching its pattern.
TYPES: dict[str, Any] = {
    field: TypeAliasType(
        name,
        Annotated[
            str,
            StringConstraints(strict=True, pattern=f"^{FORMATS[field][0].pattern}$"),
            Field(description=description, examples=[example]),
        ],
    )
    for field, (name, description, example) in SCHEMAS.items()
}
TYPES["description"] = TypeAliasType(
    "NumberDescription",
    Annotated[
        str,
        StringConstraints(strict=True, max_length=MAX_DESCRIPTION, pattern=DESCRIPTION_PATTERN),
        Field(
            description=f"Free text about the number, 0 to {MAX_DESCRIPTION} characters, no "
            "control character but tabs and line breaks; the list's number search matches "
            "its words.",
            examples=["Reception, London office"],
        ),
    ],
)
if TYPE_CHECKING:
    CompanyId = str
else:
    CompanyId = TYPES["company"]
# A list of company identifiers in a request: at most MAX_COMPANIES (maxItems in the schema).
CompanyList = Annotated[list[CompanyId], Field(max_length=MAX_COMPANIES)]


def _split(k: int) -> dict[str, Any]:
    """A dialcode of k digits leaves the number MAX_DDI_DIGITS - k."""
    most = {"dialcode": {"maxLength": k}, "number": {"maxLength": MAX_DDI_DIGITS - k}}
    return {"properties": most}


# Dialcode and number together at most MAX_DDI_DIGITS, as JSON Schema.
DDI_DIGITS = {"dialcode": {"anyOf": [_split(k) for k in range(1, MAX_DIALCODE + 1)]}}


def check_format(field: str, value: Any) -> str | None:
    """Why `value` is not a valid `field`, or None when it is."""
    if not isinstance(value, str):
        return "must be a string"
    pattern, why = FORMATS[field]
    return None if pattern.fullmatch(value) else why


@dataclass(frozen=True)
class Bounded:
    """A JSON number from `low` to `high`, `default` when absent or null: a pydantic annotation
    (`Annotated[int, Bounded(1, 12)]`) that validates and states its schema, or `parse` alone.

    JSON has one number type, so 5.0 is the integer 5 (as JSON Schema says too); 5.5 (for an
    integer), booleans and numbers in strings are refused. `why`, if given, words every
    refusal alike."""

    low: int
    high: int
    default: int | None = None
    integer: bool = True
    why: str | None = None

    def check(self, value: Any) -> Any:
        """The value (an int for an integer), or PydanticCustomError saying why not."""
        if value is None:
            raise PydanticCustomError("missing", "required")
        if self.integer and isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int if self.integer else int | float):
            raise PydanticCustomError("number", self.why or "must be an integer")
        if not self.low <= value <= self.high:
            raise PydanticCustomError("number", self.why or f"must be {self.low} to {self.high}")
        return value

    def parse(self, value: Any, name: str, label: str | None = None) -> Any:
        """The value checked, `default` when absent or null; Invalid naming `name` (`label` is
        how the message names it)."""
        if value is None:
            return self.default
        try:
            return self.check(value)
        except PydanticCustomError as exc:
            why = exc.message()
            raise Invalid(f"'{label or name}' {why}.", {name: why}) from None

    def __get_pydantic_core_schema__(self, _source: Any, _handler: Any) -> Any:
        # check() decides; the inner schema only states the bounds in JSON Schema.
        schema = core_schema.int_schema if self.integer else core_schema.float_schema
        inner = schema(ge=self.low, le=self.high)
        return core_schema.no_info_wrap_validator_function(lambda v, _: self.check(v), inner)

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        result: dict[str, Any] = handler(schema)
        if self.default is not None:
            result["default"] = self.default
        return result


# Pydantic's error types in the envelope's words; a custom error's message is its reason.
REASONS = {
    "extra_forbidden": "unknown field",
    "missing": "required",
    "string_type": "must be a string",
    "dict_type": "must be an object",
    "list_type": "must be an array",
}


Where = tuple[str | int, ...]


def check(adapter: TypeAdapter[Any], data: Any) -> tuple[Any, list[tuple[Where, str]]]:
    """`data` as `adapter` validates it, and what is wrong with it as (where, why) in
    pydantic's order (fields in the model's, then unknown ones in the request's)."""
    try:
        return adapter.validate_python(data), []
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
    if any(e["type"] == "string_unicode" for e in errors):
        # JSON may hold lone surrogates, which pydantic cannot read: as the API always has,
        # such a key is an unknown field and such text fails its check like any other.
        readable, unknown = _readable(data)
        return None, unknown + check(adapter, readable)[1]
    found = []
    for error in errors:
        kind, where = error["type"], error["loc"]
        if kind == "string_pattern_mismatch":
            # By the pattern, not the member's name: a member may hold another's format (a
            # block's `first` is a number).
            pattern = error["ctx"]["pattern"]
            formats = (w for p, w in FORMATS.values() if f"^{p.pattern}$" == pattern)
            why = next(formats, "is not in its format")
            if pattern == DESCRIPTION_PATTERN:
                why = NO_CONTROLS
        elif kind == "string_too_long":
            why = f"must be at most {error['ctx']['max_length']:,} characters"
        elif kind == "too_long":  # a list's max_length
            why = f"must hold at most {error['ctx']['max_length']:,} items"
        elif kind == "literal_error":
            why = "must be one of " + ", ".join(re.findall(r"'([^']*)'", error["ctx"]["expected"]))
        else:
            why = REASONS.get(kind, error["msg"])
        found.append((where, why))
    return None, found


def _readable(data: Any, where: Where = ()) -> tuple[Any, list[tuple[Where, str]]]:
    """`data` without the keys that are not valid Unicode (each an unknown field, returned
    beside it) and with such text replaced by U+FFFD, which no format or choice admits."""
    if isinstance(data, str):
        return (data if _unicode(data) else "\ufffd"), []
    if isinstance(data, list):
        items = [_readable(value, (*where, i)) for i, value in enumerate(data)]
        return [value for value, _ in items], [u for _, unknown in items for u in unknown]
    if not isinstance(data, Mapping):
        return data, []
    readable, unknown = {}, []
    for key, value in data.items():
        if not _unicode(key):
            unknown.append(((*where, key), "unknown field"))
            continue
        readable[key], inner = _readable(value, (*where, key))
        unknown += inner
    return readable, unknown


def _unicode(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def validated(adapter: TypeAdapter[Any], data: Any, refuse: Callable[[Where, str], Invalid]) -> Any:
    """`data` as `adapter` validates it, or refuse(where, why) raised for what is wrong first,
    as the API has always named it: an unknown member or an object that is not one (the
    outermost first, unknown members in the request's order), else the first member at fault
    in the model's order."""
    value, found = check(adapter, data)
    if not found:
        return value
    shape = [p for p in found if p[1] in ("unknown field", "must be an object")]
    if not shape:
        raise refuse(*found[0])
    where, why = min(shape, key=lambda p: (len(p[0]), p[1] != "unknown field", _at(data, p[0])))
    raise refuse(where, why)


def _at(data: Any, where: Where) -> int:
    """Where the member `where` of `data` stands among its siblings, in the request."""
    for key in where[:-1]:
        data = data[key]
    return list(data).index(where[-1]) if isinstance(data, Mapping) and where else 0


@dataclass(frozen=True)
class Part:
    """One object of a request (`scope` or `values`): which fields it may and must hold, as a
    typed model named `name` in the OpenAPI document (`doc` its description)."""

    allowed: tuple[str, ...]
    required: tuple[str, ...] = ()
    not_editable: tuple[str, ...] = ()  # named in the error as "field not editable"
    at_least_one: bool = False
    name: str = "Part"
    doc: str = ""

    @cached_property
    def model(self) -> Any:
        """A TypedDict: only the fields given come back, and a field may be absent but never
        null. The rules across fields are parse_part's, stated in JSON Schema here."""
        fields = {
            f: TYPES[f] if f in self.required else NotRequired[TYPES[f]] for f in self.allowed
        }
        typed_dict: Any = TypedDict
        model = typed_dict(self.name, fields)
        model.__doc__ = self.doc
        shown = [f for f in self.allowed if f in self.required or f == "company"]
        extra: dict[str, Any] = {"examples": [{f: SCHEMAS[f][2] for f in shown}]}
        if self.at_least_one:
            extra["minProperties"] = 1
        if {"dialcode", "number"} <= set(self.allowed):
            extra["dependentSchemas"] = DDI_DIGITS
        model.__pydantic_config__ = ConfigDict(**STRICT, json_schema_extra=extra)
        return model

    @cached_property
    def adapter(self) -> TypeAdapter[Any]:
        return TypeAdapter(self.model)


def parse_part(part: Part, data: Any, name: str, prefix: str = "") -> dict[str, str]:
    """Validate one request object against `part`; return its fields or raise Invalid naming
    every problem, in the order the request gives the fields (then those missing).

    `name` is the object's place in the request (for the message); `prefix` goes before field
    names in `fields` (batch rows use 'values[3].').
    """
    if data is None and not prefix:  # an absent scope or values object is an empty one
        data = {}
    if not isinstance(data, Mapping):
        where = prefix.rstrip(".") or name
        raise Invalid(f"'{where}' must be an object.", {where: "must be an object"})
    value, found = check(part.adapter, data)
    if value is None and not found:
        # Text that is not Unicode (a lone surrogate) where any text is allowed (fields.check):
        # refused as no database could store it.
        found = [
            ((k,), "must be valid Unicode")
            for k, v in data.items()
            if isinstance(v, str) and not _unicode(v)
        ]
    if found:
        order = {key: i for i, key in enumerate(data)}
        found.sort(key=lambda p: order.get(str(p[0][0]), len(order)))
        _refuse(
            {
                prefix + str(loc[0]): "field not editable" if loc[0] in part.not_editable else why
                for loc, why in found
            }
        )
    if part.at_least_one and not data:
        _refuse({prefix + name: f"must hold at least one of {', '.join(part.allowed)}"})
    digits = len(data.get("dialcode", "")) + len(data.get("number", ""))
    if "dialcode" in data and "number" in data and digits > MAX_DDI_DIGITS:
        why = f"dialcode and number together must be at most {MAX_DDI_DIGITS} digits"
        _refuse({prefix + "number": why})
    return dict(data)  # as given: the fields' order reaches the audit log and the events


def _refuse(problems: dict[str, str]) -> None:
    field, why = next(iter(problems.items()))
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    raise Invalid(f"Field '{field}' {why}{more}.", problems)
