"""The DDI and phone-user pages (/ddis, /users, their forms and CSV downloads) and sign-in/out,
for every role, on the HTML the browser gets (docs/api.md#roles and
docs/pages.md).

Three companies: acme, globex, initech. Accounts: a System-Admin, a Company-Admin of acme, one
of acme and initech, a Billing Call-Summary, a Billing/Call-Reporting of acme, one with no grant.
"""

from __future__ import annotations

import csv
import io
import random
import re
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import pytest
from bs4 import BeautifulSoup

from webapp.access import Principal
from webapp.database import write_transaction
from webapp.errors import Invalid
from webapp.models import Ddi
from webapp.services.records import crud, kinds, listing
from webapp.views.forms import FIELD_LABELS

from .factories import OPERATOR, World, csrf_from, snapshot
from .list_cells import table_rows
from .snapshots import kept

ACME, GLOBEX, INITECH = "acme", "globex", "initech"
COMPANIES = (ACME, GLOBEX, INITECH)
DDIS = [  # dialcode, number, virt_exten, company
    ("44", "2071234567", "100", ACME),
    ("44", "3207000000", "207", ACME),  # holds 207, but does not start with it
    ("44", "2079999999", "101", GLOBEX),
    ("1", "5551234", "102", INITECH),
    ("1", "2075550000", "110", INITECH),
]
USERS = [  # username, virt_exten, company
    ("ana.acme", "200", ACME),
    ("dan.acme", "310", ACME),
    ("bob.globex", "201", GLOBEX),
    ("cid.initech", "202", INITECH),
]
DDI_FIELDS = ("dialcode", "number", "virt_exten", "company")
USER_FIELDS = ("username", "virt_exten", "company")
DDI_URL = {ACME: "/ddis/44/2071234567", GLOBEX: "/ddis/44/2079999999", INITECH: "/ddis/1/5551234"}
USER_URL = {
    ACME: "/users/acme/ana.acme",
    GLOBEX: "/users/globex/bob.globex",
    INITECH: "/users/initech/cid.initech",
}
# The accounts (factories.ROLES, each named after its role), in the order of the status columns.
ROLE_ORDER = ("root", "cadmin", "cadmin2", "summary", "reporter", "nobody")
ADMIN_SCOPE = {"root": COMPANIES, "cadmin": (ACME,), "cadmin2": (ACME, INITECH)}


def sort_value(field: str, value: str) -> object:
    """How the pages order a field's values: extensions numerically, ties by the text."""
    return (int(value), value) if field == "virt_exten" else value


# Status per role, in the order of ROLE_ORDER: root cadmin cadmin2 summary reporter nobody.
ADMINS = "200 200 200 403 403 403"
ROOT_ONLY = "200 403 403 403 403 403"
OTHERS = "200 404 404 403 403 403"  # another company's record: as if it did not exist
PAGES = {
    "/ddis": ADMINS,
    "/users": ADMINS,
    "/ddis.csv": ADMINS,
    "/users.csv": ADMINS,
    "/ddis/new": ROOT_ONLY,
    "/users/new": ADMINS,
    f"{DDI_URL[ACME]}/edit": ADMINS,
    f"{DDI_URL[ACME]}/link": ADMINS,
    f"{DDI_URL[ACME]}/delete": ROOT_ONLY,
    f"{DDI_URL[GLOBEX]}/edit": OTHERS,
    f"{DDI_URL[GLOBEX]}/link": OTHERS,
    f"{DDI_URL[GLOBEX]}/delete": OTHERS,
    f"{DDI_URL[INITECH]}/edit": "200 404 200 403 403 403",
    f"{DDI_URL[INITECH]}/link": "200 404 200 403 403 403",
    f"{DDI_URL[INITECH]}/delete": "200 404 403 403 403 403",
    f"{USER_URL[ACME]}/edit": ADMINS,
    f"{USER_URL[ACME]}/delete": ADMINS,
    f"{USER_URL[GLOBEX]}/edit": OTHERS,
    f"{USER_URL[GLOBEX]}/delete": OTHERS,
    f"{USER_URL[INITECH]}/edit": "200 404 200 403 403 403",
    f"{USER_URL[INITECH]}/delete": "200 404 200 403 403 403",
    "/ddis/44/1/edit": "404 404 404 403 403 403",  # no such DDI
    "/users/acme/nobody.here/edit": "404 404 404 403 403 403",
}
LEAKS = ("Traceback", "sqlalchemy", "SELECT", "psycopg")


# --- helpers -----------------------------------------------------------------------------------


@pytest.fixture
def world_companies() -> dict[str, str]:
    return {company: company.title() for company in COMPANIES}


@pytest.fixture
@kept
def world(world: World) -> World:
    """The shared world (its accounts: ROLE_ORDER) with the DDIs and users above."""
    for dialcode, number, virt_exten, company in DDIS:
        world.factory.ddi(dialcode, number, company, virt_exten)
    for username, virt_exten, company in USERS:
        world.factory.user(username, company, virt_exten)
    return world


def html(response) -> str:
    return response.get_data(as_text=True)


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(html(response), "html.parser")


def csv_rows(response) -> list[list[str]]:
    return list(csv.reader(io.StringIO(html(response))))


def title(page: BeautifulSoup) -> str:
    return page.find("h1").get_text(" ", strip=True)


def main_form(page: BeautifulSoup):
    """The page's own form (the header's sign-out form is not it)."""
    return page.select_one('main form[method="post"]')


def flashes(page: BeautifulSoup) -> list[str]:
    return [p.get_text(strip=True) for p in page.select("#flashes .flash")]


def nav_hrefs(page: BeautifulSoup) -> list[str]:
    return [a["href"] for a in page.select('nav[aria-label="Main"] a')]


def field_error(page: BeautifulSoup, name: str) -> str | None:
    """The message shown beside the form field `name`, if any (inside the same field box)."""
    control = page.find(["input", "select"], attrs={"name": name})
    assert control is not None, f"no field {name}"
    box = control.find_parent("div", class_="field")
    message = box.find(class_="error") if box else None
    return message.get_text(strip=True) if message else None


def suggested(client, purpose: str, q: str = "") -> list[str]:
    """The identifiers a company picker for `purpose` suggests to this client."""
    response = client.get("/companies/suggest", query_string={"for": purpose, "q": q})
    assert response.status_code == 200
    return [b["data-value"] for b in soup(response).select("[role=option][data-value]")]


def visible(rows, fields, companies) -> set[tuple[str, ...]]:
    return {tuple(r) for r in rows if dict(zip(fields, r, strict=True))["company"] in companies}


def post(client, url: str, data: dict | None = None, *, token=True, htmx=False, **kwargs):
    data = dict(data or {})
    if token:
        data["csrf_token"] = client.csrf
    headers = {"HX-Request": "true"} if htmx else {}
    return client.post(url, data=data, headers=headers, **kwargs)


def sign_in(client, username: str, password: str, query: str = ""):
    token = csrf_from(html(client.get("/login")))
    return client.post(
        "/login" + query, data={"csrf_token": token, "username": username, "password": password}
    )


