"""Focus after htmx swaps (static/app.js): into the region that changed, to the field with the
error after a failed form, to the confirmation after a save; never away from a filter field the
user is typing in, whose result count is announced politely instead."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from .conftest import wait_for_htmx

# A real browser; what these judge is where static/app.js puts the focus after a swap, the
# same on both databases, so once per `make test` (as test_axe.py).
pytestmark = [pytest.mark.slow, pytest.mark.database_independent]

ADMIN = {"system_admin": True}


def expect_focus_in(page: Page, selector: str) -> None:
    page.wait_for_function(
        "s => !!document.activeElement && !!document.activeElement.closest(s)", arg=selector
    )


@pytest.fixture
def ddis(factory):
    factory.account("root", **ADMIN)
    factory.company("acme")
    for n in range(1, 6):
        factory.ddi("44", f"207100000{n}", "acme", f"10{n}")
    for n in range(1, 4):
        factory.ddi("44", f"161200000{n}", "acme", f"20{n}")


def test_inline_form_error_then_save_move_focus(live_server, ddis, page, sign_in):
    sign_in("root")
    row = page.locator("#rows tbody tr").filter(has=page.get_by_role("cell", name="+44 2071000002"))
    row.get_by_role("link", name="Edit").click()
    panel = page.locator("#panel")
    expect(panel.get_by_role("heading")).to_have_text("Edit DDI +44 2071000002")
    expect(panel.get_by_label("Extension")).to_be_focused()

    panel.get_by_label("Extension").fill("12a")
    panel.get_by_label("Company").focus()  # focus away from the field with the coming error
    panel.get_by_role("button", name="Save").click()
    expect(panel.locator("#virt_exten-error")).to_have_text("must be 1 to 10 digits")
    expect(panel.get_by_label("Extension")).to_be_focused()

    panel.get_by_label("Extension").fill("345")
    panel.get_by_role("button", name="Save").click()
    status = page.get_by_role("status")
    expect(status).to_have_text("Saved DDI +44 2071000002.")
    expect(status).to_be_focused()


def test_create_form_error_focuses_the_first_field_in_error(live_server, ddis, page, sign_in):
    """The form's first field has autofocus; after a failed save focus goes to the field with
    the error instead, inside the swapped form."""
    sign_in("root")
    page.get_by_role("link", name="New DDI").click()
    panel = page.locator("#panel")
    expect(panel.get_by_label("Dialcode")).to_be_focused()
    panel.get_by_label("Dialcode").fill("44")
    panel.get_by_label("Number").fill("12ab")
    panel.get_by_label("Extension").fill("100")
    panel.get_by_role("combobox", name="Company").fill("acme")
    panel.get_by_role("button", name="Create").click()
    expect(panel.get_by_label("Number")).to_have_attribute("aria-invalid", "true")
    expect(panel.get_by_label("Number")).to_be_focused()


def test_typing_in_the_filter_keeps_focus_and_announces_the_count(live_server, ddis, page, sign_in):
    sign_in("root")
    number = page.get_by_label("Number")
    number.press_sequentially("+44 1612", delay=50)  # the number search, as people type it
    expect(page.locator("#rows tbody tr")).to_have_count(3)
    expect(number).to_be_focused()
    expect(page.locator("#announcer")).to_have_text("Showing 1\N{EN DASH}3 of 3")
    number.press_sequentially("0", delay=50)  # still typing: still in the field
    expect(page.locator("#announcer")).to_have_text("Showing 1\N{EN DASH}3 of 3")
    expect(number).to_be_focused()

    company = page.get_by_role("combobox", name="Company")
    company.fill("acme")  # the company picker: type, then choose a suggestion by keyboard
    expect(page.get_by_role("listbox").get_by_role("option")).to_have_count(1)
    company.press("ArrowDown")
    company.press("Enter")
    expect(page).to_have_url(re.compile(r"company=acme"))
    expect(company).to_be_focused()


def test_sorting_moves_focus_into_the_rows(live_server, ddis, page, sign_in):
    """The sort link is replaced with the rows it sorted: focus goes to the new rows, not the
    top of the page."""
    sign_in("root")
    page.locator("#rows thead").get_by_role("link", name="Number").click()
    expect(page).to_have_url(re.compile(r"sort=dialcode"))  # the Number column: dialcode, number
    expect_focus_in(page, "#rows")
    expect(page.locator("#announcer")).to_have_text("Showing 1\N{EN DASH}8 of 8")


def test_audit_filter_keeps_focus_while_typing(live_server, ddis, page, sign_in):
    sign_in("root")
    page.goto(f"{live_server}/audit")
    wait_for_htmx(page)
    target = page.get_by_label("Target")
    # A number as people write it names one DDI: its one entry (its creation).
    target.press_sequentially("+44 1612 000 001", delay=50)
    expect(page.locator("#audit-rows tbody td[data-label=Target]")).to_have_text(["+44 1612000001"])
    expect(target).to_be_focused()
    expect(page.locator("#announcer")).to_contain_text("1 entry")
