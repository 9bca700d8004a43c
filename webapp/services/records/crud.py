"""Create, read, update and delete for DDIs and phone users, under one set of rules.

A `Kind` (kinds.py) describes what differs between the two (model, key fields, who may create);
everything else (validation, authorization, conflicts) is written once here, and every write
reaches the history, the rollup and the audit log through the change path (changes.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ...access import Principal
from ...database import write_transaction
from ...errors import Conflict, Invalid
from ...models import Company, Record
from .. import changes, inventory
from ..fields import parse_part
from ..history import intervals
from ..history.audit import AuditData
from . import record_query
from .kinds import Kind, Row

MAX_BATCH = 1000


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


def create(
    principal: Principal, kind: Kind, values: Any, force: Any = None, reason: Any = None
) -> int:
    """Create one row or a batch of up to 1,000, all or nothing; return how many were created.

    Guarantees: each row opens a history interval and writes an audit entry in the same
    transaction; a duplicate key (in the batch or already stored, even by a racing request)
    raises Conflict and nothing is written. A DDI's number comes from the inventory
    (inventory.enter_service): one held for another company is a 409 unless a System-Admin
    gives `force` and a `reason`, which every created row's audit entry keeps.
    """
    require_create_delete(principal, kind, "create")
    override = inventory.parse_override(force, reason)
    if override is not None:
        if not kind.numbered:
            raise Invalid(
                f"'force' applies to DDIs only, not to {kind.label}s.",
                {"force": "not for this type"},
            )
        principal.require_system_admin("take a number held for another company")
    rows = _parse_rows(kind, values)
    return insert_rows(principal, kind, rows, batch=isinstance(values, list), reason=override)


def insert_rows(
    principal: Principal,
    kind: Kind,
    rows: list[dict[str, str]],
    batch: bool = True,
    reason: str | None = None,
) -> int:
    """Create `rows` (already checked field by field) all or nothing; return how many.

    What `create` does after parsing, for callers that build their rows themselves (a block
    of numbers): the same grants checked, the same Conflict for a key taken, in the batch or
    stored. `batch`: name a missing company by its row (values[i].company). `reason`: a
    System-Admin's override of the holds on the numbers (create checked it)."""
    require_create_delete(principal, kind, "create")
    principal.require_admin_of(r["company"] for r in rows)
    with write_transaction() as session:
        require_companies_exist(session, [r["company"] for r in rows], batch)
        companies = [r["company"] for r in rows]
        put_in_service(session, principal, kind, companies, lambda: rows, reason=reason)
    return len(rows)


def put_in_service(
    session: Session,
    principal: Principal,
    kind: Kind,
    companies: list[str],
    rows_of: Callable[[], list[dict[str, str]]],
    reason: str | None = None,
    detail: str | None = None,
    reserved_only: bool = False,
) -> list[dict[str, str]]:
    """insert_rows' write, in the caller's transaction and without its checks (the caller
    made them, and knows `companies` exist): return the rows written.

    The change path's company locks (`companies`) come first; then `rows_of()` gives the rows
    (an allocation picks its numbers there, under the locks), their numbers are taken from the
    inventory (with `reason`, overriding holds; `reserved_only`: only numbers reserved for
    their row's company, inventory.Taking) and the rows inserted; each is audited as a create
    with `detail`, or `force: <reason>`."""
    written: list[dict[str, str]] = []

    def insert() -> None:
        rows = rows_of()
        # One key order for every batch, so two overlapping batches lock keys in the same
        # order on PostgreSQL and one waits for the other instead of deadlocking.
        rows.sort(key=lambda r: [r[f] for f in kind.order])
        if kind.numbered:
            takes = [
                inventory.Taking(
                    kind.number_key(Row(r)), r["company"], reserved_only, r.get("description")
                )
                for r in rows
            ]
            inventory.enter_service(
                session, takes, force=reason is not None, exists_message=kind.conflict_message
            )
        try:
            session.execute(kind.model.__table__.insert(), [kind.stored(r) for r in rows])
        except IntegrityError as exc:
            raise Conflict(kind.conflict_message) from exc
        written.extend(rows)

    # The rows go in once the companies are locked (changes.Lock.then): if the insert
    # waited for a racing delete of the same key, it is stamped after that delete's end,
    # so the key's intervals cannot overlap.
    changes.write(
        session,
        principal,
        kind.name,
        changes.Lock(companies=companies, then=insert),
        lambda _now: _created(kind, written, f"force: {reason}" if reason else detail),
    )
    return written


def _created(kind: Kind, rows: list[dict[str, str]], detail: str | None) -> changes.Change:
    return changes.Change(
        starts=[(r["company"], kind.history_key(Row(r))) for r in rows],
        audit=[kind.change("create", after=r, detail=detail) for r in rows],
    )