def ddi_rows() -> set[tuple[str, ...]]:
    return set(snapshot()["ddis"])


# --- signing in and out --------------------------------------------------------------------------


def test_login_page_has_a_form_with_csrf(client):
    response = client.get("/login")
    assert response.status_code == 200
    form = main_form(soup(response))
    assert form.find("input", attrs={"name": "csrf_token"})["value"]
    assert form.find("input", attrs={"name": "username"}) is not None
    assert form.find("input", attrs={"name": "password", "type": "password"}) is not None


def test_unknown_user_and_wrong_password_get_the_same_message(app, world):
    answers = []
    for username, password in (("root", "wrong password"), ("no.such.user", "wrong password")):
        client = app.test_client()
        response = sign_in(client, username, password)
        assert response.status_code == 400
        page = soup(response)
        errors = [p.get_text(strip=True) for p in page.select(".error")]
        assert errors, "no message shown"
        assert page.find("input", attrs={"name": "password"}).get("value", "") == ""
        assert client.get("/ddis").status_code == 302  # still signed out
        answers.append(errors)
    assert answers[0] == answers[1]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("/ddis?company=acme", "/ddis?company=acme"),
        ("/users", "/users"),
        ("//evil.com", "/"),
        ("https://evil.com", "/"),
        ("/\\evil.com", "/"),
        ("\\\\evil.com", "/"),
        ("javascript:alert(1)", "/"),
        ("http://localhost/ddis", "/"),
        ("", "/"),
    ],
)
def test_sign_in_follows_next_only_to_local_paths(app, world, target, expected):
    client = app.test_client()
    response = sign_in(client, "root", "correct horse battery", "?next=" + quote(target, safe=""))
    assert response.status_code == 302
    assert response.headers["Location"] == expected


def test_sign_in_renews_the_session(app, world):
    client = app.test_client()
    cookie = app.config["SESSION_COOKIE_NAME"]
    with client.session_transaction() as session:
        session["planted"] = "set before sign-in"
    old_token = csrf_from(html(client.get("/login")))
    before = client.get_cookie(cookie).value
    response = client.post(
        "/login",
        data={"csrf_token": old_token, "username": "root", "password": "correct horse battery"},
    )
    assert response.status_code == 302
    assert client.get_cookie(cookie).value != before
    with client.session_transaction() as session:
        assert "planted" not in session
        assert session.get("_user_id")
    # The CSRF secret of the signed-out session does not carry over either.
    assert client.post("/logout", data={"csrf_token": old_token}).status_code == 400
    assert client.get("/ddis").status_code == 200


def test_sign_out_is_a_post_with_csrf(app, world):
    client = world.browser("root")
    assert client.get("/logout").status_code == 405
    assert client.get("/ddis").status_code == 200
    assert post(client, "/logout", token=False).status_code == 400
    assert client.get("/ddis").status_code == 200
    response = post(client, "/logout")
    assert response.status_code == 302
    assert urlsplit(response.headers["Location"]).path == "/login"
    assert "Signed out." in flashes(soup(client.get("/login")))
    response = client.get("/ddis")
    assert response.status_code == 302
    assert urlsplit(response.headers["Location"]).path == "/login"


@pytest.mark.parametrize("path", ["/", *PAGES, "/ddis?company=acme&number=207&page=2"])
def test_signed_out_visitors_are_sent_to_login(client, world, path):
    response = client.get(path)
    assert response.status_code == 302
    location = urlsplit(response.headers["Location"])
    assert location.path == "/login"
    assert parse_qs(location.query)["next"] == [path]


def test_next_from_the_login_redirect_brings_you_back(app, world):
    client = app.test_client()
    login_url = client.get("/ddis?company=acme&number=207").headers["Location"]
    response = sign_in(client, "root", "correct horse battery", "?" + urlsplit(login_url).query)
    assert response.headers["Location"] == "/ddis?company=acme&number=207"


@pytest.mark.parametrize(
    ("role", "target"),
    [
        ("root", "/ddis"),
        ("cadmin", "/ddis"),
        ("cadmin2", "/ddis"),
        ("summary", "/reports/ddis"),
        ("reporter", "/reports/ddis"),
        ("nobody", "/account/tokens"),
    ],
)
def test_index_sends_each_role_where_it_may_go(world, role, target):
    response = world.browser(role).get("/")
    assert response.status_code == 302
    assert urlsplit(response.headers["Location"]).path == target


# --- every role on every page --------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLE_ORDER)
def test_every_page_for_every_role(world, role):
    client = world.browser(role)
    column = ROLE_ORDER.index(role)
    hidden = [c for c in COMPANIES if c not in ADMIN_SCOPE.get(role, ())]
    secrets_ = list(hidden)
    secrets_ += [d[1] for d in DDIS if d[3] in hidden] + [u[0] for u in USERS if u[2] in hidden]
    problems = []
    for path, statuses in PAGES.items():
        expected = int(statuses.split()[column])
        response = client.get(path)
        body = html(response)
        if response.status_code != expected:
            problems.append(f"{path}: {response.status_code}, expected {expected}")
            continue
        if expected in (403, 404):
            assert response.mimetype == "text/html", path
            wanted = {403: "Not allowed", 404: "Not found"}[expected]
            if wanted not in title(soup(response)):
                problems.append(f"{path}: error page titled {title(soup(response))!r}")
        leaked = [s for s in secrets_ if s in body.lower()] + [s for s in LEAKS if s in body]
        if leaked:
            problems.append(f"{path}: shows {leaked}")
    assert not problems, "\n".join(problems)


def test_another_companys_record_is_indistinguishable_from_a_missing_one(world):
    client = world.browser("cadmin")
    missing = soup(client.get("/ddis/44/1/edit")).main.get_text(" ", strip=True)
    for action in ("edit", "link", "delete"):
        page = soup(client.get(f"{DDI_URL[GLOBEX]}/{action}"))
        assert page.main.get_text(" ", strip=True) == missing
    missing = soup(client.get("/users/globex/nobody.here/edit")).main.get_text(" ", strip=True)
    for action in ("edit", "delete"):
        page = soup(client.get(f"{USER_URL[GLOBEX]}/{action}"))
        assert page.main.get_text(" ", strip=True) == missing


@pytest.mark.parametrize("role", ADMIN_SCOPE)
def test_lists_and_csv_hold_only_the_roles_companies(world, role):
    client = world.browser(role)
    scope = ADMIN_SCOPE[role]
    for path, rows, fields in (("/ddis", DDIS, DDI_FIELDS), ("/users", USERS, USER_FIELDS)):
        expected = visible(rows, fields, scope)
        page = soup(client.get(path))
        assert set(table_rows(page)) == expected, path
        assert f"of {len(expected)}" in page.find(id="count").get_text(" ", strip=True)
        # The company filter is a picker: no list of companies in the page, and its
        # suggestions hold only the role's companies.
        assert page.select("select#filter-company, select[name=company]") == []
        assert suggested(client, "records") == sorted(scope)
        response = client.get(path + ".csv")
        assert response.status_code == 200
        assert response.mimetype == "text/csv"
        assert "attachment" in response.headers["Content-Disposition"]
        header, *data = csv_rows(response)
        assert tuple(header) == fields
        assert {tuple(r) for r in data} == expected


