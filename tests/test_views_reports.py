"""The report pages /reports/ddis and /reports/users, their .csv variants and the day drill-down
(docs/reports.md, docs/pages.md), for every role, on the HTML the browser gets.

History is inserted directly as HistoryInterval rows (naive UTC) for October 2026, a closed
month that begins on a Thursday; REPORT_TIMEZONE is UTC unless a test says otherwise.
"""

from __future__ import annotations

import calendar
import csv
import io
import random
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import delete, select

from webapp.access import Principal
from webapp.database import write_transaction
from webapp.errors import Forbidden, Invalid, NotFound
from webapp.extensions import db
from webapp.models import HistoryInterval, RollupState
from webapp.services.billing import day_view, periods, report_days, reports

from .factories import Factory, World, add_history

HOME, OTHER, SECOND = "acme", "globex", "initech"
ALL = (HOME, OTHER, SECOND)
NAMES = {HOME: "Acme Telecom", OTHER: "Globex", SECOND: "Initech"}
NOUN = {"ddi": "DDIs", "user": "phone users"}  # the calendar day links' words for a screen reader
KINDS = ("ddi", "user")
PAGES = {"ddi": "/reports/ddis", "user": "/reports/users"}
API = {"ddi": "/rest/call/readDDICount", "user": "/rest/call/readUserCount"}
FIGURES = {
    "ddi": ("billableDDIDaysPerDay", "billableDDIDaysForMonth"),
    "user": ("billableUserDaysPerDay", "billableUserDaysForMonth"),
}
YEAR, MONTH = 2026, 10
OCT = {"year": "2026", "month": "10"}
KEYS = {
    "ddi": {HOME: "44:1", OTHER: ("44:2", "44:3")},
    "user": {HOME: "ana", OTHER: ("ana", "bob")},
}
EXPECTED = {
    HOME: [1] * 10 + [0] * 21,  # 10 / 31 = 0.3226
    OTHER: [1] * 15 + [2] * 16,  # 47 / 31 = 1.5161
    SECOND: [0] * 31,
}
TOTALS = {HOME: (10, "0.3226"), OTHER: (47, "1.5161"), SECOND: (0, "0.0000")}
# The pages' per-day average: at most one decimal (the API and the CSV keep four).
PAGE_PER_DAY = {HOME: "0.3", OTHER: "1.5", SECOND: "0"}
CSV_UNITS = {"ddi": "billable_ddi_days", "user": "billable_user_days"}
LEAKS = ("Traceback", "sqlalchemy", "SELECT", "psycopg", 'File "')
SEES = {"root": ALL, "summary": ALL, "reporter": (HOME,)}
# The many-company table ranks by billable month total, largest first (globex 47, acme 10).
RANKED = (OTHER, HOME, SECOND)


# --- helpers ---------------------------------------------------------------------------------


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute)


def october() -> list[str]:
    return [date(YEAR, MONTH, d).isoformat() for d in range(1, 32)]


def page(response, status: int = 200) -> BeautifulSoup:
    html = response.get_data(as_text=True)
    assert response.status_code == status, html[:800]
    for word in LEAKS:
        assert word not in html
    assert_no_inline_code(html)
    return BeautifulSoup(html, "html.parser")


def assert_no_inline_code(html: str) -> None:
    """No inline script, style element or style attribute (the CSP forbids them)."""
    soup = BeautifulSoup(html, "html.parser")
    for script in soup.find_all("script"):
        assert script.get("src") and not script.get_text(strip=True), script
    assert soup.find("style") is None
    assert soup.find(attrs={"style": True}) is None
    for tag in soup.find_all(True):
        assert not any(name.lower().startswith("on") for name in tag.attrs), tag


def csv_rows(response) -> list[list[str]]:
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    assert response.mimetype == "text/csv"
    return list(csv.reader(io.StringIO(response.get_data(as_text=True))))


def picker_ids(soup: BeautifulSoup) -> list[str]:
    """The chosen companies of the report's company picker."""
    return [i["value"] for i in soup.select("#company-chosen input[type=hidden][name=company]")]


def left_out(soup: BeautifulSoup) -> str | None:
    """The report page's note of the `company` parameters it left out."""
    note = soup.select_one("p.left-out[role=status]")
    return note.get_text(" ", strip=True) if note else None


def suggested(client, q: str = "") -> list[str]:
    """The companies the report's picker suggests to this client for `q`."""
    response = client.get("/companies/suggest", query_string={"for": "reports", "q": q})
    assert response.status_code == 200
    return [
        b["data-value"] for b in BeautifulSoup(response.data, "html.parser").select("[data-value]")
    ]


def matrix_rows(soup: BeautifulSoup) -> dict[str, list[int]]:
    return {
        tr["data-company"]: [int(td.get_text(strip=True)) for td in tr.select("td[data-date]")]
        for tr in soup.select("table.matrix tbody tr[data-company]")
    }


def api_values(client, kind: str, query: dict[str, Any]) -> dict[str, Any]:
    response = client.get(API[kind], query_string=query)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()["values"]


# --- the world -------------------------------------------------------------------------------


@pytest.fixture
def world(world: World) -> Factory:
    """The shared world (acme, globex, initech; an account per role of factories.ROLES, named
    after it) and this October's history."""
    rows = []
    for kind in KINDS:
        home = KEYS[kind][HOME]
        first, second = KEYS[kind][OTHER]
        rows += [
            (kind, HOME, home, at(2026, 9, 1), at(2026, 9, 20)),
            (kind, HOME, home, at(2026, 9, 30, 12), at(2026, 10, 1)),  # ends at Oct 1 00:00
            (kind, HOME, home, at(2026, 10, 1), at(2026, 10, 11)),  # days 1 to 10
            (kind, HOME, home, at(2026, 10, 11, 8), at(2026, 10, 11, 8)),  # zero length
            (kind, OTHER, first, at(2026, 9, 20), at(2026, 11, 5)),  # every day
            (kind, OTHER, second, at(2026, 10, 16, 12), None),  # from the 16th, still open
        ]
    add_history(*rows)
    return world.factory


