"""A phone user's own page, /users/<company>/<username>: its values now and its audit entries
(services/records/user_view.py decides who may see it)."""

from __future__ import annotations

from flask import Blueprint, render_template
from flask_login import login_required

from ..services import companies
from ..services.identity import accounts
from ..services.records import crud, kinds, user_view
from .audit import row_links
from .audit_values import changes
from .common import principal

bp = Blueprint("user_page", __name__)


@bp.get("/users/<company>/<username>")
@login_required
def user(company: str, username: str):
    me = principal()
    view = user_view.user_view(me, company, username)
    entries = view.audit.rows
    # Every company the page names, and which actors are accounts: one query each (as /audit).
    named = [view.current["company"]] + [c for e in entries for c in (e.company, e.other_company)]
    return render_template(
        "records/user.html",
        v=view,
        keys={"company": view.current["company"], "username": view.current["username"]},
        may_delete=crud.may_create_delete(me, kinds.PHONE_USER),
        changes=changes,
        company_labels=companies.labels(me, named),
        accounts=accounts.existing(me, (e.actor for e in entries)),
        row_links=row_links,
    )