@pytest.mark.parametrize("role", ADMIN_SCOPE)
def test_list_controls_follow_the_role(world, role):
    client = world.browser(role)
    root = role == "root"
    page = soup(client.get("/ddis"))
    hrefs = [a["href"] for a in page.find_all("a", href=True)]
    texts = [a.get_text(strip=True) for a in page.find_all("a")]
    assert ("/ddis/new" in hrefs) is root
    assert ("New DDI" in texts) is root
    assert any(h.endswith("/delete") for h in hrefs) is root
    assert ("Delete" in texts) is root
    assert any(h.endswith("/edit") for h in hrefs)
    assert any(h.endswith("/link") for h in hrefs)
    page = soup(client.get("/users"))
    hrefs = [a["href"] for a in page.find_all("a", href=True)]
    texts = [a.get_text(strip=True) for a in page.find_all("a")]
    assert "/users/new" in hrefs
    assert "New phone user" in texts
    assert any(h.endswith("/delete") for h in hrefs)
    assert any(h.endswith("/edit") for h in hrefs)


@pytest.mark.parametrize("role", ["summary", "reporter", "nobody"])
def test_billing_and_no_grant_get_a_403_page_on_the_lists(world, role):
    client = world.browser(role)
    for path in ("/ddis", "/users", "/ddis.csv", "/users.csv"):
        response = client.get(path)
        assert response.status_code == 403, path
        assert response.mimetype == "text/html"
        assert soup(response).find("table") is None


@pytest.mark.parametrize("role", ROLE_ORDER)
def test_nav_shows_only_links_the_role_may_open(world, role):
    client = world.browser(role)
    admin = role in ADMIN_SCOPE
    hrefs = nav_hrefs(soup(client.get("/ddis")))
    assert ("/ddis" in hrefs) is admin
    assert ("/users" in hrefs) is admin
    assert nav_hrefs(soup(client.get("/users"))) == hrefs
    for href in hrefs:
        assert client.get(href).status_code == 200, href
    # Nor does any page of this role link to a record page it may not open.
    column = ROLE_ORDER.index(role)
    refused = {p for p, s in PAGES.items() if int(s.split()[column]) != 200}
    for path, statuses in PAGES.items():
        if int(statuses.split()[column]) != 200 or path.endswith(".csv"):
            continue
        page = soup(client.get(path))
        links = {a["href"] for a in page.find_all("a", href=True)}
        links |= {e["hx-get"] for e in page.find_all(attrs={"hx-get": True})}
        assert not links & refused, f"{path} links to {links & refused}"


# --- filters, sorting, paging, htmx, CSV ---------------------------------------------------------


def _matches(row: dict[str, str], filters: dict[str, str]) -> bool:
    return all(row[f] == v if f == "company" else row[f].startswith(v) for f, v in filters.items())


def _expected(rows, fields, filters) -> list[tuple[str, ...]]:
    return [r for r in rows if _matches(dict(zip(fields, r, strict=True)), filters)]


FILTERS = [
    ("/ddis", {"number": "207"}),
    ("/ddis", {"number": "2071234567"}),
    ("/ddis", {"dialcode": "4"}),
    ("/ddis", {"virt_exten": "10"}),
    ("/ddis", {"company": ACME}),
    ("/ddis", {"number": "207", "company": INITECH}),
    ("/ddis", {"number": "99999"}),
    ("/users", {"username": "ana"}),
    ("/users", {"virt_exten": "20"}),
    ("/users", {"company": GLOBEX}),
    ("/users", {"username": "d", "company": ACME}),
]


@pytest.mark.parametrize(("path", "filters"), FILTERS)
def test_filters_match_from_the_start_as_typed(world, path, filters):
    rows, fields = (DDIS, DDI_FIELDS) if path == "/ddis" else (USERS, USER_FIELDS)
    client = world.browser("root")
    response = client.get(path, query_string=filters)
    assert response.status_code == 200
    page = soup(response)
    expected = set(_expected(rows, fields, filters))
    assert set(table_rows(page)) == expected
    count = page.find(id="count").get_text(" ", strip=True)
    if expected:
        assert f"Showing 1\u2013{len(expected)} of {len(expected)}" in count
    else:
        assert "Nothing matches" in count
    for name, value in filters.items():  # the form shows the view's state, so it can be shared
        assert page.find("input", attrs={"name": name})["value"] == value
    # The CSV download of this view holds the same rows, in the same order.
    link = page.find(id="csv-link")["href"]
    assert urlsplit(link).path == path + ".csv"
    header, *data = csv_rows(client.get(link))
    assert tuple(header) == fields
    assert [tuple(r) for r in data] == table_rows(page)


SORTS = [("/ddis", field, direction) for field in DDI_FIELDS for direction in ("asc", "desc")] + [
    ("/users", field, direction) for field in USER_FIELDS for direction in ("asc", "desc")
]


@pytest.mark.parametrize(("path", "field", "direction"), SORTS)
def test_sort_by_each_column(world, path, field, direction):
    rows, fields, keys = (
        (DDIS, DDI_FIELDS, ("dialcode", "number"))
        if path == "/ddis"
        else (USERS, USER_FIELDS, ("company", "username"))
    )
    index = {f: i for i, f in enumerate(fields)}
    # The sort field, then the key; descending reverses the whole order (ties included).
    expected = sorted(
        rows,
        key=lambda r: [sort_value(field, r[index[field]]), *(r[index[k]] for k in keys)],
        reverse=direction == "desc",
    )
    client = world.browser("root")
    response = client.get(path, query_string={"sort": field, "dir": direction})
    assert response.status_code == 200
    page = soup(response)
    assert table_rows(page) == [tuple(r) for r in expected]
    header = page.select_one("table thead tr")
    # aria-sort on the column header, where screen readers look for it, not on its link.
    sorted_by = [th for th in header.find_all("th") if th.has_attr("aria-sort")]
    # A DDI's one Number column sorts by dialcode (then number, the key order); sorting by the
    # number alone is an address's, marked by no header.
    heading = "Number" if path == "/ddis" and field == "dialcode" else FIELD_LABELS[field]
    if path == "/ddis" and field == "number":
        assert sorted_by == [] and not page.select(".sort-links a[aria-current]")
        sorted_by = [None]
    else:
        assert len(sorted_by) == 1 and sorted_by[0].a.get_text().startswith(heading)
        # The same order among the phone width's sort links, marked current.
        current = [a.get_text(" ", strip=True) for a in page.select(".sort-links a[aria-current]")]
        assert current == [f"{heading} ({'descending' if direction == 'desc' else 'ascending'})"]
        assert sorted_by[0]["aria-sort"] == ("descending" if direction == "desc" else "ascending")
    # The CSV link carries the sort too.
    _, *data = csv_rows(client.get(page.find(id="csv-link")["href"]))
    assert [tuple(r) for r in data] == [tuple(r) for r in expected]


