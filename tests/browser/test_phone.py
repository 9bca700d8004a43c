"""Phone width (390 by 844 px) in a real browser: the navigation is a one-row menu button that opens
with or without JavaScript, the company picker's suggestions show whole names, and the company
page's tables, a day's drill-down and the API reference's tables fit the screen instead of
scrolling sideways."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Browser, Page, expect

from webapp.database import write_transaction
from webapp.models import HistoryInterval

from ..factories import rollup_rebuilt
from .conftest import PASSWORD, VIEWPORT, wait_for_htmx

# A real browser; what these judge is the pages' layout at phone width (markup, style and
# static/app.js), the same on both databases, so once per `make test` (as test_axe.py).
pytestmark = [pytest.mark.slow, pytest.mark.database_independent]

PHONE = {"width": 390, "height": 844}
LONG_NAME = "Acme Telecommunications International Holdings Ltd"
NAV_ROW = 48  # px: the closed menu is one row


@pytest.fixture
def ready(factory):
    """A System-Admin, a company with a long name and DDIs whose history spans days, so the
    company page has its tables and today's drill-down a DDI from the day before."""
    factory.account("root", system_admin=True)
    factory.company("acme", LONG_NAME)
    factory.company("globex", "Globex")
    factory.ddi("44", "2071000001", "acme")
    factory.user("alice", "acme")
    yesterday = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=1)
    with write_transaction() as session:
        session.add(
            HistoryInterval(
                kind="ddi",
                company="acme",
                key="44:2071000002",
                start_at=yesterday,
                end_at=None,
                source="import",
            )
        )
        rollup_rebuilt(session)


def nav_height(page: Page) -> float:
    return page.evaluate("document.querySelector('header.topbar').getBoundingClientRect().height")


def no_sideways_scroll(page: Page, table: str) -> None:
    """Neither the page nor the table is wider than the screen: no column is cut off."""
    expect(page.locator(table)).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    widths = page.evaluate(
        """(selector) => {
            const table = document.querySelector(selector);
            const wrap = table.closest('.table-wrap') || table;
            return [table.scrollWidth, table.clientWidth, wrap.scrollWidth, wrap.clientWidth];
        }""",
        table,
    )
    table_scroll, table_client, wrap_scroll, wrap_client = widths
    assert table_scroll <= table_client, f"{table} scrolls sideways: {widths}"
    assert wrap_scroll <= wrap_client, f"{table}'s wrapper scrolls sideways: {widths}"


def test_the_menu_is_one_row_on_a_phone_and_opens(ready, live_server, page: Page, sign_in):
    page.set_viewport_size(PHONE)
    sign_in("root")
    nav = page.get_by_role("navigation", name="Main")
    menu = page.locator("details.menu > summary")
    expect(menu).to_be_visible()
    expect(nav.get_by_role("link", name="Months")).to_be_hidden()
    assert nav_height(page) <= NAV_ROW

    menu.click()
    expect(nav.get_by_role("link", name="Months")).to_be_visible()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    nav.get_by_role("link", name="Months").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Months")
    expect(page.locator("details.menu")).not_to_have_attribute("open", "")  # closed again
    assert nav_height(page) <= NAV_ROW

    # At desktop width the links show without the button; static/menu.js opens the menu too,
    # for a browser whose CSS cannot show a closed menu's content.
    page.set_viewport_size(VIEWPORT)
    expect(menu).to_be_hidden()
    expect(page.locator("details.menu")).to_have_attribute("open", "")
    expect(nav.get_by_role("link", name="Companies")).to_be_visible()
    nav.get_by_role("link", name="Companies").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Companies")
    expect(page.locator("details.menu")).to_have_attribute("open", "")


def test_the_menu_works_without_javascript(ready, live_server, browser: Browser):
    context = browser.new_context(java_script_enabled=False, viewport=PHONE, locale="en-GB")
    plain = context.new_page()
    plain.goto(f"{live_server}/login")
    plain.get_by_label("Username").fill("root")
    plain.get_by_label("Password").fill(PASSWORD)
    plain.get_by_role("button", name="Sign in").click()
    expect(plain.get_by_text("Signed in as root.")).to_be_visible()
    assert nav_height(plain) <= NAV_ROW

    nav = plain.get_by_role("navigation", name="Main")
    plain.locator("details.menu > summary").click()
    nav.get_by_role("link", name="Audit").click()
    expect(plain.get_by_role("heading", level=1)).to_contain_text("Audit")
    # At desktop width the closed menu's links show anyway (CSS alone, no script to open it).
    plain.set_viewport_size(VIEWPORT)
    expect(plain.locator("details.menu > summary")).to_be_hidden()
    expect(plain.locator("details.menu")).not_to_have_attribute("open", "")
    nav.get_by_role("link", name="Months").click()
    expect(plain.get_by_role("heading", level=1)).to_contain_text("Months")
    plain.set_viewport_size(PHONE)

    plain.locator("details.menu > summary").click()
    plain.get_by_role("button", name="Sign out").click()
    expect(plain.get_by_role("heading", name="Sign in")).to_be_visible()
    context.close()


