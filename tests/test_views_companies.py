"""The companies list /admin/companies (search, sort, paging) and a company's page
/companies/<id> (docs/pages.md).

The company page for every role (404 for a company the account may not see, like a missing
one), what each role sees on it, its numbers against the report service on a small history
over the last thirteen months, and its SVG chart against its table.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import replace
from datetime import date, datetime, timedelta

import pytest
from bs4 import BeautifulSoup
from flask import current_app
from sqlalchemy import delete, func, select

from webapp.access import Principal
from webapp.database import write_transaction
from webapp.errors import Forbidden, Invalid, NotFound
from webapp.extensions import db
from webapp.models import Company, Ddi, HistoryInterval, Number, PhoneUser, RollupState
from webapp.services import companies, company_overview
from webapp.services.billing import periods, reports
from webapp.services.records import crud, ddis, kinds

from .factories import OPERATOR, World, add_history
from .invariants import assert_history_consistent
from .snapshots import kept

ACME, GLOBEX, INITECH = "acme", "globex", "initech"
# username -> role of factories.ROLES
ACCOUNTS = {
    "root": "root",  # System-Admin
    "cadmin": "cadmin",  # Company-Admin of acme
    "summary": "summary",  # Billing Call-Summary
    "reporter": "reporter",  # Billing/Call Reporting for acme
    "reporter_globex": "reporter_globex",  # Billing/Call Reporting for globex
    "cadmin_reporter": "cadmin_reporter",  # Company-Admin of globex, reporting for acme
    "nobody": "nobody",
}
# Who may open /companies/acme, and what each sees: billing figures, grants, links.
SEES_ACME = {
    "root": (True, True, {"DDIs", "Phone users", "DDI counts", "Phone-user counts", "Audit log"}),
    "cadmin": (False, False, {"DDIs", "Phone users", "Audit log"}),
    "summary": (True, False, {"DDI counts", "Phone-user counts"}),
    "reporter": (True, False, {"DDI counts", "Phone-user counts"}),
    "cadmin_reporter": (True, False, {"DDI counts", "Phone-user counts"}),
}
LINKS = {
    "DDIs": "/ddis?company=acme",
    "Phone users": "/users?company=acme",
    "DDI counts": "/reports/ddis?company=acme",
    "Phone-user counts": "/reports/users?company=acme",
    "Audit log": "/audit?company=acme",
}


@pytest.fixture
def world_accounts() -> dict[str, str]:
    return ACCOUNTS


def month_start(today: date, back: int) -> date:
    index = today.year * 12 + today.month - 1 - back
    return date(index // 12, index % 12 + 1, 1)


def midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day)


@pytest.fixture
@kept
def world(world: World) -> World:
    """acme with two DDIs and a phone user now, and a history over the last thirteen months
    (REPORT_TIMEZONE is UTC in the tests); globex with one DDI. The history's own intervals
    all closed by this month, so the open ones are exactly the records, as the change path
    keeps them."""
    f = world.factory
    f.ddi("44", "2071234567", ACME)
    f.ddi("44", "2071234568", ACME)
    f.user("alice", ACME)
    f.ddi("44", "2079999999", GLOBEX)
    today = periods.today_in(periods.zone(current_app.config["REPORT_TIMEZONE"]))
    m = [month_start(today, back) for back in range(13)]  # m[0] this month, m[12] 13 ago
    add_history(
        ("ddi", ACME, "33:1", midnight(m[12]), midnight(m[3] + timedelta(days=14))),
        ("ddi", ACME, "33:2", midnight(m[9] + timedelta(days=3)), midnight(m[8])),
        ("ddi", ACME, "33:3", midnight(m[6]) + timedelta(hours=5), midnight(m[6] + timedelta(1))),
        ("ddi", ACME, "33:4", midnight(m[1] + timedelta(days=9)), midnight(m[0])),
        ("user", ACME, "bob", midnight(m[11]), midnight(m[2])),
        ("user", ACME, "carol", midnight(m[5] + timedelta(days=20)), midnight(m[0])),
        ("user", GLOBEX, "dan", midnight(m[12]), midnight(m[0])),
    )
    return world


def soup(response, status: int = 200) -> BeautifulSoup:
    html = response.get_data(as_text=True)
    assert response.status_code == status, html[:600]
    page = BeautifulSoup(html, "html.parser")
    assert len(page.find_all("h1")) == 1
    assert not page.select("[style]") and not page.find("style")
    assert all(s.get("src") for s in page.find_all("script"))
    return page


def number(text: str) -> int:
    return int(text.strip().replace(",", ""))


# --- the company page: who may open it -----------------------------------------------------------


@pytest.mark.parametrize("username", sorted(ACCOUNTS))
def test_company_page_for_every_role(world, username):
    browser = world.browser(username)
    response = browser.get("/companies/acme")
    if username not in SEES_ACME:
        soup(response, 404)  # like a company that does not exist
        return
    billing, grants, links = SEES_ACME[username]
    page = soup(response)
    assert page.h1.get_text(" ", strip=True) == "Acme Telecom acme"
    assert number(page.select_one("#ddis-now").get_text()) == 2
    assert number(page.select_one("#users-now").get_text()) == 1
    assert (page.select_one("#month-totals") is not None) == billing
    assert (page.select_one("svg.bar-chart") is not None) == billing
    assert (page.select_one("#month-days") is not None) == billing
    assert (page.select_one("#granted-admins") is not None) == grants
    shown = {a.get_text(strip=True): a["href"] for a in page.select("nav.company-links a")}
    assert shown == {text: LINKS[text] for text in links}
    for href in shown.values():  # every link shown opens
        assert browser.get(href).status_code == 200, href


@pytest.mark.parametrize("username", sorted(ACCOUNTS))
def test_a_company_calendar_links_its_page_for_those_who_may_open_it(world, username):
    """Billing accounts reach company pages from the reports (their only way in)."""
    response = world.browser(username).get("/reports/ddis?company=acme")
    if response.status_code != 200:
        return  # no report permission: nothing to link from
    links = BeautifulSoup(response.get_data(as_text=True), "html.parser").select(
        "[data-company-page]"
    )
    # An account that may not read acme's reports is shown its own companies instead
    # (docs/pages.md): never a link to acme's page.
    hrefs = {link["href"] for link in links}
    assert ("/companies/acme" in hrefs) == (username in SEES_ACME), (username, hrefs)


@pytest.mark.parametrize(
    ("username", "company", "status"),
    [
        ("cadmin", GLOBEX, 404),  # Company-Admin of another
        ("reporter", GLOBEX, 404),  # reporting for another
        ("reporter_globex", ACME, 404),
        ("reporter_globex", GLOBEX, 200),
        ("cadmin_reporter", GLOBEX, 200),  # its Company-Admin
        ("summary", GLOBEX, 200),
        ("root", "nosuch", 404),
        ("summary", "nosuch", 404),
    ],
)
def test_company_page_other_companies(world, username, company, status):
    soup(world.browser(username).get(f"/companies/{company}"), status)


def test_company_page_signed_out_goes_to_login(world, client):
    response = client.get("/companies/acme")
    assert response.status_code == 302
    assert response.headers["Location"].startswith("/login?next=")


def test_the_service_answers_not_found_for_what_the_principal_may_not_see(app):
    # Decided before the database is read, so it does not tell a hidden company from none.
    nobody = Principal(username="x", via="ui", admin_of=frozenset({"b"}))
    with pytest.raises(NotFound):
        company_overview.overview(nobody, "a")
    assert nobody.may_view_company("b") and not nobody.may_view_company("a")
    assert Principal(username="y", via="ui", billing_summary=True).may_view_company("a")
    assert Principal(username="z", via="ui", reporting_for=frozenset({"a"})).may_view_company("a")
    assert not Principal(username="w", via="ui").may_view_company("a")


def test_a_system_admin_sees_the_accounts_granted_on_it(world, factory):
    from webapp.services.identity import accounts

    accounts.disable(OPERATOR, "reporter")
    page = soup(world.browser("root").get("/companies/acme"))
    admins = [li.get_text(" ", strip=True) for li in page.select("#granted-admins li")]
    reporters = [li.get_text(" ", strip=True) for li in page.select("#granted-reporters li")]
    assert admins == ["cadmin"]
    assert reporters == ["cadmin_reporter", "reporter disabled"]
    assert page.select_one("#granted-admins a")["href"] == "/admin/accounts/cadmin/grants"
    initech = soup(world.browser("root").get("/companies/initech"))
    assert [li.get_text(strip=True) for li in initech.select("#granted-admins li")] == ["none"]


def reserve_for(company: str, *numbers: str) -> None:
    """Numbers stocked and reserved for `company` through the real services."""
    from webapp.services.numbers import reserving, stock

    rows = [{"dialcode": "44", "number": n} for n in numbers]
    stock.stock(OPERATOR, {"values": rows})
    for n in numbers:
        body = {"scope": {"dialcode": "44", "number": n}, "values": {"company": company}}
        reserving.reserve(OPERATOR, body)


@pytest.mark.parametrize("username", sorted(ACCOUNTS))
def test_the_numbers_reserved_for_it_show_to_those_who_administer_it(world, username):
    """Reserved today: a reservation past its last day is available again and not counted;
    another company's reservations are not this company's. Only an account that administers
    the company (and so may list its reservations) sees the count and its link."""
    reserve_for(ACME, "2030000001", "2030000002", "2030000003")
    reserve_for(GLOBEX, "2030000009")
    with write_transaction() as session:  # one of acme's ended yesterday
        session.execute(
            Number.__table__.update()
            .where(Number.number == "2030000003")
            .values(held_until=periods.today_in(periods.zone("UTC")) - timedelta(days=1))
        )
    response = world.browser(username).get("/companies/acme")
    if username not in SEES_ACME:
        soup(response, 404)
        return
    page = soup(response)
    shown = page.select_one("#reserved-now")
    if username not in ("root", "cadmin"):
        assert shown is None and page.select_one("#reserved-list") is None
        return
    assert number(shown.get_text()) == 2
    link = page.select_one("#reserved-list")["href"]
    path, _, query = link.partition("?")
    assert path == "/ddis" and sorted(query.split("&")) == ["company=acme", "state=reserved"]


def test_the_reserved_count_is_the_services(world):
    reserve_for(GLOBEX, "2030000009", "2030000010")
    root, cadmin = Principal.cli("t"), Principal(username="c", via="ui", admin_of=frozenset({ACME}))
    assert company_overview.overview(root, GLOBEX).reserved == 2
    assert company_overview.overview(root, ACME).reserved == 0
    assert company_overview.overview(cadmin, ACME).reserved == 0
    summary = Principal(username="s", via="ui", billing_summary=True)
    assert company_overview.overview(summary, GLOBEX).reserved is None


# SQLite's statistics of the bench's inventory before any reservation: every number held for
# no company, one state; ANALYZE counts all those NULLs as one value.
BENCH_NUMBERS = {
    "ix_numbers_state": "795920 795920 795920 1 1",
    "sqlite_autoindex_numbers_1": "795920 795920 1",
}


def test_the_reserved_count_reads_the_held_numbers_index_however_few_are_held(world):
    """Most numbers are held for no company; statistics that say so must not turn the count
    of a company's reservations into a read of the whole inventory. With the index over every
    number, SQLite judged `held_for = …` to match all of it and scanned the table (60 ms at
    the bench's size); the index holds only held numbers now (migration 0025), and is read."""
    if db.engine.dialect.name != "sqlite":
        pytest.skip("SQLite's statistics and plan (PostgreSQL's count NULLs apart)")
    from sqlalchemy import event, text

    reserve_for(GLOBEX, "2030000009")
    seen: list[tuple[str, object]] = []

    def keep(_conn, _cursor, statement, parameters, _context, _many):
        if "count(" in statement and "held_for" in statement:
            seen.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", keep)
    try:
        assert company_overview.reserved_count(GLOBEX) == 1
    finally:
        event.remove(db.engine, "before_cursor_execute", keep)
    [(statement, parameters)] = seen
    held_index = db.session.scalar(
        text("SELECT sql FROM sqlite_master WHERE name = 'ix_numbers_held_for'")
    )
    assert held_index.endswith("WHERE held_for IS NOT NULL"), held_index
    with write_transaction() as session:
        session.execute(text("DELETE FROM sqlite_stat1 WHERE tbl = 'numbers'"))
        session.execute(
            text("INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('numbers', :i, :s)"),
            [{"i": i, "s": stat} for i, stat in BENCH_NUMBERS.items()],
        )
        session.execute(text("ANALYZE sqlite_master"))  # the planner reads them again
    try:
        with db.engine.connect() as conn:
            rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters).all()
    finally:
        # Later tests plan without these statistics, as before.
        with write_transaction() as session:
            session.execute(text("DELETE FROM sqlite_stat1 WHERE tbl = 'numbers'"))
            session.execute(text("ANALYZE sqlite_master"))
    shown = " ".join(str(r[-1]) for r in rows)
    assert "USING INDEX ix_numbers_held_for" in shown, shown


