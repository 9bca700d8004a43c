"""A DDI's own page, /ddis/<dialcode>/<number>: the number's state now, its values, history
and audit entries (services/records/ddi_timeline.py decides what the account may see)."""

from __future__ import annotations

from datetime import timedelta

from flask import Blueprint, render_template
from flask_login import login_required

from ..services import companies, inventory
from ..services.identity import accounts
from ..services.records import crud, ddi_timeline, kinds
from .audit import row_links
from .audit_values import changes
from .common import principal

bp = Blueprint("ddi_page", __name__)
# A number's state as the page names it (docs/numbers.md).
STATE_LABELS = {
    inventory.IN_SERVICE: "In service",
    inventory.RESERVED: "Reserved",
    inventory.AVAILABLE: "Available (in stock)",
    inventory.AGING: "Aging (after leaving a company)",
}


@bp.get("/ddis/<dialcode>/<number>")
@login_required
def show(dialcode: str, number: str):
    me = principal()
    timeline = ddi_timeline.timeline(me, dialcode, number)
    entries = timeline.audit.rows
    # Every company the page names, and which actors are accounts: one query each (as /audit).
    named = [timeline.current["company"] if timeline.current else None]
    if (now := timeline.number_now) is not None:
        named += [now.held_for, now.previous_company]
    named += [iv.company for iv in timeline.intervals]
    named += [c for e in entries for c in (e.company, e.other_company)]
    return render_template(
        "records/ddi.html",
        t=timeline,
        keys={"dialcode": dialcode, "number": number},
        may_delete=crud.may_create_delete(me, kinds.DDI),
        changes=changes,
        company_labels=companies.labels(me, named),
        accounts=accounts.existing(me, (e.actor for e in entries)),
        row_links=row_links,
        state_labels=STATE_LABELS,
        one_day=timedelta(days=1),
    )
