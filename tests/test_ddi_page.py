"""A DDI's own page, /ddis/<dialcode>/<number> (docs/pages.md#a-ddis-page): values now, its
history intervals and its audit entries, scoped for a Company-Admin to its own companies."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import update

from webapp.access import Principal
from webapp.database import write_transaction
from webapp.extensions import db
from webapp.models import Number
from webapp.services import inventory
from webapp.services.numbers import reserving, retiring, stock
from webapp.services.records import crud, ddis, kinds

from .factories import ACME, GLOBEX, INITECH
from .snapshots import kept

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


def state_of(page: BeautifulSoup) -> str:
    return page.select_one("#now-state")["data-state"]


def actions_shown(page: BeautifulSoup) -> list[str]:
    """The audit entries' actions, newest first, as the page names them."""
    return [tr.select("td")[2].get_text(strip=True) for tr in page.select("table.audit tbody tr")]


@pytest.fixture
def on(app) -> date:
    with app.app_context():
        return inventory.today()


@pytest.fixture
@kept
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
    assert state_of(page) == "in_service"
    # In service since its open interval began: the last link to acme.
    since = page.select_one("#now-since").get_text(strip=True)
    assert since == page.select("#intervals tbody tr")[0].select("td")[1].get_text(strip=True)
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
    assert state_of(page) == "available"  # NUMBER_AGING_DAYS 0: back in the stock at once
    assert company_of(page.select_one("#now-previous")) == ACME
    assert page.select_one("#now-exten") is None and page.select_one("#now-until") is None
    assert interval_companies(page)[0] == ACME
    assert page.select("#intervals tbody tr")[0].select("td")[2].get_text(strip=True) != "now"
    assert not page.select(".pagehead .actions a")  # nothing to edit
    assert "DDI deleted" in actions_shown(page)
    assert world.browser("cadmin").get(PAGE).status_code == 404


def test_a_retired_number_keeps_its_history_for_the_system_admin_alone(world):
    crud.delete_rows(ROOT, kinds.DDI, {"company": ACME, "number": "2070000001"})
    retiring.retire(ROOT, {"scope": {"dialcode": "44", "number": "2070000001"}})
    page = soup(world.browser("root").get(PAGE))
    assert page.select_one("#ddi-gone") is not None and page.select_one("#now-state") is None
    assert interval_companies(page) == [ACME, INITECH, ACME, GLOBEX]
    assert actions_shown(page)[:2] == ["Number retired", "DDI deleted"]
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


# --- the number's state in the inventory (docs/numbers.md) ------------------------------------

NUMBER = {"dialcode": "44", "number": "2071230000"}
STOCKED = "/ddis/44/2071230000"
DESCRIPTION = '<b>Reception</b> & "front desk"'


def stocked(description: str = DESCRIPTION) -> None:
    stock.stock(ROOT, {"values": [{**NUMBER, "description": description}]})


def reserve(company: str, until: date | None = None, **extra) -> None:
    values = {"company": company} | ({"until": until.isoformat()} if until else {})
    reserving.reserve(ROOT, {"scope": NUMBER, "values": values, **extra})


def missing_page(world, who: str) -> str:
    """What `who` is answered for a number that does not exist: the 404 page's text."""
    response = world.browser(who).get("/ddis/44/2079999999")
    assert response.status_code == 404
    return soup(response).main.get_text(" ", strip=True)


@pytest.mark.parametrize("who", ["cadmin", "cadmin2"])
def test_a_stocked_number_is_the_system_admins_alone(world, who):
    stocked()
    page = soup(world.browser("root").get(STOCKED))
    assert state_of(page) == "available"
    assert page.select_one("#now-since").get_text(strip=True) != "not recorded"
    # The description as text, escaped: no element comes of it.
    description = page.select_one("#now-description")
    assert description.get_text() == DESCRIPTION and description.find("b") is None
    assert actions_shown(page) == ["Number stocked"]
    assert page.select_one("#now-previous") is None  # it never left a company
    # A Company-Admin: exactly the answer of a number that does not exist.
    response = world.browser(who).get(STOCKED)
    assert response.status_code == 404
    assert soup(response).main.get_text(" ", strip=True) == missing_page(world, who).replace(
        "2079999999", "2071230000"
    )