# --- the company page: its numbers ---------------------------------------------------------------


def report_months(company: str, today: date) -> list[tuple[int, int, int, int]]:
    """(year, month, DDI days, user days) of the last twelve months from the report service."""
    root = Principal.cli("test")
    out = []
    for back in range(11, -1, -1):
        start = month_start(today, back)
        scope = reports.parse_scope(
            {"company": [company], "month": start.month, "year": start.year}
        )
        ddi = reports.report(root, "ddi", scope, today=today)[company]["billableDDIDaysForMonth"]
        user = reports.report(root, "user", scope, today=today)[company]["billableUserDaysForMonth"]
        out.append((start.year, start.month, ddi, user))
    return out


def test_the_numbers_are_the_reports_numbers(world):
    today = periods.today_in(periods.zone(current_app.config["REPORT_TIMEZONE"]))
    expected = report_months(ACME, today)
    assert sum(d for _, _, d, _ in expected) > 0 and sum(u for _, _, _, u in expected) > 0
    overview = company_overview.overview(OPERATOR, ACME, today=today)
    assert overview.billing is not None
    got = [(m.year, m.month, m.ddi_days, m.user_days) for m in overview.billing.months]
    assert got == expected
    assert [m.to_date for m in overview.billing.months] == [False] * 11 + [True]
    # This month's days are the report's days.
    scope = reports.parse_scope({"company": [ACME]})
    for kind, attr in (("ddi", "ddis"), ("user", "users")):
        dates = reports.report(OPERATOR, kind, scope, today=today)[ACME]["dates"]
        assert {d.day.isoformat(): getattr(d, attr) for d in overview.billing.days} == dates

    # The page shows them: the table, the days, the counts now.
    page = soup(world.browser("summary").get("/companies/acme"))
    rows = page.select("#month-totals tbody tr")
    table = [
        (
            number(tr.select_one("td[data-kind=ddi]").get_text()),
            number(tr.select_one("td[data-kind=user]").get_text()),
        )
        for tr in rows
    ]
    assert table == [(d, u) for _, _, d, u in expected]
    labels = [tr.th.get_text(" ", strip=True) for tr in rows]
    assert labels[0] == f"{calendar.month_name[expected[0][1]]} {expected[0][0]}"
    assert labels[-1].endswith("(to date)")
    days = page.select("#month-days tbody tr")
    assert len(days) == today.day


