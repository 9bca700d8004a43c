"""Coming back after an inline (htmx) edit on page 2 of a sorted, filtered list: the list
reopens on that page, with the same filters and sort, the saved row marked."""

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
    return rows(page).filter(has=page.get_by_role("cell", name=number, exact=True))


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
    expect(panel.get_by_role("heading")).to_have_text("Edit DDI 44:2070000060")
    panel.get_by_label("Extension").fill("4242")
    panel.get_by_role("button", name="Save").click()

    expect(page.get_by_role("status")).to_have_text("Saved DDI 44:2070000060.")
    expect(page).to_have_url(page_two)
    expect(page.locator("#count")).to_contain_text("Showing 51\N{EN DASH}100 of 120")
    expect(page.locator("#filter-company")).to_have_value("acme")
    expect(rows(page).first.get_by_role("cell").nth(1)).to_have_text("2070000069")
    changed = page.locator("#rows tbody tr.changed")
    expect(changed).to_have_count(1)
    expect(changed).to_have_attribute("aria-current", "true")
    expect(changed.get_by_role("cell").nth(1)).to_have_text("2070000060")
    expect(changed.get_by_role("cell").nth(2)).to_have_text("4242")
    expect(changed).to_contain_text("Just saved")
