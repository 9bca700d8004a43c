"""Stock: numbers added to the inventory as `available` (docs/numbers.md, "Stock"), from a
request's rows, a block of consecutive numbers, or a CSV file (stock_file.py).

Every door ends in `write`: one transaction through the change path, all or nothing, one audit
entry (`number.stock`) and one change event (`number.stocked`) per number. A number already in
the inventory in any state is a 409 naming it; one a racing writer adds meanwhile is caught by
the inventory's unique key and is the same 409.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, NotRequired

from pydantic import ConfigDict, Field, StringConstraints, TypeAdapter, with_config
from sqlalchemy import select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from typing_extensions import TypedDict

from ...access import Principal
from ...database import bulk_cache, insert_rows, on_postgresql, write_transaction
from ...errors import Conflict, Invalid
from ...models import Number
from .. import changes, inventory
from ..fields import (
    DDI_DIGITS,
    DESCRIPTION_PATTERN,
    MAX_DDI_DIGITS,
    MAX_DESCRIPTION,
    MAX_DIALCODE,
    STRICT,
    TYPES,
    Bounded,
    Where,
    validated,
)
from ..history import intervals

MAX_ROWS = 10_000  # rows of one request, and numbers of one block
CHUNK = 5000  # numbers looked up and written together
# A stock at least this large is followed by ANALYZE of the inventory on PostgreSQL (write).
ANALYZE_AFTER = 50_000
NAMED = 5  # existing numbers a 409 names
if TYPE_CHECKING:
    Dialcode = str
    DigitsNumber = str
else:
    Dialcode = TYPES["dialcode"]
    DigitsNumber = TYPES["number"]
# A block's dialcode and first number together at most MAX_DDI_DIGITS, as JSON Schema.
BLOCK_DIGITS = {
    "dialcode": {
        "anyOf": [
            {
                "properties": {
                    "dialcode": {"maxLength": k},
                    "first": {"maxLength": MAX_DDI_DIGITS - k},
                }
            }
            for k in range(1, MAX_DIALCODE + 1)
        ]
    }
}
ROW_EXTRA: dict[str, Any] = {"dependentSchemas": DDI_DIGITS}
BLOCK_EXTRA: dict[str, Any] = {"dependentSchemas": BLOCK_DIGITS}
COUNT = Bounded(1, MAX_ROWS, why=f"must be from 1 to {MAX_ROWS:,}")
Description = Annotated[
    str,
    StringConstraints(strict=True, max_length=MAX_DESCRIPTION, pattern=DESCRIPTION_PATTERN),
    Field(
        description=f"Free text, 0 to {MAX_DESCRIPTION} characters, no control character but "
        "tabs and line breaks.",
        examples=["Reception"],
    ),
]


@with_config(ConfigDict(**STRICT, json_schema_extra=ROW_EXTRA))
class StockRow(TypedDict):
    """One number to stock."""

    dialcode: Dialcode
    number: DigitsNumber
    description: NotRequired[Description]


@with_config(ConfigDict(**STRICT, json_schema_extra=BLOCK_EXTRA))
class StockBlock(TypedDict):
    """`count` consecutive numbers from `first`, each as wide as `first` (0099, 0100, …); a
    block that would run past that width (`first` 9998, `count` 3) is a 400."""

    dialcode: Dialcode
    first: DigitsNumber
    count: Annotated[int, COUNT]


@with_config(ConfigDict(**STRICT, json_schema_extra={"minProperties": 1, "maxProperties": 1}))
class StockRequest(TypedDict, total=False):
    """The body of stockNumbers: exactly one of `values` and `block`. A number named twice is
    a 400."""

    values: Annotated[list[StockRow], Field(min_length=1, max_length=MAX_ROWS)]
    block: StockBlock


REQUEST = TypeAdapter(StockRequest)


class Entry(NamedTuple):
    """One number to stock, and how its door names it in an error ('values[3]', 'block',
    'line 7')."""

    label: str
    dialcode: str
    number: str
    description: str = ""

    @property
    def key(self) -> str:
        return f"{self.dialcode}:{self.number}"


def parse(body: Mapping[str, Any]) -> list[Entry]:
    """The numbers a request (StockRequest) names, checked: Invalid naming the first field at
    fault, an unknown one, both or neither of `values` and `block`, a dialcode and number of
    more than MAX_DDI_DIGITS digits, a block that would run past the width of `first`, or a
    number named twice ('values[5]': '44:2071230000 repeats values[2]')."""
    checked = validated(REQUEST, body, _invalid)
    if checked is None:  # text that is not Unicode where any text is allowed (fields.check)
        raise Invalid("The body holds text that is not valid Unicode.")
    if ("values" in checked) == ("block" in checked):
        why = "give exactly one of values and block"
        raise Invalid(f"The body must {why}.", {"values": why, "block": why})
    if "block" in checked:
        return block(checked["block"])
    entries = [
        Entry(f"values[{i}]", row["dialcode"], row["number"], row.get("description", ""))
        for i, row in enumerate(checked["values"])
    ]
    seen: dict[tuple[str, str], str] = {}
    for entry in entries:
        _check_digits(entry.dialcode, entry.number, f"{entry.label}.number")
        earlier = seen.setdefault((entry.dialcode, entry.number), entry.label)
        if earlier != entry.label:
            why = f"{entry.key} repeats {earlier}"
            raise Invalid(f"'{entry.label}': {why}.", {entry.label: why})
    return entries


def block(spec: Mapping[str, Any]) -> list[Entry]:
    """The numbers of a checked block: `count` from `first`, each as wide as `first`."""
    dialcode, first, count = spec["dialcode"], spec["first"], spec["count"]
    width = len(first)
    _check_digits(dialcode, first, "block.first")
    last = int(first) + count - 1
    if last >= 10**width:
        why = f"runs past {'9' * width}, the widest number of {width} digits"
        raise Invalid(f"'block.count' {why}.", {"block.count": why})
    return [Entry("block", dialcode, f"{n:0{width}d}") for n in range(int(first), last + 1)]


def _check_digits(dialcode: str, number: str, where: str) -> None:
    if len(dialcode) + len(number) > MAX_DDI_DIGITS:
        why = f"dialcode and number together must be at most {MAX_DDI_DIGITS} digits"
        raise Invalid(f"'{where}' {why}.", {where: why})


def _invalid(where: Where, why: str) -> Invalid:
    path = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in where)[1:]
    if path == "values" and why.startswith("List should have at least"):
        why = "must hold at least 1 item"
    if why == "unknown field":
        return Invalid(f"Unknown field '{path}'.", {path: why})
    return Invalid(f"'{path}' {why}.", {path: why})


def stock(principal: Principal, body: Mapping[str, Any]) -> int:
    """POST /rest/numbers/stock: the numbers of `body` (parse) added as `available`; how many.

    Guarantees: System-Admin only (Forbidden, before the body is read); all or nothing; each
    number's `since` is the change's instant, with its description ('' when none)."""
    principal.require_system_admin("stock numbers")
    entries = parse(body)
    return write(principal, lambda: _chunked(entries))


def _chunked(entries: list[Entry]) -> Iterator[list[Entry]]:
    for i in range(0, len(entries), CHUNK):
        yield entries[i : i + CHUNK]


def write(principal: Principal, chunks: Any) -> int:
    """Stock the numbers `chunks()` yields (lists of checked Entries, none repeated) in one
    transaction through the change path; return how many.

    Guarantees: System-Admin only; a number already in the inventory, in any state, is a
    Conflict naming the first few found (by their Entry labels) and nothing is written; so is
    one a racing writer adds meanwhile (the unique key). Only one chunk is held at a time. On
    PostgreSQL a stock of ANALYZE_AFTER numbers or more leaves the inventory analyzed."""
    principal.require_system_admin("stock numbers")
    with write_transaction() as session, bulk_cache(session):
        tally = changes.write_chunks(
            session,
            principal,
            None,
            changes.Lock(),
            lambda now: _steps(session, chunks(), now),
        )
    if tally.audited >= ANALYZE_AFTER and on_postgresql():
        # Fresh statistics, as after any bulk load: until autovacuum's own ANALYZE, which may
        # be a minute away, the planner knows nothing of the new numbers and judges their
        # ranges empty (an allocation from a million just stocked took 450 ms, not 70).
        with write_transaction() as session:
            session.execute(text("ANALYZE numbers"))
    return tally.audited


def _steps(
    session: Session, chunks: Iterable[list[Entry]], now: datetime
) -> Iterator[changes.Change]:
    """The change path's step 3, one chunk at a time: its numbers inserted, and their audit."""
    for chunk in chunks:
        _refuse_existing(session, chunk)
        rows = [_row(entry, now) for entry in chunk]
        try:
            insert_rows(session, Number.__table__, rows)
        except IntegrityError as exc:
            raise Conflict(
                "A number was added to the inventory by someone else meanwhile; nothing was "
                "stocked. Try again."
            ) from exc
        described = {(e.dialcode, e.number): e.description for e in chunk if e.description}
        inventory.add_words(session, described)
        after = {"state": inventory.AVAILABLE, "company": None}
        audit = [
            inventory.number_change("stock", (e.dialcode, e.number), None, after) for e in chunk
        ]
        yield changes.Change(audit=audit)