@pytest.fixture
def browsers(world):
    cache: dict[str, Any] = {}

    def get(username: str):
        if username not in cache:
            cache[username] = world.browser(username)
        return cache[username]

    return get


# --- who gets in -----------------------------------------------------------------------------


def all_paths(kind: str) -> list[str]:
    base = PAGES[kind]
    return [
        base,
        f"{base}?month=10&year=2026",
        f"{base}?month=13",  # a bad parameter does not reveal the page either
        f"{base}.csv",
        f"{base}.csv?month=10&year=2026&company={HOME}",
        f"{base}/day?company={HOME}&date=2026-10-05",
        f"{base}/day?company=nope&date=bad",
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_signed_out_visitor_is_sent_to_login(world, client, kind):
    for path in all_paths(kind):
        response = client.get(path)
        assert response.status_code == 302, path
        assert response.headers["Location"].split("?")[0].endswith("/login"), path


@pytest.mark.parametrize("username", ["cadmin", "nobody"])
@pytest.mark.parametrize("kind", KINDS)
def test_accounts_without_report_grant_get_403(browsers, kind, username):
    browser = browsers(username)
    for path in all_paths(kind):
        soup = page(browser.get(path), 403)
        assert soup.find("table") is None, path
        assert soup.find("select", attrs={"name": "company"}) is None, path
        assert soup.select("a[href^='/reports']") == [], path  # no way in shown either


@pytest.mark.parametrize("username", ["root", "summary", "reporter"])
@pytest.mark.parametrize("kind", KINDS)
def test_each_role_sees_exactly_its_companies(browsers, kind, username):
    browser = browsers(username)
    sees = SEES[username]
    hidden = [c for c in ALL if c not in sees]

    soup = page(browser.get(PAGES[kind], query_string=OCT))
    assert picker_ids(soup) == []  # none chosen: all of them
    assert suggested(browser) == list(sees)  # and the picker offers exactly those
    if len(sees) > 1:
        assert list(matrix_rows(soup)) == [c for c in RANKED if c in sees]
    else:
        assert soup.select_one("table.calendar")["data-company"] == sees[0]
    for company in hidden:
        assert NAMES[company] not in str(soup)

    # Asking for every company by name changes nothing for what it may not see.
    query = {**OCT, "company": list(ALL)}
    soup = page(browser.get(PAGES[kind], query_string=query))
    assert picker_ids(soup) == list(sees)
    shown = (
        list(matrix_rows(soup))
        if len(sees) > 1
        else [soup.select_one("table.calendar")["data-company"]]
    )
    assert sorted(shown) == list(sees)
    for company in hidden:
        assert NAMES[company] not in str(soup)
    rows = csv_rows(browser.get(f"{PAGES[kind]}.csv", query_string=query))
    assert [r[0] for r in rows[1:]] == list(sees)

    # Only companies it may not see: the page says so and shows its own; the CSV of that
    # address (as the API) holds nothing but the header.
    if hidden:
        query = {**OCT, "company": hidden}
        soup = page(browser.get(PAGES[kind], query_string=query))
        assert left_out(soup) == (
            f"You may not read the reports of {', '.join(hidden)} (or they do not exist): "
            "showing every company you may report on."
        )
        assert picker_ids(soup) == []
        assert soup.select_one("table.calendar")["data-company"] == sees[0]
        assert len(csv_rows(browser.get(f"{PAGES[kind]}.csv", query_string=query))) == 1
        for company in hidden:
            response = browser.get(
                f"{PAGES[kind]}/day", query_string={"company": company, "date": "2026-10-20"}
            )
            page(response, 404)
            assert KEYS[kind][OTHER][0] not in response.get_data(as_text=True)


@pytest.mark.parametrize("kind", KINDS)
def test_a_company_it_may_not_read_is_left_out_and_said_so(world, browsers, kind):
    """A Billing account granted acme asks for a company that exists but is not its own, or
    one that does not exist: the same words (it may not learn which exist), its own companies
    shown, or the others asked for."""
    browser = browsers("reporter")
    notes = {}
    for company in (OTHER, "c00000"):
        soup = page(browser.get(PAGES[kind], query_string={**OCT, "company": company}))
        notes[company] = left_out(soup)
        assert picker_ids(soup) == []
        assert soup.select_one("table.calendar")["data-company"] == HOME
        assert NAMES[OTHER] not in str(soup)
    assert notes["c00000"] == (
        "You may not read the reports of c00000 (or it does not exist): "
        "showing every company you may report on."
    )
    assert notes[OTHER] == notes["c00000"].replace("c00000", OTHER)

    soup = page(browser.get(PAGES[kind], query_string={**OCT, "company": [HOME, "c00000"]}))
    assert left_out(soup) == (
        "You may not read the reports of c00000 (or it does not exist): showing the others."
    )
    assert picker_ids(soup) == [HOME]
    # Its own companies only: no note.
    assert left_out(page(browser.get(PAGES[kind], query_string={**OCT, "company": HOME}))) is None

    # Sent from the form (Show, Add, Remove): the report's address without it, and the note.
    answer = browser.get(PAGES[kind], query_string={"company": ["c00000", HOME], "add": "1"})
    assert answer.status_code == 302 and "c00000" not in answer.headers["Location"]
    soup = page(browser.get(answer.headers["Location"]))
    assert "c00000 (or it does not exist)" in soup.select_one("#flashes").get_text()


# --- the calendar ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_one_company_is_a_calendar_from_monday(browsers, kind):
    browser = browsers("root")
    for company in (HOME, OTHER):
        soup = page(browser.get(PAGES[kind], query_string={**OCT, "company": company}))
        table = soup.select_one("table.calendar")
        assert table is not None and soup.select_one("table.matrix") is None
        headers = [th.get_text(strip=True) for th in table.select("thead th")]
        assert headers == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
        weeks = table.select("tbody tr")
        assert len(weeks) == 5  # Oct 2026: Thu 1st to Sat 31st
        cells = [tr.find_all("td", recursive=False) for tr in weeks]
        assert all(len(week) == 7 for week in cells)
        # October 1st 2026 is a Thursday: Monday to Wednesday of the first week are empty.
        first = cells[0]
        for cell in first[:3]:
            assert "out" in cell["class"] and not cell.get_text(strip=True)
            assert not cell.has_attr("data-date")
        assert first[3]["data-date"] == "2026-10-01"
        assert first[6]["data-date"] == "2026-10-04"  # a Sunday, last column
        assert cells[4][5]["data-date"] == "2026-10-31"  # a Saturday
        assert "out" in cells[4][6]["class"] and not cells[4][6].get_text(strip=True)
        # Every date holds its day number and its peak, linked to its drill-down.
        found = {}
        for week in cells:
            for column, cell in enumerate(week):
                if not cell.has_attr("data-date"):
                    continue
                day = date.fromisoformat(cell["data-date"])
                assert day.weekday() == column
                assert cell.select_one(".daynum").get_text(strip=True) == str(day.day)
                found[cell["data-date"]] = int(cell.select_one(".peak").get_text(strip=True))
                link = cell.select_one("a.day")
                assert link["href"] == link["hx-get"]
                assert link["hx-target"] == "#panel"
                assert f"date={day.isoformat()}" in link["href"]
                # Its name begins with what it shows, then words for a screen reader (WCAG
                # 2.5.3, label in name): "1 52,806, the peak on 1 October: show the DDIs".
                assert not link.has_attr("aria-label")
                shown = f"{day.day} {found[cell['data-date']]:,}"
                assert " ".join(link.get_text(" ", strip=True).split()).startswith(shown)
                assert link.select_one(".visually-hidden").get_text() == (
                    f", the peak on {day.day} October: show the {NOUN[kind]}"
                )
        assert found == dict(zip(october(), EXPECTED[company], strict=True))
        # Totals, exactly the service's figures (the average to one decimal), before the calendar.
        for_month, per_day = TOTALS[company]
        total = soup.select_one("[data-total=for-month]")
        assert total.get_text(strip=True) == str(for_month)
        assert total.find_next("table", class_="calendar") is not None
        assert (
            soup.select_one("[data-total=per-day]").get_text(strip=True) == (PAGE_PER_DAY[company])
        )
        api = api_values(browser, kind, {**OCT, "company": company})[company]
        assert api[FIGURES[kind][1]] == for_month
        assert f"{api[FIGURES[kind][0]]:.4f}" == per_day
        assert soup.select_one("#panel") is not None


# Worked out by hand from the world's history (UTC days): October against September, and the
# intervals that start and end within October (acme's Sept 30 interval ends at Oct 1 00:00;
# its zero-length one counts nothing; globex's second DDI starts on the 16th).
MONTH_VS_LAST = {
    HOME: {"difference": "\u221210", "percent": "(\u221250.0 %)", "added": "1", "removed": "2"},
    OTHER: {"difference": "+36", "percent": "(+327.3 %)", "added": "1", "removed": "0"},
}


@pytest.mark.parametrize("kind", KINDS)
def test_calendar_compares_with_last_month_and_counts_added_and_removed(browsers, kind):
    browser = browsers("root")
    for company, expected in MONTH_VS_LAST.items():
        soup = page(browser.get(PAGES[kind], query_string={**OCT, "company": company}))
        block = soup.select_one("[data-month-vs-last]")
        assert block is not None
        assert block.find_next("table", class_="calendar") is not None  # before the calendar
        assert (
            block.select_one("[data-difference]").get_text(strip=True) == (expected["difference"])
        )
        assert block.select_one("[data-percent]").get_text(strip=True) == expected["percent"]
        assert block.select_one("[data-added]").get_text(strip=True) == expected["added"]
        assert block.select_one("[data-removed]").get_text(strip=True) == expected["removed"]
        assert "September 2026" in block.get_text()
        # The difference is the reports' own totals, this month less last month.
        this = api_values(browser, kind, {**OCT, "company": company})[company]
        last = api_values(browser, kind, {"year": "2026", "month": "9", "company": company})
        difference = this[FIGURES[kind][1]] - last[company][FIGURES[kind][1]]
        assert int(block.select_one("[data-difference]")["data-difference"]) == difference
    # Several companies: a table, no comparison (it is a single-company view).
    soup = page(browser.get(PAGES[kind], query_string=OCT))
    assert soup.select_one("[data-month-vs-last]") is None


@pytest.mark.parametrize("kind", KINDS)
def test_several_companies_are_a_matrix_with_totals(browsers, kind):
    browser = browsers("summary")
    soup = page(browser.get(PAGES[kind], query_string=OCT))  # no company: all of them
    table = soup.select_one("table.matrix")
    assert table is not None and soup.select_one("table.calendar") is None
    days = [th.get_text(strip=True) for th in table.select("thead th[data-date]")]
    assert days == [str(d) for d in range(1, 32)]
    assert matrix_rows(soup) == {c: EXPECTED[c] for c in ALL}
    for tr in table.select("tbody tr[data-company]"):
        for_month, _per_day = TOTALS[tr["data-company"]]
        assert tr.select_one("[data-total=for-month]").get_text(strip=True) == str(for_month)
        assert (
            tr.select_one("[data-total=per-day]").get_text(strip=True)
            == (PAGE_PER_DAY[tr["data-company"]])
        )
        assert NAMES[tr["data-company"]] in tr.th.get_text()
    # Two picked companies: a matrix of those two.
    soup = page(browser.get(PAGES[kind], query_string={**OCT, "company": [OTHER, HOME]}))
    assert list(matrix_rows(soup)) == [OTHER, HOME]  # ranked: largest month total first
    assert picker_ids(soup) == [OTHER, HOME]  # the chosen list, as chosen


@pytest.mark.parametrize("kind", KINDS)
def test_csv_has_the_api_figures(browsers, kind):
    browser = browsers("root")
    for query in (OCT, {**OCT, "company": [HOME, SECOND]}, {}, {"month": "9"}):
        response = browser.get(f"{PAGES[kind]}.csv", query_string=query)
        rows = csv_rows(response)
        values = api_values(browser, kind, query)
        per_day_key, month_key = FIGURES[kind]
        dates = list(next(iter(values.values()))["dates"])
        assert rows[0] == [
            "company",
            "name",
            *dates,
            CSV_UNITS[kind],
            f"{CSV_UNITS[kind]}_per_day",
        ]
        assert [r[0] for r in rows[1:]] == list(values)
        for row in rows[1:]:
            entry = values[row[0]]
            assert row[1] == entry["name"]
            assert [int(v) for v in row[2:-2]] == list(entry["dates"].values())
            assert int(row[-2]) == entry[month_key]
            assert float(row[-1]) == entry[per_day_key]
        year, month = dates[0][:4], dates[0][5:7]
        stem = "ddi-counts" if kind == "ddi" else "user-counts"
        assert response.headers["Content-Disposition"] == (
            f"attachment; filename={stem}-{year}-{month}.csv"
        )
    rows = csv_rows(browser.get(f"{PAGES[kind]}.csv", query_string=OCT))
    assert rows[1][2:] == [*map(str, EXPECTED[HOME]), "10", "0.3226"]


@pytest.mark.parametrize("kind", KINDS)
def test_default_is_the_current_month_to_date_with_month_links(browsers, kind):
    browser = browsers("root")
    today = datetime.now(UTC).date()
    soup = page(browser.get(PAGES[kind]))
    days = [th.get_text(strip=True) for th in soup.select("table.matrix thead th[data-date]")]
    assert days == [str(d) for d in range(1, today.day + 1)]
    assert soup.select_one("a[rel=next]") is None  # never into the future
    previous = soup.select_one("a[rel=prev]")["href"]
    back = (today.replace(day=1) - timedelta(days=1)).replace(day=1)
    assert f"month={back.month}" in previous and f"year={back.year}" in previous
    assert soup.select_one("select[name=month] option[selected]")["value"] == str(today.month)
    assert soup.select_one("input[name=year]")["value"] == str(today.year)

    # A past month links both ways and keeps the picked companies.
    soup = page(browser.get(PAGES[kind], query_string={**OCT, "company": [HOME, OTHER]}))
    previous = soup.select_one("a[rel=prev]")["href"]
    following = soup.select_one("a[rel=next]")["href"]
    for link, month in ((previous, 9), (following, 11)):
        assert f"month={month}" in link and "year=2026" in link
        assert f"company={HOME}" in link and f"company={OTHER}" in link
    assert "month=10" in soup.select_one("a[href*='.csv']")["href"]
    # January steps back into December of the year before.
    soup = page(browser.get(PAGES[kind], query_string={"month": "1", "year": "2026"}))
    previous = soup.select_one("a[rel=prev]")["href"]
    assert "month=12" in previous and "year=2025" in previous


NEXT_MONTH = (datetime.now(UTC).date().replace(day=28) + timedelta(days=4)).replace(day=1)
BAD_QUERIES = [
    {"month": "13"},
    {"month": "0"},
    {"month": "abc"},
    {"month": "-1"},
    {"month": "1.5"},
    {"month": "\u0661\u0660"},  # Arabic-Indic digits are not digits here
    {"month": "10", "year": "20x6"},
    {"month": "10", "year": "99999"},
    {"month": "10", "year": "1969"},
    {"month": ["1", "2"]},
    # Next month: the future (a fixed month here would turn into the present one day).
    {
        "month": str(((_TODAY := datetime.now(UTC).date()).month % 12) + 1),
        "year": str(_TODAY.year + (_TODAY.month == 12)),
    },
    {"month": "1", "year": "2027"},
    {"year": "2026"},  # a year needs a month
    {"company": "Not A Company!"},
]


@pytest.mark.parametrize("kind", KINDS)
def test_bad_parameters_re_render_the_page_with_400(browsers, kind):
    browser = browsers("reporter")
    for query in BAD_QUERIES:
        soup = page(browser.get(PAGES[kind], query_string=query), 400)
        message = soup.select_one(".error[role=alert]").get_text(strip=True)
        assert message and "scope" not in message, query
        # The pickers are there to correct it.
        assert soup.select_one("input#add_company") is not None, query
        assert soup.select_one("select[name=month]") is not None, query
        assert soup.select("table.matrix, table.calendar") == []
        soup = page(browser.get(f"{PAGES[kind]}.csv", query_string=query), 400)
        assert "scope." not in soup.get_text()
    # Empty fields, as the picker form may send them, mean "the default".
    page(browser.get(PAGES[kind], query_string={"company": "", "year": ""}))


# --- the drill-down --------------------------------------------------------------------------


@pytest.fixture
def busy_day(world) -> Factory:
    """October 12th 2026 at acme, for both kinds: peak 3, first reached at 09:00."""
    rows = []
    for kind in KINDS:
        rows += [
            (kind, HOME, "k1", at(2026, 10, 1), at(2026, 10, 20)),  # all day
            (kind, HOME, "k5", at(2026, 10, 12, 9), at(2026, 10, 12, 11)),
            (kind, HOME, "k6", at(2026, 10, 12, 10, 30), at(2026, 10, 12, 12)),
            (kind, HOME, "k7", at(2026, 10, 12, 10), at(2026, 10, 12, 10)),  # zero length
            (kind, HOME, "k8", at(2026, 10, 11, 22), at(2026, 10, 12, 10, 30)),  # hands over
            (kind, HOME, "k9", at(2026, 10, 12, 23), None),  # still open
            (kind, HOME, "k0", at(2026, 10, 11, 1), at(2026, 10, 12)),  # ends at midnight
            (kind, OTHER, "x1", at(2026, 10, 12, 9), at(2026, 10, 12, 10)),
        ]
    add_history(*rows)
    return world


def records_of(soup: BeautifulSoup) -> dict[str, list[str]]:
    """The drill-down's records active all day: key -> its cells' text."""
    return {
        tr["data-key"]: [td.get_text(" ", strip=True) for td in tr.find_all("td")]
        for tr in soup.select("table.day-records tbody tr")
    }


def changes_of(soup: BeautifulSoup) -> list[tuple[str, str, str]]:
    """The drill-down's changes: (time, added/removed, key) in the page's order."""
    return [
        (tr.select_one("time").get_text(strip=True), tr["data-change"], tr["data-key"])
        for tr in soup.select("table.day-changes tbody tr")
    ]


def figures_of(soup: BeautifulSoup) -> dict[str, str]:
    return {
        name: soup.select_one(f"[data-{name}]").get_text(strip=True)
        for name in ("at-start", "added", "removed", "at-end", "peak")
    }


# The busy day: k0 ends at midnight (a removal at 00:00), k8 hands over at 10:30 (the end
# first), k7 has no length, x1 is another company's.
BUSY_CHANGES = [
    ("00:00:00", "removed", "k0"),
    ("09:00:00", "added", "k5"),
    ("10:30:00", "removed", "k8"),
    ("10:30:00", "added", "k6"),
    ("11:00:00", "removed", "k5"),
    ("12:00:00", "removed", "k6"),
    ("23:00:00", "added", "k9"),
]


@pytest.mark.parametrize("kind", KINDS)
def test_drill_down_tells_the_day(busy_day, browsers, kind):
    browser = browsers("reporter")
    calendar_page = page(browser.get(PAGES[kind], query_string={**OCT}))
    link = calendar_page.select_one("td[data-date='2026-10-12'] a.day")
    assert link.select_one(".peak").get_text(strip=True) == "3"
    assert link["hx-push-url"] == "true"
    assert calendar_page.select_one("#panel").get("aria-live") is None

    full = browser.get(link["href"])
    soup = page(full)
    assert "<html" in full.get_data(as_text=True)
    assert len(soup.find_all("h1")) == 1
    assert soup.select_one("#panel").get("aria-live") is None
    # The summary first: 3 carried in (k0, k1, k8), 3 added, 4 removed, 2 at the end.
    assert figures_of(soup) == {
        "at-start": "3",
        "added": "3",
        "removed": "4",
        "at-end": "2",
        "peak": "3",
    }
    peak_at = soup.select_one("[data-peak-at]")
    assert peak_at.get_text(strip=True) == "09:00:00"
    assert peak_at["datetime"] == "2026-10-12T09:00:00+00:00"
    summary = soup.select_one("[data-focus]")
    assert summary["id"] == "day-summary"
    assert soup.select_one("[data-announce]").get_text(" ", strip=True) == (
        "12 October: 3 at the peak, 3 added, 4 removed"
    )
    # Then the changes in time order, then what was active all day.
    assert changes_of(soup) == BUSY_CHANGES
    assert [t["id"] for t in soup.select(".day-part")] == ["day-changes", "day-all-day"]
    records = records_of(soup)
    assert list(records) == ["k1"]
    assert records["k1"][1:] == ["2026-10-01 00:00", "2026-10-20 00:00"]
    # The days around it, and Close back to the month's calendar.
    prev = soup.select_one("a[data-day-link=prev]")
    assert "date=2026-10-11" in prev["href"] and prev["hx-push-url"] == "true"
    assert "date=2026-10-13" in soup.select_one("a[data-day-link=next]")["href"]
    close = soup.select_one("a[data-close]")
    assert close["href"] == f"{PAGES[kind]}?company={HOME}&year=2026&month=10"
    assert close.get_text(" ", strip=True).startswith("Close")

    fragment = browser.get(link["hx-get"], headers={"HX-Request": "true"})
    text = fragment.get_data(as_text=True)
    assert fragment.status_code == 200
    assert "<html" not in text and "<body" not in text
    assert_no_inline_code(text)
    soup = BeautifulSoup(text, "html.parser")
    assert soup.find("h1") is None
    assert soup.select_one("[data-peak]").get_text(strip=True) == "3"
    assert changes_of(soup) == BUSY_CHANGES
    assert list(records_of(soup)) == ["k1"]
    assert "HX-Request" in fragment.headers.get("Vary", "")

    # A quiet day says so.
    soup = page(
        browser.get(f"{PAGES[kind]}/day", query_string={"company": HOME, "date": "2026-09-25"})
    )
    assert soup.select_one("[data-peak]").get_text(strip=True) == "0"
    assert soup.select_one("table.day-records") is None
    assert soup.select_one("table.day-changes") is None


@pytest.mark.parametrize("kind", KINDS)
def test_drill_down_days_around_it(busy_day, browsers, kind):
    """Previous and next day: another month is a page of its own (not swapped under the
    month's calendar), and there is no next day after today."""
    browser = browsers("reporter")
    path = f"{PAGES[kind]}/day"
    soup = page(browser.get(path, query_string={"company": HOME, "date": "2026-10-01"}))
    prev = soup.select_one("a[data-day-link=prev]")
    assert "date=2026-09-30" in prev["href"] and not prev.get("hx-get")
    assert soup.select_one("a[data-day-link=next]")["hx-get"]
    today = periods.today_in(periods.zone("UTC")).isoformat()
    soup = page(browser.get(path, query_string={"company": HOME, "date": today}))
    assert soup.select_one("a[data-day-link=next]") is None
    assert soup.select_one("a[data-day-link=prev]") is not None


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("username", "linked"),
    [("root", True), ("summary", False), ("reporter", False)],
)
def test_drill_down_records_link_where_the_reader_may_open_them(
    world, browsers, kind, username, linked
):
    """A DDI links to its page, a phone user to the phone-user list filtered to it, only for
    a reader who may open them (Billing may not); DDIs read "+44 2071234567"."""
    key = "44:2071234567" if kind == "ddi" else "zed"
    add_history((kind, HOME, key, at(2026, 10, 1), None), (kind, HOME, key, at(2026, 9, 1), None))
    add_history((kind, HOME, key, at(2026, 10, 12, 9), at(2026, 10, 12, 10)))
    soup = page(
        browsers(username).get(
            f"{PAGES[kind]}/day", query_string={"company": HOME, "date": "2026-10-12"}
        )
    )
    cells = soup.select(f"table.day-changes tr[data-key='{key}'] td:nth-of-type(3)")
    cells += soup.select(f"table.day-records tr[data-key='{key}'] td:nth-of-type(1)")
    assert len(cells) == 4  # added and removed; active all day twice
    shown = "+44 2071234567" if kind == "ddi" else "zed"
    assert {cell.get_text(strip=True) for cell in cells} == {shown}
    hrefs = {a["href"] for cell in cells for a in cell.find_all("a")}
    if not linked:
        assert hrefs == set()
    elif kind == "ddi":
        assert hrefs == {"/ddis/44/2071234567"}
    else:
        assert hrefs == {f"/users/{HOME}/zed"}


