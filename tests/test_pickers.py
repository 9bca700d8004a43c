"""Company pickers (docs/pages.md#company-pickers): GET /companies/suggest for every
role and purpose, its order, limit, case and escaping; the service without HTTP; and every
form and filter asking for companies, posted as a browser without JavaScript would (the
identifier typed), an unknown one answering 400 with the field message and the closest matches.
"""

from __future__ import annotations

from typing import Any

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import select

from webapp.access import Principal
from webapp.errors import Forbidden, Invalid
from webapp.extensions import db
from webapp.models import Account
from webapp.services import companies
from webapp.services.history import actions as audit_actions
from webapp.services.identity import accounts

from .factories import ACME, GLOBEX, INITECH, ROLES, snapshot
from .snapshots import kept

HOSTILE = "<script>alert(1)</script>"
BULK = [f"bulk{n:02d}" for n in range(25)]
NAMED: dict[str, str] = {
    ACME: "Acme Telecom",
    GLOBEX: "Globex",
    INITECH: "Initech",
    "acme-north": "Acme North",  # its identifier starts with acme
    "beta": "Beta ACME Holdings",  # its name holds acme, in capitals
    "north": "North Telecom",  # a prefix match for "north", after acme-north by identifier
    "zeta-acme": "Zeta",  # its identifier holds acme
    "pct": "100% Voice",  # LIKE's wildcards are plain characters to a picker
    "under_score": "Under Score",
    "evil": HOSTILE,
    **{c: f"Bulk {c[4:]}" for c in BULK},
}
EVERY = sorted(NAMED)
ROLE_NAMES = ("root", "cadmin", "cadmin2", "summary", "reporter", "reporter2")
ROLE_NAMES += ("cadmin_reporter", "nobody")
PURPOSES = ("records", "reports", "audit", "grants", "webhooks")
NO = None  # the picker is not the role's: 403
# role -> purpose -> the companies its picker offers (NO: it may not use that picker)
SCOPES: dict[str, dict[str, list[str] | None]] = {
    "root": {
        "records": EVERY,
        "reports": EVERY,
        "audit": EVERY,
        "grants": EVERY,
        "webhooks": EVERY,
    },
    "cadmin": {"records": [ACME], "reports": NO, "audit": [ACME], "grants": NO, "webhooks": NO},
    "cadmin2": {
        "records": [ACME, INITECH],
        "reports": NO,
        "audit": [ACME, INITECH],
        "grants": NO,
        "webhooks": NO,
    },
    "summary": {"records": NO, "reports": EVERY, "audit": NO, "grants": NO, "webhooks": NO},
    "reporter": {"records": NO, "reports": [ACME], "audit": NO, "grants": NO, "webhooks": NO},
    "reporter2": {
        "records": NO,
        "reports": [ACME, INITECH],
        "audit": NO,
        "grants": NO,
        "webhooks": NO,
    },
    "cadmin_reporter": {
        "records": [GLOBEX],
        "reports": [ACME],
        "audit": [GLOBEX],
        "grants": NO,
        "webhooks": NO,
    },
    "nobody": {"records": NO, "reports": NO, "audit": NO, "grants": NO, "webhooks": NO},
}


# role -> every company it may see: what /companies/suggest offers without `for` (§10)
VISIBLE: dict[str, list[str]] = {
    "root": EVERY,
    "cadmin": [ACME],
    "cadmin2": [ACME, INITECH],
    "summary": EVERY,
    "reporter": [ACME],
    "reporter2": [ACME, INITECH],
    "cadmin_reporter": sorted([ACME, GLOBEX]),
    "nobody": [],
}


@pytest.fixture
def world_companies() -> dict[str, str]:
    return NAMED


@pytest.fixture
def world_accounts() -> dict[str, str]:
    return {role: role for role in ROLE_NAMES}


@pytest.fixture
@kept
def world(world):
    world.factory.ddi("44", "2071234567", ACME)
    world.factory.user("ana", ACME)
    world.add("boss", "cadmin")  # an account whose grants the tests edit
    return world


