"""A DDI's own page (docs/pages.md#a-ddis-page): its values now, its history intervals and its
audit entries, so "which company had this number in March?" is one look.

Who sees what: a System-Admin sees every number that exists or ever existed (a deleted DDI
keeps its history and audit entries). A Company-Admin sees a DDI only while it belongs to one
of its companies, and then only the intervals and audit entries of its companies: the number's
life at other customers is theirs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from webapp.services.records import kinds

from ...access import Principal, within
from ...errors import NotFound
from ...extensions import db
from ...models import HistoryInterval
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
class Timeline:
    dialcode: str
    number: str
    current: dict[str, str] | None  # None: the DDI does not exist now (System-Admin only)
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
    """The DDI's values now, its intervals (newest first, the latest MAX_INTERVALS) and its
    latest AUDIT_ENTRIES audit entries, as the principal may see them.

    Guarantees: NotFound for a number the principal may not see (a Company-Admin: one not in
    its companies now) exactly as for one that never existed, so existence does not leak;
    a Company-Admin is shown only intervals and entries of its own companies; Forbidden for
    an account that administers nothing.
    """
    principal.require_admin()
    if check_format("dialcode", dialcode) or check_format("number", number):
        raise NotFound("No such DDI.")
    keys = {"dialcode": dialcode, "number": number}
    try:
        current: dict[str, str] | None = record_query.get(principal, kinds.DDI, keys)
    except NotFound:
        if not principal.system_admin:
            raise
        current = None
    key = f"{dialcode}:{number}"
    h = HistoryInterval
    rows = db.session.execute(
        select(h.company, h.start_at, h.end_at, h.source)
        .where(h.kind == "ddi", h.key == key, within(h.company, principal.visible_companies()))
        .order_by(h.start_at.desc(), h.id.desc())
        .limit(MAX_INTERVALS + 1)
    ).all()
    entries = audit.search(principal, target=f"ddi {key}", per_page=AUDIT_ENTRIES)
    if current is None and not rows and not entries.rows:
        raise NotFound("No such DDI.")
    return Timeline(
        dialcode=dialcode,
        number=number,
        current=current,
        intervals=[Interval(*r) for r in rows[:MAX_INTERVALS]],
        more_intervals=len(rows) > MAX_INTERVALS,
        audit=entries,
    )
