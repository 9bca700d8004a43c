"""Company pickers in a real browser: suggestions as one types, chosen with the mouse
or the keyboard, and the grants' lists of chosen companies, whose Add and Remove swap only
that list (nothing else typed is lost, no other grant dropped)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from webapp.extensions import db
from webapp.models import Account
from webapp.services.identity import accounts

from .conftest import wait_for_htmx, wait_for_settled

pytestmark = pytest.mark.slow  # a real browser


def grants_of(username: str):
    db.session.rollback()
    account = db.session.scalars(select(Account).where(Account.username == username)).one()
    return accounts.grants_of(account)


def test_type_into_the_ddi_filter_and_choose_with_the_keyboard(live_server, factory, page, sign_in):
    factory.account("root", system_admin=True)
    for company, name in (("acme", "Acme Telecom"), ("globex", "Globex"), ("glow", "Glow Ltd")):
        factory.company(company, name)
    factory.ddi("44", "2071000001", "acme")
    factory.ddi("44", "2072000001", "globex")
    factory.ddi("44", "2073000001", "glow")
    sign_in("root")
    page.evaluate("window.__sameDocument = true")

    field = page.get_by_role("combobox", name="Company")
    field.fill("GL")
    options = page.get_by_role("listbox").get_by_role("option")  # not the State filter's
    expect(options).to_have_text([re.compile(r"^globex\s+Globex"), re.compile(r"^glow\s+Glow")])
    expect(field).to_have_attribute("aria-expanded", "true")
    field.press("ArrowDown")
    field.press("ArrowDown")
    expect(options.nth(1)).to_have_attribute("aria-selected", "true")
    expect(field).to_have_attribute("aria-activedescendant", options.nth(1).get_attribute("id"))
    field.press("Enter")
    expect(field).to_have_value("glow")
    expect(options).to_have_count(0)
    expect(field).to_have_attribute("aria-expanded", "false")
    expect(page.locator("#rows tbody tr")).to_have_count(1)
    expect(page.locator("#rows tbody td:not(.tick-cell)").nth(0)).to_have_text("+44 2073000001")
    expect(page).to_have_url(re.compile(r"company=glow"))
    assert page.evaluate("window.__sameDocument === true"), "choosing reloaded the page"

    # Escape closes the suggestions; emptying the field lists every company again.
    field.fill("acm")
    expect(options).to_have_count(1)
    field.press("Escape")
    expect(options).to_have_count(0)
    field.fill("")
    expect(page.locator("#rows tbody tr")).to_have_count(3)


def test_create_form_picks_a_company_with_the_mouse(live_server, factory, page, sign_in):
    factory.account("root", system_admin=True)
    factory.company("acme", "Acme Telecom")
    factory.company("globex", "Globex")
    sign_in("root")
    page.get_by_role("link", name="New DDI").click()
    panel = page.locator("#panel")
    field = panel.get_by_role("combobox", name="Company")
    expect(field).to_have_value("")  # nothing chosen for you
    panel.get_by_label("Dialcode").fill("44")
    panel.get_by_label("Number").fill("2079000000")
    panel.get_by_label("Extension").fill("12")
    field.fill("telecom")  # by name
    page.get_by_role("option", name=re.compile("^acme")).click()
    expect(field).to_have_value("acme")
    panel.get_by_role("button", name="Create").click()
    expect(page.get_by_role("status")).to_have_text("Created DDI +44 2079000000.")


def test_grants_remove_one_and_add_one_keeping_the_rest(live_server, factory, page, sign_in):
    factory.account("root", system_admin=True)
    for company in ("acme", "globex", "initech"):
        factory.company(company, company.title())
    factory.account("boss", admin_of=["acme", "globex"], reporting_for=["initech"])
    sign_in("root")
    page.goto(f"{live_server}/admin/accounts/boss/grants")
    wait_for_htmx(page)
    page.evaluate("window.__sameDocument = true")
    admin_of = page.locator("#admin_of-chosen")
    expect(admin_of.locator(".chosen-id")).to_have_text(["acme", "globex"])

    admin_of.get_by_role("button", name="Remove acme").click()
    expect(admin_of.locator(".chosen-id")).to_have_text(["globex"])
    expect(page.locator("#reporting_for-chosen .chosen-id")).to_have_text(["initech"])
    expect(page.locator("#add_admin_of")).to_be_focused()
    wait_for_settled(page)

    page.locator("#add_admin_of").fill("ini")
    page.get_by_role("option", name=re.compile("^initech")).click()
    expect(admin_of.locator(".chosen-id")).to_have_text(["globex", "initech"])
    assert page.evaluate("window.__sameDocument === true"), "add or remove reloaded the page"
    assert grants_of("boss")["admin_of"] == ["acme", "globex"]  # nothing saved yet

    page.get_by_role("button", name="Save grants").click()
    expect(page.get_by_role("status")).to_have_text("Grants of boss saved.")
    grants = grants_of("boss")
    assert grants["admin_of"] == ["globex", "initech"]
    assert grants["reporting_for"] == ["initech"]


def test_report_add_companies_by_picking_and_remove_one(live_server, factory, page, sign_in):
    factory.account("root", system_admin=True)
    factory.company("acme", "Acme Telecom")
    factory.company("globex", "Globex")
    sign_in("root")
    page.goto(f"{live_server}/reports/ddis")
    wait_for_htmx(page)
    chosen = page.locator("#company-chosen .chosen-id")
    expect(chosen).to_have_count(0)

    page.locator("details.report-controls summary").click()  # folded under the report
    page.locator("#add_company").fill("acm")
    page.get_by_role("option", name=re.compile("^acme")).click()  # added at once
    expect(page).to_have_url(re.compile(r"/reports/ddis\?company=acme&month=\d+&year=\d+$"))
    expect(chosen).to_have_text(["acme"])
    expect(page.locator("table.calendar")).to_be_visible()

    wait_for_htmx(page)
    page.locator("#add_company").fill("GLO")
    suggestions = page.get_by_role("listbox").get_by_role("option")
    expect(suggestions).to_have_text([re.compile(r"^globex")])
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"\?company=acme&company=globex&month="))
    expect(chosen).to_have_text(["acme", "globex"])
    expect(page.locator("table.matrix")).to_be_visible()

    page.get_by_role("button", name="Remove acme").click()
    expect(page).to_have_url(re.compile(r"\?company=globex&month="))
    expect(chosen).to_have_text(["globex"])
