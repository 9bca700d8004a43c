"""axe-core on every page (the one table in tests/pages.py) at desktop and phone width: no
violation at all of the WCAG 2.0, 2.1 and 2.2 A and AA rules and axe's best practices, among
them label-content-name-mismatch (a control's accessible name holds its visible text, WCAG
2.5.3), an experimental rule axe leaves out unless asked for by name. At phone width no page is
wider than the screen either (docs/pages.md, "Rules for every page").

axe-core comes from the pinned dev dependency axe-playwright-python, which ships axe.min.js and
evaluates it in the page through the DevTools protocol (so the Content-Security-Policy, which
forbids inline scripts, does not get in the way). Nothing is fetched at run time: the scan
asserts the page made no request while axe ran.
"""

from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from ..factories import ACME
from ..pages import AS_OTHERS, SIGNED_OUT, add_page_records, page_paths
from .conftest import wait_for_htmx

# A real browser; what axe-core judges is the pages' markup and style, the same on both
# databases, so once per `make test`.
pytestmark = [pytest.mark.slow, pytest.mark.database_independent]

WIDTHS = {
    "1280px": {"width": 1280, "height": 800},
    "390px": {"width": 390, "height": 844},
}
AXE = Axe()
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]
EXPERIMENTAL = ["label-content-name-mismatch"]  # tagged wcag21a, but run only when named
OPTIONS = {
    "runOnly": {"type": "tag", "values": TAGS},
    "rules": {rule: {"enabled": True} for rule in EXPERIMENTAL},
    "resultTypes": ["violations"],
}


@pytest.fixture
def world(world):
    add_page_records(world)
    return world


def violations(page: Page) -> list[str]:
    """The violations on the page, whatever their impact, as 'rule (impact): targets' lines."""
    requests: list[str] = []

    def record(request) -> None:
        # The browser fetches the page's icon on its own time, whoever is running then.
        if not request.url.endswith("/static/favicon.svg"):
            requests.append(request.url)

    page.on("request", record)
    results = AXE.run(page, options=OPTIONS).response
    page.remove_listener("request", record)
    assert requests == [], f"axe-core made requests: {requests}"
    found = []
    for v in results["violations"]:
        targets = "; ".join(" ".join(map(str, node["target"])) for node in v["nodes"])
        found.append(f"{v['id']} ({v['impact']}): {targets}")
    return found


def too_wide(page: Page) -> list[str]:
    """The page scrolls sideways: something in it is wider than the window."""
    width = page.evaluate("document.documentElement.clientWidth")
    wide = page.evaluate("document.documentElement.scrollWidth")
    return [f"the page is {wide} px wide in a {width} px window"] if wide > width else []


def scan(page: Page, url: str, name: str, problems: dict[str, list[str]]) -> None:
    response = page.goto(url)
    assert response is not None
    page.wait_for_load_state("load")
    if found := violations(page) + too_wide(page):
        problems[f"{name} ({url})"] = found


@pytest.mark.parametrize("width", WIDTHS)
def test_no_violation_on_any_page(world, live_server, page, sign_in, width):
    page.set_viewport_size(WIDTHS[width])
    problems: dict[str, list[str]] = {}
    for name, path in SIGNED_OUT.items():
        scan(page, f"{live_server}{path}", name, problems)
    sign_in("root")
    for name, path in page_paths().items():
        scan(page, f"{live_server}{path}", name, problems)
    for name, (username, path) in AS_OTHERS.items():
        page.context.clear_cookies()  # signed out: /login leads a signed-in visitor on
        sign_in(username)
        scan(page, f"{live_server}{path}", name, problems)
    assert not problems, f"axe-core at {width}:\n" + "\n".join(
        f"  {page}:\n    " + "\n    ".join(found) for page, found in problems.items()
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_no_violation_after_swaps(world, live_server, page, sign_in, width):
    """What htmx swaps into a page: the list with an inline form showing a field error, and a
    month calendar with a day's drill-down open."""
    page.set_viewport_size(WIDTHS[width])
    sign_in("root")
    problems: dict[str, list[str]] = {}

    page.get_by_role("link", name="Edit").first.click()
    panel = page.locator("#panel")
    panel.get_by_label("Extension").fill("12a")
    panel.get_by_role("button", name="Save").click()
    expect(panel.locator("#virt_exten-error")).to_be_visible()
    if found := violations(page) + too_wide(page):
        problems["DDI list, edit form with an error"] = found

    page.goto(f"{live_server}/reports/ddis?company={ACME}")
    wait_for_htmx(page)
    page.locator("table.calendar a.day").last.click()
    expect(panel.locator(".day-detail")).to_be_visible()
    if found := violations(page) + too_wide(page):
        problems["DDI calendar, a day open"] = found

    # The report's controls opened, a company added in place (its chips, the line said).
    page.goto(f"{live_server}/reports/ddis")
    wait_for_htmx(page)
    page.locator("details.report-controls summary").click()
    page.get_by_label("Add a company").fill(ACME)
    page.get_by_role("button", name="Add", exact=True).click()
    expect(page.locator("#company-chosen")).to_be_focused()
    if found := violations(page) + too_wide(page):
        problems["DDI counts, a company added in place"] = found

    assert not problems, f"axe-core at {width}:\n" + "\n".join(
        f"  {name}:\n    " + "\n    ".join(found) for name, found in problems.items()
    )
