"""What only DDIs have: linking one number to an extension, and creating a block of
consecutive numbers. Create, read, update and delete are crud.py's and record_query.py's,
with kinds.DDI."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import select

from ...access import Principal
from ...database import write_transaction
from ...errors import Conflict, Invalid, NotFound
from ...extensions import db
from ...models import Ddi
from ...wording import ddi_number
from .. import inventory
from ..fields import Bounded, Part, parse_part
from . import crud
from .kinds import DDI

LINK_SCOPE = replace(DDI.key_part, doc="The DDI a link names.")
LINK_VALUES = Part(
    ("virt_exten", "company", *DDI.number_fields),
    ("virt_exten", "company"),
    name="DdiLink",
    doc="Where a link puts the DDI: both the extension and the company; and, if given, the "
    "number's new description.",
)


def link(principal: Principal, scope: Any, values: Any) -> int:
    """Point the one DDI named by scope.dialcode + scope.number at values.virt_exten in
    values.company; return 1.

    Guarantees: a DDI that does not exist and one of a company the principal does not
    administer are the same NotFound, so existence does not leak; a new company outside the
    principal's grants is Forbidden; a company change moves the history interval. A number
    not in service but reserved for values.company goes in service there (docs/numbers.md:
    how a Company-Admin takes the numbers reserved for it), audited as a create; any other
    number not in service is the same NotFound. values.description, if given, becomes the
    number's description (audited); without it the number keeps its own.
    """
    principal.require_admin()
    scope = parse_part(LINK_SCOPE, scope, "scope")
    values = parse_part(LINK_VALUES, values, "values")
    principal.require_admin_of([values["company"]])
    with write_transaction() as session:
        crud.require_companies_exist(session, [values["company"]])
        row = session.scalars(
            select(Ddi)
            .where(Ddi.dialcode == scope["dialcode"], Ddi.number == scope["number"])
            .with_for_update()
        ).one_or_none()
        if row is None:
            # Only a number reserved for the company (else NotFound, from the inventory).
            new = {**scope, **values}
            detail = f"link of a number reserved for {values['company']}"
            crud.put_in_service(
                session,
                principal,
                DDI,
                [values["company"]],
                lambda: [new],
                detail=detail,
                reserved_only=True,
            )
            return 1
        if not principal.may_admin(row.company):
            raise NotFound("No such DDI.")
        crud.apply_changes(session, principal, DDI, [row], values, "link")
    return 1


def description(dialcode: str, number: str) -> str:
    """The description of a number ('' when it has none, or is not in the inventory); the
    caller has checked that the principal sees the DDI (the edit form's, record_query.get)."""
    found = inventory.descriptions(db.session(), [(dialcode, number)])
    return found.get((dialcode, number), "")


MAX_BLOCK = 10_000
BLOCK_SIZE = Bounded(1, MAX_BLOCK)


@dataclass(frozen=True)
class Block:
    """A block of numbers as created: the first and the last DDI, and how many."""

    first: dict[str, str]
    last: dict[str, str]
    count: int


def create_block(principal: Principal, values: Any, count: Any, same_extension: bool) -> Block:
    """Create `count` consecutive numbers from values.number (same dialcode and company),
    with values.virt_exten for all (`same_extension`) or incremented by one per number.

    Guarantees: System-Admin only; the checks of a batch create, all or nothing; a block
    that would run past its number's digits or an extension past 10 digits is Invalid; if any
    number of the block is taken, Conflict names how many and the first, and nothing is
    created. Numbers keep the first one's width ('0100' is followed by '0101').
    """
    crud.require_create_delete(principal, DDI, "create")
    first = parse_part(DDI.create_part, values, "values")
    size = BLOCK_SIZE.parse(count, "count", "How many")
    if size is None:
        raise Invalid("'count' is required.", {"count": "required"})
    numbers = consecutive(first["number"], size, "number", "the block would run past")
    if same_extension:
        extens = [first["virt_exten"]] * size
    else:
        extens = consecutive(first["virt_exten"], size, "virt_exten", "extensions would run past")
    rows = [{**first, "number": n, "virt_exten": e} for n, e in zip(numbers, extens, strict=True)]
    _refuse_taken(first["dialcode"], numbers)
    crud.insert_rows(principal, DDI, rows, batch=False)
    return Block(rows[0], rows[-1], size)


def consecutive(start: str, count: int, field: str, why: str) -> list[str]:
    """`count` numbers from `start` up, zero-padded to its width; Invalid past 10 digits for
    an extension or past the width for a number (a block keeps its number's length). Blocks
    and allocations (services/numbers) count their extensions so."""
    width = len(start)
    limit = width if field == "number" else 10
    last = str(int(start) + count - 1).zfill(width)
    if len(last) > limit:
        highest = "9" * limit
        message = f"{why} {highest}: at most {int(highest) - int(start) + 1:,} from {start}"
        raise Invalid(message[0].upper() + message[1:] + ".", {field: message})
    return [str(int(start) + i).zfill(width) for i in range(count)]


def _refuse_taken(dialcode: str, numbers: list[str]) -> None:
    """Conflict naming how many of `numbers` exist already, and the first of them."""
    width = len(numbers[0])
    taken = [
        n
        for n in db.session.scalars(
            select(Ddi.number)
            .where(Ddi.dialcode == dialcode, Ddi.number.between(numbers[0], numbers[-1]))
            .order_by(Ddi.number)
        )
        if len(n) == width
    ]
    db.session.rollback()  # end the read: the create opens its own write transaction
    if taken:
        many = (
            f"{len(taken):,} of these numbers are" if len(taken) > 1 else "One of these numbers is"
        )
        # Only the pages create blocks: the number as they write it.
        first = ddi_number(dialcode, taken[0])
        raise Conflict(
            f"{many} taken already (the first: {first}); nothing was created.",
            {"number": f"{first} is taken"},
        )
