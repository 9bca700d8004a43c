"""Coming back after an inline (htmx) edit on page 2 of a sorted, filtered list: the list
reopens on that page, with the same filters and sort, the saved row marked; the same from a
number search, and from a bulk move's Cancel. Ticking rows: the tick column, "Tick all on
this page", and the bulk bar that shows once a row is ticked."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from webapp.services.records import crud, kinds

from ..factories import OPERATOR
from .conftest import wait_for_htmx

pytestmark = pytest.mark.slow  # a real browser


def rows(page: Page):
    return page.locator("#rows tbody tr")


def row(page: Page, number: str):
    """The row of the DDI whose number part is `number` (its Number cell: "+44 2071234567")."""
    shown = re.compile(rf"^\+[0-9]+ {number}$")
    return rows(page).filter(has=page.get_by_role("cell", name=shown))


def test_an_htmx_edit_on_page_two_comes_back_to_page_two(live_server, factory, page, sign_in):
    factory.account("root", system_admin=True)
    factory.company("acme")
    factory.company("globex")
    crud.create(
        OPERATOR,
        kinds.DDI,
        [
            {"dialcode": "44", "number": f"2070000{n:03d}", "virt_exten": "1", "company": "acme"}
            for n in range(120)
        ]
        + [{"dialcode": "44", "number": "2079999999", "virt_exten": "1", "company": "globex"}],
    )
    sign_in("root")
    page.goto(f"{live_server}/ddis?company=acme&sort=number&dir=desc")
    wait_for_htmx(page)
    expect(page.locator("#count")).to_contain_text("Showing 1\N{EN DASH}50 of 120")
    page.get_by_role("navigation", name="Pages").get_by_role("link", name="Next").click()
    expect(page.locator("#count")).to_contain_text("Showing 51\N{EN DASH}100 of 120")
    expect(page).to_have_url(re.compile(r"after=2070000070"))
    page_two = page.url

    row(page, "2070000060").get_by_role("link", name="Edit").click()
    panel = page.locator("#panel")
    expect(panel.get_by_role("heading")).to_have_text("Edit DDI +44 2070000060")
    panel.get_by_label("Extension").fill("4242")
    panel.get_by_role("button", name="Save").click()

    expect(page.get_by_role("status")).to_have_text("Saved DDI +44 2070000060.")
    expect(page).to_have_url(page_two)
    expect(page.locator("#count")).to_contain_text("Showing 51\N{EN DASH}100 of 120")
    expect(page.locator("#filter-company")).to_have_value("acme")
    # Cells: the tick, number, extension, company, actions.
    expect(rows(page).first.get_by_role("cell").nth(1)).to_have_text("+44 2070000069")
    changed = page.locator("#rows tbody tr.changed")
    expect(changed).to_have_count(1)
    expect(changed).to_have_attribute("aria-current", "true")
    expect(changed.get_by_role("cell").nth(1)).to_have_text("+44 2070000060")
    expect(changed.get_by_role("cell").nth(2)).to_have_text("4242")
    expect(changed).to_contain_text("Just saved")


@pytest.fixture
def searched(live_server, factory, sign_in):
    """acme's 44 20 7000 0000-0059 and one of globex; signed in as a System-Admin."""
    factory.account("root", system_admin=True)
    factory.company("acme")
    factory.company("globex")
    crud.create(
        OPERATOR,
        kinds.DDI,
        [
            {"dialcode": "44", "number": f"20700000{n:02d}", "virt_exten": "1", "company": "acme"}
            for n in range(60)
        ]
        + [{"dialcode": "44", "number": "2079999999", "virt_exten": "1", "company": "globex"}],
    )
    sign_in("root")


def test_an_htmx_edit_from_a_number_search_comes_back_to_it(live_server, searched, page):
    """/ddis, type a number search (the list filters in place), Edit, Save: the same search,
    the row marked, no "elsewhere" note."""
    page.goto(f"{live_server}/ddis")
    wait_for_htmx(page)
    page.get_by_label("Number").fill("44207000000")
    expect(page.locator("#count")).to_contain_text("of 10")
    expect(page).to_have_url(re.compile(r"q=44207000000"))

    row(page, "2070000004").get_by_role("link", name="Edit").click()
    panel = page.locator("#panel")
    panel.get_by_label("Extension").fill("4242")
    panel.get_by_role("button", name="Save").click()

    expect(page.get_by_role("status")).to_have_text("Saved DDI +44 2070000004.")
    # The same list (its address without the empty fields the filter form sent).
    expect(page).to_have_url(f"{live_server}/ddis?q=44207000000")
    expect(page.get_by_label("Number")).to_have_value("44207000000")
    expect(page.locator("#count")).to_contain_text("of 10")
    changed = page.locator("#rows tbody tr.changed")
    expect(changed.get_by_role("cell").nth(1)).to_have_text("+44 2070000004")
    expect(changed.get_by_role("cell").nth(2)).to_have_text("4242")
    expect(page.locator(".changed-elsewhere")).to_have_count(0)