def test_this_month_against_last_month_and_numbers_added_and_removed(world):
    today = periods.today_in(periods.zone(current_app.config["REPORT_TIMEZONE"]))
    this_month = periods.resolve(None, None, periods.zone("UTC"), today)
    add_history(  # one DDI moved from acme to globex within this month
        ("ddi", ACME, "44:9999", datetime(2020, 1, 1), this_month.start + timedelta(hours=1)),
        ("ddi", GLOBEX, "44:9999", this_month.start + timedelta(hours=1), None),
    )
    expected = report_months(ACME, today)
    page = soup(world.browser("summary").get("/companies/acme"))
    items = page.select("#month-vs-last li")
    assert [li["data-kind"] for li in items] == ["ddi", "user"]
    for li, column in zip(items, (2, 3), strict=True):
        # The difference of the months table's last two rows, which are the reports' totals.
        last, this = expected[-2][column], expected[-1][column]
        assert int(li.select_one("[data-difference]")["data-difference"]) == this - last
        if last:
            percent = li.select_one("[data-percent]")["data-percent"]
            assert abs(float(percent) - (this - last) * 100 / last) <= 0.05
        # Added and removed: a plain count over the company's history this month.
        rows = db.session.execute(
            select(HistoryInterval.start_at, HistoryInterval.end_at).where(
                HistoryInterval.kind == li["data-kind"], HistoryInterval.company == ACME
            )
        ).all()
        lo, hi = this_month.start, this_month.end
        live = [(s, e) for s, e in rows if e is None or e > s]
        added = sum(1 for s, _ in live if lo <= s < hi)
        removed = sum(1 for _, e in live if e is not None and lo <= e < hi)
        assert number(li.select_one("[data-added]").get_text()) == added
        assert number(li.select_one("[data-removed]").get_text()) == removed
        if li["data-kind"] == "ddi":
            assert removed >= 1  # the move out of acme


