"""Calendar-style monthly count tables: /reports/ddis, /reports/users and their .csv variants
(docs/reports.md, docs/pages.md); the day drill-down they open is views/report_day.py, on the
same blueprint.

Every figure comes from services.reports (the same call as /rest/call/read…Count); who may see
what is decided there and in services.report_days. Views only parse query parameters strictly
and lay the numbers out.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from flask import (
    Blueprint,
    current_app,
    flash,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import login_required

from ..access import Principal
from ..errors import Invalid
from ..request_auth import replica_reads
from ..services.billing import month_changes, periods, report_days, report_query, reports
from . import months, pickers, report_controls
from .common import principal
from .downloads import csv_download
from .errors import error_page

bp = Blueprint("reports", __name__, url_prefix="/reports")

TITLES = {"ddi": "DDI counts", "user": "Phone-user counts"}
PAGE_SIZE = 50  # companies a page
FILTER_MAX = 100  # characters of the company filter
NOUNS = {"ddi": "DDIs", "user": "phone users"}
# The bill's one name for a month total, on every page and CSV header (docs/reports.md).
UNITS = {"ddi": "billable DDI-days", "user": "billable user-days"}
CSV_UNITS = {"ddi": "billable_ddi_days", "user": "billable_user_days"}
FILE_STEMS = {"ddi": "ddi-counts", "user": "user-counts"}
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# The service words its messages for the JSON scope; a page speaks of its own fields.
PAGE_MESSAGES = {
    ("month", "in the future"): "That month is in the future; pick this month or an earlier one.",
    ("month", "required with year"): "Pick a month to go with the year.",
}


# --- query parameters ------------------------------------------------------------------------


@dataclass
class Resolved:
    kind: str
    ranking: reports.Ranking
    today: date
    selected: list[str]
    contains: str  # the company filter, as typed (trimmed)
    page: int  # from 1


def _resolve(kind: str, chosen: list[str]) -> Resolved:
    """Rank the chosen companies (none: all it may report on) and read the page asked for;
    Invalid for bad parameters, Forbidden from the service. `chosen`: the request's companies
    the account may report on (_chosen), so that one it may not leaves the others, or all."""
    me = principal()
    args = request.args.to_dict(flat=False)
    # Every parameter as asked is checked (a malformed identifier is a 400), then the
    # companies are those chosen.
    reports.parse_scope(report_query.scope_from_query(args, report_query.PAGE))
    args.pop("company", None)
    if chosen:
        args["company"] = chosen
    parsed = reports.parse_scope(report_query.scope_from_query(args, report_query.PAGE))
    contains = _filter_param()
    number = _page_param()
    tz = periods.zone(current_app.config["REPORT_TIMEZONE"])
    today = periods.today_in(tz)
    ranking = reports.ranking(
        me,
        kind,
        parsed,
        contains=contains,
        offset=(number - 1) * PAGE_SIZE,
        limit=PAGE_SIZE,
        today=today,
    )
    if ranking.chosen == 1 and not ranking.rows:
        # One company is its calendar, which has no filter.
        ranking = reports.ranking(me, kind, parsed, today=today)
    selected = [c for c in (parsed.companies or []) if c in chosen]
    return Resolved(kind, ranking, today, selected, contains, ranking.offset // PAGE_SIZE + 1)


def _filter_param() -> str:
    values = [v.strip() for v in request.args.getlist("filter")]
    values = [v for v in values if v]
    if len(values) > 1:
        raise Invalid("Give the company filter only once.", {"filter": "given more than once"})
    value = values[0] if values else ""
    if len(value) > FILTER_MAX:
        raise Invalid(
            f"The company filter is too long: at most {FILTER_MAX} characters.",
            {"filter": "too long"},
        )
    return value


def _page_param(name: str = "page") -> int:
    """The page asked for, from 1 (none: the first); Invalid unless a plain whole number."""
    values = [v.strip() for v in request.args.getlist(name) if v.strip()]
    if len(values) > 1:
        raise Invalid("Give the page only once.", {name: "given more than once"})
    if not values:
        return 1
    value = values[0]
    if not (value.isascii() and value.isdigit() and len(value) <= 7 and int(value) >= 1):
        raise Invalid("The page must be a whole number from 1, such as 2.", {name: "not a page"})
    return int(value)


def _message(exc: Invalid) -> str:
    """The page's wording of a parameter error."""
    if "scope." not in exc.message:
        return exc.message
    for field, why in exc.fields.items():
        if (field, why) in PAGE_MESSAGES:
            return PAGE_MESSAGES[field, why]
        return f"The {field} {why}."
    return exc.message


