"""Find free numbers in a real browser: with JavaScript the count follows the fields as they
are typed, focus staying in the field; then a reservation through the company picker."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from webapp.access import Principal
from webapp.services.numbers import stock

pytestmark = pytest.mark.slow  # a real browser


@pytest.fixture
def ready(factory):
    factory.account("root", system_admin=True)
    factory.company("acme", "Acme Telecom")
    body = {"block": {"dialcode": "44", "first": "2071000000", "count": 12}}
    stock.stock(Principal.cli("cli:test"), body)
    stock.stock(Principal.cli("cli:test"), {"block": {**body["block"], "first": "2072000000"}})


def test_the_count_follows_the_fields_then_reserve(ready, live_server, page: Page, sign_in):
    sign_in("root")
    page.goto(f"{live_server}/ddis/free")
    page.get_by_label("Dialcode").fill("44")
    page.get_by_label("How many").fill("3")
    prefix = page.get_by_label("Starting with")
    prefix.fill("207")
    expect(page.locator("#found-head")).to_have_text("Available: 24")
    prefix.press("1")  # 2071: half of them
    expect(page.locator("#found-head")).to_have_text("Available: 12")
    expect(prefix).to_be_focused()
    expect(page).to_have_url(f"{live_server}/ddis/free?dialcode=44&prefix=2071&count=3")
    expect(page.locator("#announcer")).to_contain_text("12 numbers starting +44 2071")

    reserve = page.locator("#reserve-form")
    reserve.get_by_label("Company").fill("acm")
    reserve.get_by_role("option").first.click()
    expect(reserve.get_by_label("Company")).to_have_value("acme")
    reserve.get_by_role("button", name="Reserve 3 numbers").click()
    expect(page.locator(".flash-success")).to_contain_text(
        "Reserved 3 numbers (+44 2071000000 to +44 2071000002) for acme"
    )
    expect(page.locator("#found-head")).to_have_text("Available: 9")