def test_the_numbers_hold_while_the_rollup_is_not_built(world, app):
    # A REPORT_TIMEZONE other than the rollup's: the reports compute from the history; so does
    # the company page, with the same numbers.
    app.config["REPORT_TIMEZONE"] = "Europe/London"
    today = periods.today_in(periods.zone("Europe/London"))
    overview = company_overview.overview(OPERATOR, ACME, today=today)
    assert overview.billing is not None
    got = [(m.year, m.month, m.ddi_days, m.user_days) for m in overview.billing.months]
    assert got == report_months(ACME, today)


def test_a_fixed_day_gives_twelve_months_ending_with_the_current_one(app):
    months = [
        (m.year, m.month, m.days, m.to_date) for m in company_overview_months(date(2026, 2, 10))
    ]
    assert months[0] == (2025, 3, 31, False)
    assert months[-2] == (2026, 1, 31, False)
    assert months[-1] == (2026, 2, 10, True)
    assert len(months) == 12


def company_overview_months(today: date):
    return company_overview.billing_of("nosuch", today).months


def test_the_svg_and_the_table_agree(world):
    page = soup(world.browser("root").get("/companies/acme"))
    rows = page.select("#month-totals tbody tr")
    for kind in ("ddi", "user"):
        svg = page.select_one(f"svg#chart-{kind}")
        assert svg["role"] == "img"
        title_id, desc_id = svg["aria-labelledby"].split()
        assert svg.select_one(f"title#{title_id}").get_text(strip=True)
        assert "table below" in svg.select_one(f"desc#{desc_id}").get_text()
        bars = svg.select("g.bar")
        values = [int(b["data-value"]) for b in bars]
        table = [number(tr.select_one(f"td[data-kind={kind}]").get_text()) for tr in rows]
        assert values == table
        # Each bar's title names its month and value; heights are proportional to values.
        for bar, tr, value in zip(bars, rows, values, strict=True):
            month = tr.th.get_text(" ", strip=True).removesuffix(" (to date)")
            assert bar.title.get_text().startswith(f"{month}: {value:,} ")
        heights = [float(b.rect["height"]) for b in bars]
        top = max(values)
        assert top > 0
        for value, height in zip(values, heights, strict=True):
            assert height == pytest.approx(heights[values.index(top)] * value / top, abs=0.02)
        baseline = {round(float(b.rect["y"]) + float(b.rect["height"]), 1) for b in bars}
        assert len(baseline) == 1  # every bar stands on the axis
        assert "to-date" in bars[-1]["class"]