def test_picker_suggestions_show_whole_names(ready, live_server, page: Page, sign_in):
    page.set_viewport_size(PHONE)
    sign_in("root")
    wait_for_htmx(page)
    page.get_by_role("combobox", name="Company").fill("acm")
    option = page.get_by_role("listbox").get_by_role("option")  # not the State filter's
    expect(option).to_have_count(1)
    expect(option).to_contain_text(LONG_NAME)
    sizes = option.evaluate("(el) => [el.scrollWidth, el.clientWidth]")
    assert sizes[0] <= sizes[1], f"the suggestion is cut: {sizes}"
    # The whole name is inside the list, on screen.
    name_box = option.locator(".picker-name").bounding_box()
    list_box = page.get_by_role("listbox").bounding_box()
    assert name_box and list_box
    assert name_box["x"] + name_box["width"] <= list_box["x"] + list_box["width"] + 0.5
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_company_page_tables_fit_a_phone(ready, live_server, page: Page, sign_in):
    page.set_viewport_size(PHONE)
    sign_in("root")
    page.goto(f"{live_server}/companies/acme")
    no_sideways_scroll(page, "#month-totals")
    no_sideways_scroll(page, "#month-days")
    # Each month's figures stay labelled once the header row is out of sight.
    this_month = page.locator("#month-totals tbody tr").last
    expect(
        this_month.get_by_role("cell", name=re.compile(r"^Billable DDI-days \d"))
    ).to_be_visible()
    expect(
        this_month.get_by_role("cell", name=re.compile(r"^Billable user-days \d"))
    ).to_be_visible()


def test_a_day_drill_down_fits_a_phone(ready, live_server, page: Page, sign_in):
    page.set_viewport_size(PHONE)
    sign_in("root")
    today = datetime.now(UTC).date().isoformat()
    page.goto(f"{live_server}/reports/ddis/day?company=acme&date={today}")
    # Begun yesterday and still open: carried over, no change today, active all day.
    expect(page.locator("[data-at-start]")).to_have_text("1")
    expect(page.locator("table.day-records tbody tr")).to_have_count(1)
    no_sideways_scroll(page, "table.day-records")
    earlier = page.locator("table.day-records tbody tr[data-key='44:2071000002']")
    expect(earlier.get_by_role("cell", name="DDI +44 2071000002")).to_be_visible()
    expect(earlier.get_by_role("cell", name="Until still active")).to_be_visible()

    # The same drill-down opened in the calendar's panel.
    page.goto(f"{live_server}/reports/ddis?company=acme")
    wait_for_htmx(page)
    page.locator(f"table.calendar td[data-date='{today}'] a.day").click()
    expect(page.locator("#panel table.day-records tbody tr")).to_have_count(1)
    no_sideways_scroll(page, "#panel table.day-records")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_the_api_reference_tables_fit_a_phone(live_server, page: Page):
    page.set_viewport_size(PHONE)
    page.goto(f"{live_server}/rest/docs")
    expect(page.locator("table.api-members").first).to_be_visible()
    cut = page.evaluate(
        """() => [...document.querySelectorAll('.table-wrap')]
            .filter((wrap) => wrap.scrollWidth > wrap.clientWidth)
            .map((wrap) => wrap.getAttribute('aria-label'))"""
    )
    assert cut == [], f"tables scrolling sideways: {cut}"
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_long_names_wrap_instead_of_widening_a_page(ready, live_server, factory, page, sign_in):
    """An e-mail address as a username, a long company id: the accounts list, the account's
    grants form and a day's drill-down wrap them inside the screen."""
    long_id = "international-telecommunications-holdings"
    long_user = "firstname.lastname.longer@example-company.com"
    factory.company(long_id, "International Telecommunications Holdings Incorporated")
    factory.account(long_user, admin_of=["acme", long_id])
    factory.user(long_user, "acme")
    page.set_viewport_size(PHONE)
    sign_in("root")
    today = datetime.now(UTC).date().isoformat()
    for path in (
        "/admin/accounts",
        f"/admin/accounts/{long_user}/grants",
        f"/reports/users/day?company=acme&date={today}",
    ):
        page.goto(f"{live_server}{path}")
        expect(page.get_by_role("heading", level=1)).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], path
        cut = page.evaluate(
            """() => [...document.querySelectorAll('.table-wrap')]
                .filter((wrap) => wrap.scrollWidth > wrap.clientWidth).length"""
        )
        assert cut == 0, f"{path}: a table scrolls sideways"


