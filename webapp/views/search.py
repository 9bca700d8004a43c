"""The top bar's search, /search?q=… (services/search.py decides what each account finds).

One match across the kinds opens it (303); several are a short list by kind, each with a link
to its full list filtered the same way; none says so. A plain GET form: no JavaScript needed.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, redirect, render_template, request, url_for
from flask_login import login_required

from ..errors import Invalid
from ..services import companies, search
from .common import principal

bp = Blueprint("search", __name__)


def phone_user_url(company: str, username: str) -> str:
    """Where a phone user found by the search opens: its own page."""
    return url_for("user_page.user", company=company, username=username)


def _only_url(kind: str, row: Any) -> str:
    if kind == "ddi":
        return url_for("ddi_page.show", dialcode=row["dialcode"], number=row["number"])
    if kind == "company":
        return url_for("companies.page", company_id=row.id)
    return phone_user_url(row["company"], row["username"])


def _full_lists(me: Any, found: search.Results) -> dict[str, str]:
    """Each kind's full list filtered as the search was: /ddis?q=, the companies list's ?q=,
    /users?username=."""
    company_list = "admin.companies" if me.system_admin else "companies.index"
    return {
        "ddis": url_for("records.ddis_list", q=found.text),
        "companies": url_for(company_list, q=found.text),
        "users": url_for("records.users_list", username=found.username),
    }


@bp.get("/search")
@login_required
def index():
    me = principal()
    q = request.args.get("q", "")
    try:
        found = search.search(me, q)
    except Invalid as exc:
        page = render_template("search.html", q=q[:200], error=exc.message, found=None)
        return page, 400
    only = found.only
    if only is not None:
        return redirect(_only_url(*only), code=303)
    # The companies every DDI and phone user shown belongs to, named as the lists name them.
    named = [r["company"] for f in (found.ddis, found.users) if f for r in f.rows]
    return render_template(
        "search.html",
        q=found.text,
        error=None,
        found=found,
        may_search=search.may_search(me),
        lists=_full_lists(me, found),
        company_labels=companies.labels(me, named),
        phone_user_url=phone_user_url,
    )
