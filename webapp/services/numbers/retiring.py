"""Retire (docs/numbers.md, "Retire"): numbers leave the inventory for good (ported away,
returned to the carrier). System-Admin only.

The numbers' rows are deleted; their history intervals and audit entries stay, keyed by the
number, so a DDI's page still shows its past. Through the change path with no history to
write: each number retired gets its audit entry and number.retired event there
(inventory.number_change).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from sqlalchemy import delete, or_, select
from sqlalchemy.orm import Session

from ...access import Principal
from ...database import write_transaction
from ...errors import Conflict, Invalid, NotFound
from ...models import Number
from .. import changes, inventory
from ..history import intervals
from ..history.audit import AuditData
from . import picking, requests
from .requests import Target


def retire(principal: Principal, body: Any) -> int:
    """Remove available or aging numbers from the inventory; return how many.

    Guarantees: all or nothing. By number: one in service or reserved is a Conflict, one
    aging the 409 `number_aging` unless forced with a reason (kept as the audit entry's
    detail), one not in the inventory NotFound. By prefix: every available number starting
    with it, and every aging one when forced (one aging number without force is the 409 and
    nothing is retired); numbers in service or reserved there are left as they are, and none
    to retire is a success with 0."""
    principal.require_system_admin("retire numbers")
    target, override = requests.parse_retire(body)
    on = inventory.today()
    with write_transaction() as session:

        def step(_now: datetime) -> changes.Change:
            rows = _retirable(session, target, on)
            states = [inventory.state_of(row, on) for row in rows]
            aging = [row for row, s in zip(rows, states, strict=True) if s == inventory.AGING]
            if aging and not override.force:
                raise _aging(aging[0], on)
            _delete(session, rows)
            return changes.Change(
                audit=[
                    _retired(row, state, override.reason)
                    for row, state in zip(rows, states, strict=True)
                ]
            )

        change = changes.write(session, principal, None, changes.Lock(), step)
    return len(change.audit)


def retire_numbers(
    principal: Principal, keys: Sequence[inventory.Key], reason: str | None = None
) -> int:
    """Remove the numbers `keys` (a list's ticks or all it matched: the bulk action of
    /ddis) from the inventory; return how many.

    Guarantees: all or nothing, each number as `retire` by number: available ones leave,
    aging ones only with a `reason` (checked as an override's, kept as their audit entries'
    detail; without it the 409 `number_aging`); one in service or reserved is a Conflict
    naming it and what it is, one not in the inventory NotFound, and nothing is retired."""
    principal.require_system_admin("retire numbers")
    if reason is not None:
        reason = inventory.parse_override(True, reason)
    wanted = sorted(set(keys))
    if not wanted:
        raise Invalid("Name at least one number.", {"number": "required"})
    on = inventory.today()
    with write_transaction() as session:

        def step(_now: datetime) -> changes.Change:
            rows = inventory.locked_rows(session, wanted)
            states = [inventory.state_of(row, on) for row in rows]
            for row, state in zip(rows, states, strict=True):
                if state not in (inventory.AVAILABLE, inventory.AGING):
                    now = inventory.described(row, on)
                    raise Conflict(
                        f"The number {row.dialcode}:{row.number} is {now}: only available "
                        "and aging numbers can be retired. Nothing was retired.",
                        {"number": now},
                    )
                if state == inventory.AGING and reason is None:
                    raise _aging(row, on)
            _delete(session, rows)
            return changes.Change(
                audit=[_retired(row, s, reason) for row, s in zip(rows, states, strict=True)]
            )

        changes.write(session, principal, None, changes.Lock(), step)
    return len(wanted)


def _delete(session: Session, rows: list[Number]) -> None:
    """The numbers `rows` out of the inventory, and their descriptions' words with them."""
    for chunk in intervals.chunks([row.id for row in rows]):
        session.execute(
            delete(Number).where(Number.id.in_(chunk)).execution_options(synchronize_session=False)
        )
    inventory.forget_words(session, [(row.dialcode, row.number) for row in rows])


def _retired(row: Number, state: str, reason: str | None) -> AuditData:
    """A retire's audit entry and event: the reason is the detail of aging numbers' only."""
    return inventory.number_change(
        "retire",
        (row.dialcode, row.number),
        {"state": state, "company": None},
        None,
        detail=reason if state == inventory.AGING else None,
    )


def _retirable(session: Session, target: Target, on: date) -> list[Number]:
    """The scope's numbers that may leave the inventory (available or aging), locked in key
    order; for one number, a Conflict or NotFound when it may not."""
    if target.number is None:
        assert target.prefix is not None
        query = (
            select(Number)
            .where(
                *picking.in_range(target.dialcode, target.prefix),
                or_(
                    inventory.in_state(inventory.AVAILABLE, on),
                    inventory.in_state(inventory.AGING, on),
                ),
            )
            .order_by(Number.dialcode, Number.number)
            .with_for_update()
        )
        return list(session.scalars(query))
    row = inventory.lock(session, [target.key]).get(target.key)
    name = f"{target.dialcode}:{target.number}"
    if row is None:
        raise NotFound(
            f"The number {name} is not in the inventory.", {"number": "not in the inventory"}
        )
    state = inventory.state_of(row, on)
    if state == inventory.IN_SERVICE:
        raise Conflict(
            f"The number {name} is in service: delete the DDI first.", {"number": "in service"}
        )
    if state == inventory.RESERVED:
        raise Conflict(
            f"The number {name} is reserved until {row.held_until}: release it first.",
            {"number": f"reserved until {row.held_until}"},
        )
    return [row]


def _aging(row: Number, on: date) -> Conflict:
    """The 409 number_aging for `row` (held_conflict's, for no company it was left by)."""
    problem = inventory.held_conflict(row, "", on)
    assert problem is not None
    return problem