@pytest.mark.parametrize("kind", KINDS)
def test_drill_down_pages_its_two_lists(world, browsers, kind):
    """250 records active all day and 130 changes: each list 100 a page, its own parameter
    (`page` for the records active all day, `changes` for the changes), each pager keeping
    the other's page; htmx's paging puts focus on the list paged."""
    rows = [(kind, HOME, f"a{n:03d}", at(2026, 10, 1), None) for n in range(250)]
    rows += [(kind, HOME, f"c{n:03d}", at(2026, 10, 12, 1, n % 60), None) for n in range(130)]
    add_history(*rows)
    browser = browsers("reporter")
    path = f"{PAGES[kind]}/day"
    base = {"company": HOME, "date": "2026-10-12"}
    soup = page(browser.get(path, query_string=base))
    assert figures_of(soup)["added"] == "130"
    assert len(changes_of(soup)) == 100 and len(records_of(soup)) == 100
    nxt = soup.select_one("a[data-pager=changes-next]")
    assert "changes=2" in nxt["href"] and "page=" not in nxt["href"]
    soup = page(browser.get(path, query_string={**base, "changes": "2", "page": "3"}))
    assert len(changes_of(soup)) == 30 and len(records_of(soup)) == 50
    assert next(iter(records_of(soup))) == "a200"
    assert "page=3" in soup.select_one("a[data-pager=changes-first]")["href"]
    assert "changes=2" in soup.select_one("a[data-pager=all-day-first]")["href"]
    # Past the end: the last page.
    soup = page(browser.get(path, query_string={**base, "changes": "9", "page": "9"}))
    assert len(changes_of(soup)) == 30 and len(records_of(soup)) == 50
    # Paged with htmx: focus on that list, its count line read out.
    response = browser.get(
        path,
        query_string={**base, "page": "2"},
        headers={"HX-Request": "true", "HX-Trigger": "all-day-next"},
    )
    soup = BeautifulSoup(response.get_data(as_text=True), "html.parser")
    assert soup.select_one("[data-focus]")["id"] == "day-all-day"
    line = soup.select_one("[data-announce]").get_text(" ", strip=True)
    assert line.startswith("DDIs 101" if kind == "ddi" else "Phone users 101")
    assert "200 of 250" in line
    page(browser.get(path, query_string={**base, "changes": "0"}), 400)