def test_the_charts_name_their_unit_once(world):
    """The unit is already "billable DDI-days": the chart's title and description do not say
    "Billable billable" (seen on the bench walk of /companies/c00000)."""
    page = soup(world.browser("root").get("/companies/acme"))
    for kind, unit in (("ddi", "DDI-days"), ("user", "user-days")):
        svg = page.select_one(f"svg#chart-{kind}")
        title_id, desc_id = svg["aria-labelledby"].split()
        assert svg.select_one(f"title#{title_id}").get_text() == f"Billable {unit} per month, acme"
        assert (
            svg.select_one(f"desc#{desc_id}")
            .get_text()
            .startswith(f"Billable {unit} per month from ")
        )


def test_an_empty_history_draws_flat_bars(app):
    from webapp.views.companies import bar_chart, compact, nice_ceiling

    assert [nice_ceiling(v) for v in (0, 1, 3, 7, 10, 11, 4_999, 1_300_000)] == [
        1, 1, 5, 10, 10, 20, 5_000, 2_000_000,
    ]  # fmt: skip
    months = company_overview_months(date(2026, 11, 23))
    chart = bar_chart("ddi", months)
    assert [b.height for b in chart.bars] == [0] * 12
    assert [t.label for t in chart.ticks] == ["0", "1"]
    ticks = bar_chart("user", [*months[:-1], replace(months[-1], user_days=1_234_567)]).ticks
    assert [t.label for t in ticks] == ["0", "1M", "2M"]
    assert [compact(v) for v in (0, 5_000, 20_000, 50_000, 1_500_000)] == [
        "0", "5,000", "20k", "50k", "1.5M",
    ]  # fmt: skip


def test_companies_suggest_is_not_taken_by_the_company_page(app):
    # /companies/suggest (the company picker, views/pickers.py) is a static rule, which
    # Werkzeug ranks above /companies/<company_id>: once both are registered, the picker wins.
    rules = {r.rule: r.endpoint for r in app.url_map.iter_rules()}
    assert rules["/companies/<company_id>"] == "companies.page"
    if "/companies/suggest" in rules:
        endpoint, _ = app.url_map.bind("localhost").match("/companies/suggest")
        assert endpoint == rules["/companies/suggest"] != "companies.page"


# --- the companies list --------------------------------------------------------------------------


@pytest.fixture
def many(world):
    for i in range(120):
        companies.create(OPERATOR, f"c{i:03d}", f"Name {119 - i:03d}")
    return world


def ids(page: BeautifulSoup) -> list[str]:
    return [tr.td.get_text(strip=True) for tr in page.select("tbody tr")]


def pager(page: BeautifulSoup) -> dict[str, str]:
    return {a["rel"][0]: a["href"] for a in page.select("nav.pager a[rel]")}