def principal_of(role: str) -> Principal:
    grants: dict[str, Any] = ROLES[role]
    return Principal(
        username=role,
        via="ui",
        system_admin=grants.get("system_admin", False),
        admin_of=frozenset(grants.get("admin_of", ())),
        billing_summary=grants.get("billing_summary", False),
        reporting_for=frozenset(grants.get("reporting_for", ())),
    )


def ids(found) -> list[str]:
    return [c.id for c in found]


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def suggested(client, purpose: str, q: str = "") -> list[str]:
    response = client.get("/companies/suggest", query_string={"for": purpose, "q": q})
    assert response.status_code == 200, response.get_data(as_text=True)[:300]
    return [b["data-value"] for b in soup(response).select("[role=option][data-value]")]


def options_of(response) -> list[str]:
    return [b["data-value"] for b in soup(response).select("[role=option][data-value]")]


def post(client, path: str, data: dict[str, Any], *, htmx: bool = False):
    headers = {"HX-Request": "true"} if htmx else {}
    return client.post(path, data={**data, "csrf_token": client.csrf}, headers=headers)


def field_error(page: BeautifulSoup, name: str) -> str | None:
    control = page.find("input", attrs={"name": name})
    assert control is not None, f"no field {name}"
    message = control.find_parent("div", class_="field").find(class_="error")
    return message.get_text(strip=True) if message else None


def matches(page: BeautifulSoup, field_id: str) -> list[str]:
    return [c.get_text() for c in page.select(f"#{field_id}-matches code")]


def chosen(page: BeautifulSoup, name: str) -> list[str]:
    return [i["value"] for i in page.select(f"#{name}-chosen input[type=hidden][name={name}]")]


def grants_of(username: str) -> dict[str, Any]:
    db.session.rollback()
    account = db.session.scalars(select(Account).where(Account.username == username)).one()
    return accounts.grants_of(account)


# --- the service -------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLE_NAMES)
@pytest.mark.parametrize("purpose", PURPOSES)
def test_suggest_offers_exactly_the_pickers_companies(world, role, purpose):
    me = principal_of(role)
    expected = SCOPES[role][purpose]
    if expected is None:
        for call in (companies.suggest, companies.find, companies.closest):
            with pytest.raises(Forbidden):
                call(me, purpose, "acme")
        return
    assert ids(companies.suggest(me, purpose, "", limit=100)) == expected
    assert ids(companies.suggest(me, purpose, "")) == expected[:20]
    for company in EVERY:  # each company of the scope is found by its identifier, no other
        found = companies.find(me, purpose, company.upper())
        assert (found.id if found else None) == (company if company in expected else None)
        assert set(ids(companies.suggest(me, purpose, company))) <= set(expected)
        assert set(ids(companies.closest(me, purpose, company + "x"))) <= set(expected)


def test_suggest_orders_identifier_prefixes_first_then_contains(world):
    me = principal_of("root")
    assert ids(companies.suggest(me, "grants", "acme")) == [
        "acme",
        "acme-north",
        "beta",
        "zeta-acme",
    ]
    assert ids(companies.suggest(me, "grants", "north")) == ["north", "acme-north"]
    assert ids(companies.suggest(me, "grants", "holdings")) == ["beta"]  # by name
    assert ids(companies.suggest(me, "grants", "nothing like it")) == []


def test_suggest_ignores_case_and_spaces(world):
    me = principal_of("root")
    expected = ids(companies.suggest(me, "records", "acme"))
    for typed in ("ACME", " Acme ", "aCmE"):
        assert ids(companies.suggest(me, "records", typed)) == expected
    assert ids(companies.suggest(me, "records", "TELECOM")) == ["acme", "north"]
    assert companies.find(me, "records", " ACME ").id == ACME


def test_suggest_takes_wildcards_literally(world):
    me = principal_of("root")
    assert ids(companies.suggest(me, "records", "%")) == ["pct"]
    assert ids(companies.suggest(me, "records", "_")) == ["under_score"]
    assert ids(companies.suggest(me, "records", "/")) == ["evil"]  # in </script>
    assert companies.find(me, "records", "acm%") is None
    assert companies.find(me, "records", "bulk0_") is None


def test_suggest_gives_at_most_twenty(world):
    me = principal_of("root")
    assert ids(companies.suggest(me, "records", "bulk")) == BULK[:20]
    assert ids(companies.suggest(me, "records", "")) == EVERY[:20]
    assert len(companies.suggest(me, "records", "u")) == 20


