"""Create, read, update and delete for DDIs and phone users, under one set of rules.

A `Kind` describes what differs between the two (model, key fields, who may create); everything
else (validation, authorization, conflicts) is written once here, and every write reaches the
history, the rollup and the audit log through the change path (changes.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import Integer, Select, bindparam, delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..access import Principal
from ..database import write_transaction
from ..extensions import db
from ..models import Company
from . import changes, history
from .errors import Conflict, Invalid
from .fields import Part, parse_int, parse_part

MAX_BATCH = 1000
DEFAULT_LIMIT = 1000
MAX_LIMIT = 10_000
MAX_OFFSET = 2**31 - 1
EDITABLE = ("virt_exten", "company")


@dataclass(frozen=True)
class Kind:
    name: str  # the request's `type`, and the history/audit kind
    label: str  # for messages: "DDI", "phone user"
    model: type
    fields: tuple[str, ...]  # in answer order
    order: tuple[str, ...]  # read order
    keys: tuple[str, ...]  # fields fixed at creation
    history_key: Callable[[Any], str]
    company_admin_creates: bool  # may a Company-Admin create and delete these?
    global_key: bool  # unique across companies (DDIs) or only within one (phone users)
    conflict_message: str

    def as_dict(self, row: Any) -> dict[str, str]:
        return {f: getattr(row, f) for f in self.fields}

    def member(self, row: Any) -> tuple[str, str]:
        return (row.company, self.history_key(row))

    def key_label(self, row: Any) -> str:
        """How messages name the record: '44:2071234567', 'acme/ana.kim'."""
        key = self.history_key(row)
        return key if self.global_key else f"{row.company}/{key}"

    def target(self, row: Any) -> str:
        """How the audit log names the record: 'ddi 44:2071234567', 'user acme/ana.kim'."""
        return f"{self.name} {self.key_label(row)}"

    @property
    def create_part(self) -> Part:
        return Part(allowed=self.fields, required=self.fields)

    @property
    def scope_part(self) -> Part:
        return Part(allowed=self.fields)

    @property
    def scoped_write_part(self) -> Part:
        return Part(allowed=self.fields, required=("company",))

    @property
    def update_part(self) -> Part:
        return Part(allowed=EDITABLE, not_editable=self.keys, at_least_one=True)


@dataclass(frozen=True)
class Page:
    rows: list[dict[str, str]]
    total: int


def may_create_delete(principal: Principal, kind: Kind) -> bool:
    """Whether the principal may create and delete records of this kind at all (for some
    company): the pages use it to show only the controls that will work."""
    return principal.system_admin or (kind.company_admin_creates and principal.is_admin)


def require_create_delete(principal: Principal, kind: Kind, verb: str = "create or delete") -> None:
    """Forbidden unless may_create_delete: the check create and delete make, for callers (the
    pages) that must refuse before showing a form."""
    if not may_create_delete(principal, kind):
        if kind.company_admin_creates:
            principal.require_admin()
        principal.require_system_admin(f"{verb} {kind.label}s")


def require_companies_exist(session: Session, companies: Sequence[str], batch: bool = False):
    """400 naming the first company that does not exist: fields.company, or for a batch
    fields['values[i].company'] with the row it stands in."""
    found = set(session.scalars(select(Company.id).where(Company.id.in_(set(companies)))))
    for i, company in enumerate(companies):
        if company not in found:
            field = f"values[{i}].company" if batch else "company"
            raise Invalid(f"Company '{company}' does not exist.", {field: "unknown company"})


def _filters(kind: Kind, scope: dict[str, str]) -> list:
    columns = kind.model.__table__.c
    return [columns[f] == v for f, v in scope.items()]


def _parse_rows(kind: Kind, values: Any) -> list[dict[str, str]]:
    if isinstance(values, list):
        if not values:
            raise Invalid("'values' must hold at least one row.", {"values": "empty"})
        if len(values) > MAX_BATCH:
            raise Invalid(
                f"A batch holds at most {MAX_BATCH} rows.", {"values": f"at most {MAX_BATCH} rows"}
            )
        return [
            parse_part(kind.create_part, v, "values", prefix=f"values[{i}].")
            for i, v in enumerate(values)
        ]
    if values is None:
        raise Invalid("'values' is required.", {"values": "required"})
    return [parse_part(kind.create_part, values, "values")]


def create(principal: Principal, kind: Kind, values: Any) -> int:
    """Create one row or a batch of up to 1,000, all or nothing; return how many were created.

    Guarantees: each row opens a history interval and writes an audit entry in the same
    transaction; a duplicate key (in the batch or already stored, even by a racing request)
    raises Conflict and nothing is written.
    """
    require_create_delete(principal, kind, "create")
    rows = _parse_rows(kind, values)
    principal.require_admin_of(r["company"] for r in rows)
    with write_transaction() as session:
        require_companies_exist(session, [r["company"] for r in rows], isinstance(values, list))
        # One key order for every batch, so two overlapping batches lock keys in the same
        # order on PostgreSQL and one waits for the other instead of deadlocking.
        rows.sort(key=lambda r: [r[f] for f in kind.order])
        try:
            session.execute(kind.model.__table__.insert(), rows)
        except IntegrityError as exc:
            raise Conflict(kind.conflict_message) from exc
        # After the insert: if it waited for a racing delete of the same key, it is stamped
        # after that delete's end, so the key's intervals cannot overlap.
        changes.write(
            session,
            principal,
            kind.name,
            changes.Lock(companies=[r["company"] for r in rows]),
            lambda _now: _created(kind, rows),
        )
    return len(rows)


def _created(kind: Kind, rows: list[dict[str, str]]) -> changes.Change:
    shims = [Row(r) for r in rows]
    return changes.Change(
        starts=[(r["company"], kind.history_key(s)) for r, s in zip(rows, shims, strict=True)],
        audit=[
            changes.AuditData(f"{kind.name}.create", kind.target(s), company=r["company"], after=r)
            for r, s in zip(rows, shims, strict=True)
        ],
    )


class Row:
    """Attribute access over a plain dict, so Kind helpers work before a row is stored."""

    def __init__(self, data: dict[str, str]):
        self.__dict__.update(data)


@lru_cache(maxsize=512)
def _read_statements(
    kind: Kind,
    scope_fields: tuple[str, ...],
    restricted: bool,
) -> tuple[Select, Select]:
    """read's page and count statements for one shape of request, values left as parameters
    (scope_<field> for each scope field, limit, offset and the expanding `visible`), so a
    request only binds values instead of building and hashing a statement tree.

    The page carries the total: the count rides along as an uncorrelated scalar subquery,
    which both databases evaluate once (SQLite: a constant subquery; PostgreSQL: an InitPlan),
    so each half keeps its own index-driven plan (the count an index-only scan of the
    company's range, the page an ordered index scan stopped at `limit`); a window
    count(*) OVER () would read every match in full first. Plain columns, not ORM objects:
    the answer is dicts and nothing is changed."""
    table = kind.model.__table__
    filters = [table.c[f] == bindparam(f"scope_{f}") for f in scope_fields]
    if restricted:
        filters.append(table.c.company.in_(bindparam("visible", expanding=True)))
    order = [table.c[f] for f in kind.order]
    count = select(func.count()).select_from(table).where(*filters)
    page = (
        select(*(table.c[f] for f in kind.fields), count.correlate(None).scalar_subquery())
        .where(*filters)
        .order_by(*order)
        .limit(bindparam("limit", type_=Integer))
        .offset(bindparam("offset", type_=Integer))
    )
    return page, count


def read(
    principal: Principal,
    kind: Kind,
    scope: Any,
    limit: Any = None,
    offset: Any = None,
) -> Page:
    """Rows matching every scope field exactly, sorted by key, restricted silently to the
    companies the principal administers; `total` counts all matches, `rows` one page (the
    API's read; the pages page by keyset through services/listing.py)."""
    principal.require_admin()
    scope = parse_part(kind.scope_part, scope, "scope")
    limit = parse_int(limit, "limit", 0, MAX_LIMIT, DEFAULT_LIMIT)
    offset = parse_int(offset, "offset", 0, MAX_OFFSET, 0)
    visible = principal.admin_scope()
    if visible is not None and "company" in scope:
        # The company is matched exactly: inside the grants it is the whole restriction,
        # outside them nothing can match.
        if scope["company"] not in visible:
            return Page(rows=[], total=0)
        visible = None
    params: dict[str, Any] = {"limit": limit, "offset": offset}
    for field, value in scope.items():
        params[f"scope_{field}"] = value
    if visible is not None:
        params["visible"] = sorted(visible)
    page, count = _read_statements(kind, tuple(sorted(scope)), visible is not None)
    # On the session's connection (same transaction): a Core statement needs none of the
    # Session's ORM execution layer.
    connection = db.session.connection()
    result = connection.execute(page, params).all()
    rows = [dict(zip(kind.fields, r, strict=False)) for r in result]  # the count is left off
    if result:
        total = result[0][-1]
    elif offset or not limit:  # past the end, or no page asked for: no row carried the count
        total = connection.execute(count, params).scalar() or 0
    else:
        total = 0
    return Page(rows=rows, total=total)


def apply_changes(
    session: Session,
    principal: Principal,
    kind: Kind,
    rows: Sequence[Any],
    values: dict[str, str],
    action: str,
) -> int:
    """Set `values` on `rows`; move history for company changes; audit; return rows changed."""
    # Only a company change moves rollup rows: the old and the new company are locked.
    lock = [values["company"], *(r.company for r in rows)] if "company" in values else []
    change = changes.write(
        session,
        principal,
        kind.name,
        changes.Lock(companies=lock),
        lambda _now: _set_values(session, kind, rows, values, action),
    )
    return len(change.audit)


def _set_values(
    session: Session, kind: Kind, rows: Sequence[Any], values: dict[str, str], action: str
) -> changes.Change:
    moved_from: list[tuple[str, str]] = []
    moved_to: list[tuple[str, str]] = []
    entries: list[changes.AuditData] = []
    for row in rows:
        before = kind.as_dict(row)
        diff = {f: v for f, v in values.items() if getattr(row, f) != v}
        if not diff:
            continue
        if "company" in diff:
            moved_from.append(kind.member(row))
        for field, value in diff.items():
            setattr(row, field, value)
        if "company" in diff:
            moved_to.append(kind.member(row))
        entries.append(
            changes.AuditData(
                f"{kind.name}.{action}",
                kind.target(row),
                company=row.company,
                before=before,
                after=kind.as_dict(row),
            )
        )
    try:
        session.flush()
    except IntegrityError as exc:
        raise Conflict(kind.conflict_message) from exc
    return changes.Change(starts=moved_to, ends=moved_from, audit=entries)


def update(principal: Principal, kind: Kind, scope: Any, values: Any) -> int:
    """Set `virt_exten` and/or `company` on every row matching `scope` (whose company is
    required); return the number of rows whose values actually changed.

    Guarantees: both the scope company and a new company must be administered by the
    principal (else Forbidden); a company change closes the old history interval and opens the
    new one at the same instant; rows are locked for the transaction, so a racing delete or
    update cannot interleave.
    """
    principal.require_admin()
    scope = parse_part(kind.scoped_write_part, scope, "scope")
    values = parse_part(kind.update_part, values, "values")
    principal.require_admin_of(
        [scope["company"], *([values["company"]] if "company" in values else [])]
    )
    with write_transaction() as session:
        if "company" in values:
            require_companies_exist(session, [values["company"]])
        rows = session.scalars(
            select(kind.model)
            .where(*_filters(kind, scope))
            .order_by(kind.model.id)
            .with_for_update()
        ).all()
        return apply_changes(session, principal, kind, rows, values, "update")


def delete_rows(principal: Principal, kind: Kind, scope: Any) -> int:
    """Delete every row matching `scope` (company required); return how many were deleted.

    Guarantees: each deleted row's history interval ends now and an audit entry keeps the row
    as it was; no match is not an error (0).
    """
    require_create_delete(principal, kind, "delete")
    scope = parse_part(kind.scoped_write_part, scope, "scope")
    principal.require_admin_of([scope["company"]])
    with write_transaction() as session:
        rows = session.scalars(
            select(kind.model)
            .where(*_filters(kind, scope))
            .order_by(kind.model.id)
            .with_for_update()
        ).all()
        if not rows:
            return 0
        changes.write(
            session,
            principal,
            kind.name,
            changes.Lock(companies=[r.company for r in rows]),
            lambda _now: _deleted(session, kind, rows),
        )
        return len(rows)


def _deleted(session: Session, kind: Kind, rows: Sequence[Any]) -> changes.Change:
    for chunk in history.chunks([r.id for r in rows]):
        session.execute(
            delete(kind.model)
            .where(kind.model.id.in_(chunk))
            .execution_options(synchronize_session=False)
        )
    return changes.Change(
        ends=[kind.member(r) for r in rows],
        audit=[
            changes.AuditData(
                f"{kind.name}.delete", kind.target(r), company=r.company, before=kind.as_dict(r)
            )
            for r in rows
        ],
    )
