"""A DDI's own page, /ddis/<dialcode>/<number>: its values, history and audit entries
(services/records/ddi_timeline.py decides what the account may see)."""

from __future__ import annotations

from flask import Blueprint, render_template
from flask_login import login_required

from ..services.records import crud, ddi_timeline, kinds
from .audit_values import changes
from .common import principal

bp = Blueprint("ddi_page", __name__)


@bp.get("/ddis/<dialcode>/<number>")
@login_required
def show(dialcode: str, number: str):
    me = principal()
    timeline = ddi_timeline.timeline(me, dialcode, number)
    return render_template(
        "records/ddi.html",
        t=timeline,
        keys={"dialcode": dialcode, "number": number},
        may_delete=crud.may_create_delete(me, kinds.DDI),
        changes=changes,
    )