def test_closest_matches_of_a_mistyped_identifier(world):
    me = principal_of("root")
    assert ids(companies.closest(me, "records", "acmee")) == [
        "acme",
        "acme-north",
        "beta",
        "zeta-acme",
    ]
    assert ids(companies.closest(me, "records", "bulk99")) == BULK[:5]
    assert companies.closest(me, "records", "") == []
    assert ids(companies.closest(principal_of("cadmin"), "records", "globex")) == []


def test_an_unknown_purpose_is_invalid(world):
    with pytest.raises(Invalid):
        companies.suggest(principal_of("root"), "everything", "")


# --- GET /companies/suggest --------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLE_NAMES)
def test_suggest_endpoint_for_every_role_and_purpose(world, role):
    client = world.browser(role)
    for purpose in PURPOSES:
        expected = SCOPES[role][purpose]
        if expected is None:
            response = client.get("/companies/suggest", query_string={"for": purpose, "q": ""})
            assert response.status_code == 403, purpose
            assert "data-value" not in response.get_data(as_text=True)
            continue
        assert suggested(client, purpose) == expected[:20], purpose
        assert suggested(client, purpose, "ACME") == [
            c for c in ["acme", "acme-north", "beta", "zeta-acme"] if c in expected
        ], purpose


@pytest.mark.parametrize("role", ROLE_NAMES)
def test_suggest_without_a_purpose_offers_what_the_account_may_see(world, role):
    """decisions.md §10: `/companies/suggest?q=TEXT` alone answers the companies the signed-in
    account may see, for every role (none: an empty answer, not a refusal)."""
    client = world.browser(role)
    expected = VISIBLE[role]
    for query in ({"q": ""}, {"for": "", "q": ""}, {"for": "  ", "q": ""}):
        response = client.get("/companies/suggest", query_string=query)
        assert response.status_code == 200, query
        assert options_of(response) == expected[:20], query
    response = client.get("/companies/suggest", query_string={"q": "ACME"})
    assert options_of(response) == [
        c for c in ["acme", "acme-north", "beta", "zeta-acme"] if c in expected
    ]
    assert ids(companies.suggest(principal_of(role), "", "")) == expected[:20]


def test_suggest_endpoint_answers_a_fragment(world):
    client = world.browser("root")
    response = client.get("/companies/suggest", query_string={"for": "records", "q": "bulk"})
    assert response.status_code == 200
    body = response.get_data(as_text=True)
    assert "<html" not in body and "<body" not in body
    page = soup(response)
    options = page.select("button[role=option][data-value]")
    assert len(options) == 20
    assert all(o["type"] == "button" for o in options)
    assert options[0].get_text(" ", strip=True) == "bulk00 Bulk 00"


def test_suggest_endpoint_escapes(world):
    client = world.browser("root")
    body = client.get("/companies/suggest?for=grants&q=script").get_data(as_text=True)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and HOSTILE not in body
    body = client.get("/companies/suggest", query_string={"for": "grants", "q": '<b x="1">'})
    text = body.get_data(as_text=True)
    assert "<b " not in text and "&lt;b x=&#34;1&#34;&gt;" in text
    assert "No company matches" in text


def test_suggest_endpoint_refuses_bad_requests(world, factory):
    response = factory.client.get("/companies/suggest?for=records&q=a")
    assert response.status_code == 302 and "/login" in response.headers["Location"]
    client = world.browser("root")
    for query in ({"for": "all", "q": "a"}, {"for": "everything", "q": ""}):
        response = client.get("/companies/suggest", query_string=query)
        assert response.status_code == 400
        assert "records, reports, audit, grants or webhooks" in response.get_data(as_text=True)
    long = client.get("/companies/suggest", query_string={"for": "records", "q": "a" * 5000})
    assert long.status_code == 200


# --- record forms and lists --------------------------------------------------------------------

NEW = {
    "/ddis/new": {"dialcode": "44", "number": "2079990000", "virt_exten": "7"},
    "/users/new": {"username": "eve", "virt_exten": "7"},
}