def _row(entry: Entry, now: datetime) -> dict[str, Any]:
    return {
        "dialcode": entry.dialcode,
        "number": entry.number,
        "state": inventory.AVAILABLE,
        "held_for": None,
        "previous_company": None,
        "held_until": None,
        "since": now,
        "description": entry.description,
    }


def existing(session: Session, chunk: list[Entry]) -> list[Entry]:
    """The entries of `chunk` whose number is already in the inventory (any state), in the
    chunk's order: read only, nothing locked."""
    wanted: dict[str, list[str]] = {}
    for entry in chunk:
        wanted.setdefault(entry.dialcode, []).append(entry.number)
    found: set[tuple[str, str]] = set()
    postgresql = session.get_bind().dialect.name == "postgresql"
    for dialcode, all_numbers in wanted.items():
        # PostgreSQL takes the whole list as one array; SQLite a few hundred parameters.
        for numbers in [all_numbers] if postgresql else intervals.chunks(all_numbers):
            query = select(Number.number).where(
                *inventory.key_conditions(session, dialcode, numbers)
            )
            found.update((dialcode, n) for n in session.scalars(query))
    return [e for e in chunk if (e.dialcode, e.number) in found] if found else []


def _refuse_existing(session: Session, chunk: list[Entry]) -> None:
    """A Conflict naming the first few numbers of `chunk` already in the inventory, if any."""
    present = existing(session, chunk)
    if not present:
        return
    named: dict[str, list[str]] = {}
    for entry in present[:NAMED]:
        named.setdefault(entry.label, []).append(entry.key)
    fields = {
        label: f"{', '.join(keys)} {'exists' if len(keys) == 1 else 'exist'}"
        for label, keys in named.items()
    }
    more = f" (and {len(present) - 1} more)" if len(present) > 1 else ""
    raise Conflict(
        f"The number {present[0].key} is already in the inventory{more}; nothing was stocked.",
        fields,
    )
