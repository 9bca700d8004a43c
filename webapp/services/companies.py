"""Companies: the identifier every DDI, phone user, grant and report refers to."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, func, or_, select, true
from sqlalchemy.exc import IntegrityError

from ..access import CompanyScope, Principal, within
from ..database import write_transaction
from ..extensions import db
from ..models import Company, DailyPeak, Ddi, PhoneUser
from . import audit, paging, rollups
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


# The orders of the companies list (System-Admin): each ends with the identifier, so it is
# total. Sorting by DDI or phone-user count would need every company's count first (a pass over
# a million DDIs, well over the page's budget at provider scale), so the list sorts by
# identifier and name only; the counts are read for the page's 50 companies alone.
SORTS = ("id", "name")


def count_now(kind: str, company: ColumnElement[str]) -> ColumnElement[int]:
    """How many records of `kind` a company holds now, as a scalar subquery on `company`.

    Read from the report rollup where it is built: the level its latest row leaves is the
    number of open history intervals, which the change path keeps equal to the stored records
    (tests/invariants.py), and it is one index seek whatever the company's size. Counting a
    large company's rows instead costs a pass over them: 224,000 DDIs for the first page of
    the bench, 200 ms on a PostgreSQL whose visibility map is not set. While the rollup is not
    built, counted."""
    if rollups.built_zone(db.session(), kind) is not None:
        level = (
            select(DailyPeak.level)
            .where(DailyPeak.kind == kind, DailyPeak.company == company)
            .order_by(DailyPeak.day.desc())
            .limit(1)
            .scalar_subquery()
        )
        return func.coalesce(level, 0)
    model = Ddi if kind == "ddi" else PhoneUser
    return select(func.count()).where(model.company == company).scalar_subquery()


@dataclass(frozen=True)
class CompanyPage:
    """One page of the companies list: `number` is 1-based and within 1..pages."""

    rows: list[CompanyRow]
    total: int
    number: int
    pages: int


def search(
    principal: Principal,
    q: object = "",
    *,
    sort: object = "id",
    descending: bool = False,
    page: object = 1,
    per_page: int = 50,
) -> CompanyPage:
    """The companies whose identifier or name contains `q` (case-insensitive), in `sort` order
    (the identifier breaks ties), one page of `per_page` with their DDI and phone-user counts
    (System-Admin). A page past the end answers the last one. Two queries (beside the rollup
    state): the count, and the page with its companies' counts (`count_now`)."""
    principal.require_system_admin("manage companies")
    text = paging.search_text(q)
    number = paging.page_number(page)
    if sort not in SORTS:
        raise Invalid(
            f"Sort by one of: {', '.join(SORTS)}.", {"sort": f"one of {', '.join(SORTS)}"}
        )
    matches = (
        or_(
            Company.id.icontains(text, autoescape=True),
            Company.name.icontains(text, autoescape=True),
        )
        if text
        else true()
    )
    total = db.session.scalar(select(func.count()).select_from(Company).where(matches)) or 0
    number, pages = paging.clamp(number, total, per_page)
    keys = [Company.name, Company.id] if sort == "name" else [Company.id]
    window = (
        select(Company.id, Company.name, Company.created_at)
        .where(matches)
        .order_by(*[k.desc() if descending else k.asc() for k in keys])
        .offset((number - 1) * per_page)
        .limit(per_page)
        .subquery()
    )
    outer_keys = [window.c.name, window.c.id] if sort == "name" else [window.c.id]
    query = select(
        window.c.id,
        window.c.name,
        window.c.created_at,
        count_now("ddi", window.c.id),
        count_now("user", window.c.id),
    ).order_by(*[k.desc() if descending else k.asc() for k in outer_keys])
    rows = [CompanyRow(*row) for row in db.session.execute(query)]
    return CompanyPage(rows, total, number, pages)


def get(principal: Principal, company_id: str) -> Company:
    """One company (System-Admin); NotFound if there is none with this identifier."""
    principal.require_system_admin("manage companies")
    company = db.session.get(Company, company_id)
    if company is None:
        raise NotFound("No such company.")
    return company