@pytest.mark.parametrize("path", sorted(NEW))
def test_create_form_has_an_empty_company_picker(world, path):
    page = soup(world.browser("root").get(path))
    assert page.select("select") == []
    field = page.find("input", attrs={"name": "company"})
    assert field.get("value", "") == ""
    assert field["role"] == "combobox"
    assert field["hx-get"].startswith("/companies/suggest?for=records")


@pytest.mark.parametrize("path", sorted(NEW))
@pytest.mark.parametrize("htmx", [False, True])
def test_create_needs_a_known_company(world, path, htmx):
    client = world.browser("root")
    before = snapshot()
    response = post(client, path, {**NEW[path], "company": ""}, htmx=htmx)
    assert response.status_code == 400
    assert field_error(soup(response), "company") == "required"
    assert ("<html" in response.get_data(as_text=True)) is not htmx

    response = post(client, path, {**NEW[path], "company": "acmee"}, htmx=htmx)
    assert response.status_code == 400
    page = soup(response)
    assert field_error(page, "company") == "unknown company"
    assert page.find("input", attrs={"name": "company"})["value"] == "acmee"
    assert page.find("input", attrs={"name": "company"})["aria-invalid"] == "true"
    assert matches(page, "company") == ["acme", "acme-north", "beta", "zeta-acme"]
    assert snapshot() == before

    # The identifier typed in any case names its company.
    response = post(client, path, {**NEW[path], "company": " ACME "}, htmx=htmx)
    assert response.status_code in (200, 302)
    assert snapshot() != before


def test_an_empty_create_form_says_every_problem_at_once(world):
    """Not the company first and the other fields after it is fixed (a walk at bench scale)."""
    client = world.browser("root")
    before = snapshot()
    empty = {"dialcode": "", "number": "", "virt_exten": "", "company": ""}
    response = post(client, "/ddis/new", empty)
    assert response.status_code == 400
    page = soup(response)
    assert field_error(page, "company") == "required"
    for name in ("dialcode", "number", "virt_exten"):
        assert field_error(page, name), name
    response = post(client, "/ddis/new", {**empty, "dialcode": "44x", "company": "nosuchco"})
    page = soup(response)
    assert field_error(page, "company") == "unknown company"
    assert field_error(page, "dialcode") == "must be 1 to 7 digits"
    assert snapshot() == before


def test_a_company_admin_cannot_name_another_company(world):
    client = world.browser("cadmin")
    before = snapshot()
    for company in (GLOBEX, INITECH, "nope"):
        response = post(client, "/users/new", {**NEW["/users/new"], "company": company})
        assert response.status_code == 400
        assert field_error(soup(response), "company") == "unknown company"
    response = post(client, "/ddis/44/2071234567/edit", {"virt_exten": "1", "company": GLOBEX})
    assert response.status_code == 400
    assert field_error(soup(response), "company") == "unknown company"
    assert snapshot() == before


def test_edit_reads_the_picker(world):
    """Edit holds the company (a picker); Link keeps the DDI's company and has none
    (test_views_records.py)."""
    client = world.browser("root")
    assert (
        soup(client.get("/ddis/44/2071234567/link")).find("input", attrs={"name": "company"})
        is None
    )
    path = "/ddis/44/2071234567/edit"
    page = soup(client.get(path))
    assert page.find("input", attrs={"name": "company"})["value"] == ACME  # the record's own
    before = snapshot()
    for typed, message in (("", "required"), ("globexx", "unknown company")):
        response = post(client, path, {"virt_exten": "1", "company": typed})
        assert response.status_code == 400
        assert field_error(soup(response), "company") == message
    assert snapshot() == before
    response = post(client, path, {"virt_exten": "1", "company": "Globex"})
    assert response.status_code == 302
    assert ("44", "2071234567", "1", GLOBEX) in snapshot()["ddis"]


