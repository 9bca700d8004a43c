"""Companies: the identifier every DDI, phone user, grant and report refers to."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from ..access import CompanyScope, Principal, within
from ..database import write_transaction
from ..extensions import db
from ..models import Company, Ddi, PhoneUser
from . import audit
from .errors import Conflict, Invalid, NotFound
from .fields import check_format

MAX_NAME = 200


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise Invalid("A company needs a name.", {"name": "required"})
    name = name.strip()
    if len(name) > MAX_NAME or any(ord(ch) < 32 for ch in name):
        raise Invalid(
            "A company name is at most 200 printable characters.",
            {"name": "at most 200 printable characters"},
        )
    return name


def create(principal: Principal, company_id: object, name: object) -> Company:
    """Add a company (System-Admin); Conflict if the identifier is taken. Audited."""
    principal.require_system_admin("create companies")
    if (why := check_format("company", company_id)) is not None:
        raise Invalid(f"Company identifier {why}.", {"id": why})
    assert isinstance(company_id, str)  # check_format accepts only text
    name = _check_name(name)
    with write_transaction() as session:
        company = Company(id=company_id, name=name)
        session.add(company)
        try:
            session.flush()
        except IntegrityError as exc:
            raise Conflict(f"Company '{company_id}' already exists.") from exc
        audit.record(
            session,
            [
                audit.entry(
                    principal,
                    "company.create",
                    f"company {company_id}",
                    company=company_id,
                    after={"id": company_id, "name": name},
                )
            ],
        )
    return company


def rename(principal: Principal, company_id: str, name: object) -> None:
    """Change a company's display name (System-Admin); its identifier never changes. Audited."""
    principal.require_system_admin("rename companies")
    name = _check_name(name)
    with write_transaction() as session:
        company = session.get(Company, company_id, with_for_update=True)
        if company is None:
            raise NotFound("No such company.")
        before = {"id": company.id, "name": company.name}
        company.name = name
        audit.record(
            session,
            [
                audit.entry(
                    principal,
                    "company.rename",
                    f"company {company_id}",
                    company=company_id,
                    before=before,
                    after={"id": company.id, "name": name},
                )
            ],
        )


def listed(scope: CompanyScope) -> list[Company]:
    """The companies within one of a Principal's company scopes (every one for None), by id."""
    return list(
        db.session.scalars(select(Company).where(within(Company.id, scope)).order_by(Company.id))
    )


def visible(principal: Principal) -> list[Company]:
    """Companies the principal administers or may report on (all for a System-Admin), by id."""
    return listed(principal.visible_companies())


@dataclass(frozen=True)
class CompanyRow:
    """A company with how many DDIs and phone users it holds now."""

    id: str
    name: str
    created_at: datetime
    ddis: int
    users: int


def list_all(principal: Principal) -> list[CompanyRow]:
    """Every company with its DDI and phone-user counts, by id (System-Admin), in one query."""
    principal.require_system_admin("manage companies")
    ddi_counts = (
        select(Ddi.company.label("company"), func.count().label("n"))
        .group_by(Ddi.company)
        .subquery()
    )
    user_counts = (
        select(PhoneUser.company.label("company"), func.count().label("n"))
        .group_by(PhoneUser.company)
        .subquery()
    )
    query = (
        select(
            Company.id,
            Company.name,
            Company.created_at,
            func.coalesce(ddi_counts.c.n, 0),
            func.coalesce(user_counts.c.n, 0),
        )
        .outerjoin(ddi_counts, ddi_counts.c.company == Company.id)
        .outerjoin(user_counts, user_counts.c.company == Company.id)
        .order_by(Company.id)
    )
    return [CompanyRow(*row) for row in db.session.execute(query)]


def get(principal: Principal, company_id: str) -> Company:
    """One company (System-Admin); NotFound if there is none with this identifier."""
    principal.require_system_admin("manage companies")
    company = db.session.get(Company, company_id)
    if company is None:
        raise NotFound("No such company.")
    return company
