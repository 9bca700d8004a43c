"""A number as every `/rest/numbers/…` answer gives it (docs/numbers.md, "Read"), one
construction for read, reserve and allocate."""

from __future__ import annotations

from datetime import date
from types import SimpleNamespace
from typing import Any

from ...access import Principal
from .. import inventory

FIELDS = (
    "dialcode",
    "number",
    "state",
    "company",
    "virt_exten",
    "description",
    "reserved_until",
    "aging_until",
    "previous_company",
)


def moved(
    row: Any, state: str, held_for: str | None = None, held_until: date | None = None
) -> SimpleNamespace:
    """`row` as a move left it, for `answer`: the move updated the stored row in SQL, past the
    loaded object, and changed only its state and hold; the rest is as loaded."""
    return SimpleNamespace(
        dialcode=row.dialcode,
        number=row.number,
        state=state,
        held_for=held_for,
        held_until=held_until,
        description=row.description,
        previous_company=row.previous_company,
    )


def answer(
    principal: Principal,
    row: Any,
    on: date,
    company: str | None = None,
    virt_exten: str | None = None,
) -> dict[str, Any]:
    """`row` (a models.Number, or a row with its columns) as the API answers it on day `on`:
    the state its dates give (inventory.state_of), `company` the in-service DDI's company
    (`company`, `virt_exten`: its DDI row's) or the company a reservation is for, null where a
    field does not apply. `previous_company` is shown to a System-Admin only (docs/numbers.md:
    a Company-Admin never learns who had a number before)."""
    state = inventory.state_of(row, on)
    held = row.held_until.isoformat() if row.held_until is not None else None
    return {
        "dialcode": row.dialcode,
        "number": row.number,
        "state": state,
        "company": company
        if state == inventory.IN_SERVICE
        else (row.held_for if state == inventory.RESERVED else None),
        "virt_exten": virt_exten if state == inventory.IN_SERVICE else None,
        "description": row.description,
        "reserved_until": held if state == inventory.RESERVED else None,
        "aging_until": held if state == inventory.AGING else None,
        "previous_company": row.previous_company if principal.system_admin else None,
    }
