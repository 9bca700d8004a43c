"""Phone users: a company's telephony users (billed per day), keyed by (company, username)."""

from __future__ import annotations

from typing import Any

from ..access import Principal
from ..models import PhoneUser
from . import record_query, records

KIND = records.Kind(
    name="user",
    label="phone user",
    model=PhoneUser,
    fields=("username", "virt_exten", "company"),
    order=("company", "username"),
    keys=("username",),
    history_key=lambda row: row.username,
    global_key=False,
    company_admin_creates=True,
    conflict_message="A phone user with this username already exists in that company.",
)


def create(principal: Principal, values: Any) -> int:
    """See records.create: System-Admin or the Company-Admin of every row's company."""
    return records.create(principal, KIND, values)


def read(principal: Principal, scope: Any, limit: Any = None, offset: Any = None):
    """See record_query.read."""
    return record_query.read(principal, KIND, scope, limit, offset)


def update(principal: Principal, scope: Any, values: Any) -> int:
    """See records.update; moving a user onto a username taken in the new company conflicts."""
    return records.update(principal, KIND, scope, values)


def delete(principal: Principal, scope: Any) -> int:
    """See records.delete_rows: System-Admin or the Company-Admin of scope.company."""
    return records.delete_rows(principal, KIND, scope)
