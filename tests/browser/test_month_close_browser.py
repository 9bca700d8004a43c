"""Month close in a real browser: a Billing Call-Summary account closes a month from its report
page after the confirmation; a backfill shows in the changes since the close, which the page
loads after itself (htmx); a System-Admin reopens it, first forgetting the reason."""

from __future__ import annotations

from datetime import datetime

import pytest
from playwright.sync_api import Page, expect

from ..factories import add_history

pytestmark = pytest.mark.slow  # a real browser

REPORT = "/reports/ddis?year=2025&month=10"


@pytest.fixture
def ready(factory):
    factory.company("acme")
    factory.company("globex")
    factory.account("boss", system_admin=True)
    factory.account("billing", billing_summary=True)
    add_history(("ddi", "acme", "44:1", datetime(2025, 10, 1), datetime(2025, 10, 11)))


def test_close_see_changes_reopen(ready, page: Page, live_server, sign_in):
    sign_in("billing")
    page.goto(f"{live_server}{REPORT}")
    state = page.locator("#month-state")
    expect(state.get_by_role("heading", name="Open")).to_be_visible()
    state.get_by_role("link", name="Close this month…").click()
    expect(page.get_by_role("heading", name="Close October 2025?")).to_be_visible()
    page.get_by_role("button", name="Close October 2025").click()
    expect(page.get_by_role("status")).to_contain_text("October 2025 is closed (version 1).")
    expect(state.get_by_role("heading", name="Closed version 1")).to_be_visible()
    expect(state).to_contain_text("by billing")
    expect(page.locator("#no-changes")).to_be_visible()  # loaded after the page
    # ... without taking the focus (the saved-form message keeps it).
    assert page.evaluate("!!document.activeElement.closest('#month-changes')") is False
    expect(state.get_by_role("link", name="Reopen…")).to_have_count(0)  # System-Admin only

    # A backfill into the closed month: the report keeps the closed figures, the change shows.
    add_history(("ddi", "globex", "44:2", datetime(2025, 10, 3), datetime(2025, 10, 5)))
    page.reload()
    table = page.locator("#changes-table")
    expect(table.get_by_role("row", name="globex")).to_contain_text("2025-10-03: 0 → 1")
    expect(page.locator("#month-changes")).to_contain_text("1 company")

    page.context.clear_cookies()  # signed out: the System-Admin signs in
    sign_in("boss")
    page.goto(f"{live_server}{REPORT}")
    page.locator("#month-state").get_by_role("link", name="Reopen…").click()
    expect(page.get_by_role("heading", name="Reopen October 2025?")).to_be_visible()
    page.get_by_role("button", name="Reopen October 2025").click()
    expect(page.locator("#reason-error")).to_contain_text("Say why the month is reopened")
    page.get_by_label("Reason").fill("Globex's CDRs of the 3rd arrived late")
    page.get_by_role("button", name="Reopen October 2025").click()
    expect(page.get_by_role("status")).to_contain_text("October 2025 is open again.")
    state = page.locator("#month-state")
    expect(state.get_by_role("heading", name="Open")).to_be_visible()
    expect(state).to_contain_text("Globex's CDRs of the 3rd arrived late")
    page.get_by_role("link", name="Months", exact=True).click()
    expect(page.locator("#month-2025-10")).to_contain_text("Reopened")
