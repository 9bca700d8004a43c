"""Month close pages (docs/month-close.md): the months and their
state, Close after a confirmation, Reopen with a reason, and the changes since a close.

Every decision is the services' (services/billing/month_close.py): who may close or reopen, which
months may be closed, what changed. These views parse the address, render, and redirect.
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from datetime import date, datetime
from typing import Any
from urllib.parse import urlencode

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask_login import login_required
from flask_wtf import FlaskForm
from wtforms import TextAreaField

from ..access import Principal
from ..errors import Conflict, Invalid, ServiceError
from ..services.billing import month_close, reports
from .auth import safe_next
from .common import is_htmx, principal
from .confirm import confirmation_required
from .forms import ConfirmForm, apply_field_errors

bp = Blueprint("months", __name__, url_prefix="/reports/months")

CHANGES_SHOWN = 100  # companies the changes table lists; the API has them all
# The reopen form speaks of its field; the service words its messages for the API's `fields`.
REASON_MESSAGES = {
    "required": "Say why the month is reopened: it is kept in the audit log.",
    "must not contain control characters": "Use plain text: no control characters.",
}
KIND_PAGES = {"ddi": "reports.ddis", "user": "reports.users"}


def day_links(day_endpoint: str) -> Callable[[str], str]:
    """company -> the start of its links to `day_endpoint`'s pages, to which a day's ISO date
    is added: one url_for per table and one quoting per company, not one per cell (50 companies
    x 31 days on a report page; an ISO date needs no quoting)."""
    base = url_for(day_endpoint)
    return lambda company: f"{base}?{urlencode({'company': company})}&date="


class ReopenForm(FlaskForm):
    reason = TextAreaField(
        "Reason", render_kw={"maxlength": month_close.REASON_MAX, "rows": 3, "required": True}
    )


def when(moment: datetime) -> str:
    """A stored instant as the pages show it: 2026-11-02 08:00 UTC."""
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def month_name(year: int, month: int) -> str:
    return f"{calendar.month_name[month]} {year}"


def _month(label: str) -> tuple[month_close.MonthRequest, int]:
    """The address's month (YYYY-MM), and its year."""
    wanted = month_close.parse_label(label)
    assert wanted.year is not None  # parse_label always names the year
    return wanted, wanted.year


def panel(
    kind: str, year: int, month: int, running: bool, selected: list[str], back: str | None = None
) -> dict[str, Any]:
    """The report page's month state: open or closed (when, by whom, version), the Close and
    Reopen links the account may use, and where the changes since the close load from.
    `back`: the report's address, when not the request's (a report updated in place)."""
    me = principal()
    label = f"{year:04d}-{month:02d}"
    back = back or request.full_path.rstrip("?")
    close_ = None if running else month_close.latest_close(me, year, month)
    closed = close_ is not None and close_.closed
    return {
        "running": running,
        "close": close_,
        "closed": closed,
        "timestamp": when,
        "months_url": url_for("months.index"),
        "close_url": url_for("months.close", label=label, back=back)
        if not running and not closed and me.may_close_months
        else None,
        "reopen_url": url_for("months.reopen", label=label, back=back)
        if closed and me.system_admin
        else None,
        "changes_url": url_for("months.changes", label=label, kind=kind, company=selected)
        if closed
        else None,
    }


def _report_url(request_: month_close.MonthRequest, kind: str = "ddi") -> str:
    return url_for(KIND_PAGES[kind], year=request_.year, month=request_.month)


def _back(request_: month_close.MonthRequest) -> str:
    """Where a form returns: the page it was opened from (this site only), else the report."""
    target = request.values.get("back")
    return safe_next(target) if target else _report_url(request_)


def closed_day(kind: str, company: str, day: date) -> dict[str, int] | None:
    """For a day of a closed month: the close's version and the figure it stored for the
    company that day (the day page shows it beside the peak the history gives now)."""
    found = month_close.closed_day(principal(), kind, company, day)
    return None if found is None else {"version": found[0].version, "value": found[1]}


@bp.get("")
@login_required
def index():
    me = principal()
    rows = month_close.months(me)
    return render_template("months/index.html", rows=rows, month_name=month_name, timestamp=when)


