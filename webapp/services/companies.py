"""Companies: the identifier every DDI, phone user, grant and report refers to."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import InstrumentedAttribute, aliased

from ..access import CompanyScope, Principal, within
from ..database import on_postgresql, upper_bound, write_transaction
from ..errors import Conflict, Forbidden, Invalid, NotFound
from ..extensions import db
from ..models import Company, Ddi, PhoneUser, RollupLatest
from . import paging
from .billing import rollups
from .fields import check_format
from .history import audit

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
        rollups.start_company(session, company_id)
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
# total. By DDI or phone-user count, each company's count is its rollup level (`count_now`'s,
# its rollup_latest row, read in the order of that table's level index: `_page_of`), never a
# pass over the million DDIs. While a kind's rollup is not built its counts would be such a
# pass, so that sort is refused then (`count_sortable`); the counts of the page's 50
# companies are still shown.
SORTS = ("id", "name", "ddis", "users")
COUNT_SORTS = {"ddis": "ddi", "users": "user"}


def count_sortable() -> frozenset[str]:
    """The count orders (`COUNT_SORTS`) the list may be sorted by now: those whose kind's
    report rollup is built."""
    session = db.session()
    return frozenset(s for s, kind in COUNT_SORTS.items() if rollups.built_zone(session, kind))


def count_now(
    kind: str,
    company: ColumnElement[str] | InstrumentedAttribute[str],
    built: bool | None = None,
) -> ColumnElement[int]:
    """How many records of `kind` a company holds now, as a scalar subquery on `company`.

    Read from the report rollup where it is built: the level its latest row leaves is the
    number of open history intervals, which the change path keeps equal to the stored records
    (tests/invariants.py), and it is one index seek whatever the company's size. Counting a
    large company's rows instead costs a pass over them: 224,000 DDIs for the first page of
    the bench, 200 ms on a PostgreSQL whose visibility map is not set. While the rollup is not
    built, counted. `built`: whether the kind's rollup is built, when the caller knows."""
    if built is None:
        built = rollups.built_zone(db.session(), kind) is not None
    if built:
        # The company's rollup_latest row (every company has one: models.RollupLatest), the
        # level the count orders sort by: one primary-key seek.
        level = (
            select(RollupLatest.level)
            .where(RollupLatest.kind == kind, RollupLatest.company == company)
            .scalar_subquery()
        )
        return func.coalesce(level, 0)
    model = Ddi if kind == "ddi" else PhoneUser
    return select(func.count()).where(model.company == company).scalar_subquery()


@dataclass(frozen=True)
class CompanyPage:
    """One page of the companies list: `number` is 1-based and within 1..pages. `sortable`:
    the orders the list may take now (the count orders need the rollup: `count_sortable`)."""

    rows: list[CompanyRow]
    total: int
    number: int
    pages: int
    sortable: frozenset[str] = frozenset(SORTS)


def _sort_keys(sort: str, columns: Any) -> list[Any]:
    """The list's order as columns of `columns` (Company, or the page's window): the sort key,
    then the identifier, which makes it total."""
    if sort == "id":
        return [columns["id"]]
    return [columns[sort], columns["id"]]


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
    (`id`, `name`, `ddis` or `users`: the identifier breaks ties, in the same direction), one
    page of `per_page` with their DDI and phone-user counts (System-Admin). A page past the end
    answers the last one. Invalid for another sort, and for a count sort while that kind's
    report rollup is not built (`count_sortable`). Two queries beside the rollup state: the
    count, and the page with its companies' counts (`count_now`)."""
    principal.require_system_admin("manage companies")
    return _page_of(None, q, sort=sort, descending=descending, page=page, per_page=per_page)


def browse(
    principal: Principal,
    q: object = "",
    *,
    sort: object = "id",
    descending: bool = False,
    page: object = 1,
    per_page: int = 50,
) -> CompanyPage:
    """`search` over the companies the principal may open (`Principal.visible_companies`):
    every company for Billing Call-Summary, the granted ones for Billing/Call Reporting and a
    Company-Admin; the same paging, orders and counts, read-only. Forbidden for an account
    that may open no company's page (a System-Admin may: every company)."""
    scope = principal.visible_companies()
    if scope is not None and not scope:
        raise Forbidden("This account may not open any company's page.")
    return _page_of(scope, q, sort=sort, descending=descending, page=page, per_page=per_page)


