"""DDIs: public numbers (dialcode + number) linked to an extension and owned by a company."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from ..access import Principal
from ..database import write_transaction
from ..models import Ddi
from . import record_query, records
from .errors import NotFound
from .fields import Part, parse_part


def stored_row(values: dict[str, str]) -> dict[str, str]:
    """A new DDI's stored columns: its fields and its number's digits reversed, which the
    number search seeks by the end of the number (record_query, q)."""
    return {**values, "number_reversed": values["number"][::-1]}


KIND = records.Kind(
    name="ddi",
    label="DDI",
    model=Ddi,
    fields=("dialcode", "number", "virt_exten", "company"),
    order=("dialcode", "number"),
    keys=("dialcode", "number"),
    history_key=lambda row: f"{row.dialcode}:{row.number}",
    global_key=True,
    company_admin_creates=False,
    conflict_message="A DDI with this dialcode and number already exists.",
    stored=stored_row,
)

LINK_SCOPE = Part(allowed=("dialcode", "number"), required=("dialcode", "number"))
LINK_VALUES = Part(allowed=("virt_exten", "company"), required=("virt_exten", "company"))


def create(principal: Principal, values: Any) -> int:
    """See records.create: System-Admin only."""
    return records.create(principal, KIND, values)


def read(principal: Principal, scope: Any, limit: Any = None, offset: Any = None):
    """See record_query.read."""
    return record_query.read(principal, KIND, scope, limit, offset)


def update(principal: Principal, scope: Any, values: Any) -> int:
    """See records.update."""
    return records.update(principal, KIND, scope, values)


def delete(principal: Principal, scope: Any) -> int:
    """See records.delete_rows: System-Admin only."""
    return records.delete_rows(principal, KIND, scope)


def link(principal: Principal, scope: Any, values: Any) -> int:
    """Point the one DDI named by scope.dialcode + scope.number at values.virt_exten in
    values.company; return 1.

    Guarantees: a DDI that does not exist and one of a company the principal does not
    administer are the same NotFound, so existence does not leak; a new company outside the
    principal's grants is Forbidden; a company change moves the history interval.
    """
    principal.require_admin()
    scope = parse_part(LINK_SCOPE, scope, "scope")
    values = parse_part(LINK_VALUES, values, "values")
    principal.require_admin_of([values["company"]])
    with write_transaction() as session:
        records.require_companies_exist(session, [values["company"]])
        row = session.scalars(
            select(Ddi)
            .where(Ddi.dialcode == scope["dialcode"], Ddi.number == scope["number"])
            .with_for_update()
        ).one_or_none()
        if row is None or not principal.may_admin(row.company):
            raise NotFound("No such DDI.")
        records.apply_changes(session, principal, KIND, [row], values, "link")
    return 1