@bp.route("/<label>/close", methods=["GET", "POST"])
@login_required
def close(label: str):
    me = principal()
    me.require_close_months()
    wanted, year = _month(label)
    form = ConfirmForm()
    error, status = None, 200
    if request.method == "GET":
        try:  # a month that cannot be closed gets no Close button, only the reason
            month_close.check_closable(me, wanted)
        except (Invalid, Conflict) as exc:
            error, status = exc.message, exc.status
    elif form.validate_on_submit():
        try:
            done = month_close.close_month(me, wanted)
        except (Invalid, Conflict) as exc:
            error, status = exc.message, exc.status
        else:
            flash(
                f"{month_name(done.year, done.month)} is closed (version {done.version}).",
                "success",
            )
            return redirect(_back(wanted))
    elif request.method == "POST":
        error, status = "The form has expired; try again.", 400
    name = month_name(year, wanted.month)
    html = render_template(
        "months/close.html",
        form=form,
        name=name,
        label=label,
        back=_back(wanted),
        error=error,
        closable=not (request.method == "GET" and error),
    )
    return html, status


@bp.route("/<label>/reopen", methods=["GET", "POST"])
@login_required
@confirmation_required
def reopen(label: str):
    me = principal()
    me.require_system_admin("reopen a closed month")
    wanted, year = _month(label)
    form = ReopenForm()
    status = 200
    if form.validate_on_submit():
        try:
            done = month_close.reopen_month(me, wanted, form.reason.data)
        except ServiceError as exc:
            if exc.status not in (400, 409):
                raise
            apply_field_errors(form, exc)
            form.reason.errors = [REASON_MESSAGES.get(e, e) for e in form.reason.errors]
            status = exc.status
        else:
            flash(f"{month_name(done.year, done.month)} is open again.", "success")
            return redirect(_back(wanted))
    close_ = month_close.latest_close(me, year, wanted.month)
    if request.method == "GET" and (close_ is None or not close_.closed):
        status = 409  # nothing to reopen: the page says so, without the form
    html = render_template(
        "months/reopen.html",
        form=form,
        name=month_name(year, wanted.month),
        reopenable=close_ is not None and close_.closed,
        label=label,
        back=_back(wanted),
        close=close_,
        timestamp=when,
    )
    return html, status


@bp.get("/<label>/changes")
@login_required
def changes(label: str):
    """The changes since the close for one kind (the report page loads it after itself: it
    computes the month from the history, as an open month's report does)."""
    me = principal()
    wanted, _ = _month(label)
    kind = request.args.get("kind", "ddi")
    if kind not in reports.ANSWER_KEYS:
        raise Invalid("kind must be ddi or user.")
    companies = request.args.getlist("company") or None
    scope = reports.ReportRequest(companies, wanted.month, wanted.year)
    answer = month_close.adjustments(me, scope, kinds=(kind,))
    context = changes_context(me, kind, answer)
    context["report_url"] = _report_url(wanted, kind)
    template = "months/_changes.html" if is_htmx() else "months/changes.html"
    return render_template(template, **context)


def changes_context(me: Principal, kind: str, answer: dict[str, Any]) -> dict[str, Any]:
    """The changes table: per company (the first CHANGES_SHOWN) its name, a link to its month
    and each changed day, closed → now, linked to the day's records."""
    month_key = reports.ANSWER_KEYS[kind][1]
    period = answer["period"]
    changed = [(c, kinds[kind]) for c, kinds in answer["values"].items() if kind in kinds]
    shown = changed[:CHANGES_SHOWN]
    names = dict(reports.visible_companies(me, [c for c, _ in shown])) if shown else {}
    page, link = KIND_PAGES[kind], day_links(f"{KIND_PAGES[kind]}_day")
    rows = []
    for company, entry in shown:
        row_base = link(company)
        month_url = url_for(page, company=company, year=period["year"], month=period["month"])
        rows.append(
            {
                "company": company,
                "name": names.get(company, company),
                "month_url": month_url,
                "days": [
                    (day, v["closed"], v["now"], row_base + day)
                    for day, v in entry["dates"].items()
                ],
                "closed": entry[month_key]["closed"],
                "now": entry[month_key]["now"],
            }
        )
    return {
        "kind": kind,
        "noun": "DDIs" if kind == "ddi" else "phone users",
        "noun_singular": "DDI" if kind == "ddi" else "phone-user",
        "rows": rows,
        "changed": len(changed),
        "name": month_name(period["year"], period["month"]),
        "period": period,
    }