def _page_of(
    scope: CompanyScope,
    q: object,
    *,
    sort: object,
    descending: bool,
    page: object,
    per_page: int,
) -> CompanyPage:
    """One page of the companies within `scope` matching `q` (`search` says how)."""
    text = paging.search_text(q)
    number = paging.page_number(page)
    if sort not in SORTS:
        raise Invalid(
            f"Sort by one of: {', '.join(SORTS)}.", {"sort": f"one of {', '.join(SORTS)}"}
        )
    sortable = frozenset({"id", "name"}) | count_sortable()
    if sort not in sortable:
        raise Invalid(
            "Sorting by a count needs the report rollup: run `flask history rollup` first.",
            {"sort": "needs the report rollup"},
        )
    matches = _matching(text, scope)
    total = db.session.scalar(select(func.count()).select_from(Company).where(matches)) or 0
    number, pages = paging.clamp(number, total, per_page)
    built = {kind: s in sortable for s, kind in COUNT_SORTS.items()}
    # The page's companies first, worked out on the identifier and the sort key alone (the
    # name only when it is the key); the page's 50 companies then get their name, creation
    # time and two counts by key.
    inner: Select = select(Company.id).where(matches)
    if sort == "name":
        inner = inner.add_columns(Company.name)
    if sort in COUNT_SORTS:
        # Every company's count is its rollup_latest row's level (count_now's answer, kept
        # beside the rollup, tests/invariants.py), and every company has one once the kind's
        # rollup is built (models.RollupLatest): the order is one range of
        # ix_rollup_latest_level (kind, level, company), read as far as the page. The
        # companies table is joined only to search names; joining every company to find
        # those without a row cost PostgreSQL 160-190 ms at 100,000 (bench/README.md).
        latest = aliased(RollupLatest)
        inner = select(latest.company.label("id"), latest.level.label(sort)).where(
            latest.kind == COUNT_SORTS[sort]
        )
        if text:
            inner = inner.join(Company, Company.id == latest.company).where(matches)
        else:
            inner = inner.where(within(latest.company, scope))
    ordered = [
        k.desc() if descending else k.asc() for k in _sort_keys(sort, inner.selected_columns)
    ]
    window = inner.order_by(*ordered).offset((number - 1) * per_page).limit(per_page).subquery()
    query = (
        select(
            Company.id,
            Company.name,
            Company.created_at,
            count_now("ddi", Company.id, built["ddi"]),
            count_now("user", Company.id, built["user"]),
        )
        .join(window, window.c.id == Company.id)
        .order_by(*[k.desc() if descending else k.asc() for k in _sort_keys(sort, window.c)])
    )
    rows = [CompanyRow(*row) for row in db.session.execute(query)]
    return CompanyPage(rows, total, number, pages, sortable)


def _matching(text: str, scope: CompanyScope) -> ColumnElement[bool]:
    """The companies lists' search: identifier or name contains `text`, any case ("" every
    company), within `scope`."""
    if not text:
        return within(Company.id, scope)
    # Identifiers are lower-case. SQLite's LIKE ignores case (ASCII, as its lower() does) by
    # itself, and lower() on every row made a pass over 10,000 companies 20 times slower.
    name = (
        Company.name.icontains(text, autoescape=True)
        if on_postgresql()
        else Company.name.contains(text, autoescape=True)
    )
    matches = or_(Company.id.contains(text.lower(), autoescape=True), name)
    return and_(matches, within(Company.id, scope))


def first_matching(principal: Principal, q: object, limit: int) -> tuple[list[CompanyRow], bool]:
    """The first `limit` companies by identifier that the principal may open
    (`Principal.visible_companies`, every one for a System-Admin) and that the companies lists
    find for `q` (`search`: identifier or name contains it, any case), with their counts; and
    whether more match. One pass over the companies that stops at `limit` + 1 matches, no
    count of them all (the top bar's search, services/search.py). None for an empty `q`."""
    text = paging.search_text(q)
    scope = principal.visible_companies()
    if not text or (scope is not None and not scope):
        return [], False
    found = select(Company.id, Company.name, Company.created_at).where(_matching(text, scope))
    window = found.order_by(Company.id).limit(limit + 1).subquery()
    query = select(
        window.c.id,
        window.c.name,
        window.c.created_at,
        count_now("ddi", window.c.id),
        count_now("user", window.c.id),
    ).order_by(window.c.id)
    rows = [CompanyRow(*row) for row in db.session.execute(query)]
    return rows[:limit], len(rows) > limit


def get(principal: Principal, company_id: str) -> Company:
    """One company (System-Admin); NotFound if there is none with this identifier."""
    principal.require_system_admin("manage companies")
    company = db.session.get(Company, company_id)
    if company is None:
        raise NotFound("No such company.")
    return company


# --- company pickers ---------------------------------------------------------------------------
PICKER_PURPOSES = ("records", "reports", "audit", "grants", "webhooks")
# No purpose named (decisions.md §10's plain `/companies/suggest?q=TEXT`): what the account may see.
ANY_PURPOSE = ""
SUGGESTIONS = 20  # at most this many suggestions as someone types
CLOSEST = 5  # at most this many closest matches beside an unknown identifier
MAX_TYPED = 200  # longer text matches nothing anyway (identifiers 64, names 200)


