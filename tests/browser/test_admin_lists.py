"""The administration lists in a real browser: typing a search narrows the companies
and the accounts in place (htmx) and keeps the sort order, paging swaps the rows, each company
links to its page with its chart, and the Enable button brings a disabled account back.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from webapp.services import companies
from webapp.services.identity import accounts

from ..factories import OPERATOR
from .conftest import wait_for_htmx

pytestmark = pytest.mark.slow  # a real browser

ADMIN = {"system_admin": True}


def rows(page: Page):
    return page.locator("#rows tbody tr")


def mark_document(page: Page) -> None:
    """Tag the loaded document: the tag survives an htmx swap but not a page load."""
    wait_for_htmx(page)
    page.evaluate("window.__sameDocument = true")


def same_document(page: Page) -> bool:
    return page.evaluate("window.__sameDocument === true")


def test_companies_search_sort_and_page_in_place(live_server, factory, page, sign_in):
    factory.account("root", **ADMIN)
    for i in range(60):
        companies.create(OPERATOR, f"co{i:02d}", f"Firm {59 - i:02d}")
    sign_in("root")
    page.goto(f"{live_server}/admin/companies")
    expect(rows(page)).to_have_count(50)
    mark_document(page)

    page.get_by_role("link", name="Name", exact=True).click()
    expect(page).to_have_url(re.compile(r"sort=name"))
    expect(rows(page).first).to_contain_text("Firm 00")
    page.get_by_label("Identifier or name contains").press_sequentially("FIRM 1")
    expect(rows(page)).to_have_count(10)
    expect(rows(page).first).to_contain_text("Firm 10")  # still by name
    expect(page).to_have_url(re.compile(r"q=FIRM"))
    page.get_by_label("Identifier or name contains").fill("")
    expect(rows(page)).to_have_count(50)
    page.get_by_role("link", name="Next \N{SINGLE RIGHT-POINTING ANGLE QUOTATION MARK}").click()
    expect(rows(page)).to_have_count(10)
    assert same_document(page), "the list reloaded the page instead of swapping rows"

    page.get_by_role("link", name="co00", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Firm 59")
    expect(page.locator("svg#chart-ddi")).to_be_visible()
    expect(page.locator("#month-totals tbody tr")).to_have_count(12)


def test_accounts_search_and_enable(live_server, factory, page, sign_in):
    factory.account("root", **ADMIN)
    factory.account("alice")
    factory.account("bob")
    accounts.disable(OPERATOR, "bob")
    sign_in("root")
    page.goto(f"{live_server}/admin/accounts")
    expect(rows(page)).to_have_count(3)
    mark_document(page)
    page.get_by_label("Username contains").press_sequentially("bo")
    expect(rows(page)).to_have_count(1)
    assert same_document(page)
    page.get_by_role("button", name="Enable bob").click()
    expect(page.get_by_text("Account bob enabled")).to_be_visible()
    expect(page.locator("#account-bob")).to_contain_text("active")
    expect(page.get_by_role("button", name="Enable bob")).to_have_count(0)
