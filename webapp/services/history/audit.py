"""The audit log: who did what, when, before and after, in the same transaction as the change."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from sqlalchemy import ColumnElement, false, or_
from sqlalchemy.orm import Session

from ...access import TARGET_COMPANY, CompanyScope, Principal, Seen, redact, within
from ...database import insert_rows, utcnow
from ...errors import Invalid
from ...models import AuditEntry
from ...observability.context import current_request_id
from ..fields import ISO_DATE
from . import actions, audit_query


@dataclass(frozen=True, slots=True)
class AuditData:
    """One audit entry without its instant and actor, which the change path adds."""

    action: str
    target: str
    company: str | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    detail: str | None = None
    other_company: str | None = None  # a move's old company: the entry shows in its audit too

    def entry(self, principal: Principal, at: datetime) -> dict[str, Any]:
        """The audit row of this change, made by `principal` at `at` (for `record`)."""
        return entry(
            principal,
            self.action,
            self.target,
            company=self.company,
            before=self.before,
            after=self.after,
            detail=self.detail,
            other_company=self.other_company,
            at=at,
        )


@dataclass(frozen=True, slots=True)
class Shown:
    """An audit entry as one reader may see it: its columns, with `company`, `other_company`,
    `before` and `after` passed through access.redact (`seen` keeps what was hidden)."""

    id: int
    at: datetime
    actor: str
    via: str
    action: str
    detail: str | None
    request_id: str | None
    seen: Seen

    @property
    def company(self) -> str | None:
        return self.seen.company

    @property
    def other_company(self) -> str | None:
        return self.seen.other_company

    @property
    def before(self) -> Mapping[str, Any] | None:
        return self.seen.before

    @property
    def after(self) -> Mapping[str, Any] | None:
        return self.seen.after

    @property
    def company_text(self) -> str:
        return self.seen.company_text

    @property
    def target(self) -> str:
        return self.seen.target or ""


def shown(row: Any, scope: CompanyScope) -> Shown:
    """An entry (an AuditEntry or a row of its columns) as a reader of the companies `scope`
    may see it (access.redact): nothing of a company outside them."""
    return Shown(
        id=row.id,
        at=row.at,
        actor=row.actor,
        via=row.via,
        action=row.action,
        detail=row.detail,
        request_id=row.request_id,
        seen=redact(scope, row.company, row.other_company, row.before, row.after, row.target),
    )


def entry(
    principal: Principal,
    action: str,
    target: str,
    *,
    company: str | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    detail: str | None = None,
    other_company: str | None = None,
    at: datetime | None = None,
) -> dict[str, Any]:
    """One audit row as a dict, for `record`. `other_company`: the company a record moved
    away from (`company` is the one it moved to); the entry is in the audit of both."""
    return {
        "at": at or utcnow(),
        "actor": principal.username,
        "via": principal.via,
        "action": action,
        "target": target,
        "company": company,
        "other_company": other_company,
        "before": before,
        "after": after,
        "detail": detail,
    }


def record(session: Session, entries: list[dict[str, Any]]) -> None:
    """Add audit rows to the caller's transaction: they commit or roll back with the change.
    Written during a request, each carries the request's id (X-Request-ID, the id of its log
    lines); from the command line none (NULL)."""
    if (request_id := current_request_id()) is not None:
        # Here rather than in entry(): one look-up for the batch, not one per row (an import
        # writes hundreds of thousands).
        for row in entries:
            row["request_id"] = request_id
    # Core (COPY on PostgreSQL): the ORM's bulk path costs a third of a 1,000-row batch create.
    insert_rows(session, AuditEntry.__table__, entries)


def _day(value: date | str | None, field: str) -> date | None:
    """A filter date: a `date`, or 'yyyy-mm-dd' text ('' or None: no filter)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):  # a datetime is a date too; keep only its day
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str) and ISO_DATE.fullmatch(value.strip()):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise Invalid(f"'{field}' must be a date as yyyy-mm-dd.", {field: "must be yyyy-mm-dd"})


def _text(value: str | None) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def about(scope: CompanyScope) -> ColumnElement[bool]:
    """Entries about a company in `scope`: its own (`company`), or a move away from it
    (`other_company`). Each side is one indexed column, so each is an index range (SQLite's
    multi-index OR, PostgreSQL's BitmapOr)."""
    return or_(within(AuditEntry.company, scope), within(AuditEntry.other_company, scope))


def record_forms(target: str, scope: CompanyScope) -> tuple[str, ...]:
    """The forms of the record filter (audit_query.targets) a reader of `scope` may look for:
    one naming a company outside it (`user umbrella/ana`) finds nothing, as finding a move
    filed under it would say where the record went (access.redact hides it on the rows)."""
    forms = audit_query.targets(target)
    if scope is None:
        return forms
    return tuple(f for f in forms if (m := TARGET_COMPANY.match(f)) is None or m[1] in scope)


