"""Links between records (docs/pages.md, "Links between pages"): the DDI and phone-user lists
name each company beside its identifier and link it to its page where the reader may open it;
the audit log links its actor, target and companies, except on an entry with a side hidden from
the reader (access.redact), which links nothing. The names are asked once a page, however many
rows it holds.
"""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import event

from webapp.access import Principal
from webapp.database import write_transaction
from webapp.extensions import db
from webapp.services.history import audit
from webapp.services.records import crud, ddis, kinds

from .factories import OPERATOR

ROOT = Principal(username="root", via="ui", system_admin=True)


@pytest.fixture
def world_accounts() -> dict[str, str]:
    return {"root": "root", "cadmin": "cadmin", "cadmin2": "cadmin2"}


def soup(response) -> BeautifulSoup:
    assert response.status_code == 200
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def hrefs(element) -> list[str]:
    return [a["href"] for a in element.select("a[href]")]


def company_cells(page: BeautifulSoup) -> list:
    return page.select('table.stack tbody td[data-label="Company"]')


@pytest.fixture
def records(world):
    factory = world.factory
    for i, company in enumerate(("acme", "globex", "initech")):
        factory.ddi("44", f"20700000{i}", company)
        factory.user(f"ana{i}", company)
    return world


@pytest.mark.parametrize("plural", ["ddis", "users"])
def test_a_list_names_each_company_and_links_its_page(records, plural):
    page = soup(records.browser("root").get(f"/{plural}"))
    cells = company_cells(page)
    assert len(cells) == 3
    for cell in cells:
        link = cell.select_one("a.company")
        company = link["data-company"]
        assert link["href"] == f"/companies/{company}"
        name = {"acme": "Acme Telecom", "globex": "Globex", "initech": "Initech"}[company]
        assert cell.get_text(" ", strip=True) == f"{name} ({company})"
    # The tick stays the first cell of a row; the DDI's number still links to its page.
    for row in page.select("table.stack tbody tr"):
        assert "tick-cell" in row.find("td")["class"]
    if plural == "ddis":
        assert page.select_one('td[data-label="Number"] a')["href"].startswith("/ddis/44/")


@pytest.mark.parametrize(
    ("role", "companies"), [("cadmin", {"acme"}), ("cadmin2", {"acme", "initech"})]
)
def test_a_company_admin_links_only_its_own_companies(records, role, companies):
    for plural in ("ddis", "users"):
        page = soup(records.browser(role).get(f"/{plural}"))
        linked = {a["data-company"] for a in page.select("a.company")}
        assert linked == companies
        assert not [h for h in hrefs(page) if h == "/companies/globex"]
        assert "Globex" not in page.get_text()


def move_acme_ddi_to_globex() -> None:
    crud.create(
        OPERATOR,
        kinds.DDI,
        {"dialcode": "44", "number": "2071", "virt_exten": "100", "company": "acme"},
    )
    ddis.link(
        OPERATOR, {"dialcode": "44", "number": "2071"}, {"virt_exten": "7", "company": "globex"}
    )


def audit_row(page: BeautifulSoup, action: str):
    for row in page.select("table.audit tbody tr"):
        if row.select_one('td[data-label="Action"]').get_text(strip=True) == action:
            return row
    raise AssertionError(f"no {action} row")


def cell(row, label: str):
    return row.select_one(f'td[data-label="{label}"]')


def test_the_audit_log_links_actor_target_and_companies_for_a_system_admin(records):
    move_acme_ddi_to_globex()
    page = soup(records.browser("root").get("/audit"))
    moved = audit_row(page, "DDI linked to an extension")
    # "test" (the command line's operator) has no account: only the log filtered by it.
    assert hrefs(cell(moved, "Actor")) == ["/audit?actor=test"]
    assert hrefs(cell(moved, "Target")) == ["/ddis/44/2071"]
    assert hrefs(cell(moved, "Company")) == ["/companies/globex", "/companies/acme"]
    assert cell(moved, "Company").get_text(" ", strip=True) == (
        "Globex (globex) (from Acme Telecom (acme) )"
    )
    # An actor with an account: to the log filtered by it and to the account's page.
    with write_transaction() as session:
        audit.record(session, [audit.entry(ROOT, "x.note", "webhook 3")])
    note = audit_row(soup(records.browser("root").get("/audit")), "x.note")
    assert hrefs(cell(note, "Actor")) == ["/audit?actor=root", "/admin/accounts/root/grants"]
    assert hrefs(cell(note, "Target")) == ["/audit?target=webhook+3"]


def test_a_company_admin_gets_no_link_to_another_company_and_a_redacted_row_links_nothing(
    records,
):
    move_acme_ddi_to_globex()
    page = soup(records.browser("cadmin").get("/audit"))
    moved = audit_row(page, "DDI linked to an extension")
    assert hrefs(moved) == []
    assert cell(moved, "Company").get_text(" ", strip=True) == "another company (from acme)"
    assert "globex" not in str(moved).lower()
    created = audit_row(page, "DDI created")
    assert hrefs(cell(created, "Company")) == ["/companies/acme"]
    assert hrefs(cell(created, "Actor")) == ["/audit?actor=test"]  # no account pages
    assert not [h for h in hrefs(page) if "globex" in h or h.startswith("/admin/")]


def count_selects(app):
    statements: list[str] = []

    def record(_conn, _cursor, statement, *_args):
        if statement.lstrip().upper().startswith("SELECT"):
            statements.append(statement)

    event.listen(db.engine, "before_cursor_execute", record)
    return statements, lambda: event.remove(db.engine, "before_cursor_execute", record)


def selects_for(app, client, path: str) -> int:
    statements, stop = count_selects(app)
    try:
        assert client.get(path).status_code == 200
    finally:
        stop()
    return len(statements)


@pytest.mark.parametrize("path", ["/ddis", "/users", "/audit"])
def test_names_are_asked_once_a_page_however_many_rows(app, records, path):
    client = records.browser("root")
    few = selects_for(app, client, path)
    factory = records.factory
    for i in range(12):
        company = f"extra{i:02d}"
        factory.company(company, f"Extra {i}")
        factory.ddi("44", f"20800000{i:02d}", company)
        factory.user(f"bo{i}", company)
    with write_transaction() as session:
        audit.record(
            session,
            [audit.entry(OPERATOR, "x.many", f"n {i}", company=f"extra{i:02d}") for i in range(12)],
        )
    assert selects_for(app, client, path) == few


def test_a_ddis_page_links_its_companies_and_audit_entries_as_the_log_does(records):
    move_acme_ddi_to_globex()
    ddis.link(
        OPERATOR, {"dialcode": "44", "number": "2071"}, {"virt_exten": "8", "company": "acme"}
    )
    page = soup(records.browser("root").get("/ddis/44/2071"))
    assert hrefs(page.select_one("#now-company")) == ["/companies/acme"]
    assert "Acme Telecom (acme)" in page.select_one("#now-company").get_text(" ", strip=True)
    table = page.select_one("table.audit")
    assert "/companies/globex" in hrefs(table) and "/audit?actor=test" in hrefs(table)
    # A Company-Admin of acme: the moves to and from globex are redacted and link nothing.
    page = soup(records.browser("cadmin").get("/ddis/44/2071"))
    rows = page.select("table.audit tbody tr")
    redacted = [r for r in rows if "another company" in r.get_text()]
    assert len(redacted) == 2
    assert all(hrefs(r) == [] for r in redacted)
    assert "globex" not in str(page.main).lower()
    assert [h for h in hrefs(page.select_one("#intervals")) if h.startswith("/companies/")] == [
        "/companies/acme",
        "/companies/acme",
    ]