def test_companies_are_paged_by_fifty(many):
    browser = many.browser("root")
    first = soup(browser.get("/admin/companies"))
    everyone = sorted([ACME, GLOBEX, INITECH] + [f"c{i:03d}" for i in range(120)])
    assert ids(first) == everyone[:50]
    count = " ".join(first.select_one("#count").get_text().split())
    assert count == "Showing 1\u201350 of 123 companies \u00b7 page 1 of 3"
    assert set(pager(first)) == {"next", "last"}
    second = soup(browser.get(pager(first)["next"]))
    assert ids(second) == everyone[50:100]
    assert set(pager(second)) == {"first", "prev", "next", "last"}
    last = soup(browser.get(pager(first)["last"]))
    assert ids(last) == everyone[100:]
    assert ids(soup(browser.get(pager(last)["prev"]))) == everyone[50:100]
    assert ids(soup(browser.get(pager(last)["first"]))) == everyone[:50]
    assert ids(soup(browser.get("/admin/companies?page=999"))) == everyone[100:]  # the last
    # Each row links to its company page.
    assert first.select_one("tbody tr a")["href"] == "/companies/acme"


def test_companies_are_searched_and_sorted(many):
    browser = many.browser("root")
    assert ids(soup(browser.get("/admin/companies?q=c01"))) == [f"c01{i}" for i in range(10)]
    # The name too, whatever the case.
    assert ids(soup(browser.get("/admin/companies?q=NAME+00"))) == [
        f"c{i}" for i in range(110, 120)
    ]
    assert ids(soup(browser.get("/admin/companies?q=acm"))) == [ACME]
    nothing = soup(browser.get("/admin/companies?q=_%25"))  # LIKE wildcards are plain text
    assert ids(nothing) == [] and "Nothing matches" in nothing.select_one("#count").get_text()

    by_name = soup(browser.get("/admin/companies?sort=name"))
    names = [tr.select("td")[1].get_text(strip=True) for tr in by_name.select("tbody tr")]
    assert names == sorted(names) and names[0] == "Acme Telecom"
    # The sorted column's link turns the order round, and says so.
    assert by_name.select_one("th[aria-sort=ascending] a").get_text() == "Name (sort descending)▲"
    desc = soup(browser.get("/admin/companies?sort=id&dir=desc"))
    assert ids(desc)[:2] == [INITECH, GLOBEX]
    # Searching and sorting together, paged; the links keep both.
    both = soup(browser.get("/admin/companies?q=c&sort=name&dir=desc"))
    assert ids(both)[0] == "c000" and len(ids(both)) == 50
    for link in pager(both).values():
        assert "q=c" in link and "sort=name" in link and "dir=desc" in link
    assert ids(soup(browser.get(pager(both)["last"])))[-1] == ACME  # "Acme Telecom"
    # The search form keeps the order as hidden fields.
    form = both.select_one("main form[role=search]")
    assert {i["name"]: i["value"] for i in form.select("input[type=hidden]")} == {
        "sort": "name",
        "dir": "desc",
    }


@pytest.mark.parametrize(
    "bad", ["sort=created_at", "sort=bogus", "dir=up", "page=0", "page=x", "q=" + "y" * 201]
)
def test_bad_list_parameters_answer_400_with_a_message(many, bad):
    page = soup(many.browser("root").get(f"/admin/companies?{bad}"), 400)
    assert page.select_one("[role=alert]") is not None
    assert page.select_one("#company-q") is not None  # the search form is still there


def test_the_list_counts_only_its_page_and_shows_them(many):
    page = soup(many.browser("root").get("/admin/companies?q=acme"))
    [row] = page.select("tbody tr")
    cells = [td.get_text(strip=True) for td in row.select("td")]
    assert cells[0] == ACME and cells[3:5] == ["2", "1"]


def real_counts() -> dict[str, tuple[int, int]]:
    db.session.rollback()
    ddi = {
        c: n for c, n in db.session.execute(select(Ddi.company, func.count()).group_by(Ddi.company))
    }
    user = {
        c: n
        for c, n in db.session.execute(
            select(PhoneUser.company, func.count()).group_by(PhoneUser.company)
        )
    }
    ids = db.session.scalars(select(Company.id))
    return {c: (ddi.get(c, 0), user.get(c, 0)) for c in ids}


def listed_counts() -> dict[str, tuple[int, int]]:
    db.session.rollback()
    rows = companies.search(OPERATOR, per_page=500).rows
    return {r.id: (r.ddis, r.users) for r in rows}


def test_the_list_counts_are_the_records_with_or_without_the_rollup(world):
    # The list reads each company's count from the report rollup's latest level while it is
    # built (one seek a company); the change path keeps it equal to the stored records.
    f = world.factory
    for n in range(5):
        f.ddi("49", f"3000000{n}", GLOBEX)
        f.user(f"u{n}", INITECH)
    crud.delete_rows(
        OPERATOR, kinds.DDI, {"dialcode": "49", "number": "30000000", "company": GLOBEX}
    )
    ddis.link(
        OPERATOR, {"dialcode": "49", "number": "30000001"}, {"virt_exten": "7", "company": ACME}
    )
    crud.delete_rows(OPERATOR, kinds.PHONE_USER, {"company": INITECH, "username": "u0"})
    crud.update(
        OPERATOR, kinds.PHONE_USER, {"company": INITECH, "username": "u1"}, {"company": ACME}
    )
    expected = real_counts()
    assert expected[ACME] == (3, 2) and expected[GLOBEX] == (4, 0)
    assert expected[INITECH] == (0, 3)
    assert listed_counts() == expected
    assert_history_consistent()
    # Without the rollup (never built, say, after an upgrade) the rows are counted instead.
    with write_transaction() as session:
        session.execute(delete(RollupState))
    assert listed_counts() == expected


