"""The admin pages: /admin/companies, /admin/accounts, /admin/accounts/<username>/tokens,
/account/tokens, /audit (docs/pages.md).

Every page for every role (allowed: 200 with the right content; forbidden: the 403 page;
signed out: a redirect to /login), the navigation per role, each form's effect (and its audit
entry), the guards (last System-Admin, disabling yourself), secrets shown once and never
stored, searching and paging the companies and accounts, enabling an account, another
account's tokens, the last sign-in, the audit filters and paging, CSRF, and escaping of
hostile text.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import delete, event, select

from webapp.access import Principal
from webapp.database import utcnow, write_transaction
from webapp.errors import Forbidden, Invalid
from webapp.extensions import db
from webapp.models import Account, ApiToken, AuditEntry, Company, Ddi, PhoneUser, RollupState
from webapp.services import companies
from webapp.services.history import audit, audit_query
from webapp.services.identity import accounts, api_tokens
from webapp.services.records import crud, kinds

from .factories import OPERATOR, csrf_from, snapshot

PASSWORD = "correct horse battery"
HOSTILE = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"

# The accounts of the world: username -> role of factories.ROLES.
ACCOUNTS: dict[str, str] = {
    "root": "root",  # System-Admin
    "boss": "cadmin",  # Company-Admin of acme
    "summary": "summary",  # Billing Call-Summary
    "reporter": "reporter_globex",  # Billing/Call Reporting for globex
    "nobody": "nobody",  # no grant
}
ALL = set(ACCOUNTS)
SYSADMIN = {"root"}

# page -> (roles allowed, the <h1> it shows)
PAGES: dict[str, tuple[set[str], str]] = {
    "/admin/companies": (SYSADMIN, "Companies"),
    "/admin/companies/acme/rename": (SYSADMIN, "Rename company acme"),
    "/admin/accounts": (SYSADMIN, "Sign-in accounts"),
    "/admin/accounts/new": (SYSADMIN, "New sign-in account"),
    "/admin/accounts/nobody/grants": (SYSADMIN, "Grants of nobody"),
    "/admin/accounts/nobody/password": (SYSADMIN, "Reset the password of nobody"),
    "/admin/accounts/nobody/disable": (SYSADMIN, "Disable nobody?"),
    "/admin/accounts/nobody/tokens": (SYSADMIN, "API tokens of nobody"),
    "/admin/accounts/nobody/reset-mfa": (SYSADMIN, "Reset the second factors of nobody?"),
    "/account/tokens": (ALL, "Your API tokens"),
    "/account/security": (ALL, "Security"),
    "/account/confirm": (ALL, "Confirm it is you"),
    "/audit": ({"root", "boss"}, "Audit log"),
}


@pytest.fixture
def world_companies() -> dict[str, str]:
    return {"acme": "Acme Ltd", "globex": "Globex Corp"}


@pytest.fixture
def world_accounts() -> dict[str, str]:
    return ACCOUNTS


@pytest.fixture
def world(world):
    """The shared world (acme and globex, the ACCOUNTS) with two DDIs and a phone user at acme;
    answers the callers by username."""
    world.factory.ddi("44", "2071234567", "acme")
    world.factory.ddi("44", "2071234568", "acme")
    world.factory.user("alice", "acme")
    return world.callers


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def h1(response) -> str:
    return " ".join(soup(response).h1.get_text(" ", strip=True).split())


def flashes(response) -> list[str]:
    return [p.get_text(strip=True) for p in soup(response).select("#flashes .flash")]


def account_row(username: str) -> Account:
    db.session.rollback()
    return db.session.scalars(select(Account).where(Account.username == username)).one()


def counts() -> dict[str, Any]:
    """What the admin forms may change, beside factories.snapshot()."""
    db.session.rollback()
    return {
        **snapshot(),
        "companies": sorted(db.session.execute(select(Company.id, Company.name)).all()),
        "accounts": sorted(
            (a.username, a.active, a.session_epoch, a.password_hash, str(accounts.grants_of(a)))
            for a in db.session.scalars(select(Account))
        ),
        "tokens": sorted(
            (t.id, t.revoked_at is None) for t in db.session.scalars(select(ApiToken))
        ),
    }


def audits(action: str) -> list[AuditEntry]:
    db.session.rollback()
    return list(
        db.session.scalars(
            select(AuditEntry).where(AuditEntry.action == action).order_by(AuditEntry.id)
        )
    )


def api_read(factory, token: str):
    return factory.client.post(
        "/rest/ops/read/", json={"type": "ddi"}, headers={"Authorization": f"Bearer {token}"}
    )


def post(client, path: str, data: dict[str, Any] | None = None, *, csrf: bool = True):
    data = dict(data or {})
    if csrf:
        data["csrf_token"] = client.csrf
    return client.post(path, data=data)


# --- every page for every role ------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(PAGES))
def test_every_page_for_every_role(world, factory, path):
    allowed, title = PAGES[path]
    for role in ACCOUNTS:
        response = factory.browser(role).get(path)
        if role in allowed:
            assert response.status_code == 200, (role, path)
            assert h1(response) == title, (role, path)
        else:
            assert response.status_code == 403, (role, path)
            assert h1(response) == "Not allowed (403)", (role, path)
            assert not soup(response).select("main form[method=post]"), (role, path)


@pytest.mark.parametrize("path", sorted(PAGES))
def test_signed_out_visitors_are_sent_to_login(world, client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response.headers["Location"].startswith("/login?next=")


@pytest.mark.parametrize(
    "path",
    [
        "/admin/companies",
        "/admin/companies/acme/rename",
        "/admin/accounts/new",
        "/admin/accounts/nobody/grants",
        "/admin/accounts/nobody/password",
        "/admin/accounts/nobody/disable",
        "/admin/accounts/nobody/enable",
    ],
)
def test_admin_posts_from_other_roles_are_forbidden_and_change_nothing(world, factory, path):
    data = {
        "id": "newco",
        "name": "New",
        "username": "sneaky",
        "password": "0123456789abc",
        "system_admin": "y",
    }
    for role in ALL - SYSADMIN:
        browser = factory.browser(role)
        before = counts()
        response = post(browser, path, data)
        assert response.status_code == 403, (role, path)
        assert counts() == before, (role, path)


def test_the_navigation_shows_only_what_the_role_may_open(world, factory):
    nav_targets = {
        "/admin/companies": SYSADMIN,
        "/admin/accounts": SYSADMIN,
        "/audit": {"root", "boss"},
        "/account/tokens": ALL,
    }
    for role in ACCOUNTS:
        page = soup(factory.browser(role).get("/account/tokens"))
        links = {a["href"] for a in page.select("header.topbar a[href]")}
        for target, roles in nav_targets.items():
            assert (target in links) == (role in roles), (role, target)


# --- companies -----------------------------------------------------------------------------------


def test_companies_list_shows_counts(world, factory):
    page = soup(factory.browser("root").get("/admin/companies"))
    rows = {
        tr.find("td").get_text(strip=True): [td.get_text(strip=True) for td in tr.find_all("td")]
        for tr in page.select("tbody tr")
    }
    assert set(rows) == {"acme", "globex"}
    assert rows["acme"][1:2] == ["Acme Ltd"] and rows["acme"][3:5] == ["2", "1"]
    assert rows["globex"][3:5] == ["0", "0"]


def test_a_companies_page_is_four_queries_whatever_the_number_of_companies(world, factory):
    # The list is searched and paged (services.companies.search), never every company at once:
    # the rollup's state per kind, the count, and the page with its companies' counts.
    statements: list[str] = []

    def count(conn, cursor, statement, *args):
        statements.append(statement)

    db.session.rollback()
    event.listen(db.engine, "before_cursor_execute", count)
    try:
        listing = companies.search(OPERATOR)
    finally:
        event.remove(db.engine, "before_cursor_execute", count)
    assert [(r.id, r.ddis, r.users) for r in listing.rows] == [("acme", 2, 1), ("globex", 0, 0)]
    assert (listing.total, listing.number, listing.pages) == (2, 1, 1)
    assert len([s for s in statements if s.lstrip().upper().startswith("SELECT")]) == 4


# --- the companies list sorted by its counts ----------------------------------------------------
# company -> (DDIs, phone users) to make, beside the world's acme (2, 1) and globex (0, 0): ties
# on both counts, so the identifier's tie-break shows; c5 loses DDIs again, so a count that went
# down sorts by what is left; c8 loses its only DDI and phone user, so its zeros are rollup rows
# of level 0, sorted among the companies that never held any (no rollup row).
SIZES = {
    "c1": (3, 1),
    "c2": (0, 2),
    "c3": (3, 0),
    "c4": (1, 1),
    "c5": (6, 2),
    "c6": (1, 0),
    "c7": (0, 0),
    "c8": (1, 1),
}


@pytest.fixture
def counted_companies(world) -> None:
    for n, (company, (ddis, users)) in enumerate(SIZES.items()):
        companies.create(OPERATOR, company, f"Company {company}")
        rows = [
            {"dialcode": "33", "number": f"1{n}{i:02d}", "virt_exten": "1", "company": company}
            for i in range(ddis)
        ]
        if rows:
            crud.create(OPERATOR, kinds.DDI, rows)
        people = [
            {"username": f"u{i}", "virt_exten": "2", "company": company} for i in range(users)
        ]
        if people:
            crud.create(OPERATOR, kinds.PHONE_USER, people)
    crud.delete_rows(OPERATOR, kinds.DDI, {"dialcode": "33", "number": "1400", "company": "c5"})
    crud.delete_rows(OPERATOR, kinds.DDI, {"dialcode": "33", "number": "1401", "company": "c5"})
    crud.delete_rows(OPERATOR, kinds.DDI, {"dialcode": "33", "number": "1700", "company": "c8"})
    crud.delete_rows(OPERATOR, kinds.PHONE_USER, {"username": "u0", "company": "c8"})


def counted_now() -> dict[str, tuple[int, int]]:
    """Every company's DDIs and phone users, counted from the records themselves (not from
    the rollup the list reads)."""
    db.session.rollback()
    ddis = Counter(db.session.scalars(select(Ddi.company)))
    users = Counter(db.session.scalars(select(PhoneUser.company)))
    return {c: (ddis[c], users[c]) for c in db.session.scalars(select(Company.id))}


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("sort", ["ddis", "users"])
def test_companies_sort_by_counts_page_after_page(counted_companies, sort, descending):
    counts_now = counted_now()
    assert counts_now["c5"] == (4, 2) and counts_now["acme"] == (2, 1)
    assert counts_now["c8"] == (0, 0)
    which = 0 if sort == "ddis" else 1
    # Ties broken by the identifier, in the same direction as the count.
    expected = sorted(counts_now, key=lambda c: (counts_now[c][which], c), reverse=descending)
    first = companies.search(OPERATOR, sort=sort, descending=descending, per_page=4)
    assert (first.total, first.pages) == (10, 3)
    seen = []
    for number in range(1, first.pages + 1):
        listing = companies.search(
            OPERATOR, sort=sort, descending=descending, page=number, per_page=4
        )
        assert listing.number == number
        seen += [(r.id, (r.ddis, r.users)) for r in listing.rows]
    assert [company for company, _ in seen] == expected
    assert dict(seen) == counts_now
    # The search narrows the sorted list like the others.
    narrowed = companies.search(OPERATOR, "COMPANY", sort=sort, descending=descending)
    assert [r.id for r in narrowed.rows] == [c for c in expected if c in SIZES]


def test_a_count_sort_reads_the_rollup_and_no_record(counted_companies):
    # Sorted by a count, every matching company's count is read: from the rollup
    # (rollup_latest, joined), never by counting the DDIs or phone users themselves. Still
    # four queries.
    statements: list[str] = []

    def count(conn, cursor, statement, *args):
        statements.append(statement)

    db.session.rollback()
    event.listen(db.engine, "before_cursor_execute", count)
    try:
        listing = companies.search(OPERATOR, sort="ddis", descending=True)
    finally:
        event.remove(db.engine, "before_cursor_execute", count)
    assert [r.id for r in listing.rows][:2] == ["c5", "c3"]
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 4
    assert not [s for s in selects if re.search(r"FROM\s+(ddis|phone_users)\b", s)]


def test_the_companies_page_sorts_by_counts_with_sortable_headers(counted_companies, factory):
    browser = factory.browser("root")
    response = browser.get("/admin/companies?sort=users&dir=desc")
    assert response.status_code == 200
    page = soup(response)
    headers = {th.get_text(" ", strip=True): th for th in page.select("thead th")}
    users = next(th for label, th in headers.items() if label.startswith("Phone users"))
    assert users["aria-sort"] == "descending"
    link = users.select_one("a.sort")
    # Named for what it does (the active column's link turns the order round), marked sorted.
    assert link.get_text() == "Phone users (sort ascending)▼"
    assert "dir=asc" in link["href"] and "sort=users" in link["href"]
    assert users.select_one(".sort-mark[aria-hidden=true]").get_text() == "▼"
    ddis = next(th for label, th in headers.items() if label.startswith("DDIs"))
    assert not ddis.has_attr("aria-sort")
    assert ddis.select_one("a.sort .visually-hidden").get_text() == " (sort ascending)"
    assert [th.has_attr("aria-sort") for th in page.select("thead th")].count(True) == 1
    ids = [tr.find("td").get_text(strip=True) for tr in page.select("tbody tr")]
    counts_now = counted_now()
    assert ids == sorted(counts_now, key=lambda c: (counts_now[c][1], c), reverse=True)
    # The narrow screens' sort links offer the counts too.
    narrow = [a.get_text(" ", strip=True) for a in page.select(".sort-links a")]
    assert narrow[2:] == ["DDIs", "Phone users (descending)"]


def test_without_the_rollup_the_counts_are_shown_but_not_sortable(counted_companies, factory):
    with write_transaction() as session:
        session.execute(delete(RollupState))
    browser = factory.browser("root")
    page = soup(browser.get("/admin/companies"))
    rows = {tr.find("td").get_text(strip=True): tr for tr in page.select("tbody tr")}
    assert rows["c5"].select("td")[3].get_text(strip=True) == "4"  # counted, still right
    headers = page.select("thead th")
    assert [bool(th.select("a.sort")) for th in headers] == [True, True, False, False, False, False]
    response = browser.get("/admin/companies?sort=ddis")
    assert response.status_code == 400
    assert "needs the report rollup" in soup(response).select_one("[role=alert]").get_text()


def test_create_and_rename_a_company(world, factory):
    browser = factory.browser("root")
    response = post(browser, "/admin/companies", {"id": "initech", "name": "Initech"})
    assert response.status_code == 302 and response.headers["Location"] == "/admin/companies"
    page = browser.get("/admin/companies")
    assert "Company initech created." in flashes(page)
    assert "Initech" in page.get_data(as_text=True)

    response = post(browser, "/admin/companies/initech/rename", {"name": "Initech Inc"})
    assert response.status_code == 302
    db.session.rollback()
    assert db.session.get(Company, "initech").name == "Initech Inc"
    [entry] = audits("company.rename")
    assert (entry.actor, entry.via, entry.company) == ("root", "ui", "initech")
    assert entry.before["name"] == "Initech" and entry.after["name"] == "Initech Inc"


def test_company_form_errors_are_shown_beside_the_field(world, factory):
    browser = factory.browser("root")
    before = counts()
    response = post(browser, "/admin/companies", {"id": "Bad Id!", "name": "X"})
    assert response.status_code == 400
    error = soup(response).select_one("#id-error")
    assert error is not None and "a-z 0-9" in error.get_text()

    response = post(browser, "/admin/companies", {"id": "acme", "name": "Again"})
    assert response.status_code == 409
    assert "already exists" in soup(response).select_one(".form-error").get_text()

    response = post(browser, "/admin/companies/acme/rename", {"name": "   "})
    assert response.status_code == 400
    assert soup(response).select_one("#name-error").get_text() == "required"
    assert counts() == before

    assert browser.get("/admin/companies/nope/rename").status_code == 404


# --- accounts ------------------------------------------------------------------------------------


def test_accounts_list_shows_grants_and_status(world, factory):
    accounts.disable(OPERATOR, "summary")
    page = soup(factory.browser("root").get("/admin/accounts"))
    rows = {tr["id"].removeprefix("account-"): tr for tr in page.select("tbody tr")}
    assert set(rows) == ALL
    assert "System-Admin" in rows["root"].get_text()
    assert "Company-Admin of acme" in rows["boss"].get_text()
    assert "Billing/Call Reporting for globex" in rows["reporter"].get_text()
    assert "disabled" in rows["summary"].get_text()
    assert "no grants" in rows["nobody"].get_text()
    # No Disable link for yourself nor for an account already disabled.
    disable_links = {a["href"] for a in page.select("a[href$='/disable']")}
    assert disable_links == {
        f"/admin/accounts/{name}/disable" for name in ("boss", "reporter", "nobody")
    }


def test_create_account_with_a_generated_password_shown_once(world, factory):
    browser = factory.browser("root")
    response = post(
        browser,
        "/admin/accounts/new",
        {"username": "newbie", "password": "", "admin_of": ["acme", "globex"]},
    )
    assert response.status_code == 200
    assert "no-store" in response.headers["Cache-Control"]
    password = soup(response).select_one("#secret").get_text()
    assert len(password) >= 20
    with browser.session_transaction() as session:
        assert password not in repr(dict(session))  # not in a flash cookie
    listing = browser.get("/admin/accounts")
    assert password not in listing.get_data(as_text=True)
    assert "Company-Admin of acme, globex" in listing.get_data(as_text=True)

    newbie = factory.browser("newbie", password)  # signs in through the real form
    assert newbie.get("/audit").status_code == 200
    [entry] = audits("account.create")[-1:]
    assert entry.actor == "root" and entry.via == "ui" and entry.after["username"] == "newbie"


def test_create_account_with_a_chosen_password_and_grants(world, factory):
    browser = factory.browser("root")
    response = post(
        browser,
        "/admin/accounts/new",
        {
            "username": "clerk",
            "password": "a long enough one",
            "billing_summary": "y",
            "reporting_for": ["globex"],
        },
    )
    assert response.status_code == 302
    assert "Account clerk created." in flashes(browser.get(response.headers["Location"]))
    grants = accounts.grants_of(account_row("clerk"))
    assert grants["billing_summary"] and grants["reporting_for"] == ["globex"]
    assert not grants["system_admin"] and grants["admin_of"] == []
    factory.browser("clerk", "a long enough one")


def test_create_account_errors(world, factory):
    browser = factory.browser("root")
    before = counts()
    response = post(browser, "/admin/accounts/new", {"username": "Bad Name", "password": ""})
    assert response.status_code == 400
    assert soup(response).select_one("#username-error") is not None
    response = post(browser, "/admin/accounts/new", {"username": "ok", "password": "short"})
    assert response.status_code == 400
    assert soup(response).select_one("#password-error") is not None
    response = post(browser, "/admin/accounts/new", {"username": "ok", "admin_of": ["nope"]})
    assert response.status_code == 400
    assert soup(response).select_one("#admin_of-error").get_text() == "unknown company"
    response = post(browser, "/admin/accounts/new", {"username": "boss"})
    assert response.status_code == 409
    assert counts() == before


def test_edit_grants_is_audited(world, factory):
    browser = factory.browser("root")
    page = soup(browser.get("/admin/accounts/boss/grants"))
    selected = [i["value"] for i in page.select("#admin_of-chosen input[name=admin_of]")]
    assert selected == ["acme"]
    response = post(
        browser,
        "/admin/accounts/boss/grants",
        {"admin_of": ["acme", "globex"], "billing_summary": "y"},
    )
    assert response.status_code == 302
    grants = accounts.grants_of(account_row("boss"))
    assert grants["admin_of"] == ["acme", "globex"] and grants["billing_summary"]
    [entry] = audits("account.grants")
    assert (entry.actor, entry.via, entry.target) == ("root", "ui", "account boss")
    assert entry.before["admin_of"] == ["acme"] and not entry.before["billing_summary"]
    assert entry.after["admin_of"] == ["acme", "globex"] and entry.after["billing_summary"]
    # The new grants hold from boss's next request on: the report links appear.
    nav = soup(factory.browser("boss").get("/account/tokens")).select("header a[href]")
    assert "/reports/ddis" in {a["href"] for a in nav}


def test_a_system_admin_cannot_remove_its_own_system_admin(world, factory):
    browser = factory.browser("root")
    before = counts()
    response = post(browser, "/admin/accounts/root/grants", {"admin_of": ["acme"]})
    assert response.status_code == 400
    assert "own account" in soup(response).select_one("#system_admin-error").get_text()
    assert counts() == before


NO_GRANTS = {"system_admin": False, "admin_of": [], "billing_summary": False, "reporting_for": []}


def test_the_last_active_system_admin_keeps_the_grant(world, factory):
    with pytest.raises(Invalid, match="last active System-Admin") as caught:
        accounts.set_grants(OPERATOR, "root", **NO_GRANTS)
    assert "system_admin" in caught.value.fields
    assert account_row("root").system_admin

    # With a second active System-Admin, one may demote the other, once.
    factory.account("root2", system_admin=True)
    browser = factory.browser("root")
    response = post(browser, "/admin/accounts/root2/grants", {})
    assert response.status_code == 302
    assert not account_row("root2").system_admin
    # A disabled System-Admin does not count as a remaining one.
    factory.account("root3", system_admin=True)
    accounts.disable(OPERATOR, "root3")
    with pytest.raises(Invalid, match="last active System-Admin"):
        accounts.set_grants(OPERATOR, "root", **NO_GRANTS)


def test_disable_after_confirmation_stops_session_and_tokens(world, factory):
    boss_browser = factory.browser("boss")
    assert api_read(factory, world["boss"].token).status_code == 200
    browser = factory.browser("root")
    confirm = soup(browser.get("/admin/accounts/boss/disable"))
    assert "Are you sure?" in confirm.get_text()
    form = confirm.select_one("main form[method=post]")
    assert form["action"] == "/admin/accounts/boss/disable"
    assert form.select_one("input[name=csrf_token]") is not None
    assert account_row("boss").active  # the GET changed nothing

    response = post(browser, "/admin/accounts/boss/disable")
    assert response.status_code == 302
    assert not account_row("boss").active
    assert audits("account.disable")[-1].actor == "root"
    assert boss_browser.get("/audit").headers["Location"].startswith("/login")
    assert api_read(factory, world["boss"].token).status_code == 401


def test_disabling_yourself_is_refused(world, factory):
    browser = factory.browser("root")
    before = counts()
    response = post(browser, "/admin/accounts/root/disable")
    assert response.status_code == 400
    assert "your own account" in response.get_data(as_text=True)
    assert counts() == before


def test_reset_password_chosen_and_generated(world, factory):
    boss_browser = factory.browser("boss")
    browser = factory.browser("root")
    response = post(browser, "/admin/accounts/boss/password", {"password": "brand new secret"})
    assert response.status_code == 302
    assert boss_browser.get("/audit").status_code == 302  # its session ended
    factory.browser("boss", "brand new secret")

    response = post(browser, "/admin/accounts/boss/password", {"password": ""})
    assert response.status_code == 200
    assert "no-store" in response.headers["Cache-Control"]
    generated = soup(response).select_one("#secret").get_text()
    factory.browser("boss", generated)
    assert [e.actor for e in audits("account.password")] == ["root", "root"]

    response = post(browser, "/admin/accounts/boss/password", {"password": "short"})
    assert response.status_code == 400
    assert soup(response).select_one("#password-error") is not None


# --- tokens --------------------------------------------------------------------------------------


def test_token_is_shown_once_works_and_is_then_listed_by_prefix_only(world, factory):
    browser = factory.browser("root")
    response = post(browser, "/account/tokens", {"label": "billing export"})
    assert response.status_code == 200
    assert "no-store" in response.headers["Cache-Control"]
    raw = soup(response).select_one("#new-token").get_text()
    assert raw.startswith("tad_")
    with browser.session_transaction() as session:
        assert raw not in repr(dict(session))

    assert api_read(factory, raw).status_code == 200

    listing = browser.get("/account/tokens")
    html = listing.get_data(as_text=True)
    assert raw not in html
    row = next(tr for tr in soup(listing).select("tbody tr") if "billing export" in tr.text)
    assert raw[:10] in row.get_text()
    assert "never" not in row.get_text()  # last use recorded


def test_tokens_page_lists_only_your_own_tokens(world, factory):
    api_tokens.create(OPERATOR, "root", "root's script")
    page = soup(factory.browser("boss").get("/account/tokens"))
    rows = page.select("tbody tr")
    assert len(rows) == 1 and "root's script" not in page.get_text()
    [token] = api_tokens.of_account(OPERATOR, "root")[:1]
    assert factory.browser("boss").get(f"/account/tokens/{token.id}/revoke").status_code == 404


def test_revoke_after_confirmation_then_the_api_refuses_the_token(world, factory):
    browser = factory.browser("nobody")
    db.session.rollback()
    [token] = api_tokens.of_account(OPERATOR, "nobody")
    confirm = soup(browser.get(f"/account/tokens/{token.id}/revoke"))
    assert "Are you sure?" in confirm.get_text()
    assert api_read(factory, world["nobody"].token).status_code == 403  # valid, not allowed

    response = post(browser, f"/account/tokens/{token.id}/revoke")
    assert response.status_code == 302
    assert api_read(factory, world["nobody"].token).status_code == 401
    listing = soup(browser.get("/account/tokens"))
    assert not listing.select("a[href$='/revoke']")
    assert listing.select("tr.revoked")


def test_token_label_too_long(world, factory):
    browser = factory.browser("nobody")
    before = counts()
    response = post(browser, "/account/tokens", {"label": "x" * 101})
    assert response.status_code == 400
    assert soup(response).select_one("#label-error") is not None
    assert counts() == before


def test_change_own_password(world, factory):
    browser = factory.browser("reporter")
    before = counts()
    response = post(
        browser,
        "/account/password",
        {"pw-current_password": "wrong password!", "pw-password": "another good one"},
    )
    assert response.status_code == 400
    assert soup(response).select_one("#pw-current_password-error").get_text() == "not correct"
    assert counts() == before

    other = factory.browser("reporter")  # another session of the same account
    response = post(
        browser,
        "/account/password",
        {"pw-current_password": PASSWORD, "pw-password": "another good one"},
    )
    assert response.status_code == 303
    assert response.headers["Location"] == "/account/security#password-head"
    # This session goes on (docs/security.md#sessions); the other one is signed out.
    assert "Password changed" in " ".join(flashes(browser.get("/account/security")))
    assert browser.get("/account/tokens").status_code == 200
    assert other.get("/account/tokens").status_code == 302
    factory.browser("reporter", "another good one")


# --- audit ---------------------------------------------------------------------------------------


def add_entries(entries: list[dict[str, Any]]) -> None:
    with write_transaction() as session:
        audit.record(session, entries)


def company_ids(td):
    """The cell with each company shown as its identifier ('Acme Ltd (acme)' -> 'acme'), as
    the tests compare it."""
    for company in td.select(".company"):
        company.replace_with(company["data-company"])
    td.smooth()  # one text with its neighbours again: 'globex (from acme)'
    return td


def table_rows(response) -> list[list[str]]:
    return [
        [company_ids(td).get_text(" ", strip=True) for td in tr.find_all("td")]
        for tr in soup(response).select("table.audit tbody tr")
        if not tr.select("td.empty")
    ]


def test_audit_filters(world, factory):
    day = datetime(2024, 1, 31, 23, 59, 59)
    add_entries(
        [
            audit.entry(OPERATOR, "x.one", "ddi 44:2079990001", company="acme", at=day),
            audit.entry(
                OPERATOR, "x.two", "ddi 44:2079990001", company="globex", at=day + timedelta(1)
            ),
            audit.entry(
                OPERATOR, "x.three", "user acme/bob", company="acme", at=day - timedelta(1)
            ),
            audit.entry(OPERATOR, "x.four", "ddi 44:20799900012", company="acme", at=day),
        ]
    )
    browser = factory.browser("root")

    def actions(**params) -> list[str]:
        response = browser.get("/audit", query_string=params)
        assert response.status_code == 200, response.get_data(as_text=True)
        return [row[2] for row in table_rows(response)]

    # The target filter names a record, in any form the log may name it, exactly: a number as
    # people write it, dialcode:number, the target as shown (any case), a phone user.
    for typed in ("+44 20 7999 0001", "44:2079990001", "DDI 44:2079990001", "(44) 2079-990.001"):
        assert actions(actor="test", target=typed) == ["x.two", "x.one"], typed
    assert actions(target="acme/bob") == ["x.three"]
    assert actions(target="2079990") == []  # a part of a number is not the number
    assert actions(actor="tes") == []  # actor is exact
    # Newest first; entries of one instant, the later written first.
    assert actions(actor="test", company="acme", date_to="2024-12-31") == [
        "x.four",
        "x.one",
        "x.three",
    ]
    assert actions(date_from="2024-01-31", date_to="2024-01-31") == ["x.four", "x.one"]
    assert actions(date_from="2024-02-01", date_to="2024-02-01") == ["x.two"]
    assert actions(date_to="2024-01-30") == ["x.three"]
    assert actions(target="%") == []  # wildcards are literal
    # The UI's own writes are there too, with what changed as readable field values in one
    # Changes column ("Name: Acme Ltd → changed to Acme Two").
    post(browser, "/admin/companies/acme/rename", {"name": "Acme Two"})
    row = table_rows(browser.get("/audit", query_string={"actor": "root"}))[0]
    # The actor links to the log filtered by it and, for a System-Admin, to its account; the
    # action shows by its readable name.
    assert row[1] == "root (ui) · account root" and row[2] == "Company renamed"
    assert row[5] == "Name: Acme Ltd → changed to Acme Two"
    assert actions(target="company acme") == ["Company renamed", "Company created"]

    response = browser.get("/audit", query_string={"date_from": "31/01/2024"})
    assert response.status_code == 400
    assert soup(response).select_one("#date_from-error").get_text() == "must be yyyy-mm-dd"


def pager(response) -> dict[str, str]:
    return {a["rel"][0]: a["href"] for a in soup(response).select(".pager a")}


@pytest.mark.slow
def test_audit_is_newest_first_and_paged_from_an_entry(world, factory):
    start = datetime(2023, 5, 1)
    # Pairs of entries at one instant: a page boundary between them must split on the id.
    add_entries(
        [
            audit.entry(
                OPERATOR, "x.page", f"item {i}", company="acme", at=start + timedelta(i // 2)
            )
            for i in range(120)
        ]
    )
    browser = factory.browser("root")
    expected = [f"item {i}" for i in reversed(range(120))]

    def walk(path: str, rel: str) -> list[list[str]]:
        pages = []
        while path:
            response = browser.get(path)
            assert response.status_code == 200
            pages.append([row[3] for row in table_rows(response)])
            assert "120 entries" in soup(response).select_one(".count").get_text()
            links = pager(response)
            assert all("company=acme&date_to=" in href for href in links.values())
            path = links.get(rel)
        return pages

    # date_to: only these entries, not the world's own of today.
    forward = walk("/audit?company=acme&date_to=2023-12-31", "next")
    assert [len(p) for p in forward] == [50, 50, 20]
    assert [t for page in forward for t in page] == expected
    backward = walk("/audit?company=acme&date_to=2023-12-31&last=1", "prev")
    assert [len(p) for p in backward] == [50, 50, 20]  # the oldest 50 first, then newer
    assert [t for page in reversed(backward) for t in page] == expected
    # From the oldest page, Newest and Newer; from the newest, Older and Oldest only.
    first = pager(browser.get("/audit?company=acme&date_to=2023-12-31"))
    assert set(first) == {"next", "last"}
    oldest = pager(browser.get("/audit?company=acme&date_to=2023-12-31&last=1"))
    assert set(oldest) == {"first", "prev"}
    # Old page=N addresses still work; past the end, an empty page that links back.
    response = browser.get("/audit?company=acme&date_to=2023-12-31&page=2")
    assert [row[3] for row in table_rows(response)] == expected[50:100]
    response = browser.get("/audit?company=acme&date_to=2023-12-31&page=9")  # past the end
    assert [row[3] for row in table_rows(response)] == expected[70:]  # the oldest 50
    assert set(pager(response)) == {"first", "prev"}
    for bad in ("after=x", "after=999999", "before=1&after=2", "page=x", "page=0"):
        assert browser.get(f"/audit?{bad}").status_code == 400, bad


def test_the_audit_count_stops_at_its_cap(world, factory, monkeypatch):
    monkeypatch.setattr(audit_query, "COUNT_CAP", 7)
    add_entries([audit.entry(OPERATOR, "x.many", f"n {i}", company="acme") for i in range(9)])
    found = audit.search(OPERATOR, company="acme", per_page=5)
    assert (found.total, found.more) == (7, True)
    text = soup(factory.browser("root").get("/audit?company=acme")).select_one(".count").get_text()
    assert "More than 7 entries" in text
    found = audit.search(OPERATOR, company="acme", actor="nobody")
    assert (found.total, found.more, found.rows) == (0, False, [])


def test_a_company_admin_reads_only_its_companies_entries(world, factory):
    add_entries(
        [
            audit.entry(OPERATOR, "x.acme", "thing a", company="acme"),
            audit.entry(OPERATOR, "x.globex", "thing g", company="globex"),
            audit.entry(OPERATOR, "x.none", "thing n"),
        ]
    )
    browser = factory.browser("boss")
    rows = table_rows(browser.get("/audit"))
    assert rows and {row[4] for row in rows} == {"acme"}
    assert "x.acme" in [row[2] for row in rows]
    assert table_rows(browser.get("/audit?company=globex")) == []
    # The company filter is a picker whose suggestions are its companies only.
    suggestions = soup(browser.get("/companies/suggest?for=audit&q="))
    assert [o["data-value"] for o in suggestions.select("[data-value]")] == ["acme"]

    principal = Principal(username="x", via="ui", billing_summary=True)
    with pytest.raises(Forbidden):
        audit.search(principal)


def test_audit_with_htmx_answers_only_the_rows_partial(world, factory):
    browser = factory.browser("root")
    response = browser.get("/audit?actor=test", headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "HX-Request" in response.headers["Vary"]
    html = response.get_data(as_text=True)
    assert "<html" not in html and "<form" not in html
    assert soup(response).select("table.audit tbody tr")
    # htmx restoring history needs the whole page.
    restore = browser.get(
        "/audit?actor=test", headers={"HX-Request": "true", "HX-History-Restore-Request": "true"}
    )
    assert "<html" in restore.get_data(as_text=True)
    page = soup(browser.get("/audit"))
    form = page.select_one("form.filters")
    assert form["method"] == "get" and form["hx-target"] == "#audit-rows"
    assert form["hx-push-url"] == "true" and page.select_one("#audit-rows table")
    bad = browser.get("/audit?date_to=x", headers={"HX-Request": "true"})
    assert bad.status_code == 400 and "must be yyyy-mm-dd" in bad.get_data(as_text=True)


# --- CSRF, escaping, accessibility ---------------------------------------------------------------


def test_posts_without_the_csrf_token_change_nothing(world, factory):
    db.session.rollback()
    [token] = api_tokens.of_account(OPERATOR, "root")
    attempts = [
        ("/admin/companies", {"id": "newco", "name": "New"}),
        ("/admin/companies/acme/rename", {"name": "Renamed"}),
        ("/admin/accounts/new", {"username": "sneaky", "system_admin": "y"}),
        ("/admin/accounts/boss/grants", {"system_admin": "y"}),
        ("/admin/accounts/boss/password", {"password": "0123456789abc"}),
        ("/admin/accounts/boss/disable", {}),
        ("/account/tokens", {"label": "sneaky"}),
        (f"/account/tokens/{token.id}/revoke", {}),
        ("/admin/accounts/boss/enable", {}),
        (f"/admin/accounts/root/tokens/{token.id}/revoke", {}),
        ("/account/password", {"pw-current_password": PASSWORD, "pw-password": "0123456789ab"}),
    ]
    browser = factory.browser("root")
    before = counts()
    for path, data in attempts:
        response = post(browser, path, data, csrf=False)
        assert response.status_code == 400, path
        assert "expired or is not valid" in response.get_data(as_text=True), path
        wrong = post(browser, path, {**data, "csrf_token": "forged"}, csrf=False)
        assert wrong.status_code == 400, path
        assert counts() == before, path


def test_hostile_text_is_escaped(world, factory):
    browser = factory.browser("root")
    assert post(browser, "/admin/companies", {"id": "evil", "name": HOSTILE}).status_code == 302
    response = post(browser, "/account/tokens", {"label": HOSTILE})
    for page in (
        browser.get("/admin/companies"),
        response,
        browser.get("/account/tokens"),
        browser.get("/audit"),
        browser.get("/companies/suggest?for=grants&q=evil"),  # the pickers' suggestions
    ):
        html = page.get_data(as_text=True)
        assert HOSTILE not in html and ESCAPED in html
        assert not [s for s in soup(page).find_all("script") if "alert" in s.text]


@pytest.mark.parametrize("path", [p for p, (roles, _) in PAGES.items() if "root" in roles])
def test_every_input_has_a_label_and_no_inline_script_or_style(world, factory, path):
    page = soup(factory.browser("root").get(path))
    for control in page.select("main input, main select, main textarea"):
        if control.get("type") in ("hidden", "submit"):
            continue
        assert control.get("id"), (path, control)
        assert page.select_one(f"label[for='{control['id']}']"), (path, control)
    for form in page.select("form[method=post]"):
        assert form.select_one("input[name$=csrf_token]"), path
    assert not page.select("[style]") and not page.select("style")
    assert all(s.get("src") for s in page.find_all("script"))
    assert not [tag for tag in page.find_all(True) if any(a.startswith("on") for a in tag.attrs)]


def test_audit_search_answers_a_page_and_the_total(world, factory):
    at = datetime(2022, 6, 1, 12)
    add_entries([audit.entry(OPERATOR, "x.many", f"n {i}", at=at) for i in range(7)])
    day = {"date_from": "2022-06-01", "date_to": "2022-06-01"}
    found = audit.search(OPERATOR, **day, per_page=5)
    assert [r.target for r in found.rows] == ["n 6", "n 5", "n 4", "n 3", "n 2"]
    assert (found.total, found.has_newer, found.has_older) == (7, False, True)
    older = audit.search(OPERATOR, **day, after=str(found.rows[-1].id), per_page=5)
    assert [r.target for r in older.rows] == ["n 1", "n 0"]
    assert (older.has_newer, older.has_older) == (True, False)
    newer = audit.search(OPERATOR, **day, before=older.rows[0].id, per_page=5)
    assert newer.rows == found.rows
    found = audit.search(OPERATOR, **day, page=2, per_page=5)
    assert [r.target for r in found.rows] == ["n 1", "n 0"] and found.total == 7
    for bad in (
        {"page": 0},
        {"page": "2"},
        {"per_page": 0},
        {"after": "n 1"},
        {"before": -1},
        {"date_from": "2022-6-1"},
        {"date_to": "2022-02-30"},
    ):
        with pytest.raises(Invalid):
            audit.search(OPERATOR, **bad)
    with pytest.raises(Invalid, match="before"):
        audit.search(OPERATOR, date_from="2022-06-02", date_to="2022-06-01")


# --- searching and paging the accounts, last sign-in -------------------------------------------


def account_names(response) -> list[str]:
    return [tr["id"].removeprefix("account-") for tr in soup(response).select("tbody tr[id]")]


def pager_links(response) -> dict[str, str]:
    return {a["rel"][0]: a["href"] for a in soup(response).select("nav.pager a[rel]")}


def test_accounts_are_searched_and_paged_by_fifty(world, factory):
    for i in range(60):
        factory.account(f"agent{i:02d}")
    browser = factory.browser("root")
    first = browser.get("/admin/accounts")
    assert first.status_code == 200
    names = account_names(first)
    assert len(names) == 50 and names == sorted(names)
    count_line = " ".join(soup(first).select_one("#count").get_text().split())
    assert count_line.startswith("Showing 1\u201350 of 65 accounts")
    links = pager_links(first)
    assert set(links) == {"next", "last"}
    second = browser.get(links["next"])
    rest = account_names(second)
    assert len(rest) == 15 and set(names).isdisjoint(rest)
    assert set(names) | set(rest) == ALL | {f"agent{i:02d}" for i in range(60)}
    assert set(pager_links(second)) == {"first", "prev"}
    assert browser.get("/admin/accounts?page=99").status_code == 200  # the last page
    assert account_names(browser.get("/admin/accounts?page=99")) == rest

    # Contains, case-insensitive; % and _ are plain characters.
    assert account_names(browser.get("/admin/accounts?q=GENT5")) == [
        f"agent5{i}" for i in range(10)
    ]
    assert account_names(browser.get("/admin/accounts?q=O")) == [
        "boss",
        "nobody",
        "reporter",
        "root",
    ]
    nothing = browser.get("/admin/accounts?q=%25")
    assert account_names(nothing) == []
    assert "Nothing matches" in soup(nothing).select_one("#count").get_text()
    # The paging links keep the search.
    for link in pager_links(browser.get("/admin/accounts?q=agent")).values():
        assert "q=agent" in link

    for bad in ("page=0", "page=x", "q=" + "x" * 201):
        response = browser.get(f"/admin/accounts?{bad}")
        assert response.status_code == 400, bad
        assert soup(response).select_one("[role=alert]") is not None
        assert len(soup(response).find_all("h1")) == 1

    partial = browser.get("/admin/accounts?q=boss", headers={"HX-Request": "true"})
    assert partial.status_code == 200 and soup(partial).h1 is None
    assert account_names(partial) == ["boss"]
    assert "HX-Request" in partial.headers["Vary"]


def test_last_sign_in_is_set_by_the_login_form_and_not_by_a_token(world, factory):
    assert account_row("boss").last_sign_in_at is None
    assert api_read(factory, world["boss"].token).status_code == 200
    assert account_row("boss").last_sign_in_at is None  # a token is not a sign-in
    before = utcnow().replace(microsecond=0) - timedelta(seconds=1)
    factory.browser("boss")
    stamped = account_row("boss").last_sign_in_at
    assert stamped is not None and before <= stamped <= utcnow() + timedelta(seconds=1)

    # A wrong password, or a disabled account, leaves it alone.
    client = factory.app.test_client()
    client.get("/login")
    accounts.disable(OPERATOR, "nobody")
    for username, password in (("boss", "wrong password!"), ("nobody", PASSWORD)):
        page = client.get("/login").get_data(as_text=True)
        response = client.post(
            "/login",
            data={"csrf_token": csrf_from(page), "username": username, "password": password},
        )
        assert response.status_code == 400
    assert account_row("boss").last_sign_in_at == stamped
    assert account_row("nobody").last_sign_in_at is None

    page = soup(factory.browser("root").get("/admin/accounts"))
    cells = {
        tr["id"].removeprefix("account-"): tr.select_one("td.last-sign-in").get_text(strip=True)
        for tr in page.select("tbody tr[id]")
    }
    assert cells["boss"] == stamped.strftime("%Y-%m-%d %H:%M")
    assert cells["nobody"] == "never"


# --- enabling an account -------------------------------------------------------------------------


def test_enable_button_lets_a_disabled_account_back_in_audited(world, factory):
    boss_browser = factory.browser("boss")
    accounts.disable(OPERATOR, "boss")
    assert api_read(factory, world["boss"].token).status_code == 401
    browser = factory.browser("root")
    page = soup(browser.get("/admin/accounts?q=bo"))
    [form] = page.select("#account-boss form[method=post]")
    assert form["action"] == "/admin/accounts/boss/enable"
    assert form.select_one("input[name=csrf_token]") is not None
    assert form.select_one("input[name=q]")["value"] == "bo"
    # Only disabled accounts have the button; active ones have the Disable link.
    assert [f["action"] for f in page.select("tbody form")] == ["/admin/accounts/boss/enable"]

    response = post(browser, "/admin/accounts/boss/enable", {"q": "bo"})
    assert response.status_code == 302
    assert response.headers["Location"] == "/admin/accounts?q=bo#account-boss"
    assert account_row("boss").active
    [entry] = audits("account.enable")
    assert (entry.actor, entry.via, entry.target) == ("root", "ui", "account boss")
    assert (entry.before["active"], entry.after["active"]) == (False, True)
    assert "Account boss enabled" in " ".join(flashes(browser.get("/admin/accounts")))
    # It may sign in again and its unrevoked token works again; the old session stays ended.
    factory.browser("boss")
    assert api_read(factory, world["boss"].token).status_code == 200
    assert boss_browser.get("/audit").status_code == 302

    # Enabling an active account is a clear 400 that changes nothing.
    before = counts()
    again = post(browser, "/admin/accounts/boss/enable")
    assert again.status_code == 400
    assert "already active" in soup(again).select_one("[role=alert]").get_text()
    assert len(soup(again).find_all("h1")) == 1
    assert counts() == before
    assert post(browser, "/admin/accounts/ghost/enable").status_code == 404


def test_enable_service_is_for_system_admins_only(world):
    accounts.disable(OPERATOR, "boss")
    before = counts()
    for username in ALL - SYSADMIN:
        caller = Principal(username=username, via="ui", system_admin=False)
        with pytest.raises(Forbidden):
            accounts.enable(caller, "boss")
    assert counts() == before


# --- another account's API tokens ----------------------------------------------------------------


def test_a_system_admin_lists_and_revokes_another_accounts_tokens(world, factory):
    api_tokens.create(OPERATOR, "boss", "nightly export")
    db.session.rollback()
    tokens = {t.label: t for t in api_tokens.of_account(OPERATOR, "boss")}
    browser = factory.browser("root")
    page = browser.get("/admin/accounts/boss/tokens")
    assert page.status_code == 200 and h1(page) == "API tokens of boss"
    assert len(soup(page).find_all("h1")) == 1
    rows = {tr["id"]: tr for tr in soup(page).select("tbody tr")}
    assert set(rows) == {f"token-{t.id}" for t in tokens.values()}
    export = tokens["nightly export"]
    row = rows[f"token-{export.id}"]
    assert export.prefix in row.get_text() and "never" in row.get_text()
    [form] = row.select("form[method=post]")
    assert form["action"] == f"/admin/accounts/boss/tokens/{export.id}/revoke"
    assert form.select_one("input[name=csrf_token]") is not None
    # The list of accounts links to it.
    links = {a["href"] for a in soup(browser.get("/admin/accounts")).select("a")}
    assert "/admin/accounts/boss/tokens" in links

    test_token = tokens["test"]
    response = post(browser, f"/admin/accounts/boss/tokens/{test_token.id}/revoke")
    assert response.status_code == 302
    assert response.headers["Location"] == "/admin/accounts/boss/tokens"
    assert api_read(factory, world["boss"].token).status_code == 401
    [entry] = audits("token.revoke")
    assert (entry.actor, entry.via, entry.target) == ("root", "ui", "account boss")
    assert entry.before["token_id"] == test_token.id
    after = soup(browser.get("/admin/accounts/boss/tokens"))
    assert "revoked" in after.select_one(f"#token-{test_token.id}")["class"]
    assert not after.select(f"#token-{test_token.id} form")
    assert after.select(f"#token-{export.id} form")

    # A token named under another account's address, or an unknown one, is not found.
    before = counts()
    assert post(browser, f"/admin/accounts/nobody/tokens/{export.id}/revoke").status_code == 404
    assert post(browser, "/admin/accounts/boss/tokens/999999/revoke").status_code == 404
    assert browser.get("/admin/accounts/ghost/tokens").status_code == 404
    assert counts() == before


def test_other_roles_may_neither_list_nor_revoke_another_accounts_tokens(world, factory):
    db.session.rollback()
    [root_token] = api_tokens.of_account(OPERATOR, "root")
    for role in ALL - SYSADMIN:
        browser = factory.browser(role)
        before = counts()
        assert browser.get("/admin/accounts/root/tokens").status_code == 403, role
        assert browser.get(f"/admin/accounts/{role}/tokens").status_code == 403, role
        response = post(browser, f"/admin/accounts/root/tokens/{root_token.id}/revoke")
        assert response.status_code == 403, role
        assert counts() == before, role
    assert api_read(factory, world["root"].token).status_code == 200
