"""The report pages at scale (docs/pages.md): many companies as a totals row and 50 ranked
companies a page with a filter, the time zone named, the CSV with the whole choice; the day
drill-down paged 100 records at a time with its CSV.

History is inserted directly (naive UTC) for October 2026; REPORT_TIMEZONE is UTC unless a
test says otherwise.
"""

from __future__ import annotations

import csv
import io
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup

from .factories import World, add_history
from .snapshots import kept
from .test_views_reports import assert_no_inline_code

pytestmark = pytest.mark.slow  # a world of 63 companies per test

KINDS = ("ddi", "user")
PAGES = {"ddi": "/reports/ddis", "user": "/reports/users"}
OCT = {"year": "2026", "month": "10"}
COUNT = 63  # companies: two pages of 50
MONTH_KEY = {"ddi": "billableDDIDaysForMonth", "user": "billableUserDaysForMonth"}


def company_id(n: int) -> str:
    return f"co{n:03d}"


@pytest.fixture
def world_companies() -> dict[str, str]:
    # Names that sort differently from identifiers; every third one a "Telecom".
    return {
        company_id(n): f"{'Telecom' if n % 3 == 0 else 'Voice'} {chr(90 - n % 26)}{n}"
        for n in range(COUNT)
    }


@pytest.fixture
def world_accounts() -> dict[str, str]:
    return {"root": "root", "nobody": "nobody"}


@pytest.fixture
@kept
def world(world: World) -> World:
    """Company n has n % 7 records active all October, and on October 12th one more from 09:00
    to 10:00; co000 has 250 records that day (three pages of the drill-down)."""
    rows = []
    for kind in KINDS:
        for n in range(COUNT):
            c = company_id(n)
            rows += [(kind, c, f"{c}-{k}", datetime(2026, 9, 1), None) for k in range(n % 7)]
            rows.append((kind, c, f"{c}-x", datetime(2026, 10, 12, 9), datetime(2026, 10, 12, 10)))
        rows += [
            (kind, "co000", f"=k{k:03d}", datetime(2026, 10, 12, k % 24), None) for k in range(249)
        ]
    add_history(*rows)
    return world


def page(response, status: int = 200) -> BeautifulSoup:
    html = response.get_data(as_text=True)
    assert response.status_code == status, html[:800]
    assert "Traceback" not in html
    assert_no_inline_code(html)
    return BeautifulSoup(html, "html.parser")


def company_rows(soup: BeautifulSoup) -> list[str]:
    return [tr["data-company"] for tr in soup.select("table.matrix tbody tr[data-company]")]


def api(browser, kind: str, query: dict) -> dict:
    path = "/rest/call/readDDICount" if kind == "ddi" else "/rest/call/readUserCount"
    response = browser.get(path, query_string=query)
    assert response.status_code == 200
    return response.get_json()["values"]


@pytest.fixture
def root(world):
    return world.browser("root")


# --- the many-company page -------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_totals_row_first_then_fifty_ranked_companies(root, kind):
    soup = page(root.get(PAGES[kind], query_string=OCT))
    table = soup.select_one("table.matrix")
    body = table.select("tbody tr")
    assert body[0].has_attr("data-totals")  # the totals row first
    values = api(root, kind, OCT)
    month_key = MONTH_KEY[kind]
    # The totals row: each day's sum and the month's over every company of the choice.
    totals = body[0]
    days = [td["data-date"] for td in totals.select("td[data-date]")]
    assert days == list(next(iter(values.values()))["dates"])
    # Figures read as people write them: thousands separated (10,901).
    for day, td in zip(days, totals.select("td[data-date]"), strict=True):
        assert td.get_text(strip=True) == f"{sum(e['dates'][day] for e in values.values()):,}"
    month_total = sum(e[month_key] for e in values.values())
    assert totals.select_one("[data-total=for-month]").get_text(strip=True) == f"{month_total:,}"
    assert totals.select_one("[data-total=per-day]").get_text(strip=True) == (
        f"{(Decimal(month_total) / 31).quantize(Decimal('0.1'), ROUND_HALF_UP):,.1f}".removesuffix(
            ".0"
        )
    )
    assert f"All {COUNT} companies" in totals.th.get_text()
    # 50 companies, largest month total first, ties by identifier; the same figures as the API.
    order = sorted(values, key=lambda c: (-values[c][month_key], c))
    assert company_rows(soup) == order[:50]
    for tr in table.select("tbody tr[data-company]"):
        entry = values[tr["data-company"]]
        assert tr.select_one("[data-total=for-month]").get_text(strip=True) == (
            f"{entry[month_key]:,}"
        )
        cells = [int(td.get_text(strip=True).replace(",", "")) for td in tr.select("td[data-date]")]
        assert cells == list(entry["dates"].values())
    assert [int(tr["data-rank"]) for tr in table.select("tbody tr[data-company]")] == list(
        range(1, 51)
    )
    assert "Companies 1\u201350 of 63" in soup.select_one("[data-count]").get_text(" ", strip=True)


