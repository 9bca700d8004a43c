"""A phone user's own page, /users/<company>/<username> (docs/pages.md#a-phone-users-page):
its values now and its audit entries, for a System-Admin and a Company-Admin of its company;
anyone else gets the 404 a missing user gets. The lists and the audit log link to it."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup

from webapp.access import Principal
from webapp.services.records import crud, kinds

from .factories import ACME, GLOBEX
from .snapshots import kept

ROOT = Principal.cli("root-cli")
PAGE = f"/users/{ACME}/ana.kim"


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def action_links(page: BeautifulSoup) -> dict[str, str]:
    return {a.get_text(): a["href"] for a in page.select(".pagehead .actions a")}


@pytest.fixture
@kept
def world(world, factory):
    factory.user("ana.kim", ACME, "201")
    factory.user("bo", GLOBEX, "301")
    crud.update(
        ROOT, kinds.PHONE_USER, {"company": ACME, "username": "ana.kim"}, {"virt_exten": "202"}
    )
    return world


def test_a_system_admin_sees_values_links_and_the_audit(world):
    page = soup(world.browser("root").get(PAGE))
    assert page.h1.get_text(" ", strip=True) == f"Phone user {ACME}/ana.kim"
    assert page.select_one("#now-exten").get_text() == "202"
    company = page.select_one("#now-company a.company")
    assert company["href"] == f"/companies/{ACME}" and "Acme Telecom" in company.get_text()
    assert len(page.select("table.audit tbody tr")) == 2  # the create and the update
    links = action_links(page)
    assert set(links) == {"Edit", "Delete"}
    for href in links.values():  # each comes back to this page
        assert parse_qs(urlsplit(href).query)["back"] == [PAGE]
    everything = page.find("a", string="all of them in the audit log")
    assert parse_qs(urlsplit(everything["href"]).query)["target"] == [f"user {ACME}/ana.kim"]


def test_a_company_admin_of_its_company_sees_it(world):
    page = soup(world.browser("cadmin").get(PAGE))  # Company-Admin of acme
    assert page.h1.get_text(" ", strip=True) == f"Phone user {ACME}/ana.kim"
    assert set(action_links(page)) == {"Edit", "Delete"}  # Company-Admins delete phone users


@pytest.mark.parametrize(
    ("username", "path"),
    [
        ("cadmin", f"/users/{GLOBEX}/bo"),  # another company's user
        ("summary", PAGE),  # Billing: administers nothing
        ("reporter", PAGE),  # reports on acme, administers nothing
        ("nobody", PAGE),
        ("root", f"/users/{ACME}/nobody-here"),  # missing
        ("root", f"/users/{ACME}/{'x' * 300}"),  # malformed
    ],
)
def test_anyone_else_gets_the_404_of_a_missing_user(world, username, path):
    missing = world.browser("root").get(f"/users/{ACME}/nobody-here")
    response = world.browser(username).get(path)
    assert response.status_code == 404
    assert soup(response).h1.get_text() == soup(missing).h1.get_text()


def test_edit_from_the_page_comes_back_to_it_and_follows_a_move(world):
    browser = world.browser("root")
    form = f"{PAGE}/edit?back={PAGE}"
    data = {"csrf_token": browser.csrf, "back": PAGE, "virt_exten": "203", "company": ACME}
    saved = browser.post(form, data=data)
    assert saved.status_code == 302 and saved.headers["Location"] == PAGE
    moved = browser.post(form, data={**data, "company": GLOBEX})
    assert moved.headers["Location"] == f"/users/{GLOBEX}/ana.kim"
    assert browser.get(f"/users/{GLOBEX}/ana.kim").status_code == 200


def test_a_delete_from_the_page_goes_to_the_list(world):
    browser = world.browser("root")
    delete = browser.get(f"{PAGE}/delete?back={PAGE}")
    cancel = soup(delete).find("a", string="Cancel")
    assert cancel["href"] == PAGE
    done = browser.post(f"{PAGE}/delete", data={"csrf_token": browser.csrf, "back": PAGE})
    assert done.status_code == 302 and urlsplit(done.headers["Location"]).path == "/users"
    assert browser.get(PAGE).status_code == 404


@pytest.mark.parametrize(
    ("username", "linked"), [("root", {"ana.kim", "bo"}), ("cadmin", {"ana.kim"})]
)
def test_the_list_links_each_username_to_its_page(world, username, linked):
    page = soup(world.browser(username).get("/users"))
    cells = page.select("#rows td[data-label='Username']")
    shown = {td.get_text(strip=True): td.a["href"] for td in cells}
    assert set(shown) == linked
    for name, href in shown.items():
        company = ACME if name == "ana.kim" else GLOBEX
        assert href == f"/users/{company}/{name}"


@pytest.mark.parametrize("username", ["root", "cadmin"])
def test_the_audit_log_links_a_phone_user_target_to_its_page(world, username):
    page = soup(world.browser(username).get("/audit", query_string={"target": "acme/ana.kim"}))
    targets = page.select("td[data-label='Target'] a")
    assert targets and {a["href"] for a in targets} == {PAGE}
    assert {a.get_text(strip=True) for a in targets} == {f"user {ACME}/ana.kim"}