def picker_scope(principal: Principal, purpose: str) -> CompanyScope:
    """The companies a picker for `purpose` may offer: a record form's or list's (records), the
    report choice's (reports), the audit filter's (audit), the grants' and a webhook's
    companies (every company: both are a System-Admin's only); no purpose (ANY_PURPOSE): every
    company the principal may see at all (Principal.visible_companies), never refused.
    Forbidden when the principal may not use that picker at all; Invalid for another purpose."""
    if purpose == ANY_PURPOSE:
        return principal.visible_companies()
    if purpose == "records":
        principal.require_admin()
        return principal.pickable_companies()
    if purpose == "reports":
        principal.require_report()
        return principal.reportable_companies()
    if purpose == "audit":
        principal.require_audit()
        return principal.auditable_companies()
    if purpose == "grants":
        principal.require_system_admin("grant companies")
        return None
    if purpose == "webhooks":
        principal.require_system_admin("manage webhooks")
        return None
    raise Invalid(
        "Say which picker this is for: records, reports, audit, grants or webhooks "
        "(or nothing, for every company you may see).",
        {"for": "must be empty or one of " + ", ".join(PICKER_PURPOSES)},
    )


def _typed(text: object) -> str:
    return text.strip().lower()[:MAX_TYPED] if isinstance(text, str) else ""


def _suggest_in(scope: CompanyScope, text: str, limit: int) -> list[Company]:
    visible = within(Company.id, scope)
    if not text:
        query = select(Company).where(visible).order_by(Company.id).limit(limit)
        return list(db.session.scalars(query))
    # Identifiers are lower-case a-z 0-9 . _ -, so a prefix of one is a range of the primary
    # key (the LIKE keeps the range exact whatever the collation: see record_query).
    starts = Company.id.startswith(text, autoescape=True)
    prefix = [starts, visible]
    if not on_postgresql():  # SQLite's binary order: the range is what an index seeks
        prefix += [Company.id >= text, Company.id < upper_bound(text)]
    found = list(
        db.session.scalars(select(Company).where(*prefix).order_by(Company.id).limit(limit))
    )
    if len(found) < limit:  # then the rest of the rows, identifier or name containing it
        contains = or_(
            Company.id.contains(text, autoescape=True),
            Company.name.icontains(text, autoescape=True),
        )
        query = (
            select(Company)
            .where(contains, visible, ~starts)
            .order_by(Company.id)
            .limit(limit - len(found))
        )
        found += db.session.scalars(query)
    return found


def suggest(
    principal: Principal, purpose: str, text: object, limit: int = SUGGESTIONS
) -> list[Company]:
    """At most `limit` companies of the picker's scope (`picker_scope`) whose identifier or
    name contains `text`, case-insensitively: identifier prefix matches first, then the others,
    each by identifier. Empty text: the first companies by identifier."""
    return _suggest_in(picker_scope(principal, purpose), _typed(text), limit)


def find(principal: Principal, purpose: str, text: object) -> Company | None:
    """The company of the picker's scope whose identifier is `text` (any case, spaces around
    ignored), or None: an unknown company and one outside the scope are alike."""
    scope = picker_scope(principal, purpose)
    typed = _typed(text)
    if not typed:
        return None
    query = select(Company).where(Company.id == typed, within(Company.id, scope))
    return db.session.scalars(query).first()


def closest(
    principal: Principal, purpose: str, text: object, limit: int = CLOSEST
) -> list[Company]:
    """Companies of the picker's scope close to a mistyped identifier: the suggestions for the
    text, else for a shorter start of it (one character less, half, the first character),
    else none: at most 8 queries, however long the text."""
    scope = picker_scope(principal, purpose)
    typed = _typed(text)
    n = len(typed)
    if not n:
        return []
    for length in sorted({n, n - 1, n // 2, 1}, reverse=True):
        if length >= 1 and (found := _suggest_in(scope, typed[:length], limit)):
            return found
    return []


def named(principal: Principal, purpose: str, ids: list[str]) -> dict[str, str]:
    """{identifier: name} of those of `ids` the picker for `purpose` may offer (others are
    left out, unknown or not)."""
    if not ids:
        return {}
    scope = picker_scope(principal, purpose)
    query = select(Company.id, Company.name).where(
        Company.id.in_(sorted(set(ids))), within(Company.id, scope)
    )
    return {row.id: row.name for row in db.session.execute(query)}


@dataclass(frozen=True)
class Label:
    """A company as a list shows it: its name beside its identifier, and whether the reader
    may open its page (Principal.may_view_company, the rule services.company_overview keeps)."""

    id: str
    name: str
    page: bool


def labels(principal: Principal, ids: Iterable[str | None]) -> dict[str, Label]:
    """{identifier: Label} of those of `ids` the principal may see (visible_companies), for the
    companies of one page of a list or of the audit log: one query however many rows, none
    for no identifiers. A company outside the principal's sight, or none at all, is absent,
    and its identifier shows alone; a caller passes only identifiers it already shows."""
    wanted = sorted({i for i in ids if i})
    if not wanted:
        return {}
    query = select(Company.id, Company.name).where(
        Company.id.in_(wanted), within(Company.id, principal.visible_companies())
    )
    return {
        row.id: Label(row.id, row.name, principal.may_view_company(row.id))
        for row in db.session.execute(query)
    }
