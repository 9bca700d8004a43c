"""The top bar's search, /search (docs/pages.md, "Search"): what each role finds, a single match
opening its page, the caps of 20 a kind, the refusals and the escaping."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup

from webapp.access import Principal
from webapp.errors import Invalid
from webapp.services import search

from .factories import ACME, GLOBEX, INITECH, World
from .snapshots import kept

ACCOUNTS = {
    "root": "root",  # System-Admin
    "cadmin": "cadmin",  # Company-Admin of acme
    "cadmin2": "cadmin2",  # Company-Admin of acme and initech
    "summary": "summary",  # Billing Call-Summary
    "reporter": "reporter",  # Billing/Call Reporting for acme
    "nobody": "nobody",
}
MANY = 25  # more than a kind shows


@pytest.fixture
def world_accounts() -> dict[str, str]:
    return ACCOUNTS


@pytest.fixture
@kept
def world(world: World) -> World:
    """acme: two London numbers, alice and alina; globex: a number ending like acme's first,
    anna; initech: MANY numbers of one block and MANY phone users 'bulk…'."""
    f = world.factory
    f.ddi("44", "2071234567", ACME)
    f.ddi("44", "2071234568", ACME)
    f.ddi("33", "3011234567", GLOBEX)
    f.user("alice", ACME)
    f.user("alina", ACME)
    f.user("anna", GLOBEX)
    for i in range(MANY):
        f.ddi("49", f"30555{i:04d}", INITECH, str(300 + i))
        f.user(f"bulk{i:02d}", INITECH)
    return world


def soup(response, status: int = 200) -> BeautifulSoup:
    html = response.get_data(as_text=True)
    assert response.status_code == status, html[:600]
    page = BeautifulSoup(html, "html.parser")
    assert len(page.find_all("h1")) == 1
    assert not page.select("[style]") and not page.find("style")
    return page


def kind(page: BeautifulSoup, name: str) -> list[str]:
    """The texts of one kind's results (ddis, companies, users); [] when the kind is absent."""
    section = page.select_one(f"section[aria-labelledby=found-{name}]")
    if section is None:
        return []
    return [li.get_text(" ", strip=True) for li in section.select("li")]


def heading(page: BeautifulSoup, name: str) -> str:
    return page.select_one(f"#found-{name}").get_text(" ", strip=True)


def location(response) -> tuple[str, dict[str, list[str]]]:
    assert response.status_code == 303, response.get_data(as_text=True)[:300]
    url = urlsplit(response.headers["Location"])
    return url.path, parse_qs(url.query)


# --- one match opens it -----------------------------------------------------------------------


def test_a_whole_number_as_written_opens_its_page(world):
    response = world.browser("root").get("/search", query_string={"q": "+44 (20) 7123-4567"})
    assert location(response) == ("/ddis/44/2071234567", {})


def test_one_company_opens_its_page(world):
    response = world.browser("summary").get("/search?q=GLOB")
    assert location(response) == (f"/companies/{GLOBEX}", {})


def test_one_phone_user_opens_its_page(world):
    response = world.browser("cadmin").get("/search?q=Alice")
    assert location(response) == (f"/users/{ACME}/alice", {})


# --- what each role finds ---------------------------------------------------------------------


def test_system_admin_sees_every_kind_and_company(world):
    page = soup(world.browser("root").get("/search?q=4567"))
    assert kind(page, "ddis") == [
        "+33 3011234567 extension 100 Globex (globex)",
        "+44 2071234567 extension 100 Acme Telecom (acme)",
    ]
    assert heading(page, "ddis") == "DDIs (2)"
    more = page.select_one("section[aria-labelledby=found-ddis] p a")
    assert more["href"] == "/ddis?q=4567"
    links = [a["href"] for a in page.select("section[aria-labelledby=found-ddis] li a")]
    assert links[0] == "/ddis/33/3011234567" and "/companies/globex" in links


def test_company_admin_never_sees_another_companys_records(world):
    browser = world.browser("cadmin")
    # globex's number ends the same way: the one left is acme's, so it opens.
    assert location(browser.get("/search?q=4567")) == ("/ddis/44/2071234567", {})
    page = soup(browser.get("/search?q=a"))
    assert kind(page, "users") == [
        "alice extension 200 Acme Telecom (acme)",
        "alina extension 200 Acme Telecom (acme)",
    ]
    assert kind(page, "companies") == ["Acme Telecom (acme) 2 DDIs, 2 phone users"]
    html = str(page.select_one("main"))
    assert "anna" not in html and "globex" not in html.lower() and "initech" not in html.lower()
    # initech's block and phone users: not its companies, so nothing at all.
    page = soup(browser.get("/search?q=bulk"))
    assert "Nothing found for “bulk”." in page.get_text(" ", strip=True)
    assert soup(browser.get("/search?q=%2B49 305")).select("section") == []


