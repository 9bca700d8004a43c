"""Reading the number inventory: POST /rest/numbers/read (docs/numbers.md, "Read").

A read pages through the numbers a principal may see that match its scope, sorted by dialcode
then number, by keyset: `after` is the last number of the previous page, as an opaque cursor,
and a page holds the numbers after it, so numbers added or removed between two requests never
make paging skip or repeat one. A number's state is what its dates say at the moment of the
request (inventory.state_of): a reservation or an aging period past its last day is
`available`, and is found by that state, never by `reserved` or `aging`.

Each page is read from ordered index ranges, each stopped at the page's size, never by
skipping rows: every number in key order (uq_numbers_dialcode_number) when every state is
asked for; otherwise one range of ix_numbers_state per stored state the asked states can be
in; for a company, one range of its DDIs (ix_ddis_company_dialcode_number) and one of its
reservations (ix_numbers_held_for). A dialcode and a prefix narrow each range; a prefix
without a dialcode is checked on the numbers the range reads, and a Company-Admin of more than
MAX_RANGED_COMPANIES companies has one statement over all of them, not a range each.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    with_config,
)
from pydantic_core import PydanticCustomError
from sqlalchemy import (
    Column,
    ColumnElement,
    Select,
    String,
    and_,
    cast,
    null,
    or_,
    select,
    tuple_,
    union_all,
)
from sqlalchemy.sql import operators
from sqlalchemy.sql.expression import UnaryExpression
from sqlalchemy.sql.visitors import replacement_traverse
from typing_extensions import TypeAliasType, TypedDict

from ...access import Principal
from ...database import on_postgresql, upper_bound
from ...errors import Forbidden, Invalid
from ...extensions import db
from ...models import Ddi, Number
from .. import inventory
from ..fields import (
    FORMATS,
    MAX_DDI_DIGITS,
    MAX_DIALCODE,
    STRICT,
    TYPES,
    Bounded,
    CompanyId,
    validated,
)
from . import answers

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
LIMIT = Bounded(1, MAX_LIMIT, DEFAULT_LIMIT, why=f"must be from 1 to {MAX_LIMIT}")
# A Company-Admin's numbers are two ranges per company it administers; past this many
# companies the statement would outgrow what SQLite takes in one compound SELECT (500
# members), so their numbers are read by one statement over all of them instead.
MAX_RANGED_COMPANIES = 64
MAX_CURSOR = 100  # characters: the cursor of the longest dialcode and number is about 60
NOT_A_CURSOR = "must be the `next` of a previous answer"
# What every cursor looks like (URL-safe base64, unpadded): the OpenAPI document's pattern; a
# string of that look is a cursor only if a `next` gave it.
CURSOR_PATTERN = f"^[A-Za-z0-9_-]{{1,{MAX_CURSOR}}}$"
PREFIX_WHY = "must be 1 to 15 digits"
NO_STATE = "must hold at least one state"
# The states a Company-Admin's numbers can be in: stock and aging numbers do not exist for it.
COMPANY_STATES = frozenset({inventory.IN_SERVICE, inventory.RESERVED})
ALL_STATES = frozenset(inventory.STATES)

Key = tuple[str, str]  # (dialcode, number)


def encode_cursor(key: Key) -> str:
    """The cursor of the page after `key`: its dialcode and number, as URL-safe base64 of
    JSON, unpadded (opaque to clients, who only send it back)."""
    raw = json.dumps(list(key), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> Key | None:
    """The key a cursor of encode_cursor holds, or None for anything else."""
    if len(cursor) > MAX_CURSOR or not cursor.isascii():
        return None
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        key = json.loads(raw)
    except (binascii.Error, ValueError):
        return None
    if not (isinstance(key, list) and len(key) == 2 and all(isinstance(k, str) for k in key)):
        return None
    dialcode, number = key
    if FORMATS["dialcode"][0].fullmatch(dialcode) and FORMATS["number"][0].fullmatch(number):
        return dialcode, number
    return None


def _prefix(value: str) -> str:
    if not FORMATS["number"][0].fullmatch(value):
        raise PydanticCustomError("prefix", PREFIX_WHY)
    return value


def _cursor(value: str) -> Key:
    key = decode_cursor(value)
    if key is None:
        raise PydanticCustomError("cursor", NOT_A_CURSOR)
    return key


def _states(value: list[str]) -> list[str]:
    if not value:
        raise PydanticCustomError("state", NO_STATE)
    return value


if TYPE_CHECKING:
    Dialcode = str
else:
    Dialcode = TYPES["dialcode"]
# A named type, so that a generated client has one enum of the states (not one per list).
NumberState = TypeAliasType("NumberState", Literal["in_service", "reserved", "available", "aging"])
States = Annotated[
    list[NumberState],
    AfterValidator(_states),
    Field(max_length=len(inventory.STATES), json_schema_extra={"minItems": 1}),
]
Prefix = Annotated[
    str,
    StringConstraints(strict=True),
    AfterValidator(_prefix),
    Field(
        description="Digits the number starts with: 1 to 15.",
        json_schema_extra={"pattern": "^[0-9]{1,15}$"},
        examples=["20712"],
    ),
]
Cursor = Annotated[
    str,
    StringConstraints(strict=True),
    AfterValidator(_cursor),
    Field(
        description="The `next` of a previous answer: the page after it. Opaque: only a "
        "`next` the API gave is a cursor, anything else is a 400 (`fields.after`).",
        json_schema_extra={"pattern": CURSOR_PATTERN},
    ),
]


# A dialcode and a prefix together at most MAX_DDI_DIGITS digits (parse), as JSON Schema.
PREFIX_DIGITS: dict[str, Any] = {
    "dialcode": {
        "anyOf": [
            {
                "properties": {
                    "dialcode": {"maxLength": k},
                    "prefix": {"maxLength": MAX_DDI_DIGITS - k},
                }
            }
            for k in range(1, MAX_DIALCODE + 1)
        ]
    }
}


SCOPE_EXTRA: dict[str, Any] = {"dependentSchemas": PREFIX_DIGITS}


@with_config(ConfigDict(**STRICT, json_schema_extra=SCOPE_EXTRA))
class ReadScope(TypedDict, total=False):
    """Only the numbers in one of these states (as their dates say today), of this dialcode,
    starting with these digits, and in service for or reserved for this company."""

    state: States
    dialcode: Dialcode
    prefix: Prefix
    company: CompanyId


@with_config(STRICT)
class ReadNumbersRequest(TypedDict, total=False):
    """The body of readNumbers: every member optional; null is the default, as absent."""

    scope: ReadScope | None
    limit: Annotated[int, LIMIT, Field(description="Numbers in the page.")] | None
    after: Cursor | None


READ = TypeAdapter(ReadNumbersRequest)


@dataclass(frozen=True)
class Query:
    """A checked read: the numbers in `states`, of `dialcode` and starting with `prefix` (None:
    any), of `company` (None: any), after `after` (None: from the first), at most `limit`."""

    states: frozenset[str] = ALL_STATES
    dialcode: str | None = None
    prefix: str | None = None
    company: str | None = None
    limit: int = DEFAULT_LIMIT
    after: Key | None = None


def parse(body: Mapping[str, Any]) -> Query:
    """The read's fields checked (ReadNumbersRequest): Invalid naming the first one at fault,
    or an unknown one, in `fields` (a malformed cursor: `fields.after`). A dialcode and a
    prefix together longer than a DDI can be are refused as §4 refuses such a number."""
    values = validated(READ, body, _invalid)
    scope = values.get("scope") or {}
    dialcode, prefix = scope.get("dialcode"), scope.get("prefix")
    if dialcode is not None and prefix is not None and len(dialcode + prefix) > MAX_DDI_DIGITS:
        why = f"dialcode and prefix together must be at most {MAX_DDI_DIGITS} digits"
        raise Invalid(f"The {why}.", {"scope.prefix": why})
    states = scope.get("state")
    return Query(
        states=ALL_STATES if states is None else frozenset(states),
        dialcode=dialcode,
        prefix=prefix,
        company=scope.get("company"),
        limit=LIMIT.parse(values.get("limit"), "limit"),
        after=values.get("after"),
    )


def _invalid(where: tuple[str | int, ...], why: str) -> Invalid:
    path = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in where)[1:]
    if why == "unknown field":
        return Invalid(f"Unknown field '{path}'.", {path: why})
    if path == "limit":
        bounds = why.removeprefix("must be ")
        return Invalid(f"'limit' must be a whole number {bounds}.", {path: why})
    return Invalid(f"'{path}' {why}.", {path: why})


@dataclass(frozen=True)
class Page:
    values: list[dict[str, Any]]
    next: str | None


def read(principal: Principal, query: Query) -> Page:
    """The numbers `query` selects that the principal may see, sorted by dialcode then number,
    after `query.after`, at most `query.limit`, each as answers.answer gives it, with the
    cursor of the next page (None when none follows).

    Guarantees: a System-Admin reads every number; a Company-Admin only numbers in service for
    or reserved for a company it administers: stock and aging numbers do not exist for it (a
    state filter of available or aging finds nothing) and a `company` it does not administer
    finds nothing, silently, as /rest/ops/read/ does. Anyone else: Forbidden. The state of
    every number is read against one day, today in REPORT_TIMEZONE, for the whole page.
    Paging by the cursors of `next` from the first page to the last gives every matching
    number once (as long as no number changes state in between)."""
    if not principal.is_admin:
        raise Forbidden("Only a System-Admin or a Company-Admin may read the numbers.")
    on = inventory.today()
    statement = page_statement(principal, query, on)
    if statement is None:
        return Page([], None)
    rows = db.session.execute(statement).all()
    page = rows[: query.limit]
    values = [answers.answer(principal, r, on, r.company, r.virt_exten) for r in page]
    more = len(rows) > query.limit
    return Page(values, encode_cursor((page[-1].dialcode, page[-1].number)) if more else None)


def page_statement(principal: Principal, query: Query, on: date) -> Select[Any] | None:
    """The statement of a page of `read` (one row more than `query.limit`, telling whether a
    next page follows), or None when nothing can match."""
    companies = _companies(principal, query.company)
    if companies is None:
        branches = _stock_branches(query, query.states, on)
    else:
        branches = _company_branches(query, query.states & COMPANY_STATES, companies, on)
    return merged(branches, query.limit + 1) if branches else None


def _companies(principal: Principal, company: str | None) -> frozenset[str] | None:
    """The companies whose numbers the read is limited to (None: no limit, every number)."""
    visible = principal.pickable_companies()
    if visible is None:
        return None if company is None else frozenset({company})
    if company is None:
        return visible
    return visible & {company}  # another company's: nothing, silently


# --- the statement ----------------------------------------------------------------------------


def _columns(company: Any, virt_exten: Any) -> tuple[Any, ...]:
    """What answers.answer reads of a number, and its DDI's company and extension."""
    n = Number
    return (
        n.dialcode,
        n.number,
        n.state,
        n.held_for,
        n.previous_company,
        n.held_until,
        n.description,
        company.label("company"),
        virt_exten.label("virt_exten"),
    )