@pytest.mark.parametrize("kind", KINDS)
def test_month_total_and_per_day_come_before_the_days(root, kind):
    soup = page(root.get(PAGES[kind], query_string=OCT))
    headers = [th.get_text(strip=True) for th in soup.select("table.matrix thead th")]
    unit = {"ddi": "Billable DDI-days", "user": "Billable user-days"}[kind]
    assert headers[:3] == ["Company", unit, "Per day (average)"]
    assert headers[3:] == [str(d) for d in range(1, 32)]
    for tr in soup.select("table.matrix tbody tr"):
        cells = tr.find_all(["th", "td"], recursive=False)
        assert cells[1]["data-total"] == "for-month"
        assert cells[2]["data-total"] == "per-day"
        assert cells[3]["data-date"] == "2026-10-01"


@pytest.mark.parametrize("kind", KINDS)
def test_paging_first_previous_next_last(root, kind):
    soup = page(root.get(PAGES[kind], query_string=OCT))
    first_page = company_rows(soup)
    pager = {el["data-pager"]: el for el in soup.select("nav.pager [data-pager]")}
    assert pager["first"].name == "span" and pager["prev"].name == "span"  # disabled here
    following = pager["next"]["href"]
    assert pager["last"]["href"] == following  # two pages
    query = parse_qs(urlsplit(following).query)
    assert query["page"] == ["2"] and query["month"] == ["10"] and query["year"] == ["2026"]
    soup = page(root.get(following))
    second = company_rows(soup)
    assert len(second) == COUNT - 50
    assert not set(second) & set(first_page)
    assert soup.select_one("tbody tr[data-company]")["data-rank"] == "51"
    # The totals row is on every page, the same.
    assert (
        soup.select_one("tr[data-totals] [data-total=for-month]").get_text()
        == page(root.get(PAGES[kind], query_string=OCT))
        .select_one("tr[data-totals] [data-total=for-month]")
        .get_text()
    )
    pager = {el["data-pager"]: el for el in soup.select("nav.pager [data-pager]")}
    assert pager["next"].name == "span" and pager["last"].name == "span"
    back = pager["prev"]["href"]
    assert "page=" not in back and pager["first"]["href"] == back
    assert company_rows(page(root.get(back))) == first_page
    # A page past the end shows the last one; a bad page number is a 400 with the form.
    assert company_rows(page(root.get(PAGES[kind], query_string={**OCT, "page": "99"}))) == (second)
    for bad in ("0", "-1", "two", "1.5", "\u0662"):
        soup = page(root.get(PAGES[kind], query_string={**OCT, "page": bad}), 400)
        assert "page" in soup.select_one(".error[role=alert]").get_text()
        assert soup.select_one("table.matrix") is None


@pytest.mark.parametrize("kind", KINDS)
def test_filter_by_identifier_or_name_keeps_the_choice_totals(root, kind):
    full = page(root.get(PAGES[kind], query_string=OCT))
    all_totals = full.select_one("tr[data-totals]").get_text(" ", strip=True)
    # By name, case-insensitive: the "Telecom" companies (every third).
    soup = page(root.get(PAGES[kind], query_string={**OCT, "filter": "  telECOM "}))
    shown = company_rows(soup)
    telecoms = {company_id(n) for n in range(0, COUNT, 3)}
    assert set(shown) == telecoms and len(shown) == 21
    values = api(root, kind, OCT)
    month_key = MONTH_KEY[kind]
    assert shown == sorted(telecoms, key=lambda c: (-values[c][month_key], c))
    assert soup.select_one("tr[data-totals]").get_text(" ", strip=True) == all_totals
    assert soup.select_one("input[name=filter]")["value"] == "telECOM"
    assert "matching" in soup.select_one("[data-count]").get_text()
    assert soup.select_one("nav.pager") is None  # one page
    # By identifier.
    soup = page(root.get(PAGES[kind], query_string={**OCT, "filter": "CO06"}))
    assert company_rows(soup) == sorted(
        ["co060", "co061", "co062"], key=lambda c: (-values[c][month_key], c)
    )
    # Nothing matches: said so, the totals row stays.
    soup = page(root.get(PAGES[kind], query_string={**OCT, "filter": "nobody"}))
    assert company_rows(soup) == []
    assert "No company matches" in soup.select_one("[data-count]").get_text()
    assert soup.select_one("tr[data-totals]") is not None
    # Paging keeps the filter; the filter form keeps the month and the chosen companies.
    soup = page(root.get(PAGES[kind], query_string={**OCT, "filter": "CO0"}))
    following = soup.select_one("nav.pager a[data-pager=next]")["href"]
    assert parse_qs(urlsplit(following).query)["filter"] == ["CO0"]
    assert all(
        "co0" in tr["data-company"]
        for tr in page(root.get(following)).select("tbody tr[data-company]")
    )
    form = soup.select_one("form.report-filter")
    assert {i["name"]: i["value"] for i in form.select("input[type=hidden]")} == {
        "month": "10",
        "year": "2026",
    }
    # Too long: a 400 with the form, nothing else.
    soup = page(root.get(PAGES[kind], query_string={**OCT, "filter": "x" * 101}), 400)
    assert "filter" in soup.select_one(".error[role=alert]").get_text()