@pytest.mark.parametrize("kind", KINDS)
def test_drill_down_bad_parameters_are_400_or_404(busy_day, browsers, kind):
    browser = browsers("reporter")
    path = f"{PAGES[kind]}/day"
    today = datetime.now(UTC).date()
    for query in (
        {},
        {"company": HOME},
        {"date": "2026-10-12"},
        {"company": HOME, "date": "2026-13-01"},
        {"company": HOME, "date": "2026-02-30"},
        {"company": HOME, "date": "12/10/2026"},
        {"company": HOME, "date": "2026-10-12T00:00"},
        {"company": HOME, "date": "1969-12-31"},
        {"company": HOME, "date": (today + timedelta(days=1)).isoformat()},
        {"company": "Bad Company", "date": "2026-10-12"},
    ):
        page(browser.get(path, query_string=query), 400)
        page(browser.get(path, query_string=query, headers={"HX-Request": "true"}), 400)
    for company in (OTHER, "no-such-company"):
        page(browser.get(path, query_string={"company": company, "date": "2026-10-12"}), 404)


def test_drill_down_service_rules(busy_day):
    reporter = Principal(username="r", via="ui", reporting_for=frozenset({HOME}))
    with pytest.raises(Forbidden):
        report_days.day_detail(Principal(username="n", via="ui"), "ddi", HOME, "2026-10-12")
    with pytest.raises(Forbidden):
        report_days.reportable_companies(
            Principal(username="a", via="ui", admin_of=frozenset({HOME}))
        )
    with pytest.raises(NotFound):
        report_days.day_detail(reporter, "ddi", OTHER, "2026-10-12")
    with pytest.raises(Invalid):
        report_days.day_detail(reporter, "ddi", HOME, "2026-10-12", today=date(2026, 10, 11))
    detail = report_days.day_detail(reporter, "user", HOME, date(2026, 10, 12))
    assert detail.peak == 3
    assert detail.peak_at == datetime(2026, 10, 12, 9, tzinfo=UTC)
    assert [c.id for c in report_days.reportable_companies(reporter)] == [HOME]


