"""Bulk actions on the DDI and phone-user lists (docs/pages.md#bulk-actions): move the rows
ticked, or all the rows matching the list's filters, to another company, or delete them.

Two steps, as on the pages: `preview` says how many records the action would change and
which, and `apply` changes them only if they are still exactly those records with the values
previewed (the preview's fingerprint, as the DDI import checks its plan; otherwise Changed,
with the new preview). Every change goes through the change path like a single one (crud.py):
history, rollup, one audit entry per record, all or nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from ...access import Principal
from ...database import write_transaction
from ...errors import Conflict, Invalid
from ...extensions import db
from ...models import Record
from ...wording import counted
from . import crud, kinds, record_query

MAX_RECORDS = 100_000  # more at once: narrow the filters, or use the DDI import
SAMPLE = 20
MAX_TICKED = 1_000  # records named one by one (a page holds 50)
ACTIONS = ("move", "delete")
FILTERS = ("dialcode", "number", "virt_exten", "company", "username", "q")


@dataclass(frozen=True)
class Target:
    """What an action applies to: the records named by `keys` (as the list names them:
    '44:2071234567', 'acme/ana.kim'), or, with `keys` None, every record matching `filters`
    (the list's: fields matching from their start, the company exactly, `q` the number
    search), as the principal sees them."""

    keys: tuple[str, ...] | None = None
    filters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Preview:
    action: str
    company: str | None  # a move's new company
    count: int  # records the action would change
    sample: list[dict[str, str]]  # the first SAMPLE, in list order
    by_company: list[tuple[str, int]]  # how many of them each company holds now, most first
    fingerprint: str  # of the action and every record it would change, as they are now


class Changed(Conflict):
    """The records the action would change are not those confirmed: `preview` is the new
    count and sample."""

    def __init__(self, preview: Preview):
        super().__init__(
            "The selection changed since you confirmed: it is "
            f"{counted(preview.count, 'record', grouped=True)} now. "
            "Nothing was changed; check and confirm again."
        )
        self.preview = preview


def may_move(principal: Principal) -> bool:
    """Whether the principal may move records in bulk at all: a System-Admin, or a
    Company-Admin with two companies to move between (the lists show the form only then)."""
    return principal.system_admin or len(principal.admin_of) > 1


def may_delete(principal: Principal) -> bool:
    """Whether the principal may delete records in bulk: the System-Admin only."""
    return principal.system_admin


def _check(principal: Principal, kind: kinds.Kind, action: str, company: str | None) -> None:
    if action not in ACTIONS:
        raise Invalid("Choose an action: move or delete.", {"action": "must be move or delete"})
    if action == "delete":
        principal.require_system_admin(f"delete {kind.label}s in bulk")
        return
    principal.require_admin()
    if not company:
        raise Invalid("Choose the company to move them to.", {"company": "required"})
    principal.require_admin_of([company])


def unticked(kind: kinds.Kind, target: Target) -> str | None:
    """The sentence refusing a target of ticked rows with none ticked ("Tick the DDIs to change
    first."); None for any other target. What `preview` and `apply` refuse it with, for a page
    that shows it beside another problem found first."""
    if target.keys is not None and not target.keys:
        return f"Tick the {kind.label}s to change first."
    return None


def _keys(kind: kinds.Kind, key: str) -> dict[str, str]:
    """A record's key as the list names it, as its fields; Invalid if malformed."""
    first, sep, second = key.partition(":" if kind.global_key else "/")
    if not sep:
        raise Invalid(f"'{key}' names no {kind.label}.", {"key": "malformed"})
    return dict(zip(kind.order, (first, second), strict=True))


def _rows(
    session: Session, principal: Principal, kind: kinds.Kind, target: Target, lock: bool
) -> Sequence[Record]:
    """The records `target` names that the principal sees, in the list's order (locked until
    commit with `lock`, on PostgreSQL)."""
    model = kind.model
    if target.keys is not None:
        if none := unticked(kind, target):
            raise Invalid(none, {"key": "none ticked"})
        wanted = [_keys(kind, k) for k in dict.fromkeys(target.keys)]
        if len(wanted) > MAX_TICKED:
            why = f"at most {MAX_TICKED:,} ticked; for more, choose all matching the filters"
            raise Invalid(f"Tick {why}.", {"key": why})
        selection = record_query.select_rows(principal, kind, {})
        keyed = or_(*(and_(*record_query.exact(kind, w)) for w in wanted))
        query = select(model).where(*selection.where, keyed)
    else:
        filters = {f: v for f, v in target.filters.items() if f != "q" and v}
        selection = record_query.select_rows(
            principal, kind, filters, prefix=True, q=target.filters.get("q") or None
        )
        query = select(model).where(*selection.where)
        if selection.branches:
            query = query.where(or_(*(and_(*b) for b in selection.branches)))
    if selection.empty:
        return []
    query = query.order_by(*(getattr(model, f) for f in kind.order)).limit(MAX_RECORDS + 1)
    if lock:
        query = query.with_for_update()
    found = cast(Sequence[Record], session.scalars(query, selection.params).all())
    if len(found) > MAX_RECORDS:
        raise Invalid(
            f"A bulk action changes at most {MAX_RECORDS:,} records at once: narrow the filters"
            + (" (or use the DDI import)." if kind.name == "ddi" else "."),
            {"scope": f"at most {MAX_RECORDS:,}"},
        )
    return found


def _preview(kind: kinds.Kind, action: str, company: str | None, rows: Sequence[Record]) -> Preview:
    # A move leaves alone the records already in the company: they are not counted.
    if action == "move":
        rows = [r for r in rows if r.company != company]
    held = Counter(r.company for r in rows)
    digest = hashlib.sha256(f"{kind.name}\n{action}\n{company or ''}\n".encode())
    for r in rows:
        digest.update(("\t".join(kind.as_dict(r).values()) + "\n").encode())
    return Preview(
        action=action,
        company=company if action == "move" else None,
        count=len(rows),
        sample=[kind.as_dict(r) for r in rows[:SAMPLE]],
        by_company=sorted(held.items(), key=lambda cn: (-cn[1], cn[0]))[:SAMPLE],
        fingerprint=digest.hexdigest(),
    )


def preview(
    principal: Principal,
    kind: kinds.Kind,
    target: Target,
    action: str,
    company: str | None = None,
) -> Preview:
    """How many records `action` would change, which, and from which companies.

    Guarantees: the checks of `apply` (the action allowed to the principal, the new company
    administered by it and existing), nothing written. Invalid when nothing is selected or
    more than MAX_RECORDS are."""
    _check(principal, kind, action, company)
    session = db.session()
    try:
        if company is not None and action == "move":
            crud.require_companies_exist(session, [company])
        return _preview(kind, action, company, _rows(session, principal, kind, target, False))
    finally:
        session.rollback()


def apply(
    principal: Principal,
    kind: kinds.Kind,
    target: Target,
    action: str,
    expected: str,
    company: str | None = None,
) -> int:
    """Carry out a previewed action on the records `target` names now; return how many
    changed.

    Guarantees: all or nothing, in one transaction through the change path (a move ends each
    record's history interval in its old company and starts one in the new; a delete ends
    it), one audit entry per record with the detail 'bulk <id>'. The records are locked
    first; unless they are the records previewed with the fingerprint `expected`, with the
    same values (someone changed the selection since it was confirmed, even keeping its
    count), raises Changed with the new preview and changes nothing. A move of phone
    users onto a username the company already has is a Conflict, nothing changed."""
    _check(principal, kind, action, company)
    detail = f"bulk {secrets.token_hex(6)}"
    with write_transaction() as session:
        if company is not None and action == "move":
            crud.require_companies_exist(session, [company])
        rows = _rows(session, principal, kind, target, lock=True)
        plan = _preview(kind, action, company, rows)
        if not hmac.compare_digest(plan.fingerprint, expected):
            raise Changed(plan)
        if action == "delete":
            return crud.delete_locked(session, principal, kind, rows, detail)
        assert company is not None
        moving = [r for r in rows if r.company != company]
        return crud.apply_changes(
            session, principal, kind, moving, {"company": company}, "update", detail
        )