def apply_changes(
    session: Session,
    principal: Principal,
    kind: Kind,
    rows: Sequence[Any],
    values: dict[str, str],
    action: str,
    detail: str | None = None,
) -> int:
    """Set `values` on `rows` (a numbered kind's number fields, such as a DDI's description, on
    their inventory rows); move history for company changes only; audit (with `detail`, if
    given; a description named by the change in its before and after); return rows changed."""
    # Only a company change moves rollup rows: the old and the new company are locked.
    lock = [values["company"], *(r.company for r in rows)] if "company" in values else []
    change = changes.write(
        session,
        principal,
        kind.name,
        changes.Lock(companies=lock),
        lambda _now: _set_values(session, kind, rows, values, action, detail),
    )
    return len(change.audit)


def _set_values(
    session: Session,
    kind: Kind,
    rows: Sequence[Any],
    values: dict[str, str],
    action: str,
    detail: str | None,
) -> changes.Change:
    moved_from: list[tuple[str, str]] = []
    moved_to: list[tuple[str, str]] = []
    entries: list[AuditData] = []
    # The number's own fields (a DDI's description) are its inventory row's, not the record's.
    own = {f: v for f, v in values.items() if f in kind.number_fields}
    values = {f: v for f, v in values.items() if f not in own}
    kept = inventory.descriptions(session, [kind.number_key(r) for r in rows]) if own else {}
    described: dict[inventory.Key, str] = {}
    for row in rows:
        before, key = kind.as_dict(row), kind.number_key(row) if own else None
        diff = {f: v for f, v in values.items() if getattr(row, f) != v}
        if key is not None and kept.get(key, "") != own["description"]:
            described[key] = own["description"]
        elif not diff:
            continue
        if "company" in diff:
            moved_from.append(kind.member(row))
        for field, value in diff.items():
            setattr(row, field, value)
        if "company" in diff:
            moved_to.append(kind.member(row))
        after = kind.as_dict(row)
        if key is not None:  # the description is in the entry when the change names it
            before["description"] = kept.get(key, "")
            after["description"] = own["description"]
        entries.append(kind.change(action, before, after, detail))
    try:
        session.flush()
    except IntegrityError as exc:
        raise Conflict(kind.conflict_message) from exc
    # Only the description changes the number: no history moves for it (billing is untouched).
    inventory.set_descriptions(session, described)
    return changes.Change(starts=moved_to, ends=moved_from, audit=entries)


def update(principal: Principal, kind: Kind, scope: Any, values: Any) -> int:
    """Set `virt_exten`, `company` and, on DDIs, the number's `description` on every row
    matching `scope` (whose company is required); return the number of rows whose values
    actually changed.

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
        rows = _locked_rows(session, kind, scope)
        return apply_changes(session, principal, kind, rows, values, "update")


def _locked_rows(session: Session, kind: Kind, scope: dict[str, str]) -> Sequence[Record]:
    """The rows matching `scope` exactly, locked until commit (SELECT ... FOR UPDATE on
    PostgreSQL), in id order so two writers lock them in the same order."""
    query = (
        select(kind.model)
        .where(*record_query.exact(kind, scope))
        .order_by(kind.model.id)
        .with_for_update()
    )
    # The query selects kind.model, one of the two record classes.
    return cast(Sequence[Record], session.scalars(query).all())


def delete_rows(principal: Principal, kind: Kind, scope: Any) -> int:
    """Delete every row matching `scope` (company required); return how many were deleted.

    Guarantees: each deleted row's history interval ends now and an audit entry keeps the row
    as it was; no match is not an error (0).
    """
    require_create_delete(principal, kind, "delete")
    scope = parse_part(kind.scoped_write_part, scope, "scope")
    principal.require_admin_of([scope["company"]])
    with write_transaction() as session:
        return delete_locked(session, principal, kind, _locked_rows(session, kind, scope))


def delete_locked(
    session: Session,
    principal: Principal,
    kind: Kind,
    rows: Sequence[Any],
    detail: str | None = None,
) -> int:
    """Delete `rows`, already locked in the caller's write transaction, through the change
    path (history ends, one audit entry each, with `detail` if given); return how many."""
    if rows:
        changes.write(
            session,
            principal,
            kind.name,
            changes.Lock(companies=[r.company for r in rows]),
            lambda now: _deleted(session, kind, rows, now, detail),
        )
    return len(rows)


def _deleted(
    session: Session,
    kind: Kind,
    rows: Sequence[Any],
    now: datetime,
    detail: str | None = None,
) -> changes.Change:
    for chunk in intervals.chunks([r.id for r in rows]):
        session.execute(
            delete(kind.model)
            .where(kind.model.id.in_(chunk))
            .execution_options(synchronize_session=False)
        )
    if kind.numbered:
        leaving = [inventory.Leaving(kind.number_key(r), r.company) for r in rows]
        inventory.leave_service(session, leaving, now)
    return changes.Change(
        ends=[kind.member(r) for r in rows],
        audit=[kind.change("delete", before=kind.as_dict(r), detail=detail) for r in rows],
    )
