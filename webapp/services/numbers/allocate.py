"""POST /rest/numbers/allocate: numbers from the stock put in service for a company in one
transaction (docs/numbers.md, "Allocate")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Annotated, Any, NotRequired

from pydantic import ConfigDict, TypeAdapter, with_config
from sqlalchemy import ColumnElement, and_, func, or_, select
from typing_extensions import TypedDict

from ...access import Principal
from ...database import write_transaction
from ...errors import Conflict, Invalid
from ...extensions import db
from ...models import Number
from ...wording import counted
from .. import inventory
from ..fields import OVERRIDE_RULES, STRICT, TYPES, Bounded, validated
from ..records import crud, ddis
from ..records.kinds import DDI
from . import answers, picking, requests

if TYPE_CHECKING:
    Dialcode = str
    CompanyId = str
    Extension = str
    Prefix = str
else:
    Dialcode, CompanyId, Extension = TYPES["dialcode"], TYPES["company"], TYPES["virt_exten"]
    Prefix = TYPES["prefix"]

MAX_COUNT = 10_000
COUNT = Bounded(1, MAX_COUNT, why=f"must be from 1 to {MAX_COUNT:,}")


@with_config(STRICT)
class AllocateScope(TypedDict):
    """Which numbers: `count` of the dialcode's, starting with `prefix` if given."""

    dialcode: Dialcode
    prefix: NotRequired[Prefix | None]
    count: Annotated[int, COUNT]


@with_config(STRICT)
class AllocateValues(TypedDict):
    """Where they go in service: the company, and the first extension, counting up in number
    order and keeping its width (`0099`, `0100`, …); extensions that would pass 10 digits
    (`virt_exten` plus `count` - 1 over 9999999999) are a 400."""

    company: CompanyId
    virt_exten: Extension


@with_config(ConfigDict(**STRICT, json_schema_extra=OVERRIDE_RULES))
class AllocateRequest(TypedDict):
    """The body of allocateNumbers. `reason` only with `force`: true, and `force`: true only
    with a `reason`."""

    scope: AllocateScope
    values: AllocateValues
    force: NotRequired[requests.Flag | None]
    reason: NotRequired[requests.Reason | None]


REQUEST = TypeAdapter(AllocateRequest)


@dataclass(frozen=True)
class Allocation:
    dialcode: str
    prefix: str
    count: int
    company: str
    virt_exten: str
    reason: str | None  # a System-Admin's override: numbers held for others may be taken


def parse(body: Mapping[str, Any]) -> Allocation:
    """The body checked (AllocateRequest): Invalid naming the first field at fault."""
    values = validated(REQUEST, body, _invalid)
    scope, where = values["scope"], values["values"]
    return Allocation(
        dialcode=scope["dialcode"],
        prefix=scope.get("prefix") or "",
        count=int(scope["count"]),
        company=where["company"],
        virt_exten=where["virt_exten"],
        reason=inventory.parse_override(values.get("force"), values.get("reason")),
    )


def _invalid(where: tuple[str | int, ...], why: str) -> Invalid:
    path = ".".join(str(k) for k in where)
    if why == "unknown field":
        return Invalid(f"Field '{path}' is not known here.", {path: why})
    return Invalid(f"'{path}' {why}.", {path: why})