@pytest.mark.parametrize("path", ["/ddis", "/users"])
def test_list_filter_takes_an_identifier(world, path):
    client = world.browser("root")
    page = soup(client.get(path, query_string={"company": "ACME"}))
    assert page.find("input", attrs={"name": "company"})["value"] == ACME
    assert len(page.select("#rows tbody tr")) == 1
    for htmx in (False, True):
        headers = {"HX-Request": "true"} if htmx else {}
        response = client.get(path, query_string={"company": "acmee"}, headers=headers)
        assert response.status_code == 400
        page = soup(response)
        assert page.select("#rows tbody tr, tbody tr") == []
        if not htmx:
            assert page.select_one("#filter-company-error").get_text() == "unknown company"
            assert matches(page, "filter-company")[:1] == [ACME]
    # A Company-Admin's filter does not know another company: the same answer as a missing one.
    cadmin = world.browser("cadmin")
    for company in (GLOBEX, "nope"):
        response = cadmin.get(path, query_string={"company": company})
        assert response.status_code == 400
        assert soup(response).select_one("#filter-company-error").get_text() == "unknown company"


# --- the audit filter ----------------------------------------------------------------------------


def test_audit_filter_takes_an_identifier(world):
    client = world.browser("cadmin")
    response = client.get("/audit", query_string={"company": "ACME"})
    assert response.status_code == 200
    page = soup(response)
    assert page.find("input", attrs={"name": "company"})["value"] == ACME
    assert page.select("select[name=company]") == []
    for company in (GLOBEX, "acmee"):
        response = client.get("/audit", query_string={"company": company})
        assert response.status_code == 400
        page = soup(response)
        assert page.select_one("#company-error").get_text() == "unknown company"
        assert GLOBEX not in matches(page, "company")
    response = client.get("/audit?company=acmee", headers={"HX-Request": "true"})
    assert response.status_code == 400
    assert "unknown company" in response.get_data(as_text=True)
    root = world.browser("root")
    assert matches(soup(root.get("/audit?company=globexx")), "company") == [GLOBEX]


# --- the report choice ---------------------------------------------------------------------------


def location(response) -> str:
    assert response.status_code == 302, response.get_data(as_text=True)[:500]
    return response.headers["Location"]


def test_report_adds_and_removes_companies_by_address(world):
    client = world.browser("reporter2")
    page = soup(client.get("/reports/ddis"))
    assert page.select("select[name=company]") == []
    assert chosen(page, "company") == []
    assert page.select_one("#add_company")["hx-get"].startswith("/companies/suggest?for=reports")

    # Show, with the picker left empty: the report's own address, as the links name it.
    url = location(client.get("/reports/ddis?company=acme&add_company=&month=10&year=2026"))
    assert url == "/reports/ddis?company=acme&month=10&year=2026"
    url = location(client.get("/reports/ddis?add_company=ACME&add=company&month=10&year=2026"))
    assert url == "/reports/ddis?company=acme&month=10&year=2026"
    url = location(client.get("/reports/ddis?company=initech&add_company=acme&month=10"))
    assert url == "/reports/ddis?company=initech&company=acme&month=10"
    page = soup(client.get(url))
    assert chosen(page, "company") == [INITECH, ACME]
    buttons = page.select("#company-chosen button[name=remove]")
    assert [b["value"] for b in buttons] == ["company:initech", "company:acme"]
    assert all(b["type"] == "submit" for b in buttons)
    url = location(client.get(url + "&remove=company:initech"))
    assert url == "/reports/ddis?company=acme&month=10"
    assert chosen(soup(client.get(url)), "company") == [ACME]


def test_report_picker_refuses_a_company_it_may_not_report_on(world):
    client = world.browser("reporter2")
    for company in (GLOBEX, "acmee"):
        response = client.get(
            "/reports/users", query_string={"company": ACME, "add_company": company}
        )
        assert response.status_code == 400
        page = soup(response)
        assert chosen(page, "company") == [ACME]  # what was chosen stays
        assert page.select_one("#add_company")["value"] == company
        assert page.select_one("#add_company-error").get_text() == "unknown company"
        assert GLOBEX not in matches(page, "add_company")
        assert page.select("table.matrix, table.calendar") == []


# --- the grants ----------------------------------------------------------------------------------

GRANTS = "/admin/accounts/boss/grants"