NO_DDI = (cast(null(), String), cast(null(), String))  # a number out of service has no DDI row


def _key_range(query: Query, dialcode: Any, number: Any) -> list[ColumnElement[bool]]:
    """The query's dialcode, prefix and cursor on a (dialcode, number) pair of columns: each a
    bound of the same index range."""
    where: list[ColumnElement[bool]] = []
    if query.dialcode is not None:
        where.append(dialcode == query.dialcode)
    if query.prefix is not None:
        where += [number >= query.prefix, number < upper_bound(query.prefix)]
    if query.after is not None:
        where.append(tuple_(dialcode, number) > tuple_(*query.after))
    return where


def _ordered(statement: Select[Any], dialcode: Any, number: Any, size: int) -> Select[Any]:
    return statement.order_by(dialcode, number).limit(size)


def stored_states(states: Iterable[str]) -> list[str]:
    """The stored states (Number.state) a number read in one of `states` can have, in order: a
    number read as available is stored available, or reserved or aging with its hold ended."""
    stored = set(states)
    if inventory.AVAILABLE in stored:
        stored |= set(inventory.HELD)
    return sorted(stored)


def _stock_branches(query: Query, states: frozenset[str], on: date) -> list[Select[Any]]:
    """Every company's numbers (a System-Admin without a company filter): one range over the
    whole key for every state, else one range of ix_numbers_state per stored state."""
    n, d = Number, Ddi
    size = query.limit + 1
    if states == ALL_STATES:
        joined = n.__table__.outerjoin(
            d.__table__, and_(d.dialcode == n.dialcode, d.number == n.number)
        )
        statement = select(*_columns(d.company, d.virt_exten)).select_from(joined)
        statement = statement.where(*_key_range(query, n.dialcode, n.number))
        return [_ordered(statement, n.dialcode, n.number, size)]
    # The state as the dates say (inventory.in_state); the stored state bounds the range.
    in_states = or_(*(inventory.in_state(s, on) for s in sorted(states)))
    branches = []
    for stored in stored_states(states):
        # Without a prefix, the stored state as a range of one value, not an equality:
        # PostgreSQL drops a column held equal to a constant from the order, and then read
        # the key's index in order, filtering by state and passing every number in service
        # listed before the stock (800,000 rows for the first page of the available numbers:
        # 60-140 ms). Ordered by the state too, only ix_numbers_state gives that order. With
        # a prefix the equality stays: the state, dialcode and number range are one range.
        one_state = n.state == stored if query.prefix else n.state.between(stored, stored)
        where = [one_state, *_key_range(query, n.dialcode, n.number), in_states]
        if stored == inventory.IN_SERVICE:
            statement = select(*_columns(d.company, d.virt_exten)).join(
                d, and_(d.dialcode == n.dialcode, d.number == n.number)
            )
        else:
            statement = select(*_columns(*NO_DDI))
        statement = statement.where(*where).order_by(n.state)
        branches.append(_ordered(statement, n.dialcode, n.number, size))
    return branches