@pytest.mark.parametrize(
    "query",
    [
        {"sort": "password_hash"},
        {"sort": "id", "dir": "desc"},
        {"sort": "number); DROP TABLE ddis;--"},
        {"sort": "number", "dir": "sideways"},
        {"page": "abc"},
        {"page": "-1"},
        {"page": "0"},
        {"after": "44"},  # one value where the order has two
        {"before": ["44", "2071234567", "100"]},
        {"after": ["44", "9" * 201]},
        {"before": "", "last": "yes"},
    ],
)
def test_bad_sort_or_page_values_are_ignored(world, query):
    client = world.browser("root")
    response = client.get("/ddis", query_string=query)
    assert response.status_code == 200
    rows = table_rows(soup(response))
    if query.get("sort") == "number":
        assert rows == sorted(rows, key=lambda r: r[1])
    else:
        assert rows == sorted((tuple(r) for r in DDIS), key=lambda r: (r[0], r[1]))
    assert client.get("/ddis.csv", query_string=query).status_code == 200


def pager_links(page: BeautifulSoup) -> dict[str, dict[str, list[str]]]:
    """The query of each pager link by its rel: first, prev, next, last."""
    return {
        a["rel"][0]: parse_qs(urlsplit(a["href"]).query)
        for a in page.select('nav[aria-label="Pages"] a[rel]')
    }


def count_line(page: BeautifulSoup) -> str:
    return page.find(id="count").get_text(" ", strip=True)


@pytest.mark.slow
def test_paging_fifty_a_page(factory):
    factory.company(ACME)
    factory.account("root", system_admin=True)
    numbers = [f"20{i:08d}" for i in range(120)]
    crud.create(
        OPERATOR,
        kinds.DDI,
        [{"dialcode": "44", "number": n, "virt_exten": "1", "company": ACME} for n in numbers],
    )
    client = factory.browser("root")

    first = soup(client.get("/ddis", query_string={"number": "20"}))
    assert [r[1] for r in table_rows(first)] == numbers[:50]
    assert "Showing 1\u201350 of 120" in count_line(first)
    links = pager_links(first)
    assert set(links) == {"next", "last"}  # no way back from the first page
    assert links["next"] == {"after": ["44", numbers[49]], "number": ["20"]}
    assert links["last"] == {"last": ["1"], "number": ["20"]}
    pager = first.select_one('nav[aria-label="Pages"]')
    for a in pager.select("a[rel]"):  # htmx swaps the rows and keeps the address shareable
        assert a["hx-get"] == a["href"] and a["hx-push-url"] == "true"
        assert a["hx-target"] == "#rows"

    second = soup(client.get(first.find("a", rel="next")["href"]))
    assert [r[1] for r in table_rows(second)] == numbers[50:100]
    assert "Showing 51\u2013100 of 120" in count_line(second)
    links = pager_links(second)
    assert set(links) == {"first", "prev", "next", "last"}
    assert links["first"] == {"number": ["20"]}
    assert links["prev"] == {"before": ["44", numbers[50]], "number": ["20"]}

    # The last page is the last fifty rows; from there Previous walks back.
    last = soup(client.get(first.find("a", rel="last")["href"]))
    assert [r[1] for r in table_rows(last)] == numbers[70:]
    assert "Showing 71\u2013120 of 120" in count_line(last)
    assert set(pager_links(last)) == {"first", "prev"}
    back = soup(client.get(last.find("a", rel="prev")["href"]))
    assert [r[1] for r in table_rows(back)] == numbers[20:70]
    assert "Showing 21\u201370 of 120" in count_line(back)
    start = soup(client.get(back.find("a", rel="prev")["href"]))
    assert [r[1] for r in table_rows(start)] == numbers[:20]  # exactly the rows before
    assert "Showing 1\u201320 of 120" in count_line(start)
    assert set(pager_links(start)) == {"next", "last"}

    # Paging keeps the sort: the cursor is the sort field, then the key.
    desc = soup(client.get("/ddis", query_string={"sort": "number", "dir": "desc"}))
    assert [r[1] for r in table_rows(desc)] == numbers[::-1][:50]
    following = pager_links(desc)["next"]
    assert following == {"after": [numbers[70], "44"], "sort": ["number"], "dir": ["desc"]}
    desc2 = soup(client.get(desc.find("a", rel="next")["href"]))
    assert [r[1] for r in table_rows(desc2)] == numbers[::-1][50:100]

    # The old page numbers of the spec's addresses still work, and link on with cursors.
    old = soup(client.get("/ddis", query_string={"number": "20", "page": "2"}))
    assert [r[1] for r in table_rows(old)] == numbers[50:100]
    assert "Showing 51\u2013100 of 120" in count_line(old)
    assert pager_links(old)["next"] == {"after": ["44", numbers[99]], "number": ["20"]}
    past = soup(client.get("/ddis", query_string={"page": "9"}))
    assert table_rows(past) == []
    assert "Page 9 is past the end: 120 in all" in count_line(past)
    assert set(pager_links(past)) == {"first", "prev"}

    # The CSV is the whole filtered view, not one page, whatever page the link came from.
    _, *data = csv_rows(client.get("/ddis.csv", query_string={"number": "20", "after": "x"}))
    assert [r[1] for r in data] == numbers
    csv_link = second.find(id="csv-link")["href"]
    assert "after" not in parse_qs(urlsplit(csv_link).query)


# --- keyset paging over random data --------------------------------------------------------------
WALK_PER_PAGE = 7


def random_records(seed: int) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """DDIs and phone users with many equal values in every sortable column, in three
    companies: ties must be broken by the key, or paging would skip or repeat rows."""
    rng = random.Random(seed)
    ddi_rows: dict[tuple[str, str], tuple[str, ...]] = {}
    while len(ddi_rows) < 60:
        dialcode = rng.choice(["1", "44", "44", "353"])
        number = rng.choice(["2", "20", "207", "3"]) + str(rng.randrange(10 ** rng.randrange(1, 5)))
        virt_exten = rng.choice(["100", "101", "2", "20", "200"])
        ddi_rows[(dialcode, number)] = (dialcode, number, virt_exten, rng.choice(COMPANIES))
    user_rows: dict[tuple[str, str], tuple[str, ...]] = {}
    while len(user_rows) < 45:
        username = rng.choice(["a", "ab", "b", "d"]) + str(rng.randrange(12))
        company = rng.choice(COMPANIES)  # the same username in two companies is two users
        user_rows[(company, username)] = (username, rng.choice(["200", "201", "3"]), company)
    return list(ddi_rows.values()), list(user_rows.values())