def test_a_reserved_number_for_every_role(world, on):
    stocked()
    until = on + timedelta(days=10)
    reserve(INITECH, until=until)
    root = soup(world.browser("root").get(STOCKED))
    assert state_of(root) == "reserved"
    assert root.select_one("#now-until")["data-until"] == until.isoformat()
    assert (until + timedelta(days=1)).isoformat() in root.select_one("#now-until").get_text()
    assert company_of(root.select_one("#now-held-for")) == INITECH
    assert actions_shown(root) == ["Number reserved", "Number stocked"]
    # cadmin2 administers initech: the number is its company's, and only its part shows.
    cadmin2 = soup(world.browser("cadmin2").get(STOCKED))
    assert state_of(cadmin2) == "reserved"
    assert company_of(cadmin2.select_one("#now-held-for")) == INITECH
    assert actions_shown(cadmin2) == ["Number reserved"]  # the stock is not its business
    assert cadmin2.select_one("#now-description").get_text() == DESCRIPTION
    # cadmin (acme only): as a missing number.
    assert world.browser("cadmin").get(STOCKED).status_code == 404
    for who in ("summary", "reporter", "nobody"):
        assert world.browser(who).get(STOCKED).status_code == 403


def test_a_reservation_past_its_last_day_is_available_and_no_longer_the_companys(world, on):
    stocked()
    reserve(ACME)
    with write_transaction() as session:
        session.execute(
            update(Number)
            .where(Number.number == NUMBER["number"])
            .values(held_until=on - timedelta(days=1))
        )
    page = soup(world.browser("root").get(STOCKED))
    assert state_of(page) == "available" and page.select_one("#now-until") is None
    assert page.select_one("#now-held-for") is None
    assert world.browser("cadmin").get(STOCKED).status_code == 404


def test_an_aging_number_shows_until_when_and_who_had_it_to_the_system_admin(world, app, on):
    app.config["NUMBER_AGING_DAYS"] = 30
    crud.delete_rows(ROOT, kinds.DDI, {"company": ACME, "number": "2070000001"})
    page = soup(world.browser("root").get(PAGE))
    assert state_of(page) == "aging"
    assert page.select_one("#now-until")["data-until"] == (on + timedelta(days=29)).isoformat()
    assert company_of(page.select_one("#now-previous")) == ACME
    assert world.browser("cadmin").get(PAGE).status_code == 404  # no longer its number


def test_a_reservation_taken_over_shows_each_company_only_its_side(world):
    """Reserved for initech, then by force for acme: acme's Company-Admin sees the number and
    the takeover, never initech nor its reservation; the System-Admin sees both sides."""
    stocked()
    reserve(INITECH)
    reserve(ACME, force=True, reason="contract moved")
    root = soup(world.browser("root").get(STOCKED))
    assert actions_shown(root) == ["Number reserved", "Number reserved", "Number stocked"]
    assert "contract moved" in root.select("table.audit tbody tr")[0].get_text()
    assert INITECH in str(root.select("table.audit tbody tr")[0])
    acme = world.browser("cadmin").get(STOCKED)
    page = soup(acme)
    assert state_of(page) == "reserved" and company_of(page.select_one("#now-held-for")) == ACME
    assert actions_shown(page) == ["Number reserved"]
    assert INITECH not in acme.get_data(as_text=True).lower()
    assert "Initech" not in acme.get_data(as_text=True)


def test_a_released_number_goes_back_to_the_stock(world):
    stocked()
    reserve(ACME)
    reserving.release(ROOT, {"scope": NUMBER})
    page = soup(world.browser("root").get(STOCKED))
    assert state_of(page) == "available"
    assert actions_shown(page) == ["Number released", "Number reserved", "Number stocked"]
    assert world.browser("cadmin").get(STOCKED).status_code == 404


def test_the_page_reads_by_index(world, app):
    """The inventory row by its key (§10's budget: no read grows with the inventory)."""
    from sqlalchemy import event

    stocked()
    reserve(ACME)
    seen: list[str] = []

    def record(conn, cursor, statement, *args):
        seen.append(statement)

    engine = db.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        assert world.browser("cadmin").get(STOCKED).status_code == 200
    finally:
        event.remove(engine, "before_cursor_execute", record)
    number_reads = [s for s in seen if "FROM numbers" in s]
    assert number_reads and all("numbers.number =" in s for s in number_reads), number_reads