@pytest.mark.parametrize("kind", KINDS)
def test_filter_within_chosen_companies(root, kind):
    chosen = [company_id(n) for n in (3, 4, 6, 9)]
    soup = page(root.get(PAGES[kind], query_string={**OCT, "company": chosen, "filter": "telecom"}))
    assert set(company_rows(soup)) == {"co003", "co006", "co009"}
    assert "All 4 companies" in soup.select_one("tr[data-totals] th").get_text()
    hidden = soup.select("form.report-filter input[type=hidden][name=company]")
    assert [i["value"] for i in hidden] == chosen


@pytest.mark.parametrize("kind", KINDS)
def test_every_report_page_names_its_time_zone(root, app, kind):
    app.config["REPORT_TIMEZONE"] = "Europe/London"
    addresses = [
        (PAGES[kind], OCT, 200),  # many companies
        (PAGES[kind], {**OCT, "company": "co001"}, 200),  # one: the calendar
        (PAGES[kind], {"month": "13"}, 400),  # an error
        (f"{PAGES[kind]}/day", {"company": "co001", "date": "2026-10-12"}, 200),
        (f"{PAGES[kind]}/day", {"company": "co001", "date": "2026-09-01"}, 200),
    ]
    for path, query, status in addresses:
        soup = page(root.get(path, query_string=query), status)
        named = soup.select("[data-timezone]")
        assert named, path
        assert "Europe/London" in named[0].get_text(), path


@pytest.mark.parametrize("kind", KINDS)
def test_csv_holds_the_whole_choice_streamed(root, kind):
    response = root.get(f"{PAGES[kind]}.csv", query_string={**OCT, "filter": "telecom"})
    assert response.status_code == 200 and response.mimetype == "text/csv"
    assert response.is_streamed
    rows = list(csv.reader(io.StringIO(response.get_data(as_text=True))))
    values = api(root, kind, OCT)
    assert [r[0] for r in rows[1:]] == sorted(values)  # every company, the filter ignored
    assert len(rows) == COUNT + 1
    for row in rows[1:]:
        assert int(row[-2]) == values[row[0]][MONTH_KEY[kind]]
        assert [int(v) for v in row[2:-2]] == list(values[row[0]]["dates"].values())


# --- the day drill-down ----------------------------------------------------------------------


def records_of(soup: BeautifulSoup) -> list[str]:
    """The keys of the drill-down's changes (the day's starts and ends), in the page's order."""
    return [tr["data-key"] for tr in soup.select("table.day-changes tbody tr")]


def count_line(soup: BeautifulSoup) -> str:
    return soup.select_one("#day-changes .day-count").get_text()


@pytest.mark.parametrize("kind", KINDS)
def test_drill_down_pages_a_hundred_changes(root, kind):
    path = f"{PAGES[kind]}/day"
    query = {"company": "co000", "date": "2026-10-12"}
    soup = page(root.get(path, query_string=query))
    # 249 records from hours 0-23 (all open) and one from 09:00 to 10:00: 249 at 23:00; all
    # begin that day, so 250 added, 1 removed, none active all day.
    assert soup.select_one("[data-peak]").get_text(strip=True) == "249"
    assert soup.select_one("[data-peak-at]").get_text(strip=True) == "23:00:00"
    assert soup.select_one("[data-added]").get_text(strip=True) == "250"
    assert soup.select_one("[data-removed]").get_text(strip=True) == "1"
    assert soup.select_one("table.day-records") is None
    first = records_of(soup)
    assert len(first) == 100
    assert "1\u2013100 of 251" in count_line(soup)
    pager = {el["data-pager"]: el for el in soup.select("nav.pager [data-pager]")}
    assert pager["changes-first"].name == "span" and pager["changes-prev"].name == "span"
    assert parse_qs(urlsplit(pager["changes-last"]["href"]).query)["changes"] == ["3"]
    seen = list(first)
    following = pager["changes-next"]["href"]
    while following:
        soup = page(root.get(following))
        seen += records_of(soup)
        link = soup.select_one("nav.pager a[data-pager=changes-next]")
        following = link["href"] if link else None
    assert len(seen) == 251 and len(set(seen)) == 250  # co000-x added and removed
    assert "201\u2013251 of 251" in count_line(soup)
    # The htmx fragment pages inside the panel.
    fragment = root.get(
        path, query_string={**query, "changes": "2"}, headers={"HX-Request": "true"}
    )
    text = fragment.get_data(as_text=True)
    assert "<html" not in text
    soup = BeautifulSoup(text, "html.parser")
    assert records_of(soup) == seen[100:200]
    assert soup.select_one("nav.pager a[data-pager=changes-next]")["hx-target"] == "#panel"
    # A page past the end is the last; a bad one a 400.
    last = page(root.get(path, query_string={**query, "changes": "9"}))
    assert records_of(last) == seen[200:]
    page(root.get(path, query_string={**query, "changes": "x"}), 400)
    page(root.get(path, query_string={**query, "page": "x"}), 400)