@pytest.fixture
def walk_world(factory, monkeypatch, request):
    from webapp.views import records as record_views

    monkeypatch.setattr(record_views, "PER_PAGE", WALK_PER_PAGE)
    companies = {company: company.title() for company in COMPANIES}
    world = World.build(factory, companies, {role: role for role in ("root", "cadmin", "cadmin2")})
    ddi_rows, user_rows = random_records(request.param)
    crud.create(OPERATOR, kinds.DDI, [dict(zip(DDI_FIELDS, r, strict=True)) for r in ddi_rows])
    crud.create(
        OPERATOR, kinds.PHONE_USER, [dict(zip(USER_FIELDS, r, strict=True)) for r in user_rows]
    )
    return world, ddi_rows, user_rows, random.Random(request.param)


def expected_order(rows, fields, keys, sort, descending):
    index = {f: i for i, f in enumerate(fields)}
    order = ([sort] if sort else []) + [k for k in keys if k != sort]
    return sorted(
        (tuple(r) for r in rows),
        key=lambda r: [sort_value(f, r[index[f]]) for f in order],
        reverse=descending,
    )


def walk(client, url: str, rel: str, total: int) -> list[list[tuple[str, ...]]]:
    """Follow `rel` links from `url` to the end; every page's rows, checking its count line."""
    pages = []
    while url:
        response = client.get(url)
        assert response.status_code == 200, url
        page = soup(response)
        rows = table_rows(page)
        assert 0 < len(rows) <= WALK_PER_PAGE, url
        pages.append(rows)
        match = re.search(r"Showing ([0-9]+)\u2013([0-9]+) of ([0-9]+)", count_line(page))
        assert match, count_line(page)
        assert int(match[2]) - int(match[1]) + 1 == len(rows)
        assert int(match[3]) == total
        link = page.find("a", rel=rel)
        url = link["href"] if link else None
        assert len(pages) <= total, "the walk does not end"
    return pages


@pytest.mark.slow
@pytest.mark.parametrize("walk_world", [1, 2, 3], indirect=True)
def test_walking_next_and_prev_visits_every_row_once_in_order(walk_world):
    """From the first page Next to the end, and from the last page Previous to the start,
    for random combinations of role, filters, sort and direction: every matching row once,
    in order, with positions that add up."""
    world, ddi_rows, user_rows, rng = walk_world
    filters = {
        "/ddis": [{}, {"company": ACME}, {"number": "2"}, {"virt_exten": "2", "company": INITECH},
                  {"dialcode": "44", "number": "20"}, {"company": GLOBEX}],
        "/users": [{}, {"company": INITECH}, {"username": "a"}, {"virt_exten": "20"}],
    }  # fmt: skip
    kinds = {
        "/ddis": (ddi_rows, DDI_FIELDS, ("dialcode", "number")),
        "/users": (user_rows, USER_FIELDS, ("company", "username")),
    }
    combos = [
        (role, path, flt, sort, desc)
        for role in ("root", "cadmin", "cadmin2")
        for path in ("/ddis", "/users")
        for flt in filters[path]
        for sort in (None, *kinds[path][1])
        for desc in ((False, True) if sort else (False,))
    ]
    for role, path, flt, sort, desc in rng.sample(combos, 30):
        rows, fields, keys = kinds[path]
        client = world.browser(role)
        mine = visible(rows, fields, ADMIN_SCOPE[role])
        matching = [r for r in _expected(rows, fields, flt) if tuple(r) in mine]
        expected = expected_order(matching, fields, keys, sort, desc)
        query = {**flt, **({"sort": sort, "dir": "desc" if desc else "asc"} if sort else {})}
        url = f"{path}?{urlencode(query)}"
        what = f"{role} {url}"
        if not expected:
            assert "Nothing matches" in count_line(soup(client.get(url))), what
            continue
        forward = walk(client, url, "next", len(expected))
        assert [r for page in forward for r in page] == expected, what
        assert all(len(page) == WALK_PER_PAGE for page in forward[:-1]), what
        last_link = soup(client.get(url)).find("a", rel="last")
        last_url = last_link["href"] if last_link else url
        backward = walk(client, last_url, "prev", len(expected))
        assert [r for page in reversed(backward) for r in page] == expected, what
        assert backward[0] == expected[-WALK_PER_PAGE:], what
        assert all(len(page) == WALK_PER_PAGE for page in backward[:-1]), what


@pytest.mark.parametrize("walk_world", [4], indirect=True)
def test_paging_goes_on_from_where_it_was_when_rows_change(walk_world):
    """A cursor names a position, not a row: delete the row a Next link continues from and
    add one before it, and Next still shows the rows that follow it, none twice."""
    world, ddi_rows, _, _ = walk_world
    client = world.browser("root")
    expected = expected_order(ddi_rows, DDI_FIELDS, ("dialcode", "number"), "virt_exten", False)
    first = soup(client.get("/ddis?sort=virt_exten&dir=asc"))
    next_url = first.find("a", rel="next")["href"]
    gone = expected[WALK_PER_PAGE - 1]
    crud.delete_rows(
        OPERATOR, kinds.DDI, {"dialcode": gone[0], "number": gone[1], "company": gone[3]}
    )
    crud.create(
        OPERATOR, kinds.DDI, {"dialcode": "1", "number": "1", "virt_exten": "0", "company": ACME}
    )
    second = soup(client.get(next_url))
    assert table_rows(second) == expected[WALK_PER_PAGE : 2 * WALK_PER_PAGE]
    # One row fewer before it and one more: the position is counted, not remembered.
    assert f"Showing {WALK_PER_PAGE + 1}\u2013" in count_line(second)


@pytest.mark.parametrize("walk_world", [5], indirect=True)
def test_csv_export_walks_the_whole_view_in_chunks(walk_world, monkeypatch):
    from webapp.views import records as record_views

    monkeypatch.setattr(record_views, "CSV_CHUNK", 4)  # many chunks, ties across their edges
    world, ddi_rows, user_rows, _ = walk_world
    for role in ("root", "cadmin2"):
        client = world.browser(role)
        mine = visible(ddi_rows, DDI_FIELDS, ADMIN_SCOPE[role])
        for sort, desc in ((None, False), ("virt_exten", True), ("company", False)):
            query = {"sort": sort, "dir": "desc" if desc else "asc"} if sort else {}
            _, *data = csv_rows(client.get("/ddis.csv", query_string=query))
            expected = expected_order(mine, DDI_FIELDS, ("dialcode", "number"), sort, desc)
            assert [tuple(r) for r in data] == expected, (role, query)
        mine = visible(user_rows, USER_FIELDS, ADMIN_SCOPE[role])
        _, *data = csv_rows(client.get("/users.csv", query_string={"sort": "username"}))
        assert [tuple(r) for r in data] == expected_order(
            mine, USER_FIELDS, ("company", "username"), "username", False
        )


