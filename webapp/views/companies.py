"""A company's page: /companies/<company_id> (blueprint "companies").

Who may open it and what it holds is decided by services.company_overview and the Principal
(a company the account may not see answers 404, like a missing one); this view adds the links
the account may follow and lays the twelve months out as a server-rendered SVG bar chart, with
a table of the same numbers beside it (no JavaScript, nothing from a CDN).

Routing: company identifiers match [a-z0-9._-]{1,64}, so "suggest" is one. The company picker's
`/companies/suggest` (views/pickers.py) is a static rule and Werkzeug ranks static rules above
rules with a converter, so it wins over `/companies/<company_id>` whatever the registration
order; the cost is that a company whose identifier is "suggest" has no page at that address
(docs/decisions.md).
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Blueprint, redirect, render_template, request, url_for
from flask_login import login_required

from ..access import Principal
from ..errors import Invalid
from ..request_auth import replica_reads
from ..services import companies, company_overview
from ..services.billing import month_changes
from ..services.company_overview import MonthTotal
from .common import is_htmx, list_here, page_args, principal

bp = Blueprint("companies", __name__, url_prefix="/companies")
PER_PAGE = 50  # as /admin/companies (views/admin.py)
LIST_ARGS = ("q", "sort", "dir")

# The chart's geometry, in SVG user units (the SVG scales to its box: app.css).
WIDTH, HEIGHT = 640, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 8, 12, 40
SERIES = {  # kind: (MonthTotal attribute, what one unit is called)
    "ddi": ("ddi_days", "billable DDI-days"),
    "user": ("user_days", "billable user-days"),
}


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label_x: float
    month: str  # "Mar"
    year: str  # shown under January and under the first bar
    value: int
    title: str  # "March 2026: 1,234 DDI days (to date)"
    to_date: bool


@dataclass(frozen=True)
class Tick:
    y: float
    label: str


@dataclass(frozen=True)
class Chart:
    kind: str
    unit: str
    width: int
    height: int
    left: int
    right: int
    baseline: float
    bars: list[Bar]
    ticks: list[Tick]
    description: str


def nice_ceiling(value: int) -> int:
    """The smallest of 1, 2, 5 x 10^k (k >= 0) that is at least `value` (1 for 0)."""
    step = 1
    while True:
        for m in (1, 2, 5):
            if m * step >= value:
                return m * step
        step *= 10


def compact(value: int) -> str:
    """An axis label short enough for the chart's margin: 2M, 1.5M, 20k, 5,000, 0."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 10_000:
        return f"{value / 1_000:g}k"
    return f"{value:,}"


