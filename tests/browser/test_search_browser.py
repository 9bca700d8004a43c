"""The top bar's search in a real browser, at desktop and phone width, with and without
JavaScript: typed in the bar, the results page or the one match's page follows, and nothing
is wider than the screen."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

from .conftest import PASSWORD, VIEWPORT

pytestmark = pytest.mark.slow  # a real browser

PHONE = {"width": 390, "height": 844}
LONG_NAME = "Acme Telecommunications International Holdings Ltd"
BOX = "Search DDIs, companies, phone users"


@pytest.fixture
def ready(factory):
    factory.account("root", system_admin=True)
    factory.company("acme", LONG_NAME)
    factory.company("globex", "Globex")
    factory.ddi("44", "2071000001", "acme")
    factory.ddi("44", "2071000002", "globex")
    factory.user("alice", "acme")


def open_menu_on_a_phone(page: Page, width: int) -> None:
    if width == PHONE["width"]:
        page.locator("details.menu > summary").click()


def fits(page: Page, width: int) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= width


@pytest.mark.parametrize("width", [VIEWPORT["width"], PHONE["width"]])
def test_typing_in_the_top_bar(ready, live_server, page: Page, sign_in, width):
    page.set_viewport_size(PHONE if width == PHONE["width"] else VIEWPORT)
    sign_in("root")
    fits(page, width)
    open_menu_on_a_phone(page, width)
    box = page.get_by_role("search", name="Site search").get_by_label(BOX)
    expect(box).to_be_visible()
    fits(page, width)
    box.fill("+44 20 7100")
    box.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("Search")
    results = page.get_by_role("region", name="DDIs (2)")
    expect(results.get_by_role("link", name="+44 2071000001")).to_be_visible()
    expect(results.get_by_role("link", name="+44 2071000002")).to_be_visible()
    fits(page, width)

    # One match opens its page; the search there is typed again in the top bar.
    open_menu_on_a_phone(page, width)
    box.fill("0001")
    box.press("Enter")
    expect(page).to_have_url(f"{live_server}/ddis/44/2071000001")
    # The address changes when the navigation commits, before the new page's style sheet
    # applies: measured then, its unstyled width (509 px once in CI) is not the page's.
    page.wait_for_load_state("load")
    fits(page, width)


def test_the_search_works_without_javascript_on_a_phone(ready, live_server, browser: Browser):
    context = browser.new_context(java_script_enabled=False, viewport=PHONE, locale="en-GB")
    plain = context.new_page()
    plain.goto(f"{live_server}/login")
    plain.get_by_label("Username").fill("root")
    plain.get_by_label("Password").fill(PASSWORD)
    plain.get_by_role("button", name="Sign in").click()
    expect(plain.get_by_text("Signed in as root.")).to_be_visible()
    plain.locator("details.menu > summary").click()
    plain.get_by_label(BOX).fill("a")
    plain.get_by_role("search", name="Site search").get_by_role("button").click()
    companies = plain.get_by_role("region", name="Companies (1)")
    expect(companies.get_by_role("link", name=LONG_NAME)).to_be_visible()
    expect(plain.get_by_role("region", name="Phone users (1)")).to_contain_text("alice")
    fits(plain, PHONE["width"])
    # An empty search: the page's own box, focused, ready to type in.
    plain.goto(f"{live_server}/search")
    expect(plain.get_by_label("Number, company or phone user")).to_be_focused()
    context.close()