def test_company_admin_companies_link_to_its_own_list(world):
    page = soup(world.browser("cadmin2").get("/search?q=E"))
    assert kind(page, "companies") == [
        "Acme Telecom (acme) 2 DDIs, 2 phone users",
        "Initech (initech) 25 DDIs, 25 phone users",
    ]
    link = page.select_one("section[aria-labelledby=found-companies] p a")
    assert link["href"] == "/companies?q=E"
    assert kind(page, "users") == []  # no username starts with e


@pytest.mark.parametrize("username", ["summary", "reporter"])
def test_billing_sees_no_ddis_nor_phone_users(world, username):
    browser = world.browser(username)
    page = soup(browser.get("/search?q=%2B44"))
    assert kind(page, "ddis") == [] and kind(page, "users") == []
    assert "Nothing found" in page.get_text()
    if username == "summary":  # every company
        page = soup(browser.get("/search?q=e"))
        assert kind(page, "users") == []
        assert [c.split(")")[0] + ")" for c in kind(page, "companies")] == [
            "Acme Telecom (acme)",
            "Globex (globex)",
            "Initech (initech)",
        ]
    else:  # its one company: opens
        assert location(browser.get("/search?q=e")) == (f"/companies/{ACME}", {})


def test_an_account_without_grants_finds_nothing(world):
    page = soup(world.browser("nobody").get("/search?q=acme"))
    assert "there is nothing to search" in page.get_text()
    assert page.select("section") == []


# --- caps, refusals, escaping -----------------------------------------------------------------


def test_at_most_20_of_a_kind(world):
    browser = world.browser("root")
    page = soup(browser.get("/search?q=49 305"))
    rows = kind(page, "ddis")
    assert len(rows) == 20 and rows[0].startswith("+49 305550000 ")
    assert heading(page, "ddis") == "DDIs (more than 20)"
    assert page.select_one("section[aria-labelledby=found-ddis] p a")["href"] == ("/ddis?q=49+305")
    page = soup(browser.get("/search?q=BULK"))
    assert len(kind(page, "users")) == 20
    assert heading(page, "users") == "Phone users (more than 20)"
    link = page.select_one("section[aria-labelledby=found-users] p a")
    assert link["href"] == "/users?username=bulk"


def test_a_text_that_is_no_number_is_not_searched_as_one(world):
    # Neither a number nor a username: no 400, the one company found opens.
    assert location(world.browser("root").get("/search?q=acme tel")) == ("/companies/acme", {})
    page = soup(world.browser("root").get("/search?q=(20) x"))
    assert "Nothing found for “(20) x”." in page.get_text()


def test_an_overlong_search_is_a_form_message(world):
    page = soup(world.browser("root").get("/search", query_string={"q": "4" * 101}), 400)
    field = page.select_one("#search-q")
    assert field["aria-invalid"] == "true"
    assert page.select_one("#search-q-error").get_text() == (
        "The search is at most 100 printable characters."
    )


def test_the_search_is_echoed_escaped(world):
    typed = '<script>alert("x")</script>'
    response = world.browser("root").get("/search", query_string={"q": typed})
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert typed not in html
    assert "Nothing found for “&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;”." in html


def test_an_empty_search_shows_the_box_focused(world):
    page = soup(world.browser("cadmin").get("/search"))
    field = page.select_one("main form[role=search] input[name=q]")
    assert field.has_attr("autofocus") and field.get("value", "") == ""
    assert page.select("section") == [] and "Nothing found" not in page.get_text()


@pytest.mark.parametrize("username", sorted(ACCOUNTS))
def test_the_top_bar_has_the_search_for_every_account(world, username):
    page = soup(world.browser(username).get("/account/tokens"))
    form = page.select_one("header form[role=search]")
    assert form["method"] == "get" and form["action"] == "/search"
    field = form.select_one("input[name=q]")
    assert page.select_one(f"label[for={field['id']}]") is not None


def test_the_service_refuses_control_characters(world):
    with pytest.raises(Invalid):
        search.search(Principal.cli(), "44\x00")
    assert search.search(Principal.cli(), "  ").kinds == []


def test_at_most_20_companies(world):
    for i in range(21):
        world.factory.company(f"zeta{i:02d}", f"Zeta {i}")
    page = soup(world.browser("root").get("/search?q=ZETA"))
    rows = kind(page, "companies")
    assert len(rows) == 20 and rows[0].startswith("Zeta 0 (zeta00)")
    assert heading(page, "companies") == "Companies (more than 20)"
    link = page.select_one("section[aria-labelledby=found-companies] p a")
    assert link["href"] == "/admin/companies?q=ZETA"