def allocate(principal: Principal, body: Any) -> list[dict[str, Any]]:
    """Put `scope.count` numbers of `scope.dialcode` (starting with `scope.prefix`) in service
    for `values.company`, with extensions counting up from `values.virt_exten`, all in one
    transaction; return them as the API answers numbers, in number order.

    Guarantees: System-Admin only. The numbers are those reserved for the company first, then
    the available ones (a reservation or aging period past its last day included), each group
    lowest first (picking.pick); with `force` and a `reason`, numbers held for other companies
    may be taken after them. Too few is a 409 `not_enough_numbers` whose `fields.count` says
    how many there are, and nothing changes. Each number goes in service through the change
    path (a history interval, an audit entry `ddi.create` with detail `allocate` or
    `force: <reason>`, a `ddi.created` event). Two allocations running at once never take the
    same number: on PostgreSQL each skips the numbers another has locked (FOR UPDATE SKIP
    LOCKED), so they do not queue behind each other either (for different companies: one
    company's writers take turns at its lock).
    """
    principal.require_system_admin("allocate numbers")
    if not isinstance(body, Mapping):
        raise Invalid("The body must be a JSON object.")
    wanted = parse(body)
    extens = ddis.consecutive(
        wanted.virt_exten, wanted.count, "virt_exten", "extensions would run past"
    )
    with write_transaction() as session:
        crud.require_companies_exist(session, [wanted.company])

        taken: dict[inventory.Key, Any] = {}

        def picked() -> list[dict[str, str]]:
            # Extensions count up in number order, whichever tier each number came from.
            taken.update(((r.dialcode, r.number), r) for r in _pick(wanted))
            return [
                {"dialcode": d, "number": n, "virt_exten": e, "company": wanted.company}
                for (d, n), e in zip(sorted(taken), extens, strict=True)
            ]

        rows = crud.put_in_service(
            session,
            principal,
            DDI,
            [wanted.company],
            picked,
            reason=wanted.reason,
            detail="allocate",
        )
        on = inventory.today()
        return [
            answers.answer(
                principal,
                answers.moved(taken[(r["dialcode"], r["number"])], inventory.IN_SERVICE),
                on,
                company=r["company"],
                virt_exten=r["virt_exten"],
            )
            for r in rows
        ]


def _pick(wanted: Allocation) -> list[Number]:
    """The numbers to take, locked: the company's reservations, then the available numbers
    (picking.pick: lowest first, skipping what other writers hold), then, overriding, the
    holds of other companies. Conflict if too few."""
    on = inventory.today()
    session = db.session()
    where = (session, wanted.dialcode, wanted.prefix)
    rows = picking.pick(*where, wanted.count, on, reserved_for=wanted.company)
    rows += picking.pick(*where, wanted.count - len(rows), on)
    if len(rows) < wanted.count and wanted.reason is not None:
        rows += _held_for_others(wanted, wanted.count - len(rows), on)
    if len(rows) < wanted.count:
        there = _available(wanted, on)
        raise Conflict(
            f"Only {counted(there, 'number')} can be allocated there; nothing was allocated.",
            {"count": f"{there} available"},
            code="not_enough_numbers",
        )
    return rows


def _held_for_others(wanted: Allocation, need: int, on: date) -> list[Number]:
    """Up to `need` numbers held for other companies (reserved or aging), lowest first,
    locked (skipping those other writers hold): what a forced allocation may go on to."""
    n = Number
    others = or_(n.state == inventory.AGING, n.held_for != wanted.company)
    query = (
        select(n)
        .where(*_matching(wanted), n.state.in_(inventory.HELD), n.held_until >= on, others)
        .order_by(n.dialcode, n.number)
        .limit(need)
        .with_for_update(skip_locked=True)
    )
    return list(db.session.scalars(query))


def _matching(wanted: Allocation) -> list[ColumnElement[bool]]:
    return picking.in_range(wanted.dialcode, wanted.prefix)


def _available(wanted: Allocation, on: date) -> int:
    """How many numbers the allocation could take (its reservations and the available ones;
    with an override, the holds of others too), those other writers hold locked included."""
    n = Number
    free = [
        and_(n.state == inventory.RESERVED, n.held_for == wanted.company, n.held_until >= on),
        inventory.in_state(inventory.AVAILABLE, on),
    ]
    if wanted.reason is not None:
        free.append(and_(n.state.in_(inventory.HELD), n.held_until >= on))
    query = select(func.count()).where(*_matching(wanted), or_(*free))
    return int(db.session.scalar(query) or 0)