def test_htmx_gets_only_the_rows_with_the_sort_state(many):
    response = many.browser("root").get(
        "/admin/companies?q=c1&sort=name", headers={"HX-Request": "true"}
    )
    assert response.status_code == 200 and "HX-Request" in response.headers["Vary"]
    page = BeautifulSoup(response.get_data(as_text=True), "html.parser")
    assert page.h1 is None and page.select_one("#company-q") is None
    assert page.select_one("#sort-state[hx-swap-oob=true] input[name=sort]")["value"] == "name"
    assert len(ids(page)) == 20


def test_the_search_service(many):
    listing = companies.search(OPERATOR, "C11", sort="name", descending=True, page=1, per_page=5)
    assert [r.id for r in listing.rows] == ["c110", "c111", "c112", "c113", "c114"]
    assert (listing.total, listing.number, listing.pages) == (10, 1, 2)
    with pytest.raises(Forbidden):
        companies.search(Principal(username="x", via="ui", billing_summary=True))
    for bad in ({"sort": "created_at"}, {"page": 0}, {"page": True}, {"q": 5}, {"q": "a\x00"}):
        with pytest.raises(Invalid):
            companies.search(OPERATOR, **bad)  # type: ignore[arg-type]


def test_create_and_rename_still_work_from_the_paged_list(many):
    browser = many.browser("root")
    page = browser.get("/admin/companies")
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page.get_data(as_text=True))
    assert token
    created = browser.post(
        "/admin/companies", data={"csrf_token": token.group(1), "id": "zz", "name": "Zed"}
    )
    assert created.status_code == 302
    assert ids(soup(browser.get("/admin/companies?q=zz"))) == ["zz"]
    rename = soup(browser.get("/admin/companies?q=zz")).select_one("td.actions a")
    # It carries the list as shown, to come back to it (tests/test_coming_back.py).
    assert rename["href"] == "/admin/companies/zz/rename?back=/admin/companies?q%3Dzz"


# --- /companies: the companies list of every account that may open a company -------------------

# username -> the companies its /companies list holds (None: 403, "admin": /admin/companies).
LISTS: dict[str, list[str] | str | None] = {
    "root": "admin",
    "cadmin": [ACME],
    "summary": [ACME, GLOBEX, INITECH],
    "reporter": [ACME],
    "reporter_globex": [GLOBEX],
    "cadmin_reporter": [ACME, GLOBEX],
    "nobody": None,
}


@pytest.mark.parametrize("username", sorted(ACCOUNTS))
def test_the_companies_list_for_every_role(world, username):
    browser = world.browser(username)
    response = browser.get("/companies?q=e&sort=name&dir=desc&page=2")
    expected = LISTS[username]
    if expected == "admin":  # a System-Admin's list is the one with the actions
        assert response.status_code == 302
        assert response.headers["Location"] == "/admin/companies?q=e&sort=name&dir=desc&page=2"
        return
    if expected is None:
        soup(response, 403)
        return
    page = soup(browser.get("/companies"))
    assert page.h1.get_text(strip=True) == "Companies"
    assert ids(page) == expected
    # Read-only: no create form, no rename link, nothing to post.
    assert not page.select("main form[method=post]") and not page.select("td.actions")
    assert not [a for a in page.select("main a[href]") if "/admin/" in a["href"]]
    # Every row opens its company page.
    for row in page.select("tbody tr"):
        href = row.select_one("a")["href"]
        assert href == f"/companies/{row.td.get_text(strip=True)}"
        assert browser.get(href).status_code == 200, href
    # The actions stay refused, in the service and at their addresses.
    assert browser.get("/admin/companies").status_code == 403
    assert browser.get("/admin/companies/acme/rename").status_code == 403