@pytest.mark.parametrize("zone", ["Europe/London", "America/New_York"])
def test_drill_down_times_are_in_the_report_timezone(busy_day, browsers, app, zone):
    app.config["REPORT_TIMEZONE"] = zone
    browser = browsers("root")
    soup = page(
        browser.get("/reports/ddis/day", query_string={"company": OTHER, "date": "2026-10-12"})
    )
    local = datetime(2026, 10, 12, 9, tzinfo=UTC).astimezone(periods.zone(zone))
    assert soup.select_one("[data-peak-at]").get_text(strip=True) == local.strftime("%H:%M:%S")
    assert zone in soup.get_text()


# --- the drill-down's peak is the report's value ---------------------------------------------


def random_history(rng: random.Random, year: int, month: int) -> list[tuple]:
    """Keys moving between companies, back-to-back and overlapping intervals, zero-length ones,
    instants on midnights, intervals spanning the month's ends, open ones."""
    first = datetime(year, month, 1)
    last = first + timedelta(days=calendar.monthrange(year, month)[1])
    rows = []
    for kind in KINDS:
        for n in range(rng.randint(4, 14)):
            moment = (
                first
                - timedelta(days=3)
                + timedelta(minutes=rng.choice([0, rng.randint(0, 60 * 24 * 36)]))
            )
            moment = moment.replace(second=0)
            if rng.random() < 0.3:
                moment = moment.replace(hour=0, minute=0)
            for segment in range(rng.randint(1, 5)):
                company = rng.choice(ALL)
                length = rng.choice([0, rng.randint(1, 120), rng.randint(60, 60 * 24 * 9)])
                end = moment + timedelta(minutes=length)
                if segment and rng.random() < 0.15:
                    rows.append((kind, company, f"{kind}{n}", moment, None))
                    break
                rows.append((kind, company, f"{kind}{n}", moment, end))
                if end > last:
                    break
                # Back to back (a move), a gap, or an overlap with another key's copy.
                moment = end + timedelta(minutes=rng.choice([0, 0, rng.randint(1, 3000)]))
        # Some keys overlap themselves in another company (as an import could not, but the
        # peak rules still hold).
        for _ in range(rng.randint(0, 6)):
            start = first + timedelta(minutes=rng.randint(0, 60 * 24 * 30))
            rows.append(
                (
                    kind,
                    rng.choice(ALL),
                    f"{kind}x",
                    start,
                    start + timedelta(minutes=rng.randint(1, 900)),
                )
            )
    return rows