@pytest.mark.parametrize("plural", ["ddis", "users"])
def test_tick_all_is_in_sight_on_a_phone(ready, live_server, factory, page, sign_in, plural):
    """The stacked table's header is out of sight; its "Tick all on this page" box is not: it
    ticks every row of the page and shows the bulk bar."""
    factory.ddi("44", "2071000003", "acme")
    factory.user("bob", "acme")
    page.set_viewport_size(PHONE)
    sign_in("root")
    page.goto(f"{live_server}/{plural}")
    wait_for_htmx(page)
    bar = page.locator("form#bulk")
    expect(bar).to_be_hidden()
    tick_all = page.get_by_label("Tick all on this page")
    expect(tick_all).to_be_visible()
    box = tick_all.bounding_box()
    assert box is not None and 0 <= box["x"] < PHONE["width"], box
    tick_all.check()
    ticks = page.locator("#rows tbody input.tick")
    expect(ticks).to_have_count(2)
    expect(page.locator("#rows tbody input.tick:checked")).to_have_count(2)
    expect(bar).to_be_visible()
    page.get_by_label(re.compile(r"^Tick (\+44 2071000001|acme/alice)$")).uncheck()
    assert tick_all.evaluate("box => box.indeterminate")
    # The words above the rows are its label: clicking them ticks them all again.
    page.get_by_text("Tick all on this page", exact=True).click()
    expect(page.locator("#rows tbody input.tick:checked")).to_have_count(2)


@pytest.mark.parametrize("width", [1280, PHONE["width"]])
def test_the_number_searchs_example_is_whole(ready, live_server, page, sign_in, width):
    page.set_viewport_size({**PHONE, "width": width})
    sign_in("root")
    page.goto(f"{live_server}/ddis")
    search = page.locator("#filter-q")
    expect(search).to_be_visible()
    text, room = search.evaluate(
        """(box) => {
            const style = getComputedStyle(box);
            const ctx = document.createElement('canvas').getContext('2d');
            ctx.font = style.font;
            const room = box.clientWidth - parseFloat(style.paddingLeft)
                - parseFloat(style.paddingRight);
            return [ctx.measureText(box.placeholder).width, room];
        }"""
    )
    assert "4567" in search.get_attribute("placeholder")
    assert text <= room, f"the example is {text:.0f} px in a box of {room:.0f} px"
    # A whole number as people type it fits too, and the page stays within the screen.
    search.fill("+44 1000 0090 00")
    wait_for_htmx(page)
    inner, outer = search.evaluate("(box) => [box.scrollWidth, box.clientWidth]")
    assert inner <= outer, f"the number typed is {inner} px in a box of {outer} px"
    wide = page.evaluate("document.documentElement.scrollWidth")
    assert wide <= width, f"the page is {wide} px wide at {width} px"


@pytest.mark.parametrize("script", [True, False])
def test_a_filtered_lists_bulk_bar_is_one_line_on_a_phone(
    ready, live_server, factory, browser: Browser, script
):
    """Under 640 px the bar is folded, "Change several…", until it is opened or a row is ticked
    (CSS alone, so also without JavaScript); then the whole form is there."""
    factory.ddi("44", "2071000003", "acme")
    context = browser.new_context(viewport=PHONE, java_script_enabled=script)
    phone = context.new_page()
    phone.goto(f"{live_server}/login")
    phone.get_by_label("Username").fill("root")
    phone.get_by_label("Password").fill(PASSWORD)
    phone.get_by_role("button", name="Sign in").click()
    phone.goto(f"{live_server}/ddis?company=acme")
    bar = phone.locator("form#bulk")
    expect(bar).to_be_visible()
    assert bar.bounding_box()["height"] <= NAV_ROW, bar.bounding_box()
    everything = bar.get_by_label("all 2 matching the filters")
    expect(everything).to_be_hidden()
    # Ticking a row unfolds it.
    phone.get_by_label("Tick +44 2071000003").check()
    expect(everything).to_be_visible()
    expect(bar.get_by_role("button", name="Continue…")).to_be_visible()
    phone.get_by_label("Tick +44 2071000003").uncheck()
    if not script:
        expect(everything).to_be_hidden()
    # Or opening it.
    phone.reload()
    bar.get_by_text("Change several…").click()
    expect(everything).to_be_visible()
    everything.check()
    bar.get_by_label("Move them to").fill("globex")
    bar.get_by_role("button", name="Continue…").click()
    expect(phone.get_by_role("heading", name="Move 2 DDIs to globex?")).to_be_visible()
    context.close()


@pytest.mark.parametrize("path", ["/ddis", "/users", "/audit"])
def test_company_names_on_lists_and_the_audit_log_fit_a_phone(
    ready, live_server, factory, page, sign_in, path
):
    """A company's name beside its identifier, both long, linked: the stacked rows of the lists
    and of the audit log wrap them inside the screen."""
    long_id = "internationaltelecommunicationsholdingsincorporatedworldwide"  # no break
    factory.company(long_id, "International Telecommunications Holdings Incorporated Worldwide")
    factory.ddi("44", "2071000009", long_id)
    factory.user("firstname.lastname.longer", long_id)
    page.set_viewport_size(PHONE)
    sign_in("root")
    page.goto(f"{live_server}{path}?company={long_id}")
    expect(page.locator(f'table.stack a.company[data-company="{long_id}"]').first).to_be_visible()
    no_sideways_scroll(page, "table.stack")