def test_bad_cursors_are_refused_by_the_service_and_ignored_by_the_pages(world):
    root = Principal.cli("test")
    for bad in (["44"], ["44", "1", "2"], "44", [44, "1"], ["44", "x" * 201], ["\ud800", "1"]):
        with pytest.raises(Invalid) as caught:
            listing.page(root, kinds.DDI, {}, after=bad)
        assert "after" in caught.value.fields
    with pytest.raises(Invalid):
        listing.page(root, kinds.DDI, {}, sort="virt_exten", before=["44", "1"])
    client = world.browser("cadmin")
    assert client.get("/ddis?after=1%00&after=2").status_code == 400  # NUL: refused early
    for query in ("after=%ED%A0%80&after=1", "before=%FF&before=1", "after=44&sort=virt_exten"):
        response = client.get(f"/ddis?{query}")
        assert response.status_code == 200, query
        assert not any(leak in html(response) for leak in LEAKS)
    # Whatever a cursor says, a Company-Admin sees only its company's rows.
    for query in ("after=0&after=0", "before=9&before=9", "last=1", "page=1"):
        rows = table_rows(soup(client.get(f"/ddis?company={GLOBEX}&{query}")))
        assert rows == []
        rows = table_rows(soup(client.get(f"/ddis?{query}")))
        assert {r[3] for r in rows} == {ACME}, query


@pytest.mark.parametrize(
    ("path", "query", "field"),
    [
        ("/ddis", {"number": "20a"}, "number"),
        ("/ddis", {"dialcode": "+44"}, "dialcode"),
        ("/ddis", {"virt_exten": "x"}, "virt_exten"),
        ("/ddis", {"company": "Not A Company"}, "company"),
        ("/users", {"username": "Ana Kim"}, "username"),
    ],
)
def test_a_bad_filter_answers_400_with_a_message(world, path, query, field):
    client = world.browser("root")
    for htmx in (False, True):
        headers = {"HX-Request": "true"} if htmx else {}
        response = client.get(path, query_string=query, headers=headers)
        assert response.status_code == 400
        body = html(response)
        assert not any(leak in body for leak in LEAKS)
        message = soup(response).select_one(".error")
        assert message is not None and field in message.get_text()
        assert ("<html" in body) is not htmx
        assert table_rows(soup(response)) == []


@pytest.mark.parametrize("path", ["/ddis", "/users"])
def test_htmx_gets_only_the_rows_fragment(world, path):
    client = world.browser("root")
    query = {"company": ACME, "sort": "virt_exten", "dir": "desc"}
    full = soup(client.get(path, query_string=query))
    response = client.get(path, query_string=query, headers={"HX-Request": "true"})
    assert response.status_code == 200
    body = html(response)
    assert "<html" not in body
    assert '<nav aria-label="Main"' not in body
    fragment = soup(response)
    assert fragment.find("form", class_="filters") is None
    assert table_rows(fragment) == table_rows(full)
    assert fragment.find(id="count") is not None


def test_csv_neutralises_formula_cells(factory):
    factory.company(ACME)
    factory.company("-dash")
    factory.account("root", system_admin=True)
    factory.user("@ana", ACME)
    factory.user("-bob", "-dash")
    hostile = [  # values the services would refuse, stored directly
        ("5550001", "=1+2", ACME),
        ("5550002", "+12", ACME),
        ("5550003", "@SUM(A1)", ACME),
        ("5550004", "-3", "-dash"),
    ]
    with write_transaction() as session:
        for number, virt_exten, company in hostile:
            reversed_ = number[::-1]
            session.add(
                Ddi(dialcode="44", number=number, number_reversed=reversed_, virt_exten=virt_exten,
                    company=company)
            )  # fmt: skip
    client = factory.browser("root")
    header, *data = csv_rows(client.get("/ddis.csv"))
    assert header == list(DDI_FIELDS)
    assert data == [
        ["44", "5550001", "'=1+2", ACME],
        ["44", "5550002", "'+12", ACME],
        ["44", "5550003", "'@SUM(A1)", ACME],
        ["44", "5550004", "'-3", "'-dash"],
    ]
    header, *data = csv_rows(client.get("/users.csv"))
    assert header == list(USER_FIELDS)
    assert sorted(data) == sorted([["'@ana", "200", ACME], ["'-bob", "200", "'-dash"]])


# --- forms ---------------------------------------------------------------------------------------

GOOD = {
    "ddi": {"dialcode": "44", "number": "2071239999", "virt_exten": "150", "company": ACME},
    "user": {"username": "eve.acme", "virt_exten": "250", "company": ACME},
}
NEW = {"ddi": "/ddis/new", "user": "/users/new"}
LIST = {"ddi": "/ddis", "user": "/users"}
# Where the list reopens after creating GOOD[kind]: the page starting with it.
CREATED_AT = {
    "ddi": "/ddis?after=44&after=2071234567",
    "user": "/users?after=acme&after=dan.acme",
}
BAD_FIELDS = [
    ("ddi", {"dialcode": ""}, "dialcode"),
    ("ddi", {"dialcode": "4x"}, "dialcode"),
    ("ddi", {"number": "12ab"}, "number"),
    ("ddi", {"dialcode": "1234567", "number": "12345678901"}, "number"),
    ("ddi", {"virt_exten": ""}, "virt_exten"),
    ("ddi", {"virt_exten": "1 2"}, "virt_exten"),
    ("ddi", {"company": "nope"}, "company"),
    ("ddi", {"company": ""}, "company"),
    ("user", {"username": "Eve Smith"}, "username"),
    ("user", {"virt_exten": "x1"}, "virt_exten"),
    ("user", {"company": "nope"}, "company"),
]


@pytest.mark.parametrize(("kind", "bad", "field"), BAD_FIELDS)
def test_create_with_a_bad_field_shows_the_message_beside_it(world, kind, bad, field):
    client = world.browser("root")
    before = snapshot()
    values = {**GOOD[kind], **bad}
    response = post(client, NEW[kind], values)
    assert response.status_code == 400
    page = soup(response)
    assert field_error(page, field), f"no message beside {field}"
    for other in GOOD[kind]:
        if other != field:
            assert field_error(page, other) is None, other
    control = page.find(["input", "select"], attrs={"name": field})
    assert control["aria-invalid"] == "true"
    assert snapshot() == before
    # Inline with htmx: the form fragment comes back with the same message.
    response = post(client, NEW[kind], values, htmx=True)
    assert response.status_code == 400
    assert "<html" not in html(response)
    assert field_error(soup(response), field)
    assert snapshot() == before


@pytest.mark.parametrize("kind", ["ddi", "user"])
def test_create_a_duplicate_shows_a_message_and_changes_nothing(world, kind):
    client = world.browser("root")
    before = snapshot()
    values = (
        {"dialcode": "44", "number": "2071234567", "virt_exten": "999", "company": GLOBEX}
        if kind == "ddi"
        else {"username": "ana.acme", "virt_exten": "999", "company": ACME}
    )
    response = post(client, NEW[kind], values)
    assert response.status_code == 400
    assert "already exists" in main_form(soup(response)).get_text()
    assert snapshot() == before