def bar_chart(kind: str, months: list[MonthTotal]) -> Chart:
    """The bars of one kind's monthly totals, scaled so the tallest fits under a round top."""
    attribute, unit = SERIES[kind]
    values = [getattr(m, attribute) for m in months]
    top = nice_ceiling(max(values, default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    baseline = TOP + plot_h
    slot = plot_w / max(len(months), 1)
    bars = []
    for i, (m, value) in enumerate(zip(months, values, strict=True)):
        height = plot_h * value / top
        name = f"{calendar.month_name[m.month]} {m.year}"
        bars.append(
            Bar(
                x=round(LEFT + i * slot + slot * 0.15, 2),
                y=round(baseline - height, 2),
                width=round(slot * 0.7, 2),
                height=round(height, 2),
                label_x=round(LEFT + i * slot + slot / 2, 2),
                month=calendar.month_abbr[m.month],
                year=str(m.year) if i == 0 or m.month == 1 else "",
                value=value,
                title=f"{name}: {value:,} {unit}" + (" (to date)" if m.to_date else ""),
                to_date=m.to_date,
            )
        )
    # The axis at 0 and at the top, and half-way where that is a whole number.
    levels = [0, top // 2, top] if top % 2 == 0 else [0, top]
    ticks = [Tick(round(baseline - plot_h * v / top, 2), compact(v)) for v in levels]
    first, last = months[0], months[-1]
    description = (
        f"{unit[0].upper()}{unit[1:]} per month from "
        f"{calendar.month_name[first.month]} {first.year} "
        f"to {calendar.month_name[last.month]} {last.year} (to date); the highest is "
        f"{max(values, default=0):,}. The table below gives every figure."
    )
    return Chart(kind, unit, WIDTH, HEIGHT, LEFT, RIGHT, baseline, bars, ticks, description)


def links_for(me: Principal, company_id: str) -> list[tuple[str, str]]:
    """(text, address) of the company's lists, reports and audit log the account may open."""
    links = []
    if me.may_admin(company_id):
        links += [
            ("DDIs", url_for("records.ddis_list", company=company_id)),
            ("Phone users", url_for("records.users_list", company=company_id)),
        ]
    if me.may_report_on(company_id):
        links += [
            ("DDI counts", url_for("reports.ddis", company=company_id)),
            ("Phone-user counts", url_for("reports.users", company=company_id)),
        ]
    auditable = me.auditable_companies()
    if auditable is None or company_id in auditable:
        links.append(("Audit log", url_for("audit.index", company=company_id)))
    return links


@bp.get("/<company_id>")
@login_required
@replica_reads
def page(company_id: str):
    me = principal()
    overview = company_overview.overview(me, company_id)
    charts = (
        [bar_chart(kind, overview.billing.months) for kind in SERIES] if overview.billing else []
    )
    return render_template(
        "companies/page.html",
        company=overview,
        charts=charts,
        links=links_for(me, company_id),
        may_rename=me.system_admin,
        month_name=calendar.month_name,
        month_vs_last=_month_vs_last(overview.billing) if overview.billing else [],
    )


def _month_vs_last(billing: company_overview.Billing) -> list[dict[str, Any]]:
    """Per kind, this month (to date) against last month, and the records added and removed
    this month: the figures of the months table itself, so the two always agree."""
    if len(billing.months) < 2:
        return []
    last, this = billing.months[-2], billing.months[-1]
    return [
        {
            "kind": kind,
            "unit": unit,
            "comparison": month_changes.compare(getattr(this, attr), getattr(last, attr)),
            "changes": billing.changes[kind],
        }
        for kind, (attr, unit) in SERIES.items()
    ]


def listing(
    me: Principal,
    lister: Callable[..., companies.CompanyPage],
    endpoint: str,
    per_page: int | None = None,
) -> tuple[dict[str, Any], int]:
    """A companies list's page from the query string (`q`, `sort`, `dir`, `page`), the one
    reading for /admin/companies (`lister` companies.search) and /companies (companies.browse):
    its template context, and 400 with the list empty and the reason for a bad parameter."""
    args = page_args(request.args, LIST_ARGS)
    descending = args.get("dir") == "desc"
    error, status = None, 200
    try:
        if args.get("dir", "asc") not in ("asc", "desc"):
            raise Invalid("The direction is asc or desc.", {"dir": "asc or desc"})
        found = lister(
            me,
            args.get("q", ""),
            sort=args.get("sort", "id"),
            descending=descending,
            page=request.args.get("page") or 1,
            per_page=per_page or PER_PAGE,
        )
    except Invalid as exc:
        error, status = exc.message, 400
        found = companies.CompanyPage([], 0, 1, 1)
    context = {
        "listing": found,
        "args": args,
        "sort": args.get("sort", "id"),
        "descending": descending,
        "error": error,
        "back_arg": list_here(endpoint, args, found.number),
    }
    return context, status


@bp.get("", endpoint="index")
@login_required
@replica_reads
def index():
    """`/companies`: the companies the account may open (services.companies.browse), searched,
    sorted and paged like /admin/companies but read-only. A System-Admin's companies list is
    /admin/companies, with its actions: it is sent there with the same parameters."""
    me = principal()
    if me.system_admin:
        return redirect(url_for("admin.companies", **page_args(request.args, (*LIST_ARGS, "page"))))
    context, status = listing(me, companies.browse, "companies.index")
    context.update(list_endpoint="companies.index", may_rename=False)
    vary = {"Vary": "HX-Request"}
    if is_htmx():
        return render_template("admin/_company_rows.html", oob=True, **context), status, vary
    return render_template("companies/list.html", **context), status, vary


def nav_link(me: Principal) -> tuple[str, str, bool] | None:
    """The navigation's way to the account's companies, as (text, address, current): "My
    company" to its page for an account that may open exactly one company and administers it;
    "Companies" to /companies for any other account that may open some (Billing, a
    Company-Admin of several); None for a System-Admin (its "Companies" is /admin/companies)
    and for an account that may open none."""
    scope = me.visible_companies()
    if me.system_admin or (scope is not None and not scope):
        return None
    endpoint = request.endpoint or ""
    if scope is not None and len(scope) == 1 and scope <= me.admin_of:
        [company_id] = scope
        here = (
            endpoint == "companies.page"
            and (request.view_args or {}).get("company_id") == company_id
        )
        return "My company", url_for("companies.page", company_id=company_id), here
    return "Companies", url_for("companies.index"), endpoint == "companies.index"