@pytest.mark.parametrize(
    ("seed", "zone", "year", "month"),
    [
        (1, "UTC", 2026, 10),
        (2, "Europe/London", 2026, 10),  # clocks go back on the 25th
        (3, "America/New_York", 2026, 3),  # and forward on the 8th
        (4, "Australia/Lord_Howe", 2026, 4),  # a half-hour change
        (5, "UTC", 2024, 2),  # a leap February
        (6, "Asia/Kolkata", 2026, 11),  # the current month, to date
    ],
)
def test_drill_down_peak_equals_the_report_for_every_day(world, app, seed, zone, year, month):
    app.config["REPORT_TIMEZONE"] = zone
    rng = random.Random(seed)
    add_history(*random_history(rng, year, month))
    root = Principal.cli("test")
    today = date(2026, 11, 22)
    scope = reports.parse_scope({"month": month, "year": year})
    values = reports.report(root, "ddi", scope, today=today)
    checked = 0
    for kind in KINDS:
        values = reports.report(root, kind, scope, today=today)
        for company, entry in values.items():
            for iso, peak in entry["dates"].items():
                detail = report_days.day_detail(root, kind, company, iso, today=today)
                assert detail.peak == peak, (kind, company, iso)
                assert sum(r.at_peak for r in detail.records) == peak, (kind, company, iso)
                if peak:
                    assert detail.start <= detail.peak_at < detail.end
                    checked += 1
                else:
                    assert detail.peak_at is None
                for r in detail.records:
                    assert detail.start <= r.start < r.end <= detail.end
    assert checked > 10


