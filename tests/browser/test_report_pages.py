"""The many-company report page in a real browser: a day figure of the ranked table opens the
drill-down in the panel (htmx boosts the plain links the table carries), and the drill-down's
pages turn inside the panel."""

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
    expect(panel.locator("[data-peak-at]")).to_have_text("23:00:00")
    expect(panel.locator("table.day-records tbody tr")).to_have_count(100)
    expect(panel.locator("[data-count]")).to_contain_text("of 120")
    assert page.evaluate("window.__sameDocument === true"), "the day opened a new page"
    assert page.url.endswith("/reports/ddis?month=3&year=2025")  # the address stays

    panel.locator("a[data-pager=next]").click()
    expect(panel.locator("table.day-records tbody tr")).to_have_count(20)
    expect(panel.locator("[data-count]")).to_contain_text("101\N{EN DASH}120 of 120")
    assert page.evaluate("window.__sameDocument === true"), "paging left the page"

    # A company's name opens its calendar as a page of its own.
    table.locator('tr[data-company="acme"] th a').click()
    expect(page.locator("table.calendar")).to_be_visible()
