"""A DDI's own page (docs/pages.md#a-ddis-page): the number's state in the inventory now
(docs/numbers.md), its values, its history intervals and its audit entries (every change of
its state among them: stocked, reserved, released, in service, out of it, retired), so "which
company had this number in March?" is one look.

Who sees what: a System-Admin sees every number that is in the inventory, in any state, or
ever was (a retired number, a DDI deleted before the inventory was kept, keep their history
and audit entries), with the company a number last left. A Company-Admin sees a number only
while it is in service in one of its companies or reserved for one of them, and then only the
intervals and audit entries of its companies (the audit log's one redaction rule): the
number's life at other customers, and in the provider's stock, is not its business.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import select

from webapp.services.records import kinds

from ...access import Principal, within
from ...errors import NotFound
from ...extensions import db
from ...models import HistoryInterval, Number
from .. import inventory
from ..fields import check_format
from ..history import audit, audit_query
from . import record_query

MAX_INTERVALS = 200  # a number moved more often than this shows its latest ones
AUDIT_ENTRIES = 20  # the latest; the audit log, filtered by the number, has them all


@dataclass(frozen=True)
class Interval:
    company: str
    start: datetime
    end: datetime | None  # None: active now
    source: str  # live | import | demo


@dataclass(frozen=True)
class NumberNow:
    """The number in the inventory now, as the reader may see it."""

    state: str  # as its dates say today (inventory.state_of)
    since: datetime | None  # when it entered that state (UTC); None: not recorded
    until: date | None  # reserved or aging: its last day held (REPORT_TIMEZONE), inclusive
    held_for: str | None  # reserved: the company it is reserved for
    previous_company: str | None  # the company it last left; a System-Admin's only
    description: str


@dataclass(frozen=True)
class Timeline:
    dialcode: str
    number: str
    current: dict[str, str] | None  # None: not in service now (or not in the reader's companies)
    number_now: NumberNow | None  # None: not in the inventory now (System-Admin only)
    intervals: list[Interval]  # newest first
    more_intervals: bool
    audit: audit_query.AuditPage[audit.Shown]

    @property
    def key(self) -> str:
        return f"{self.dialcode}:{self.number}"

    @property
    def target(self) -> str:
        """How the audit log names this DDI (its filter takes it as written)."""
        return f"ddi {self.key}"


def timeline(principal: Principal, dialcode: str, number: str) -> Timeline:
    """The number's state now, its DDI's values while in service, its intervals (newest
    first, the latest MAX_INTERVALS) and its latest AUDIT_ENTRIES audit entries, as the
    principal may see them.

    Guarantees: NotFound for a number the principal may not see exactly as for one that never
    existed, so existence does not leak (a Company-Admin: one neither in service in its
    companies nor reserved for one of them today); a Company-Admin is shown only intervals and
    entries of its own companies, redacted as the audit log redacts them, and never the
    company a number last left; Forbidden for an account that administers nothing. Every
    read is one index range: the DDI and the inventory row by their keys, the intervals and
    the entries by the number."""
    principal.require_admin()
    if check_format("dialcode", dialcode) or check_format("number", number):
        raise NotFound("No such DDI.")
    keys = {"dialcode": dialcode, "number": number}
    try:
        current: dict[str, str] | None = record_query.get(principal, kinds.DDI, keys)
    except NotFound:
        current = None
    stored = db.session.execute(
        select(
            Number.state,
            Number.held_for,
            Number.held_until,
            Number.previous_company,
            Number.since,
            Number.description,
        ).where(Number.dialcode == dialcode, Number.number == number)
    ).first()
    on = inventory.today()
    state = inventory.state_of(stored, on) if stored is not None else None
    if not principal.system_admin and current is None:
        reserved_for = stored.held_for if state == inventory.RESERVED and stored else None
        if reserved_for is None or not principal.may_admin(reserved_for):
            raise NotFound("No such DDI.")
    key = f"{dialcode}:{number}"
    h = HistoryInterval
    rows = db.session.execute(
        select(h.company, h.start_at, h.end_at, h.source)
        .where(h.kind == "ddi", h.key == key, within(h.company, principal.visible_companies()))
        .order_by(h.start_at.desc(), h.id.desc())
        .limit(MAX_INTERVALS + 1)
    ).all()
    entries = audit.search(principal, target=f"ddi {key}", per_page=AUDIT_ENTRIES)
    if stored is None and current is None and not rows and not entries.rows:
        raise NotFound("No such DDI.")
    intervals = [Interval(*r) for r in rows[:MAX_INTERVALS]]
    return Timeline(
        dialcode=dialcode,
        number=number,
        current=current,
        number_now=None
        if stored is None or state is None
        else _now(principal, stored, state, intervals),
        intervals=intervals,
        more_intervals=len(rows) > MAX_INTERVALS,
        audit=entries,
    )


def _now(principal: Principal, stored: Any, state: str, intervals: list[Interval]) -> NumberNow:
    """The inventory row as the page shows it. An in-service number's `since` is its open
    history interval's start (inventory.enter_service leaves the row's empty), the newest of
    `intervals`, so a number in service before the inventory existed has it too."""
    since = stored.since
    if state == inventory.IN_SERVICE:
        since = next((iv.start for iv in intervals if iv.end is None), None)
    held = state in inventory.HELD
    return NumberNow(
        state=state,
        since=since,
        until=stored.held_until if held else None,
        held_for=stored.held_for if state == inventory.RESERVED else None,
        previous_company=stored.previous_company if principal.system_admin else None,
        description=stored.description or "",
    )
