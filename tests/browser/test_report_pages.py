"""The report pages in a real browser: a day figure of the ranked table, or a day of a
company's calendar, opens the drill-down in the panel (htmx; the table's plain links boosted),
its address pushed; its lists page inside the panel; focus goes to the summary and one short
line is read out; Back and Forward show a page that agrees with itself."""

from __future__ import annotations

from datetime import datetime

import pytest
from playwright.sync_api import Page, expect

from webapp.database import write_transaction
from webapp.models import HistoryInterval

from ..factories import rollup_rebuilt
from .conftest import wait_for_htmx

pytestmark = pytest.mark.slow  # a real browser


def test_matrix_day_opens_the_paged_drill_down_in_the_panel(
    live_server, factory, page: Page, sign_in
):
    factory.account("root", system_admin=True)
    for company, name in (("acme", "Acme Telecom"), ("globex", "Globex"), ("initech", "Initech")):
        factory.company(company, name)
    with write_transaction() as session:
        session.add_all(
            HistoryInterval(
                kind="ddi",
                company="globex",
                key=f"44:20720{n:05d}",
                start_at=datetime(2025, 3, 11, n % 24),
                end_at=None,
                source="import",
            )
            for n in range(120)
        )
        session.add(
            HistoryInterval(
                kind="ddi",
                company="acme",
                key="44:2071000001",
                start_at=datetime(2025, 3, 1),
                end_at=None,
                source="import",
            )
        )
        rollup_rebuilt(session)
    sign_in("root")

    page.goto(f"{live_server}/reports/ddis?month=3&year=2025")
    table = page.locator("table.matrix")
    expect(table.locator("tbody tr[data-totals] th")).to_have_text("All 3 companies")
    expect(table.locator("tbody tr[data-company]")).to_have_count(3)
    expect(table.locator("tbody tr[data-company]").first).to_have_attribute(
        "data-company", "globex"
    )
    expect(page.locator("[data-timezone]").first).to_contain_text("UTC")
    wait_for_htmx(page)
    page.evaluate("window.__sameDocument = true")

    table.locator('tr[data-company="globex"] td[data-date="2025-03-11"] a').click()
    panel = page.locator("#panel")
    expect(panel.locator("[data-peak]")).to_have_text("120")
    expect(panel.locator("[data-added]")).to_have_text("120")
    expect(panel.locator("[data-peak-at]")).to_have_text("23:00:00")
    expect(panel.locator("table.day-changes tbody tr")).to_have_count(100)
    expect(panel.locator("#day-changes .day-count")).to_contain_text("of 120")
    assert page.evaluate("window.__sameDocument === true"), "the day opened a new page"
    expect(page).to_have_url(f"{live_server}/reports/ddis/day?company=globex&date=2025-03-11")

    panel.locator("a[data-pager=changes-next]").click()
    expect(panel.locator("table.day-changes tbody tr")).to_have_count(20)
    expect(panel.locator("#day-changes .day-count")).to_contain_text("101\N{EN DASH}120 of 120")
    expect(page.locator("#day-changes")).to_be_focused()
    assert page.evaluate("window.__sameDocument === true"), "paging left the page"

    # A company's name opens its calendar as a page of its own.
    table.locator('tr[data-company="acme"] th a').click()
    expect(page.locator("table.calendar")).to_be_visible()


def test_calendar_day_opens_pushes_focuses_announces_and_comes_back(
    live_server, factory, page: Page, sign_in
):
    factory.account("root", system_admin=True)
    factory.company("acme", "Acme Telecom")
    with write_transaction() as session:
        session.add_all(
            [
                HistoryInterval(
                    kind="ddi",
                    company="acme",
                    key=f"44:20710{n:05d}",
                    start_at=datetime(2025, 3, 1),
                    end_at=datetime(2025, 3, 12, 15) if n < 2 else None,
                    source="import",
                )
                for n in range(5)
            ]
            + [
                HistoryInterval(
                    kind="ddi",
                    company="acme",
                    key="44:2071099999",
                    start_at=datetime(2025, 3, 12, 9),
                    end_at=None,
                    source="import",
                )
            ]
        )
        rollup_rebuilt(session)
    sign_in("root")
    report = f"{live_server}/reports/ddis?company=acme&year=2025&month=3"
    page.goto(report)
    wait_for_htmx(page)
    page.evaluate("window.__sameDocument = true")
    assert page.locator("#panel").get_attribute("aria-live") is None

    page.locator("table.calendar td[data-date='2025-03-12'] a.day").click()
    panel = page.locator("#panel")
    expect(panel.locator("[data-peak]")).to_have_text("6")
    day_url = f"{live_server}/reports/ddis/day?company=acme&date=2025-03-12"
    expect(page).to_have_url(day_url)
    assert page.evaluate("window.__sameDocument === true"), "the day opened a new page"
    expect(page.locator("#day-summary")).to_be_focused()
    expect(page.locator("#announcer")).to_have_text("12 March: 6 at the peak, 1 added, 2 removed")
    expect(panel.locator("table.day-changes tbody tr")).to_have_count(3)
    # A DDI links to its page (a System-Admin may open it).
    expect(panel.get_by_role("link", name="+44 2071099999").first).to_have_attribute(
        "href", "/ddis/44/2071099999"
    )

    # The next day, in the same month, in the panel too.
    panel.locator("a[data-day-link=next]").click()
    expect(page).to_have_url(f"{live_server}/reports/ddis/day?company=acme&date=2025-03-13")
    expect(panel.locator("h2")).to_contain_text("13 March 2025")
    expect(page.locator("#day-summary")).to_be_focused()

    # Back: the day before, then the month's calendar, each a page that agrees with itself.
    page.go_back()
    expect(page).to_have_url(day_url)
    expect(page.locator("#panel h2")).to_contain_text("12 March 2025")
    expect(page.locator("h1")).to_have_count(1)
    page.go_back()
    expect(page).to_have_url(report)
    expect(page.locator("h1")).to_contain_text("March 2025")
    expect(page.locator("#report-month")).to_have_value("3")
    expect(page.locator("#panel table")).to_have_count(0)
    page.go_forward()
    expect(page).to_have_url(day_url)
    expect(page.locator("#panel [data-peak]")).to_have_text("6")
    expect(page.locator("h1")).to_have_count(1)

    # Close: the month's calendar.
    page.locator("a[data-close]").click()
    expect(page).to_have_url(report)
    expect(page.locator("table.calendar")).to_be_visible()
    expect(page.locator("#report-month")).to_have_value("3")