def test_grants_page_is_a_list_of_chosen_companies(world):
    page = soup(world.browser("root").get(GRANTS))
    assert page.select("select") == []
    assert "Ctrl" not in page.get_text()
    assert chosen(page, "admin_of") == [ACME]
    assert chosen(page, "reporting_for") == []
    [remove] = page.select("#admin_of-chosen button[name=remove]")
    assert remove["value"] == "admin_of:acme" and remove["type"] == "submit"
    assert page.select_one("#add_admin_of")["hx-get"].startswith("/companies/suggest?for=grants")
    # Enter in a text field submits the form's own button, not the first Remove.
    first = page.select_one("main form[method=post] button[type=submit]")
    assert "name" not in first.attrs and first.get_text() == "Save grants"


@pytest.mark.parametrize("htmx", [False, True])
def test_grants_remove_and_add_keep_the_other_grants(world, htmx):
    client = world.browser("root")
    before = grants_of("boss")
    data = {"admin_of": [ACME, GLOBEX], "reporting_for": [INITECH], "billing_summary": "y"}
    response = post(client, GRANTS, {**data, "remove": "admin_of:acme"}, htmx=htmx)
    assert response.status_code == 200
    page = soup(response)
    assert chosen(page, "admin_of") == [GLOBEX]
    assert chosen(page, "reporting_for") == [INITECH]
    assert page.select_one("#billing_summary").has_attr("checked")
    response = post(client, GRANTS, {**data, "add_reporting_for": "GLOBEX", "add": "reporting_for"})
    assert response.status_code == 200
    page = soup(response)
    assert chosen(page, "admin_of") == [ACME, GLOBEX]
    assert chosen(page, "reporting_for") == [INITECH, GLOBEX]
    assert page.select_one("#add_reporting_for").get("value", "") == ""
    response = post(client, GRANTS, {**data, "add_admin_of": "nope", "add": "admin_of"})
    assert response.status_code == 400
    page = soup(response)
    assert page.select_one("#add_admin_of-error").get_text() == "unknown company"
    assert page.select_one("#add_admin_of")["value"] == "nope"
    assert chosen(page, "admin_of") == [ACME, GLOBEX]
    assert grants_of("boss") == before  # add and remove save nothing

    # Saving with a company still typed in a picker grants it too.
    response = post(client, GRANTS, {**data, "add_admin_of": "initech"})
    assert response.status_code == 302
    assert grants_of("boss") == {
        "active": True,
        "system_admin": False,
        "admin_of": [ACME, GLOBEX, INITECH],
        "billing_summary": True,
        "reporting_for": [INITECH],
    }
    # An unknown one typed saves nothing.
    response = post(client, GRANTS, {"admin_of": [ACME], "add_admin_of": "nope"})
    assert response.status_code == 400
    assert grants_of("boss")["admin_of"] == [ACME, GLOBEX, INITECH]


def test_new_account_form_keeps_what_was_typed_across_add_and_remove(world):
    client = world.browser("root")
    page = soup(client.get("/admin/accounts/new"))
    assert page.select("select") == []
    assert chosen(page, "admin_of") == [] and chosen(page, "reporting_for") == []
    data = {"username": "clerk", "admin_of": [ACME, GLOBEX], "reporting_for": [INITECH]}
    response = post(client, "/admin/accounts/new", {**data, "remove": "admin_of:globex"})
    assert response.status_code == 200
    page = soup(response)
    assert page.select_one("#username")["value"] == "clerk"
    assert chosen(page, "admin_of") == [ACME] and chosen(page, "reporting_for") == [INITECH]
    response = post(
        client,
        "/admin/accounts/new",
        {"username": "clerk", "password": "a long enough one", "add_admin_of": "Acme"},
    )
    assert response.status_code == 302
    assert grants_of("clerk")["admin_of"] == [ACME]


# --- page sizes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["/ddis", "/users", "/ddis/new", "/users/new", "/admin/accounts/new", GRANTS, "/audit"],
)
def test_pages_do_not_list_every_company(world, path):
    page = soup(world.browser("root").get(path))
    # The DDI list's state filter has its own few choices (services/numbers/browse.py).
    options = [o for o in page.select("option") if o.find_parent(id="filter-state") is None]
    if path == "/audit":  # its action filter's choices (services/history/actions.py) only
        options = [o for o in options if o["value"] not in {"", *audit_actions.NAMES}]
    assert options == []
    if path != "/audit":  # whose rows name the companies created
        assert "bulk07" not in str(page.main)