def plain_day(rows, kind: str, company: str, start: datetime, end: datetime) -> dict:
    """The day drill-down's figures counted plainly from every history row (naive UTC), as
    docs/reports.md defines them: a change belongs to the day its instant falls in."""
    mine = [
        (key, s, e)
        for k, c, key, s, e in rows
        if (k, c) == (kind, company) and (e is None or e > s)
    ]
    added = [(s, 1, key) for key, s, e in mine if start <= s < end]
    removed = [(e, 0, key) for key, s, e in mine if e is not None and start <= e < end]
    return {
        "at_start": sum(1 for _, s, e in mine if s < start and (e is None or e >= start)),
        "added": len(added),
        "removed": len(removed),
        "at_end": sum(1 for _, s, e in mine if s < end and (e is None or e >= end)),
        "all_day": sorted(key for key, s, e in mine if s < start and (e is None or e >= end)),
        "changes": sorted(added + removed),
    }


@pytest.mark.parametrize(
    ("seed", "zone", "year", "month", "rollup"),
    [
        (7, "UTC", 2026, 10, True),
        (8, "Europe/London", 2026, 10, True),  # clocks go back on the 25th
        (9, "America/New_York", 2026, 3, True),  # and forward on the 8th
        (10, "Australia/Lord_Howe", 2026, 4, True),  # a half-hour change
        # Without the daily rollup (never built, or built in another zone) the level carried
        # into a day is counted from the history instead of read from the rollup.
        (11, "Europe/London", 2026, 10, False),
        (12, "UTC", 2024, 2, False),  # a leap February
    ],
)
def test_drill_down_summary_and_lists_equal_a_plain_count(
    world, app, seed, zone, year, month, rollup
):
    """Every day of a random history: the summary's counts, the changes in time order and the
    records active all day equal a plain count, the peak equals the report's value, and the
    counts agree with the peak (the level at the start and at the end are never above it)."""
    app.config["REPORT_TIMEZONE"] = zone
    tz = periods.zone(zone)
    rng = random.Random(seed)
    add_history(*random_history(rng, year, month))
    if not rollup:
        with write_transaction() as session:
            session.execute(delete(RollupState))
    h = HistoryInterval
    rows = db.session.execute(select(h.kind, h.company, h.key, h.start_at, h.end_at)).all()
    root = Principal.cli("test")
    today = date(2026, 11, 22)
    scope = reports.parse_scope({"month": month, "year": year})
    busy = 0
    for kind in KINDS:
        values = reports.report(root, kind, scope, today=today)
        for company, entry in values.items():
            for iso, peak in entry["dates"].items():
                day = date.fromisoformat(iso)
                start = periods.local_midnight_utc(day, tz)
                end = periods.local_midnight_utc(day + timedelta(days=1), tz)
                plain = plain_day(rows, kind, company, start, end)
                view = day_view.day_view(root, kind, company, iso, limit=3, today=today)
                s = view.summary
                assert view.day.peak == peak, (kind, company, iso)
                got = (s.at_start, s.added, s.removed, s.at_end)
                want = (plain["at_start"], plain["added"], plain["removed"], plain["at_end"])
                assert got == want, (kind, company, iso)
                assert s.at_end <= peak <= s.at_start + s.added
                assert s.all_day <= peak
                changes, records = [], []
                for offset in range(0, max(s.added + s.removed, 1), 3):
                    part = day_view.day_view(
                        root, kind, company, iso, changes_offset=offset, limit=3, today=today
                    )
                    changes += part.changes
                for offset in range(0, max(s.all_day, 1), 3):
                    part = day_view.day_view(
                        root, kind, company, iso, all_day_offset=offset, limit=3, today=today
                    )
                    records += part.all_day
                local = [
                    (c.at.astimezone(UTC).replace(tzinfo=None), c.added, c.key) for c in changes
                ]
                assert [(at_, int(a), k) for at_, a, k in local] == plain["changes"]
                assert sorted(r.key for r in records) == plain["all_day"]
                assert [r.since for r in records] == sorted(r.since for r in records)
                busy += bool(s.added and s.removed)
    assert busy > 5