def _company_branches(
    query: Query, states: frozenset[str], companies: frozenset[str], on: date
) -> list[Select[Any]]:
    """The numbers in service for or reserved for `companies`: for each company (or, past
    MAX_RANGED_COMPANIES, for all of them at once) one range of its DDIs and one of its
    running reservations."""
    if not companies or not states:
        return []
    n, d = Number, Ddi
    size = query.limit + 1
    ranged = len(companies) <= MAX_RANGED_COMPANIES
    groups = [[c] for c in sorted(companies)] if ranged else [sorted(companies)]
    branches = []
    for group in groups:
        if inventory.IN_SERVICE in states:
            # From the DDI rows, in the company's key order; the number's row by its key.
            statement = (
                select(*_columns(d.company, d.virt_exten))
                .select_from(d)
                .join(n, and_(n.dialcode == d.dialcode, n.number == d.number))
                .where(_company(d.company, group), *_key_range(query, d.dialcode, d.number))
            )
            branches.append(_ordered(statement, d.dialcode, d.number, size))
        if inventory.RESERVED in states:
            statement = select(*_columns(*NO_DDI)).where(
                _company(n.held_for, group),
                *_key_range(query, n.dialcode, n.number),
                _not_by_state(inventory.in_state(inventory.RESERVED, on)),
            )
            branches.append(_ordered(statement, n.dialcode, n.number, size))
    return branches