# --- pages -----------------------------------------------------------------------------------


def _month_shift(year: int, month: int, step: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + step
    return index // 12, index % 12 + 1


def _typed(name: str, fallback: int, low: int, high: int) -> int:
    """The query's value of `name` if it is a plain number within [low, high], else fallback."""
    value = request.args.get(name, "")
    if value.isascii() and value.isdigit() and low <= int(value) <= high:
        return int(value)
    return fallback


def _chosen(me: Principal) -> pickers.Chosen:
    """The report's companies (`company`, repeated) as a chosen list: those it may report on
    (others are left out, as the report leaves them out), less a removed one, plus the one
    typed into the picker (`add_company`)."""
    chosen = pickers.choose(me, "reports", "company", request.args.getlist("company"), request.args)
    chosen.ids = [c for c in chosen.ids if c in chosen.names]
    return chosen


def _left_out(chosen: pickers.Chosen) -> str | None:
    """What the page says of the `company` parameters it left out, if any: the same words
    whether such a company does not exist or is not the account's to read (docs/decisions.md,
    company pickers)."""
    gone = pickers.removals(request.args, "company")
    asked = dict.fromkeys(c for c in request.args.getlist("company") if c and c not in gone)
    left = [c for c in asked if c not in chosen.names]
    if not left:
        return None
    which = ", ".join(left)
    exists = "it does not exist" if len(left) == 1 else "they do not exist"
    shown = "showing the others" if chosen.ids else "showing every company you may report on"
    return f"You may not read the reports of {which} (or {exists}): {shown}."


def _chosen_url(kind: str, chosen: pickers.Chosen) -> str:
    """The report's address for the chosen companies and the month asked for."""
    args: dict[str, Any] = {k: v for k in ("month", "year") if (v := request.args.get(k, ""))}
    return url_for(f"reports.{_plural(kind)}", company=chosen.ids, **args)


def _page(kind: str):
    me = principal()
    me.require_report()  # Forbidden without report permission, before any parameter
    chosen = _chosen(me)
    in_place = report_controls.changing(request.args) and report_controls.in_place()
    if chosen.ok and report_controls.changing(request.args) and not in_place:
        # The form was sent (Show, Add or a Remove): the report's own address, so its links
        # and bookmarks stay the `company`, `month`, `year` they always were.
        if left_out := _left_out(chosen):
            flash(left_out, "info")
        if line := report_controls.change_line(request.args, chosen):
            flash(line, "success")
            report_controls.keep_open()
        return redirect(_chosen_url(kind, chosen))
    if in_place:
        return _in_place(kind, chosen)
    return _render(kind, chosen, open_=report_controls.kept_open())


def _in_place(kind: str, chosen: pickers.Chosen):
    """An Add or a Remove with htmx: the report region for the new choice (what the redirect
    would show), the address it stands for pushed, focus and one line for the announcer."""
    line = report_controls.change_line(request.args, chosen) if chosen.ok else None
    url = _chosen_url(kind, chosen)
    response = make_response(_render(kind, chosen, open_=True, line=line, region=True, back=url))
    if chosen.ok and response.status_code == 200:
        response.headers["HX-Push-Url"] = url
    return response


def _render(
    kind: str,
    chosen: pickers.Chosen,
    *,
    open_: bool = False,
    line: str | None = None,
    region: bool = False,
    back: str | None = None,
):
    """The report page (or, `region`, its swapped part) for the chosen companies: `open_`
    keeps the controls unfolded, `line` says what an Add or a Remove did."""
    template = "reports/_region.html" if region else "reports/report.html"
    controls = {"controls_open": open_, "change_line": line}
    try:
        if not chosen.ok:
            raise Invalid(f"Company '{chosen.picked.text}': {chosen.picked.error}.")
        result = _resolve(kind, chosen.ids)
    except Invalid as exc:
        tz = periods.zone(current_app.config["REPORT_TIMEZONE"])
        today = periods.today_in(tz)
        # Keep what was asked for in the pickers, so it can be corrected, where it is a number.
        year = _typed("year", today.year, 1, 9999)
        month = _typed("month", today.month, 1, 12)
        context = _picker_context(kind, chosen, today, year, month, chosen.ids)
        context["filter"] = request.args.get("filter", "")[:FILTER_MAX]
        html = render_template(template, error=_message(exc), **controls, **context)
        return html, 400
    period = result.ranking.period
    context = _picker_context(
        kind, chosen, result.today, period.year, period.month, result.selected
    )
    args: dict[str, Any] = {"company": result.selected} if result.selected else {}
    earlier = _month_shift(period.year, period.month, -1)
    later = _month_shift(period.year, period.month, 1)
    if earlier[0] >= reports.MIN_YEAR:
        context["previous_url"] = url_for(
            f"reports.{_plural(kind)}", year=earlier[0], month=earlier[1], **args
        )
    if later <= (result.today.year, result.today.month):
        context["next_url"] = url_for(
            f"reports.{_plural(kind)}", year=later[0], month=later[1], **args
        )
    context["csv_url"] = url_for(
        f"reports.{_plural(kind)}_csv", year=period.year, month=period.month, **args
    )
    single = result.ranking.chosen == 1
    context.update(
        rows=_rows(kind, result),
        days=[d.day for d in period.days],
        weeks=_weeks(kind, result) if single else None,
        month_vs_last=_month_vs_last(kind, result) if single else None,
        to_date=(period.year, period.month) == (result.today.year, result.today.month),
        filter=result.contains,
    )
    if result.ranking.chosen > 1:
        context.update(_matrix_context(kind, result, args))
    context["month_panel"] = months.panel(
        kind, period.year, period.month, context["to_date"], result.selected, back=back
    )
    return render_template(template, error=None, **controls, **context)


def _matrix_context(kind: str, result: Resolved, args: dict[str, Any]) -> dict[str, Any]:
    """The many-company table's totals row, counts and paging links."""
    ranking = result.ranking
    period = ranking.period
    _, month_key = reports.ANSWER_KEYS[kind]
    totals = ranking.totals
    pages = max(1, -(-ranking.matched // PAGE_SIZE))
    base: dict[str, Any] = {"year": period.year, "month": period.month, **args}
    if result.contains:
        base["filter"] = result.contains

    def link(number: int) -> str:
        query: dict[str, Any] = {**base, "page": number} if number > 1 else base
        return url_for(f"reports.{_plural(kind)}", **query)

    links = [("first", 1), ("prev", result.page - 1), ("next", result.page + 1), ("last", pages)]
    return {
        "totals": {
            "cells": list(totals["dates"].items()),
            "for_month": totals[month_key],
            "per_day": per_day_text(totals[month_key], len(period.days)),
        },
        "chosen": ranking.chosen,
        "matched": ranking.matched,
        "first_rank": ranking.offset + 1,
        "last_rank": ranking.offset + len(ranking.rows),
        "page_number": result.page,
        "pages": pages,
        "pager": [
            (name, link(number) if 1 <= number <= pages and number != result.page else None)
            for name, number in links
        ],
        "unfiltered_url": url_for(
            f"reports.{_plural(kind)}", year=period.year, month=period.month, **args
        ),
        "filter_hidden": {"company": result.selected, "month": period.month, "year": period.year},
    }


def per_day_text(total: int, days: int) -> str:
    """A page's per-day average: the month total / days, rounded half-up to one decimal and
    written with thousands separators, the ".0" left off ("49,450.5", "12"). Rounded once from
    the exact quotient, not from the API's four places (no double rounding)."""
    if not days:
        return "0"
    value = (Decimal(total) / Decimal(days)).quantize(Decimal("0.1"), ROUND_HALF_UP)
    text = f"{value:,.1f}"
    return text[:-2] if text.endswith(".0") else text


def _month_vs_last(kind: str, result: Resolved) -> dict[str, Any] | None:
    """The one company's month against the month before (the reports' own totals, a closed
    month's stored ones) and its records added and removed in the month; None for the first
    month a report may ask for."""
    period = result.ranking.period
    ((company_id, entry),) = result.ranking.rows.items()
    year, month = _month_shift(period.year, period.month, -1)
    if year < reports.MIN_YEAR:
        return None
    _, month_key = reports.ANSWER_KEYS[kind]
    last = reports.report(
        principal(), kind, reports.ReportRequest([company_id], month, year), result.today
    )
    last_total = last[company_id][month_key] if company_id in last else 0
    return {
        "comparison": month_changes.compare(entry[month_key], last_total),
        "last_name": f"{calendar.month_name[month]} {year}",
        "changes": month_changes.changes(kind, company_id, period),
    }


def _plural(kind: str) -> str:
    return "ddis" if kind == "ddi" else "users"


def _picker_context(kind, choices, today, year, month, selected) -> dict[str, Any]:
    return {
        "kind": kind,
        "page_url": url_for(f"reports.{_plural(kind)}"),
        "title": TITLES[kind],
        "noun": NOUNS[kind],
        "unit": UNITS[kind],
        "choices": choices,
        "left_out": _left_out(choices),
        "selected": set(selected),
        "summary": report_controls.summary(list(selected), calendar.month_name[month], year),
        "year": year,
        "month": month,
        "month_name": calendar.month_name[month],
        "months": [(n, calendar.month_name[n]) for n in range(1, 13)],
        "min_year": reports.MIN_YEAR,
        "max_year": today.year,
        "weekdays": WEEKDAYS,
        "rows": [],
        "weeks": None,
        "days": [],
    }


def _day_url(kind: str, company: str, day: date) -> str:
    return url_for(f"reports.{_plural(kind)}_day", company=company, date=day.isoformat())


def _rows(kind: str, result: Resolved) -> list[dict[str, Any]]:
    """One row per company of the page, in rank order: its identifier, name, rank,
    [(date, peak, drill-down URL)] and totals."""
    _, month_key = reports.ANSWER_KEYS[kind]
    period = result.ranking.period
    link = months.day_links(f"reports.{_plural(kind)}_day")
    rows = []
    for rank, (company_id, entry) in enumerate(
        result.ranking.rows.items(), result.ranking.offset + 1
    ):
        row_base = link(company_id)
        cells = [(day, peak, row_base + day) for day, peak in entry["dates"].items()]
        rows.append(
            {
                "id": company_id,
                "name": entry["name"],
                "rank": rank,
                "cells": cells,
                "for_month": entry[month_key],
                "per_day": per_day_text(entry[month_key], entry["days"]),
                "days": entry["days"],
                "calendar_url": url_for(
                    f"reports.{_plural(kind)}",
                    company=company_id,
                    year=period.year,
                    month=period.month,
                ),
            }
        )
    return rows


def _weeks(kind: str, result: Resolved) -> list[list[dict[str, Any] | None]]:
    """The month as weeks (Monday first); a cell is None outside the month, and a day of the
    month outside the report period (after today) has no peak."""
    ((company_id, entry),) = result.ranking.rows.items()
    weeks = []
    year, month = result.ranking.period.year, result.ranking.period.month
    for week in calendar.Calendar(firstweekday=0).monthdatescalendar(year, month):
        row: list[dict[str, Any] | None] = []
        for day in week:
            if day.month != month:
                row.append(None)
                continue
            peak = entry["dates"].get(day.isoformat())
            row.append(
                {
                    "day": day,
                    "peak": peak,
                    "url": None if peak is None else _day_url(kind, company_id, day),
                }
            )
        weeks.append(row)
    return weeks


@bp.get("/ddis")
@login_required
@replica_reads
def ddis():
    return _page("ddi")


@bp.get("/users")
@login_required
@replica_reads
def users():
    return _page("user")


# --- CSV -------------------------------------------------------------------------------------


def _csv(kind: str):
    """The whole choice (every company, whatever the page's filter and page), streamed."""
    me = principal()
    report_days.reportable_companies(me)  # Forbidden before any parameter error
    try:
        scope = report_query.scope_from_query(request.args.to_dict(flat=False), report_query.PAGE)
        period, pairs = reports.report_rows(me, kind, reports.parse_scope(scope))
    except Invalid as exc:
        return error_page(400, _message(exc))
    per_day_key, month_key = reports.ANSWER_KEYS[kind]
    dates = [d.day.isoformat() for d in period.days]

    unit = CSV_UNITS[kind]
    header = ["company", "name", *dates, unit, f"{unit}_per_day"]
    rows = (
        [
            company_id,
            entry["name"],
            *(str(entry["dates"][d]) for d in dates),
            str(entry[month_key]),
            f"{entry[per_day_key]:.4f}",
        ]
        for company_id, entry in pairs
    )
    name = f"{FILE_STEMS[kind]}-{period.year:04d}-{period.month:02d}.csv"
    return csv_download(name, header, rows)


@bp.get("/ddis.csv")
@login_required
@replica_reads
def ddis_csv():
    return _csv("ddi")


@bp.get("/users.csv")
@login_required
@replica_reads
def users_csv():
    return _csv("user")
