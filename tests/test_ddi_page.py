"""A DDI's own page, /ddis/<dialcode>/<number> (docs/pages.md#a-ddis-page): values now, its
history intervals and its audit entries, scoped for a Company-Admin to its own companies."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from webapp.access import Principal
from webapp.services.records import crud, ddis, kinds

from .factories import ACME, GLOBEX, INITECH

ROOT = Principal.cli("root-cli")
PAGE = "/ddis/44/2070000001"


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def company_of(element) -> str:
    """The company an element shows by its name and identifier ('Acme Telecom (acme)'): its
    identifier."""
    return element.select_one(".company")["data-company"]


def interval_companies(page: BeautifulSoup) -> list[str]:
    return [company_of(tr.td) for tr in page.select("#intervals tbody tr")]


@pytest.fixture
def world(world, factory):
    factory.ddi("44", "2070000001", GLOBEX, "101")
    # globex -> acme -> initech -> acme: four intervals in three companies.
    for company in (ACME, INITECH, ACME):
        ddis.link(
            ROOT,
            {"dialcode": "44", "number": "2070000001"},
            {"virt_exten": "101", "company": company},
        )
    crud.update(ROOT, kinds.DDI, {"company": ACME, "number": "2070000001"}, {"virt_exten": "555"})
    return world


def test_a_system_admin_sees_values_every_interval_and_the_audit(world):
    page = soup(world.browser("root").get(PAGE))
    assert page.h1.get_text(" ", strip=True) == "DDI +44 2070000001"
    assert page.select_one("#now-exten").get_text() == "555"
    assert company_of(page.select_one("#now-company")) == ACME
    assert interval_companies(page) == [ACME, INITECH, ACME, GLOBEX]  # newest first
    assert page.select("#intervals tbody tr")[0].select("td")[2].get_text(strip=True) == "now"
    audit_rows = page.select("table.audit tbody tr")
    assert len(audit_rows) == 5  # create, three links, the update
    assert "Edit" in [a.get_text() for a in page.select(".pagehead .actions a")]
    assert "Delete" in [a.get_text() for a in page.select(".pagehead .actions a")]


def test_a_company_admin_sees_only_its_own_companies_part(world):
    page = soup(world.browser("cadmin").get(PAGE))  # Company-Admin of acme
    assert interval_companies(page) == [ACME, ACME]
    targets = {
        tr.select("td")[4].get_text(" ", strip=True) for tr in page.select("table.audit tbody tr")
    }
    assert all(ACME in t for t in targets), targets  # entries about acme, moves away included
    assert "Delete" not in [a.get_text() for a in page.select(".pagehead .actions a")]


def test_a_company_admin_gets_404_once_the_number_left_its_companies(world):
    ddis.link(
        ROOT, {"dialcode": "44", "number": "2070000001"}, {"virt_exten": "1", "company": GLOBEX}
    )
    assert world.browser("cadmin").get(PAGE).status_code == 404
    assert world.browser("cadmin").get("/ddis/44/9999999").status_code == 404  # same answer


def test_a_deleted_number_keeps_its_page_for_the_system_admin(world):
    crud.delete_rows(ROOT, kinds.DDI, {"company": ACME, "number": "2070000001"})
    page = soup(world.browser("root").get(PAGE))
    assert page.select_one("#ddi-gone") is not None
    assert interval_companies(page)[0] == ACME
    assert page.select("#intervals tbody tr")[0].select("td")[2].get_text(strip=True) != "now"
    assert not page.select(".pagehead .actions a")  # nothing to edit
    assert world.browser("cadmin").get(PAGE).status_code == 404


@pytest.mark.parametrize("path", ["/ddis/44/1234", "/ddis/4x/1234", "/ddis/44/" + "1" * 16])
def test_unknown_or_malformed_numbers_are_404(world, path):
    assert world.browser("root").get(path).status_code == 404


@pytest.mark.parametrize("who", ["summary", "reporter", "nobody"])
def test_accounts_that_administer_nothing_are_refused(world, who):
    assert world.browser(who).get(PAGE).status_code == 403


def test_the_list_links_each_number_to_its_page(world):
    page = soup(world.browser("root").get("/ddis"))
    assert page.select_one(f'#rows a[href="{PAGE}"]') is not None