def _company(column: Any, group: list[str]) -> ColumnElement[bool]:
    return column == group[0] if len(group) == 1 else column.in_(group)


def _not_by_state(condition: ColumnElement[bool]) -> ColumnElement[bool]:
    """`condition` with SQLite kept from reading it from the state's index: a company's
    reservations are one range of ix_numbers_held_for, but held_for is NULL in nearly every
    number and SQLite's statistics count the NULLs, so with one company holding reservations
    (and, without statistics, by its guess) SQLite would rather read every company's
    reservations from ix_numbers_state. `+state`, the same value, is no index's column
    (SQLite's own way of saying so). PostgreSQL's statistics leave the NULLs out."""
    if on_postgresql():
        return condition
    state = Number.__table__.c.state
    plus = UnaryExpression(state, operator=operators.custom_op("+"), type_=String())

    def plus_state(element: Any, **_kw: Any) -> Any:
        return plus if isinstance(element, Column) and element.key == "state" else None

    return replacement_traverse(condition, {}, plus_state)


def merged(branches: list[Select[Any]], size: int) -> Select[Any]:
    """One branch as it is; several merged: each read as its own ordered range (a subquery
    keeps its ORDER BY and LIMIT), then the first `size` of their union in key order. The
    branches must be disjoint (here: a number has one stored state, and one company or none;
    the /ddis number search's branches are different dialcodes, services/numbers/browse.py)."""
    if len(branches) == 1:
        return branches[0]
    both = union_all(*(select(*b.subquery().c) for b in branches)).subquery()
    return select(*both.c).order_by(both.c.dialcode, both.c.number).limit(size)