def test_drill_down_captions_write_counts_as_the_page_does(root):
    """The tables' captions (read out by screen readers) group thousands as the count lines
    do: "of 1,200", not "of 1200" (seen on the bench walk of a busy day)."""
    add_history(
        *[("ddi", "co002", f"co002-b{k:04d}", datetime(2026, 10, 19, 9), None) for k in range(1200)]
    )
    query = {"company": "co002"}
    soup = page(root.get("/reports/ddis/day", query_string={**query, "date": "2026-10-19"}))
    assert "1\u2013100 of 1,200" in count_line(soup)
    caption = soup.select_one("table.day-changes caption").get_text()
    assert caption.startswith("Changes on 2026-10-19, 1 to 100 of 1,200, times in ")
    soup = page(root.get("/reports/ddis/day", query_string={**query, "date": "2026-10-20"}))
    caption = soup.select_one("table.day-records caption").get_text()  # co002's 2 more
    assert caption.startswith("DDIs active all day on 2026-10-20, 1 to 100 of 1,202, times in ")


@pytest.mark.parametrize("kind", KINDS)
def test_day_csv_has_every_record_neutralised(root, kind):
    path = f"{PAGES[kind]}/day.csv"
    response = root.get(path, query_string={"company": "co000", "date": "2026-10-12"})
    assert response.status_code == 200 and response.mimetype == "text/csv"
    assert response.is_streamed
    disposition = response.headers["Content-Disposition"]
    assert disposition.startswith("attachment; filename=") and "co000-2026-10-12" in disposition
    rows = list(csv.reader(io.StringIO(response.get_data(as_text=True))))
    header, body = rows[0], rows[1:]
    assert header[1:] == ["from", "until", "from_day_before", "continues", "at_peak"]
    assert len(body) == 250
    keys = [r[0] for r in body]
    assert "'=k000" in keys and not any(k.startswith("=") for k in keys)  # formula guard
    assert sum(r[5] == "yes" for r in body) == 249  # all but the 09:00-10:00 one at 23:00
    assert all(r[1].endswith("+00:00") for r in body)
    # Every record the page lists (here all of them are among the day's changes).
    soup = page(
        root.get(f"{PAGES[kind]}/day", query_string={"company": "co000", "date": "2026-10-12"})
    )
    assert set(records_of(soup)) <= {k.lstrip("'") for k in keys}
    link = soup.select_one("a[href*='day.csv']")["href"]
    assert parse_qs(urlsplit(link).query) == {"company": ["co000"], "date": ["2026-10-12"]}
    # The same checks as the page.
    for query, status in (
        ({"company": "co000", "date": "2026-13-01"}, 400),
        ({"company": "nope", "date": "2026-10-12"}, 404),
    ):
        assert root.get(path, query_string=query).status_code == status


def test_day_csv_needs_the_report_grant(world):
    browser = world.browser("nobody")
    response = browser.get(
        "/reports/ddis/day.csv", query_string={"company": "co000", "date": "2026-10-12"}
    )
    assert response.status_code == 403
    assert world.factory.app.test_client().get("/reports/users/day.csv").status_code == 302


def test_the_navigation_names_the_reports_as_their_pages_do(world):
    """One vocabulary: the menu's words for the two reports are their pages' titles."""
    browser = world.browser("root")
    page = BeautifulSoup(browser.get("/reports/users").data, "html.parser")
    nav = {a["href"]: a.get_text(strip=True) for a in page.select("header.topbar a[href]")}
    assert nav["/reports/ddis"] == "DDI counts"
    assert nav["/reports/users"] == "Phone-user counts"
    assert page.h1 is not None and "Phone-user counts" in page.h1.get_text()
