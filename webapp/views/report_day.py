"""A report day's drill-down, /reports/ddis/day and /reports/users/day, and its CSV (on the
reports blueprint, registered by views/__init__.py): the summary, the day's changes and the
records active all day (services/billing/day_view.py; docs/reports.md, docs/pages.md).

Opened from a month's calendar (or the many-company table) with htmx, it is a fragment swapped
into the report page's #panel and its address is pushed; without JavaScript, reloaded or
restored from history it is a page of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, timedelta
from typing import Any

from flask import current_app, make_response, render_template, request, url_for
from flask_login import login_required

from .. import wording
from ..access import Principal
from ..request_auth import replica_reads
from ..services.billing import day_view, periods, report_days, reports
from . import months
from .common import is_htmx, principal
from .downloads import csv_download
from .reports import FILE_STEMS, NOUNS, TITLES, _page_param, _plural, bp

DAY_CSV_KEYS = {"ddi": "ddi", "user": "username"}  # the first column of a day's CSV
PAGE_SIZE = day_view.PAGE_SIZE
# A paging link's id begins with its list's name: the server sees it as htmx's HX-Trigger and
# puts focus, and the line read out, on that list instead of the summary.
LISTS = ("changes", "all-day")


# --- where a record links to -----------------------------------------------------------------


def ddi_url(me: Principal, key: str) -> str | None:
    """A DDI's own page, for a reader who may open it whatever company holds the number now:
    a System-Admin (a Company-Admin's may have left its companies; Billing has none)."""
    dialcode, colon, number = key.partition(":")
    if not me.system_admin or not colon:
        return None
    return url_for("ddi_page.show", dialcode=dialcode, number=number)


def user_url(me: Principal, company: str, username: str) -> str | None:
    """Where a phone user links to: its own page, for a reader who may open it (a
    System-Admin, its company's Company-Admin; views/user_page.py)."""
    if not me.may_admin(company):
        return None
    return url_for("user_page.user", company=company, username=username)


def record_cells(
    me: Principal, kind: str, company: str, keys: Iterable[str]
) -> list[tuple[str, str | None]]:
    """Each record's text ("+44 2071234567" for a DDI, the username) and link (or None), made
    here rather than by a macro per row: 200 rows of the page."""
    if kind == "ddi":
        return [(wording.ddi_key_number(key), ddi_url(me, key)) for key in keys]
    return [(key, user_url(me, company, key)) for key in keys]


# --- the page --------------------------------------------------------------------------------


def _day(kind: str):
    """One company's day; a fragment for htmx (swapped into the report page's panel), else a
    whole page. Parameters are checked by the service, after the permission."""
    me = principal()
    me.require_report()  # Forbidden before any parameter error
    number = _page_param()
    changes_number = _page_param("changes")
    view = day_view.day_view(
        me,
        kind,
        request.args.get("company", ""),
        request.args.get("date", ""),
        changes_offset=(changes_number - 1) * PAGE_SIZE,
        all_day_offset=(number - 1) * PAGE_SIZE,
    )
    detail = view.day
    endpoint = f"reports.{_plural(kind)}_day"
    pages = {
        "changes": view.changes_offset // PAGE_SIZE + 1,
        "page": view.all_day_offset // PAGE_SIZE + 1,
    }
    context = {
        "view": view,
        "detail": detail,
        "summary": view.summary,
        "noun": NOUNS[kind],
        "title": TITLES[kind],
        "month_url": url_for(
            f"reports.{_plural(kind)}",
            company=detail.company,
            year=detail.day.year,
            month=detail.day.month,
        ),
        "csv_url": url_for(f"{endpoint}_csv", company=detail.company, date=detail.day.isoformat()),
        "closed": months.closed_day(kind, detail.company, detail.day),
        "change_cells": record_cells(me, kind, detail.company, (c.key for c in view.changes)),
        "all_day_cells": record_cells(me, kind, detail.company, (r.key for r in view.all_day)),
        "changes_list": _list(
            endpoint,
            detail,
            pages,
            "changes",
            len(view.changes),
            view.summary.added + view.summary.removed,
        ),
        "all_day_list": _list(
            endpoint, detail, pages, "page", len(view.all_day), view.summary.all_day
        ),
        "focus": _focus(),
        **_days(endpoint, detail.company, detail.day),
    }
    fragment = is_htmx()
    template = "reports/_day.html" if fragment else "reports/day.html"
    response = make_response(render_template(template, is_fragment=fragment, **context))
    response.headers["Vary"] = "HX-Request"
    return response


def _focus() -> str:
    """Where focus goes after an htmx swap: the list whose paging link was followed, else the
    summary (a day opened, or the previous or next day)."""
    trigger = request.headers.get("HX-Trigger", "") if is_htmx() else ""
    return next((name for name in LISTS if trigger.startswith(f"{name}-")), "summary")


def _list(
    endpoint: str,
    detail: report_days.DayPage,
    pages: dict[str, int],
    param: str,
    shown: int,
    total: int,
) -> dict[str, Any]:
    """One of the day's two lists: its positions and its pager (First/Previous/Next/Last),
    whose links keep the other list's page."""
    number = pages[param]
    last = max(1, -(-total // PAGE_SIZE))

    def link(target: int) -> str | None:
        if not 1 <= target <= last or target == number:
            return None
        query: dict[str, Any] = {k: v for k, v in {**pages, param: target}.items() if v > 1}
        return url_for(endpoint, company=detail.company, date=detail.day.isoformat(), **query)

    first = (number - 1) * PAGE_SIZE + 1
    return {
        "first": first,
        "last": first + shown - 1,
        "total": total,
        "number": number,
        "pages": last,
        "pager": [
            ("first", link(1)),
            ("prev", link(number - 1)),
            ("next", link(number + 1)),
            ("last", link(last)),
        ],
    }


def _days(endpoint: str, company: str, day: date) -> dict[str, Any]:
    """The previous and next day's addresses (none before the reports' first year, none after
    today) and whether each is in the same month: only then is it swapped into the panel
    under the month's calendar; another month is a page of its own."""
    today = periods.today_in(periods.zone(current_app.config["REPORT_TIMEZONE"]))
    context: dict[str, Any] = {}
    for name, other in (
        ("previous_day", day - timedelta(days=1)),
        ("next_day", day + timedelta(days=1)),
    ):
        if other.year < reports.MIN_YEAR or other > today:
            context[name] = None
            continue
        context[name] = {
            "day": other,
            "url": url_for(endpoint, company=company, date=other.isoformat()),
            "same_month": other.month == day.month,
        }
    return context


def _day_csv(kind: str):
    """Every record of the day (same parameters as the page; its page numbers are ignored),
    streamed: the columns and values it always had (scripts read it)."""
    me = principal()
    me.require_report()
    detail, records = report_days.day_records(
        me, kind, request.args.get("company", ""), request.args.get("date", "")
    )

    header = [DAY_CSV_KEYS[kind], "from", "until", "from_day_before", "continues", "at_peak"]
    rows = (
        [
            r.key,
            r.start.isoformat(),
            r.end.isoformat(),
            _yes(r.from_before),
            _yes(r.continues),
            _yes(r.at_peak),
        ]
        for r in records
    )
    name = f"{FILE_STEMS[kind]}-{detail.company}-{detail.day.isoformat()}.csv"
    return csv_download(name, header, rows)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


@bp.get("/ddis/day.csv")
@login_required
@replica_reads
def ddis_day_csv():
    return _day_csv("ddi")


@bp.get("/users/day.csv")
@login_required
@replica_reads
def users_day_csv():
    return _day_csv("user")


@bp.get("/ddis/day")
@login_required
@replica_reads
def ddis_day():
    return _day("ddi")


@bp.get("/users/day")
@login_required
@replica_reads
def users_day():
    return _day("user")