@pytest.mark.parametrize(
    ("kind", "role", "message"),
    [
        ("ddi", "root", "Created DDI +44 2071239999."),
        ("user", "root", "Created phone user acme/eve.acme."),
        ("user", "cadmin", "Created phone user acme/eve.acme."),
    ],
)
def test_create_success_redirects_to_the_list_with_a_flash(world, kind, role, message):
    client = world.browser(role)
    form = soup(client.get(NEW[kind]))
    assert form.find("input", attrs={"name": "csrf_token"}) is not None
    response = post(client, NEW[kind], GOOD[kind])
    assert response.status_code == 302
    # After a create the list reopens at the new record (after the row before it), marked.
    assert response.headers["Location"] == CREATED_AT[kind]
    page = soup(client.get(response.headers["Location"]))
    assert message in flashes(page)
    assert page.select_one("tbody tr.changed") is page.select_one("tbody tr")
    good = GOOD[kind]
    if kind == "ddi":
        assert ("44", "2071239999", "150", ACME) in ddi_rows()
    else:
        assert (ACME, "eve.acme", "250") in snapshot()["users"]
    assert tuple(good[f] for f in (DDI_FIELDS if kind == "ddi" else USER_FIELDS)) in set(
        table_rows(page)
    )


@pytest.mark.parametrize("kind", ["ddi", "user"])
def test_create_with_htmx_answers_hx_redirect(world, kind):
    client = world.browser("root")
    response = post(client, NEW[kind], GOOD[kind], htmx=True)
    assert response.status_code == 200
    assert response.headers["HX-Redirect"] == CREATED_AT[kind]
    assert any(m.startswith("Created") for m in flashes(soup(client.get(LIST[kind]))))


def test_company_admin_may_not_create_ddis_or_users_elsewhere(world):
    client = world.browser("cadmin")
    before = snapshot()
    response = post(client, "/ddis/new", GOOD["ddi"])
    assert response.status_code == 403
    assert "Not allowed" in title(soup(response))
    # Another company is not one its picker knows: as if it did not exist.
    for company in (GLOBEX, INITECH):
        response = post(client, "/users/new", {**GOOD["user"], "company": company})
        assert response.status_code == 400, company
        page = soup(response)
        assert field_error(page, "company") == "unknown company"
        matches = page.select_one("#company-matches")
        assert matches is None or company not in matches.get_text()
    assert snapshot() == before
    # The company picker offers only the companies it administers.
    assert suggested(client, "records") == [ACME]


def test_edit_form_shows_key_fields_read_only(world):
    client = world.browser("root")
    page = soup(client.get(f"{DDI_URL[ACME]}/edit"))
    form = main_form(page)
    assert form.find("input", id="key-dialcode")["value"] == "44"
    assert form.find("input", id="key-number")["value"] == "2071234567"
    assert form.find("input", id="key-dialcode").has_attr("readonly")
    assert form.find("input", id="key-number").has_attr("readonly")
    assert form.find(attrs={"name": "dialcode"}) is None
    assert form.find(attrs={"name": "number"}) is None
    assert form.find("input", attrs={"name": "virt_exten"})["value"] == "100"
    assert form.find("input", attrs={"name": "company"})["value"] == ACME
    page = soup(client.get(f"{USER_URL[ACME]}/edit"))
    form = main_form(page)
    assert form.find("input", id="key-username").has_attr("readonly")
    assert form.find(attrs={"name": "username"}) is None


def test_edit_changes_extension_and_company_but_never_the_key(world):
    client = world.browser("root")
    before = ddi_rows()
    response = post(
        client,
        f"{DDI_URL[ACME]}/edit",
        {"virt_exten": "555", "company": INITECH, "dialcode": "9", "number": "999"},
    )
    assert response.status_code == 302
    assert response.headers["Location"] == "/ddis"
    assert "Saved DDI +44 2071234567." in flashes(soup(client.get("/ddis")))
    after = ddi_rows()
    assert after == (before - {("44", "2071234567", "100", ACME)}) | {
        ("44", "2071234567", "555", INITECH)
    }

    response = post(
        client,
        f"{USER_URL[ACME]}/edit",
        {"virt_exten": "299", "company": ACME, "username": "mallory"},
    )
    assert response.status_code == 302
    users = set(snapshot()["users"])
    assert (ACME, "ana.acme", "299") in users
    assert not {u for u in users if u[1] == "mallory"}


def test_company_admin_edits_a_user_and_moves_it_between_its_companies(world):
    client = world.browser("cadmin2")
    response = post(
        client,
        f"{USER_URL[ACME]}/edit",
        {"virt_exten": "299", "company": INITECH, "username": "mallory"},
    )
    assert response.status_code == 302
    assert "Saved phone user acme/ana.acme." in flashes(soup(client.get("/users")))
    users = set(snapshot()["users"])
    assert (INITECH, "ana.acme", "299") in users
    assert (ACME, "ana.acme", "200") not in users
    assert not {u for u in users if u[1] == "mallory"}


@pytest.mark.parametrize(
    ("path", "values", "field"),
    [
        (f"{DDI_URL[ACME]}/edit", {"virt_exten": "abc", "company": ACME}, "virt_exten"),
        (f"{DDI_URL[ACME]}/edit", {"virt_exten": "100", "company": "nope"}, "company"),
        (f"{DDI_URL[ACME]}/link", {"virt_exten": "", "company": ACME}, "virt_exten"),
        (f"{USER_URL[ACME]}/edit", {"virt_exten": "1.2", "company": ACME}, "virt_exten"),
    ],
)
def test_edit_with_a_bad_field_shows_the_message_beside_it(world, path, values, field):
    client = world.browser("root")
    before = snapshot()
    response = post(client, path, values)
    assert response.status_code == 400
    assert field_error(soup(response), field)
    assert snapshot() == before
    response = post(client, path, values, htmx=True)
    assert response.status_code == 400
    assert "<html" not in html(response)
    assert field_error(soup(response), field)
    assert snapshot() == before


def test_link_points_a_ddi_at_an_extension_of_its_company(world):
    """Link is the API's link with the company unchanged: the extension (and the number's
    description) alone, explained on the form; Edit holds the extension and the company."""
    client = world.browser("cadmin")
    page = soup(client.get(f"{DDI_URL[ACME]}/link"))
    form = main_form(page)
    assert form is not None
    assert [i["name"] for i in form.select("input[name]") if i["type"] != "hidden"] == [
        "virt_exten",
        "description",
    ]
    intro = page.find(id="link-intro").get_text(" ", strip=True)
    assert "points this number at an extension" in intro and "use Edit" in intro
    edit = main_form(soup(client.get(f"{DDI_URL[ACME]}/edit")))
    assert {"virt_exten", "company"} <= {i["name"] for i in edit.select("input[name]")}
    # A company posted anyway is not the link's to change.
    values = {"virt_exten": "777", "company": GLOBEX}
    response = post(client, f"{DDI_URL[ACME]}/link", values)
    assert response.status_code == 302
    assert response.headers["Location"] == "/ddis"
    assert "Linked DDI +44 2071234567 to extension 777." in flashes(soup(client.get("/ddis")))
    assert ("44", "2071234567", "777", ACME) in ddi_rows()
    bad = post(client, f"{DDI_URL[ACME]}/link", {"virt_exten": "12a"})
    assert bad.status_code == 400 and field_error(soup(bad), "virt_exten")