def test_billing_pages_search_and_sorts_within_its_companies_alone(many, factory):
    summary = many.browser("summary")
    everyone = sorted([ACME, GLOBEX, INITECH] + [f"c{i:03d}" for i in range(120)])
    first = soup(summary.get("/companies"))
    assert ids(first) == everyone[:50]
    count = " ".join(first.select_one("#count").get_text().split())
    assert count == "Showing 1\u201350 of 123 companies \u00b7 page 1 of 3"
    links = pager(first)
    assert all(link.startswith("/companies?") for link in links.values())
    assert ids(soup(summary.get(links["last"]))) == everyone[100:]
    assert ids(soup(summary.get("/companies?q=c01"))) == [f"c01{i}" for i in range(10)]
    by_name = soup(summary.get("/companies?sort=name&dir=desc"))
    assert ids(by_name)[0] == "c000"  # "Name 119"
    assert by_name.select_one("th[aria-sort=descending] a")["href"].startswith("/companies?")
    # Billing/Call Reporting: only its grants, whatever the search.
    factory.account("reporter2", reporting_for=[ACME, "c005", "c110"])
    reporter = factory.browser("reporter2")
    assert ids(soup(reporter.get("/companies"))) == [ACME, "c005", "c110"]
    assert ids(soup(reporter.get("/companies?q=c"))) == [ACME, "c005", "c110"]
    assert ids(soup(reporter.get("/companies?q=c1"))) == ["c110"]
    assert ids(soup(reporter.get("/companies?sort=id&dir=desc"))) == ["c110", "c005", ACME]
    # An htmx request gets the rows alone.
    partial = reporter.get("/companies?q=c0", headers={"HX-Request": "true"})
    rows = BeautifulSoup(partial.get_data(as_text=True), "html.parser")
    assert rows.h1 is None and ids(rows) == ["c005"]
    assert "HX-Request" in partial.headers["Vary"]


@pytest.mark.parametrize("bad", ["sort=created_at", "dir=up", "page=0", "q=" + "y" * 201])
def test_bad_companies_list_parameters_answer_400(world, bad):
    page = soup(world.browser("summary").get(f"/companies?{bad}"), 400)
    assert page.select_one("[role=alert]") is not None
    assert page.select_one("#company-q") is not None


def test_the_browse_service_follows_the_principal(world):
    def browse(**grants) -> list[str]:
        me = Principal(username="x", via="ui", **grants)
        return [r.id for r in companies.browse(me).rows]

    assert browse(system_admin=True) == [ACME, GLOBEX, INITECH]
    assert browse(billing_summary=True) == [ACME, GLOBEX, INITECH]
    assert browse(reporting_for=frozenset({INITECH})) == [INITECH]
    assert browse(admin_of=frozenset({GLOBEX}), reporting_for=frozenset({ACME})) == [
        ACME,
        GLOBEX,
    ]
    with pytest.raises(Forbidden):
        browse()
    # The counts of the page's companies, as on /admin/companies.
    me = Principal(username="x", via="ui", reporting_for=frozenset({ACME}))
    [row] = companies.browse(me).rows
    assert (row.ddis, row.users) == (2, 1)


# username -> the navigation's way to its companies (text, address), None: no such entry.
NAV = {
    "root": ("Companies", "/admin/companies"),
    "cadmin": ("My company", "/companies/acme"),  # one company it administers
    "summary": ("Companies", "/companies"),
    "reporter": ("Companies", "/companies"),  # Billing: a list, even of one
    "reporter_globex": ("Companies", "/companies"),
    "cadmin_reporter": ("Companies", "/companies"),
    "nobody": None,
}


@pytest.mark.parametrize("username", sorted(ACCOUNTS))
def test_the_navigation_leads_each_role_to_its_companies(world, username):
    browser = world.browser(username)
    nav = soup(browser.get("/account/tokens")).select_one("nav[aria-label=Main]")
    entries = {a.get_text(strip=True): a["href"] for a in nav.select("a")}
    way = {t: h for t, h in entries.items() if t in ("Companies", "My company")}
    assert way == (dict([NAV[username]]) if NAV[username] else {})
    if NAV[username] is None:
        return
    # On the page it leads to, the entry is marked as the current page.
    text, href = NAV[username]
    there = soup(browser.get(href)).select_one("nav[aria-label=Main]")
    assert there.select_one("a[aria-current=page]").get_text(strip=True) == text
    if username == "cadmin":  # another company page is not "My company"
        other = soup(world.browser("summary").get("/companies/globex"))
        assert other.select_one("nav[aria-label=Main] a[aria-current=page]") is None


def test_a_company_admin_of_several_gets_the_list(world, factory):
    factory.account("cadmin2", admin_of=[ACME, INITECH])
    browser = factory.browser("cadmin2")
    nav = soup(browser.get("/account/tokens")).select_one("nav[aria-label=Main]")
    assert nav.find("a", string="Companies")["href"] == "/companies"
    assert nav.find("a", string="My company") is None
    assert ids(soup(browser.get("/companies"))) == [ACME, INITECH]
