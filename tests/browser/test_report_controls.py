"""The report page's controls in a real browser (docs/pages.md, "The report's controls"): folded
once a report is shown, so that the ranking starts on the first screen at 1280 px (and high up
at 390 px); a company added or removed in the chooser updates the report in place, with the
focus on the chosen companies, one line announced and the address pushed."""

from __future__ import annotations

from datetime import datetime

import pytest
from playwright.sync_api import Page, expect

from webapp.database import write_transaction
from webapp.models import HistoryInterval

from ..factories import rollup_rebuilt
from .conftest import PASSWORD, wait_for_htmx

pytestmark = pytest.mark.slow  # a real browser

WIDTHS = {"1280": {"width": 1280, "height": 800}, "390": {"width": 390, "height": 844}}
COMPANIES = [("acme", "Acme Telecom"), ("globex", "Globex"), ("initech", "Initech")] + [
    (f"co{n:03d}", f"Company {n}") for n in range(60)
]
REPORT = "/reports/ddis?month=3&year=2025"


def _world(factory) -> None:
    factory.account("root", system_admin=True)
    for company, name in COMPANIES:
        factory.company(company, name)
    with write_transaction() as session:
        session.add_all(
            HistoryInterval(
                kind="ddi",
                company=company,
                key=f"44:2072{i:03d}{n:03d}",
                start_at=datetime(2025, 3, 1 + n % 28),
                end_at=None,
                source="import",
            )
            for i, (company, _) in enumerate(COMPANIES)
            for n in range(1 + i % 7)
        )
        rollup_rebuilt(session)


def _first_row_top(page: Page) -> float:
    row = page.locator("table.matrix tbody tr[data-company]").first
    box = row.bounding_box()
    assert box is not None
    return box["y"] + page.evaluate("window.scrollY")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_ranking_starts_on_the_first_screen(live_server, factory, page: Page, sign_in, width):
    _world(factory)
    page.set_viewport_size(WIDTHS[width])
    sign_in("root")
    page.goto(f"{live_server}{REPORT}")
    controls = page.locator("details.report-controls")
    expect(controls).not_to_have_attribute("open", "")
    expect(controls.locator("summary")).to_contain_text("March 2025 · every company")
    top = _first_row_top(page)
    print(f"first ranking row at {top:.0f} px ({width} px wide)")
    if width == "1280":
        assert top < 800, top
    else:
        # The first company row at 390 px: measured 693 px on this page.
        assert top < 844, top
    # Opened, the controls ask for nothing more than the chooser and the month.
    controls.locator("summary").click()
    expect(page.get_by_label("Add a company")).to_be_visible()
    expect(page.get_by_label("Month", exact=True)).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTHS[width]["width"]


@pytest.mark.parametrize("width", WIDTHS)
def test_add_and_remove_update_the_report_in_place(
    live_server, factory, page: Page, sign_in, width
):
    _world(factory)
    page.set_viewport_size(WIDTHS[width])
    sign_in("root")
    page.goto(f"{live_server}/reports/ddis?company=acme&company=globex&month=3&year=2025")
    wait_for_htmx(page)
    page.evaluate("window.__sameDocument = true")
    page.locator("details.report-controls summary").click()
    field = page.get_by_label("Add a company")
    field.fill("initech")
    option = page.locator('#add_company-suggestions [role="option"][data-value="initech"]')
    expect(option).to_be_visible()
    field.press("ArrowDown")
    field.press("Enter")
    expect(page.locator("#announcer")).to_have_text("Added initech: 3 companies chosen.")
    expect(page.locator("#company-chosen")).to_be_focused()
    expect(page.locator("table.matrix tr[data-totals] th")).to_have_text("All 3 companies")
    expect(page.locator("details.report-controls")).to_have_attribute("open", "")
    assert page.url.endswith(
        "/reports/ddis?company=acme&company=globex&company=initech&month=3&year=2025"
    )
    assert page.evaluate("window.__sameDocument === true"), "the Add loaded a new page"

    page.get_by_role("button", name="Remove globex").click()
    expect(page.locator("#announcer")).to_have_text("Removed globex: 2 companies chosen.")
    expect(page.locator("#company-chosen")).to_be_focused()
    expect(page.locator("table.matrix tr[data-totals] th")).to_have_text("All 2 companies")
    assert page.url.endswith("/reports/ddis?company=acme&company=initech&month=3&year=2025")
    assert page.evaluate("window.__sameDocument === true"), "the Remove loaded a new page"

    # Down to one company: its calendar, in place too.
    page.get_by_role("button", name="Remove acme").click()
    expect(page.locator("#announcer")).to_have_text("Removed acme: 1 company chosen.")
    expect(page.locator("table.calendar")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTHS[width]["width"]


def test_add_and_remove_without_javascript(live_server, factory, browser, sign_in):
    _world(factory)
    context = browser.new_context(java_script_enabled=False, viewport=WIDTHS["1280"])
    page = context.new_page()
    page.goto(f"{live_server}/login")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"{live_server}/reports/ddis?company=acme&month=3&year=2025")
    page.locator("details.report-controls summary").click()
    page.get_by_label("Add a company").fill("GLOBEX")
    page.get_by_role("button", name="Add", exact=True).click()
    expect(page.locator("#flashes")).to_contain_text("Added globex: 2 companies chosen.")
    assert page.url.endswith("/reports/ddis?company=acme&company=globex&month=3&year=2025")
    expect(page.locator("details.report-controls")).to_have_attribute("open", "")
    expect(page.get_by_label("Add a company")).to_be_focused()
    page.get_by_role("button", name="Remove acme").click()
    expect(page.locator("#flashes")).to_contain_text("Removed acme: 1 company chosen.")
    expect(page.locator("table.calendar")).to_be_visible()
    context.close()