def _action(value: str | None) -> str | None:
    """The action filter: an action code ('ddi.delete', actions.NAMES), or None for none;
    Invalid for text that is no action code."""
    text = _text(value)
    if text is not None and not actions.is_code(text):
        raise Invalid("Action: not an action of the log.", {"action": "not an action of the log"})
    return text


def filter_conditions(
    principal: Principal,
    actor: str | None,
    target: str | None,
    company: str | None,
    date_from: date | str | None,
    date_to: date | str | None,
    implied: frozenset[str] = frozenset(),
    action: str | None = None,
) -> list[ColumnElement[bool]]:
    """The filters of `search` and `audit_export.export` as SQL conditions, access included;
    Forbidden or Invalid before anything is read. `implied` names conditions left out because
    the caller's branches hold them already ('scope', 'company', 'actor', 'action')."""
    principal.require_audit()
    start, end = _day(date_from, "date_from"), _day(date_to, "date_to")
    if start and end and end < start:
        raise Invalid(
            "The 'to' date is before the 'from' date.", {"date_to": "must not be before 'from'"}
        )
    scope = principal.auditable_companies()
    conditions = [] if "scope" in implied else [about(scope)]
    if (actor := _text(actor)) and "actor" not in implied:
        conditions.append(AuditEntry.actor == actor)
    if (action := _action(action)) and "action" not in implied:
        conditions.append(AuditEntry.action == action)
    if target := _text(target):
        conditions.append(AuditEntry.target.in_(record_forms(target, scope)))
    if (company := _text(company)) and scope is not None and company not in scope:
        # The entries about a company the reader may not see are about the reader's too only
        # when a record moved between them: finding them would say where it went.
        conditions.append(false())
    elif company and "company" not in implied:
        conditions.append(about(frozenset({company})))
    if start:
        conditions.append(AuditEntry.at >= datetime.combine(start, time.min))
    if end and end < date.max:  # 9999-12-31 has no next day: no upper bound
        conditions.append(AuditEntry.at < datetime.combine(end + timedelta(days=1), time.min))
    return conditions


def search(
    principal: Principal,
    *,
    actor: str | None = None,
    target: str | None = None,
    company: str | None = None,
    date_from: date | str | None = None,
    date_to: date | str | None = None,
    action: str | None = None,
    after: Any = None,
    before: Any = None,
    oldest: bool = False,
    page: int | None = None,
    per_page: int = 50,
) -> audit_query.AuditPage[Shown]:
    """One page of the audit log, newest first, and how many entries match (up to
    audit_query.COUNT_CAP), at any size of the log (audit_query).

    A System-Admin reads every entry; a Company-Admin only entries about a company it
    administers (silently: others are not counted); anyone else gets Forbidden. An entry is
    about its `company` and, for a move between companies, the company the record left
    (`other_company`); of a move, the side in a company the reader may not see is absent, its
    company and its values (access.redact). Filters: `actor` exact username; `target` a record,
    matched exactly in any form the log may name it (audit_query.targets: '+44 20 7123 4567',
    '44:2071234567', 'acme/ana', 'bob', or the target as stored, any case; a form naming a
    company the reader may not see finds nothing); `company` exact (either side of a move; one
    the reader may not see finds nothing); `date_from` and `date_to` whole UTC days, both
    inclusive; `action` an action code, exact ('ddi.delete'; actions.NAMES names them).
    Position: at most one of `after` or `before` an entry id (Older, Newer), `oldest`, or a
    1-based `page` (an offset, for old addresses). Invalid for a bad filter or position, before
    anything is read.
    """
    principal.require_audit()
    positions = {"after": after is not None, "before": before is not None}
    audit_query.check_position(
        per_page, page, {**positions, "last": oldest, "page": page is not None}
    )
    scope = principal.auditable_companies()
    record = record_forms(target, scope) if (target := _text(target)) else ()
    parts = audit_query.branches(scope, record, _text(company), _text(actor), _action(action))
    # What the branches hold by themselves is no condition of its own: an OR over two columns
    # would lead PostgreSQL's planner to read both indexes whole (100 ms at 3M entries).
    implied = audit_query.implied(scope, record, _text(company))
    conditions = filter_conditions(
        principal, actor, target, company, date_from, date_to, implied, action=action
    )
    if target and not record:  # every form named a company the reader may not see
        return audit_query.AuditPage([], 0, False, False, False)
    found = audit_query.read_page(
        conditions,
        parts,
        after=None if after is None else audit_query.anchor(after, "after"),
        before=None if before is None else audit_query.anchor(before, "before"),
        oldest=oldest,
        number=page,
        per_page=per_page,
    )
    rows = [shown(row, scope) for row in found.rows]
    return audit_query.AuditPage(rows, found.total, found.more, found.has_newer, found.has_older)