# --- user data is escaped and neutralised ----------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_company_names_are_escaped_in_html_and_neutralised_in_csv(world, browsers, kind):
    hostile = {
        "evil": "<script>alert(1)</script>",
        "formula": "=cmd|' /C calc'!A0",
        "plus": "+1+2",
        "at": "@SUM(A1)",
        "-minus": "-2-3",
    }
    for company_id, name in hostile.items():
        world.company(company_id, name)
    add_history((kind, "evil", "e1", at(2026, 10, 3), at(2026, 10, 4)))
    browser = browsers("root")
    for query in (OCT, {**OCT, "company": "evil"}):
        response = browser.get(PAGES[kind], query_string=query)
        html = response.get_data(as_text=True)
        soup = page(response)
        assert "<script>alert(1)</script>" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert all(s.get("src") for s in soup.find_all("script"))
        assert "<script>alert(1)</script>" in soup.get_text()  # shown as text
    response = browser.get(
        f"{PAGES[kind]}/day", query_string={"company": "evil", "date": "2026-10-03"}
    )
    assert "<script>alert(1)</script>" not in response.get_data(as_text=True)
    assert "<script>alert(1)</script>" in page(response).get_text()

    rows = {r[0]: r[1] for r in csv_rows(browser.get(f"{PAGES[kind]}.csv", query_string=OCT))[1:]}
    assert rows["evil"] == "<script>alert(1)</script>"
    assert rows["formula"] == "'=cmd|' /C calc'!A0"
    assert rows["plus"] == "'+1+2"
    assert rows["at"] == "'@SUM(A1)"
    assert rows["'-minus"] == "'-2-3"  # identifiers may begin with '-' too
    assert rows[HOME] == NAMES[HOME]