def test_a_bulk_moves_cancel_comes_back_to_the_filtered_list(live_server, searched, page):
    listed = f"{live_server}/ddis?company=acme&q=44207000001&sort=number&dir=desc"
    page.goto(listed)
    wait_for_htmx(page)
    expect(page.locator("#count")).to_contain_text("of 10")
    page.get_by_label("Tick +44 2070000012").check()
    page.get_by_label("Move them to").fill("globex")
    page.get_by_role("button", name="Continue…").click()
    expect(page.get_by_role("heading", name="Move 1 DDI to globex?")).to_be_visible()
    page.get_by_role("link", name="Cancel").click()
    expect(page).to_have_url(listed)
    expect(page.get_by_label("Number")).to_have_value("44207000001")
    expect(page.locator("#count")).to_contain_text("of 10")

    # Nothing ticked: the list itself says so, with its filters.
    page.get_by_label("Move them to").fill("globex")
    page.get_by_role("button", name="Continue…").click()
    expect(page.locator("#bulk-error")).to_have_text("Tick the DDIs to change first.")
    expect(page.get_by_role("heading", level=1)).to_have_text("DDIs")
    expect(page.get_by_label("Number")).to_have_value("44207000001")
    expect(page.locator("#count")).to_contain_text("of 10")


def test_tick_all_and_the_bulk_bar_on_tick(live_server, searched, page):
    page.goto(f"{live_server}/ddis")
    wait_for_htmx(page)
    bar = page.locator("form#bulk")
    # Unfiltered and nothing ticked: no bar, so no "all 61 … delete them".
    expect(bar).to_be_hidden()
    expect(page.get_by_text("all 61 matching")).to_have_count(0)

    # The first Tab stop of a row is its tick.
    first = rows(page).first
    first.get_by_role("checkbox").focus()
    page.keyboard.press("Space")
    expect(bar).to_be_visible()
    expect(bar.get_by_role("button", name="Continue…")).to_be_visible()
    page.keyboard.press("Tab")
    expect(first.get_by_role("link", name="2070000000")).to_be_focused()

    tick_all = page.get_by_label("Tick all on this page")
    expect(tick_all).to_be_visible()
    expect(tick_all).not_to_be_checked()
    assert tick_all.evaluate("box => box.indeterminate")
    tick_all.check()
    expect(page.locator("#rows input.tick:checked")).to_have_count(50)
    page.get_by_label("Tick +44 2070000003").uncheck()
    assert tick_all.evaluate("box => box.indeterminate")
    tick_all.click()  # mixed → all ticked, as a native mixed checkbox does
    expect(page.locator("#rows input.tick:checked")).to_have_count(50)
    expect(tick_all).to_be_checked()
    tick_all.click()
    expect(page.locator("#rows input.tick:checked")).to_have_count(0)
    expect(bar).to_be_hidden()

    # A filtered list offers all N matching at once.
    page.goto(f"{live_server}/ddis?company=globex")
    wait_for_htmx(page)
    expect(bar).to_be_visible()
    expect(bar.get_by_label("all 1 matching the filters")).to_be_visible()


def test_without_javascript_a_tick_shows_the_bulk_bar(live_server, searched, browser):
    """No script: no "Tick all" box; ticking a row unfolds the bar (CSS :has), whose form
    posts the ticked row, and Cancel comes back to the list as it was shown."""
    context = browser.new_context(java_script_enabled=False)
    plain = context.new_page()
    plain.goto(f"{live_server}/login")
    plain.get_by_label("Username").fill("root")
    plain.get_by_label("Password").fill("correct horse battery")
    plain.get_by_role("button", name="Sign in").click()
    listed = f"{live_server}/ddis?sort=number&dir=desc"
    plain.goto(listed)
    bar = plain.locator("form#bulk")
    expect(bar).to_be_hidden()
    expect(plain.get_by_label("Tick all on this page")).to_be_hidden()
    plain.get_by_label("Tick +44 2070000050").check()
    expect(bar).to_be_visible()
    bar.get_by_label("Move them to").fill("globex")
    bar.get_by_role("button", name="Continue…").click()
    expect(plain.get_by_role("heading", name="Move 1 DDI to globex?")).to_be_visible()
    plain.get_by_role("link", name="Cancel").click()
    expect(plain).to_have_url(listed)
    context.close()
