"""Calendar-style monthly count tables: /reports/ddis, /reports/users, their .csv variants and
the day drill-down /reports/ddis/day, /reports/users/day (docs/reports.md, docs/pages.md).

Every figure comes from services.reports (the same call as /rest/call/read…Count); who may see
what is decided there and in services.report_days. Views only parse query parameters strictly
and lay the numbers out.
"""

from __future__ import annotations

import calendar
import csv
import io
from dataclasses import dataclass
from datetime import date
from typing import Any

from flask import (
    Blueprint,
    current_app,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import login_required

from ..access import Principal
from ..services import periods, report_days, report_query, reports
from ..services.errors import Invalid
from . import pickers
from .common import is_htmx, principal
from .csv_safe import neutralise
from .errors import error_page

bp = Blueprint("reports", __name__, url_prefix="/reports")

TITLES = {"ddi": "DDI counts", "user": "Phone-user counts"}
NOUNS = {"ddi": "DDIs", "user": "phone users"}
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
    values: dict[str, dict[str, Any]]
    period: periods.Period
    today: date
    selected: list[str]


def _resolve(kind: str) -> Resolved:
    """Run the report for the request's parameters; Invalid for bad ones, Forbidden from the
    service."""
    me = principal()
    scope = report_query.scope_from_query(request.args.to_dict(flat=False), report_query.PAGE)
    parsed = reports.parse_scope(scope)
    tz = periods.zone(current_app.config["REPORT_TIMEZONE"])
    today = periods.today_in(tz)
    values = reports.report(me, kind, parsed, today=today)
    period = periods.resolve(parsed.month, parsed.year, tz, today)
    selected = [c for c in (parsed.companies or []) if c in values]
    return Resolved(kind, values, period, today, selected)


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


def _chosen_url(kind: str, chosen: pickers.Chosen) -> str:
    """The report's address for the chosen companies and the month asked for."""
    args: dict[str, Any] = {k: v for k in ("month", "year") if (v := request.args.get(k, ""))}
    return url_for(f"reports.{_plural(kind)}", company=chosen.ids, **args)


def _page(kind: str):
    me = principal()
    me.require_report()  # Forbidden without report permission, before any parameter
    chosen = _chosen(me)
    if chosen.ok and (pickers.pressed(request.args) or "add_company" in request.args):
        # The form was sent (Show, Add or a Remove): the report's own address, so its links
        # and bookmarks stay the `company`, `month`, `year` they always were.
        return redirect(_chosen_url(kind, chosen))
    try:
        if not chosen.ok:
            raise Invalid(f"Company '{chosen.picked.text}': {chosen.picked.error}.")
        result = _resolve(kind)
    except Invalid as exc:
        tz = periods.zone(current_app.config["REPORT_TIMEZONE"])
        today = periods.today_in(tz)
        # Keep what was asked for in the pickers, so it can be corrected, where it is a number.
        year = _typed("year", today.year, 1, 9999)
        month = _typed("month", today.month, 1, 12)
        context = _picker_context(kind, chosen, today, year, month, chosen.ids)
        html = render_template("reports/report.html", error=_message(exc), **context)
        return html, 400
    period = result.period
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
    context.update(
        rows=_rows(kind, result),
        days=[d.day for d in period.days],
        weeks=_weeks(kind, result) if len(result.values) == 1 else None,
        to_date=(period.year, period.month) == (result.today.year, result.today.month),
    )
    return render_template("reports/report.html", error=None, **context)


def _plural(kind: str) -> str:
    return "ddis" if kind == "ddi" else "users"


def _picker_context(kind, choices, today, year, month, selected) -> dict[str, Any]:
    return {
        "kind": kind,
        "page_url": url_for(f"reports.{_plural(kind)}"),
        "title": TITLES[kind],
        "noun": NOUNS[kind],
        "choices": choices,
        "selected": set(selected),
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
    """One row per company: its identifier, name, [(date, peak, drill-down URL)] and totals."""
    per_day_key, month_key = reports.ANSWER_KEYS[kind]
    rows = []
    for company_id, entry in result.values.items():
        cells = [
            (day, peak, _day_url(kind, company_id, date.fromisoformat(day)))
            for day, peak in entry["dates"].items()
        ]
        rows.append(
            {
                "id": company_id,
                "name": entry["name"],
                "cells": cells,
                "for_month": entry[month_key],
                "per_day": f"{entry[per_day_key]:.4f}",
                "days": entry["days"],
                "calendar_url": url_for(
                    f"reports.{_plural(kind)}",
                    company=company_id,
                    year=result.period.year,
                    month=result.period.month,
                ),
            }
        )
    return rows


def _weeks(kind: str, result: Resolved) -> list[list[dict[str, Any] | None]]:
    """The month as weeks (Monday first); a cell is None outside the month, and a day of the
    month outside the report period (after today) has no peak."""
    ((company_id, entry),) = result.values.items()
    weeks = []
    year, month = result.period.year, result.period.month
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
def ddis():
    return _page("ddi")


@bp.get("/users")
@login_required
def users():
    return _page("user")


# --- CSV -------------------------------------------------------------------------------------


def _csv(kind: str):
    report_days.reportable_companies(principal())  # Forbidden before any parameter error
    try:
        result = _resolve(kind)
    except Invalid as exc:
        return error_page(400, _message(exc))
    per_day_key, month_key = reports.ANSWER_KEYS[kind]
    out = io.StringIO()
    writer = csv.writer(out)
    dates = [d.day.isoformat() for d in result.period.days]
    writer.writerow(["company", "name", *dates, "billable_days_for_month", "billable_days_per_day"])
    for company_id, entry in result.values.items():
        writer.writerow(
            [
                neutralise(company_id),
                neutralise(entry["name"]),
                *(str(entry["dates"][d]) for d in dates),
                str(entry[month_key]),
                f"{entry[per_day_key]:.4f}",
            ]
        )
    response = make_response(out.getvalue())
    response.mimetype = "text/csv"
    stem = FILE_STEMS[kind]
    name = f"{stem}-{result.period.year:04d}-{result.period.month:02d}.csv"
    response.headers["Content-Disposition"] = f"attachment; filename={name}"
    return response


@bp.get("/ddis.csv")
@login_required
def ddis_csv():
    return _csv("ddi")


@bp.get("/users.csv")
@login_required
def users_csv():
    return _csv("user")


# --- drill-down ------------------------------------------------------------------------------


def _day(kind: str):
    """One company's day; a fragment for htmx (swapped into the report page's panel), else a
    whole page. Parameters are checked by the service, after the permission."""
    company = request.args.get("company", "")
    day = request.args.get("date", "")
    detail = report_days.day_detail(principal(), kind, company, day)
    context = {
        "detail": detail,
        "noun": NOUNS[kind],
        "title": TITLES[kind],
        "month_url": url_for(
            f"reports.{_plural(kind)}",
            company=detail.company,
            year=detail.day.year,
            month=detail.day.month,
        ),
    }
    template = "reports/_day.html" if is_htmx() else "reports/day.html"
    response = make_response(render_template(template, **context))
    response.headers["Vary"] = "HX-Request"
    return response


@bp.get("/ddis/day")
@login_required
def ddis_day():
    return _day("ddi")


@bp.get("/users/day")
@login_required
def users_day():
    return _day("user")
