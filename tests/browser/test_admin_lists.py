"""The administration lists in a real browser: typing a search narrows the companies
and the accounts in place (htmx) and keeps the sort order, paging swaps the rows, each company
links to its page with its chart, and the Enable button brings a disabled account back. The
companies sort by their counts from their headers; the audit log's actor field suggests only
accounts the reader may know of, and its action filter reloads the entries.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from webapp.services import companies
from webapp.services.identity import accounts
from webapp.services.records import crud, kinds

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

    page.get_by_role("link", name="Name (sort ascending)", exact=True).click()
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


def test_companies_sort_by_ddis_from_the_header_and_page_in_place(
    live_server, factory, page, sign_in
):
    factory.account("root", **ADMIN)
    for i in range(55):
        companies.create(OPERATOR, f"co{i:02d}", f"Firm {i:02d}")
    # co07 holds the most DDIs, then co03; the rest none (ties by identifier).
    for company, size in (("co07", 3), ("co03", 2)):
        crud.create(
            OPERATOR,
            kinds.DDI,
            [
                {
                    "dialcode": "44",
                    "number": f"{company[2:]}{n}",
                    "virt_exten": "1",
                    "company": company,
                }
                for n in range(size)
            ],
        )
    sign_in("root")
    page.goto(f"{live_server}/admin/companies")
    mark_document(page)
    header = page.locator("#rows thead th").filter(has_text="DDIs")
    expect(header).not_to_have_attribute("aria-sort", re.compile("."))
    header.get_by_role("link", name="DDIs (sort ascending)").click()
    expect(page).to_have_url(re.compile(r"sort=ddis&dir=asc"))
    expect(header).to_have_attribute("aria-sort", "ascending")
    # The 53 companies without DDIs first, by identifier (co03 and co07 are not among them).
    expect(rows(page).last).to_contain_text("co51")
    header.get_by_role("link", name="DDIs (sort descending)").click()
    expect(header).to_have_attribute("aria-sort", "descending")
    expect(rows(page).first).to_contain_text("co07")
    expect(rows(page).nth(1)).to_contain_text("co03")
    expect(rows(page).nth(2)).to_contain_text("co54")
    # Looks like a link: underlined, with its mark.
    link = header.locator("a.sort")
    assert "underline" in link.evaluate("a => getComputedStyle(a).textDecorationLine")
    expect(link.locator(".sort-mark")).to_have_text("\N{BLACK DOWN-POINTING TRIANGLE}")
    page.get_by_role("link", name="Next \N{SINGLE RIGHT-POINTING ANGLE QUOTATION MARK}").click()
    expect(rows(page)).to_have_count(5)
    expect(rows(page).last).to_contain_text("co00")
    expect(page).to_have_url(re.compile(r"sort=ddis&dir=desc&page=2|page=2.*sort=ddis"))
    assert same_document(page), "sorting or paging reloaded the page instead of swapping rows"


def test_audit_actor_suggestions_and_action_filter(live_server, factory, page, sign_in):
    factory.company("acme")
    factory.company("globex")
    factory.account("root", **ADMIN)
    factory.account("ann", admin_of=["acme"])
    factory.account("andy", admin_of=["acme"])
    factory.account("anton", admin_of=["globex"])  # of a company ann cannot see
    crud.create(
        OPERATOR, kinds.DDI, {"dialcode": "44", "number": "1", "virt_exten": "1", "company": "acme"}
    )
    crud.delete_rows(OPERATOR, kinds.DDI, {"dialcode": "44", "number": "1", "company": "acme"})
    sign_in("ann")
    page.goto(f"{live_server}/audit")
    wait_for_htmx(page)
    actor = page.get_by_role("combobox", name="Actor")
    actor.press_sequentially("an", delay=50)
    expect(page.locator("#actor-suggestions [role=option]")).to_have_text(["andy", "ann"])
    actor.press("ArrowDown")
    actor.press("ArrowDown")
    actor.press("Enter")
    expect(actor).to_have_value("ann")
    expect(page).to_have_url(re.compile(r"actor=ann"))
    expect(page.locator("#audit-rows .count")).to_contain_text("0 entries")
    actor.fill("")
    actor.dispatch_event("input")
    # Creating acme, the DDI's creation and its deletion.
    expect(page.locator("#audit-rows tbody td[data-label=Action]")).to_have_count(3)
    page.get_by_label("Action").select_option(label="DDI deleted")
    expect(page).to_have_url(re.compile(r"action=ddi.delete"))
    expect(page.locator("#audit-rows tbody td[data-label=Action]")).to_have_text(["DDI deleted"])
    expect(page.locator("#audit-rows .changes-deleted .change-kind")).to_have_text("Deleted")


@pytest.mark.parametrize("width", [1280, 390])
def test_the_audit_filters_line_up(live_server, factory, page, sign_in, width):
    """The fields' labels and boxes share their row's top whatever hint hangs under one (the
    actor's; the target's forms, folded under "Forms it takes"); at 1280 px Actor to To make
    one row."""
    factory.account("root", **ADMIN)
    page.set_viewport_size({"width": width, "height": 900})
    sign_in("root")
    page.goto(f"{live_server}/audit")
    form = page.get_by_role("search", name="Filter the audit log")
    names = ["Actor", "Action", "Target", "Company", "From", "To"]
    tops = {n: round(form.get_by_label(n, exact=True).bounding_box()["y"]) for n in names}
    if width == 1280:
        assert len(set(tops.values())) == 1, tops
    else:  # two a row: Actor and Action, Target alone, Company and From, To
        assert tops["Actor"] == tops["Action"] and tops["Company"] == tops["From"], tops
    forms = form.locator("#target-hint")
    expect(forms).to_be_hidden()
    form.get_by_text("Forms it takes").click()
    expect(forms).to_be_visible()
    expect(forms).to_contain_text("44:2071234567")
    assert round(form.get_by_label("Target", exact=True).bounding_box()["y"]) == tops["Target"]