def test_company_admin_cannot_move_its_ddi_to_a_company_it_does_not_administer(world):
    client = world.browser("cadmin")
    before = snapshot()
    for htmx in (False, True):
        response = post(
            client, f"{DDI_URL[ACME]}/edit", {"virt_exten": "100", "company": GLOBEX}, htmx=htmx
        )
        # Its company picker does not know another company: as if it did not exist.
        assert response.status_code == 400
        assert "HX-Redirect" not in response.headers
        assert field_error(soup(response), "company") == "unknown company"
    assert snapshot() == before


@pytest.mark.parametrize(
    ("role", "path", "gone", "message"),
    [
        ("root", DDI_URL[ACME], ("44", "2071234567"), "Deleted DDI +44 2071234567."),
        ("cadmin", USER_URL[ACME], (ACME, "ana.acme"), "Deleted phone user acme/ana.acme."),
    ],
)
def test_delete_asks_for_confirmation_then_posts(world, role, path, gone, message):
    client = world.browser(role)
    before = snapshot()
    response = client.get(f"{path}/delete")
    assert response.status_code == 200
    form = main_form(soup(response))
    assert form["action"] == f"{path}/delete"
    assert form.find("button", type="submit").get_text(strip=True) == "Delete"
    assert form.find("input", attrs={"name": "csrf_token"}) is not None
    assert snapshot() == before  # asking changed nothing
    response = post(client, f"{path}/delete")
    assert response.status_code == 302
    list_path = "/ddis" if path.startswith("/ddis") else "/users"
    assert response.headers["Location"] == list_path
    assert message in flashes(soup(client.get(list_path)))
    key = "ddis" if list_path == "/ddis" else "users"
    assert not [r for r in snapshot()[key] if tuple(r[:2]) == gone]


def test_edit_with_htmx_answers_hx_redirect(world):
    client = world.browser("root")
    response = client.get(f"{DDI_URL[INITECH]}/edit", headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "<html" not in html(response)
    assert main_form(soup(response)) is None  # a fragment: no <main>
    assert soup(response).find("form", class_="record-form") is not None
    response = post(
        client, f"{DDI_URL[INITECH]}/edit", {"virt_exten": "9", "company": INITECH}, htmx=True
    )
    assert response.status_code == 200
    assert response.headers["HX-Redirect"] == "/ddis"
    assert ("1", "5551234", "9", INITECH) in ddi_rows()
    assert "Saved DDI +1 5551234." in flashes(soup(client.get("/ddis")))


def test_delete_with_htmx_answers_hx_redirect(world):
    client = world.browser("root")
    response = client.get(f"{DDI_URL[GLOBEX]}/delete", headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "<html" not in html(response)
    assert ("44", "2079999999", "101", GLOBEX) in ddi_rows()
    response = post(client, f"{DDI_URL[GLOBEX]}/delete", htmx=True)
    assert response.status_code == 200
    assert response.headers["HX-Redirect"] == "/ddis"
    assert ("44", "2079999999", "101", GLOBEX) not in ddi_rows()
    assert "Deleted DDI +44 2079999999." in flashes(soup(client.get("/ddis")))


def test_company_admin_cannot_delete_ddis(world):
    client = world.browser("cadmin")
    before = snapshot()
    assert post(client, f"{DDI_URL[ACME]}/delete").status_code == 403
    assert post(client, f"{DDI_URL[GLOBEX]}/delete").status_code == 404
    assert post(client, f"{USER_URL[GLOBEX]}/delete").status_code == 404
    assert snapshot() == before


# --- CSRF ----------------------------------------------------------------------------------------

FORM_POSTS = [
    ("/ddis/new", GOOD["ddi"]),
    (f"{DDI_URL[ACME]}/edit", {"virt_exten": "555", "company": INITECH}),
    (f"{DDI_URL[ACME]}/link", {"virt_exten": "555", "company": INITECH}),
    (f"{DDI_URL[ACME]}/delete", {}),
    ("/users/new", GOOD["user"]),
    (f"{USER_URL[ACME]}/edit", {"virt_exten": "555", "company": INITECH}),
    (f"{USER_URL[ACME]}/delete", {}),
    ("/logout", {}),
]


@pytest.mark.parametrize(("path", "values"), FORM_POSTS)
@pytest.mark.parametrize("token", [None, "not-a-token"])
def test_a_form_post_without_the_csrf_token_changes_nothing(world, path, values, token):
    client = world.browser("root")
    before = snapshot()
    data = dict(values) if token is None else {**values, "csrf_token": token}
    for headers in ({}, {"HX-Request": "true"}):
        response = client.post(path, data=data, headers=headers)
        assert response.status_code == 400
        assert "HX-Redirect" not in response.headers
    assert snapshot() == before
    assert client.get("/ddis").status_code == 200  # still signed in


# --- escaping ------------------------------------------------------------------------------------


def test_a_company_name_is_escaped(world):
    factory = world.factory
    factory.company("evil", name="<script>alert(1)</script>")
    factory.ddi("44", "2070000666", "evil")
    client = world.browser("root")
    response = client.get("/ddis")
    assert response.status_code == 200
    page = soup(response)
    assert not [s for s in page.find_all("script") if "alert" in (s.string or "")]
    assert all(s.has_attr("src") for s in page.find_all("script"))
    # The company picker's suggestions name it, escaped.
    response = client.get("/companies/suggest?for=records&q=evil")
    option = soup(response).select_one('[data-value="evil"]')
    assert "<script>alert(1)</script>" in option.get_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html(response)


# --- the company filter where it cannot narrow anything ------------------------------------------


def company_fields(page: BeautifulSoup) -> list[tuple[str, str]]:
    """The filter form's company inputs as (type, value): a picker's text field or a hidden
    one keeping the address's `company`."""
    form = page.select_one("main form[role=search]")
    return [(i.get("type", "text"), i.get("value", "")) for i in form.select("input[name=company]")]


@pytest.mark.parametrize("role", sorted(ADMIN_SCOPE))
@pytest.mark.parametrize("path", ["/ddis", "/users"])
def test_the_company_filter_is_left_out_for_one_company(world, role, path):
    client = world.browser(role)
    plain = soup(client.get(path))
    one = len(ADMIN_SCOPE[role]) == 1
    assert (plain.select_one("#filter-company") is None) is one
    if not one:
        return
    assert company_fields(plain) == []
    # The address's company is still read, and kept by a hidden field (any case names it).
    for given in (ACME, "ACME"):
        filtered = soup(client.get(f"{path}?company={given}"))
        assert filtered.select_one("#filter-company") is None
        assert company_fields(filtered) == [("hidden", ACME)]
        assert table_rows(filtered) == table_rows(plain)
    # Another company: the picker comes back, with its message, so the filter can be cleared.
    other = client.get(f"{path}?company={GLOBEX}")
    assert soup(other).select_one("#filter-company") is not None
