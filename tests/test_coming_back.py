"""Coming back to a list, without JavaScript (and with htmx's headers): every action opened
from the DDI or phone-user list (create, edit, link, delete, bulk move and delete, their
Cancel, a refused bulk form) returns to the list as it was shown: the number search, every
filter, the sort and the position (docs/pages.md, "Coming back"). A `back` that is not the
list's own address is ignored, never followed."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from bs4 import BeautifulSoup

from .factories import World
from .snapshots import kept

ACME, GLOBEX = "acme", "globex"

# A list as shown: its number search, filters, sort and position (the last page).
LISTS = {
    "ddis": {"q": "44207", "company": ACME, "sort": "virt_exten", "dir": "desc", "last": "1"},
    "users": {"username": "a", "company": ACME, "sort": "virt_exten", "dir": "desc", "last": "1"},
}
RECORD = {"ddis": "/ddis/44/2071234567", "users": "/users/acme/ana"}
KEY = {"ddis": "44:2071234567", "users": "acme/ana"}
NEW = {
    "ddis": {"dialcode": "44", "number": "2070000009", "virt_exten": "555", "company": ACME},
    "users": {"username": "amy", "virt_exten": "555", "company": ACME},
}
NOUN = {"ddis": "DDIs", "users": "phone users"}


@pytest.fixture
@kept
def world(world: World) -> World:
    world.factory.ddi("44", "2071234567", ACME, "100")
    world.factory.ddi("44", "2079999999", ACME, "101")
    world.factory.ddi("33", "100000001", GLOBEX, "102")
    world.factory.user("ana", ACME, "200")
    world.factory.user("abe", ACME, "201")
    world.factory.user("bob", GLOBEX, "202")
    return world


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def address(plural: str, state: dict[str, str] | None = None) -> str:
    return f"/{plural}" + (f"?{urlencode(state)}" if state else "")


def same_list(url: str, plural: str, state: dict[str, str], position: bool = True) -> None:
    """`url` reopens /<plural> in `state` (every parameter, in any order); without `position`,
    it may start somewhere else (a create opens the list from the new record)."""
    parts = urlsplit(url)
    assert not parts.scheme and not parts.netloc and parts.path == f"/{plural}", url
    got = {k: v[0] for k, v in parse_qs(parts.query).items()}
    if not position:
        got = {k: v for k, v in got.items() if k not in ("after", "before", "last", "page")}
        state = {k: v for k, v in state.items() if k != "last"}
    assert got == state, url


def post(client, url: str, data: dict, htmx_from: str | None = None):
    headers = {"HX-Request": "true", "HX-Current-URL": htmx_from} if htmx_from else {}
    return client.post(url, data={"csrf_token": client.csrf, **data}, headers=headers)


def form_back(page: BeautifulSoup) -> list[str]:
    """Where a form page returns: its hidden `back` and its Cancel link."""
    form = page.select_one("main form[method=post]")
    assert form is not None
    cancel = form.find("a", string="Cancel")
    return [form.select_one("input[name=back]")["value"], cancel["href"]]


# Each action: opened from the list in `state`, what it shows and where it comes back; the
# URLs it returns that must reopen the list (position: whether the position is kept too).
Action = Callable[[object, str, str], list[tuple[str, bool]]]


def create(client, plural: str, back: str) -> list[tuple[str, bool]]:
    form = form_back(soup(client.get(f"/{plural}/new?" + urlencode({"back": back}))))
    done = post(client, f"/{plural}/new", {**NEW[plural], "back": back})
    assert done.status_code == 302
    return [(u, True) for u in form] + [(done.headers["Location"], False)]


def change(action: str) -> Action:
    def run(client, plural: str, back: str) -> list[tuple[str, bool]]:
        url = f"{RECORD[plural]}/{action}"
        form = form_back(soup(client.get(url + "?" + urlencode({"back": back}))))
        values = {"virt_exten": "777", "back": back}
        if action == "edit":
            values["company"] = ACME
        done = post(client, url, values if action != "delete" else {"back": back})
        assert done.status_code == 302, done.get_data(as_text=True)
        return [(u, True) for u in form] + [(done.headers["Location"], True)]

    return run


def htmx_edit(client, plural: str, back: str) -> list[tuple[str, bool]]:
    """The form opened in the list's panel: the list's address is the browser's (HX-Current-URL)."""
    url = f"{RECORD[plural]}/edit"
    shown = client.get(
        url, headers={"HX-Request": "true", "HX-Current-URL": f"http://localhost{back}"}
    )
    hidden = soup(shown).select_one("input[name=back]")["value"]
    values = {"virt_exten": "777", "company": ACME, "back": hidden}
    done = post(client, url, values, htmx_from=f"http://localhost{back}")
    assert done.status_code == 200
    return [(hidden, True), (done.headers["HX-Redirect"], True)]


def bulk(action: str) -> Action:
    def run(client, plural: str, back: str) -> list[tuple[str, bool]]:
        data = {"scope": "selected", "key": KEY[plural], "action": action, "back": back}
        if action == "move":
            data["to_company"] = GLOBEX
        page = soup(post(client, f"/{plural}/bulk", data))
        confirm = page.select_one("form[action$='/bulk/apply']")
        hidden = {i["name"]: i["value"] for i in confirm.select("input[type=hidden]")}
        cancel = confirm.find("a", string="Cancel")["href"]
        done = client.post(f"/{plural}/bulk/apply", data=hidden)
        assert done.status_code == 303
        return [(hidden["back"], True), (cancel, True), (done.headers["Location"], True)]

    return run


def bulk_refused(client, plural: str, back: str) -> list[tuple[str, bool]]:
    """Nothing ticked: the list itself again, saying so, its bulk form still coming back."""
    data = {"scope": "selected", "action": "move", "to_company": GLOBEX, "back": back}
    answer = post(client, f"/{plural}/bulk", data)
    assert answer.status_code == 400
    page = soup(answer)
    assert page.h1.get_text(strip=True) == {"ddis": "DDIs", "users": "Phone users"}[plural]
    message = page.find(id="bulk-error").get_text(strip=True)
    assert message == f"Tick the {NOUN[plural]} to change first."
    assert page.find(id="filter-company")["value"] == ACME
    return [(page.select_one("#bulk input[name=back]")["value"], True)]


ACTIONS: dict[str, Action] = {
    "create": create,
    "edit": change("edit"),
    "link": change("link"),
    "delete": change("delete"),
    "htmx edit": htmx_edit,
    "bulk move": bulk("move"),
    "bulk delete": bulk("delete"),
    "bulk refused": bulk_refused,
}
CASES = [
    (plural, action)
    for plural in LISTS
    for action in ACTIONS
    if not (plural == "users" and action == "link")  # a DDI's only
]


@pytest.mark.parametrize(("plural", "action"), CASES)
def test_every_action_comes_back_to_the_list_as_shown(world, plural, action):
    client = world.browser("root")
    state = LISTS[plural]
    back = address(plural, state)
    urls = ACTIONS[action](client, plural, back)
    assert urls
    for url, position in urls:
        same_list(url, plural, state, position)


@pytest.mark.parametrize("plural", LISTS)
def test_the_lists_links_carry_the_list_as_shown(world, plural):
    """Every record link of a filtered list, and its bulk form, name the list as shown."""
    client = world.browser("root")
    state = {**LISTS[plural], "last": "1"}
    page = soup(client.get(address(plural, state)))
    links = [a["href"] for a in page.select("#rows td.actions a")]
    links.append(
        page.find("a", string=f"New {'DDI' if plural == 'ddis' else 'phone user'}")["href"]
    )
    assert links
    for href in links:
        back = parse_qs(urlsplit(href).query)["back"][0]
        same_list(back, plural, state)
    same_list(page.select_one("#bulk input[name=back]")["value"], plural, state)


@pytest.mark.parametrize(
    "back",
    [
        "//evil.example/ddis",
        "https://evil.example/ddis?q=1",
        "/ddis?next=https://evil.example",
        "/users?company=acme",
        "/ddis/../admin?q=1",
        "/ddis?q=1#x",
        "\\\\evil.example/ddis",
        "javascript:alert(1)",
    ],
)
def test_a_back_that_is_not_the_lists_own_address_is_ignored(world, back):
    client = world.browser("root")
    shown = form_back(soup(client.get(f"{RECORD['ddis']}/edit?" + urlencode({"back": back}))))
    assert shown == ["/ddis", "/ddis"]
    done = post(
        client, f"{RECORD['ddis']}/edit", {"virt_exten": "1", "company": ACME, "back": back}
    )
    assert done.headers["Location"] == "/ddis"
    data = {"scope": "selected", "action": "move", "to_company": GLOBEX, "back": back}
    refused = post(client, "/ddis/bulk", data)
    assert refused.status_code == 400
    assert soup(refused).select_one("#bulk input[name=back]")["value"] == "/ddis"


def test_a_saved_row_of_a_searched_list_is_marked_there(world):
    """/ddis?q=… → Edit → Save: the same search, the row marked, no "elsewhere" note."""
    client = world.browser("root")
    back = "/ddis?q=442071234567"
    done = post(
        client, f"{RECORD['ddis']}/edit", {"virt_exten": "4242", "company": ACME, "back": back}
    )
    assert done.headers["Location"] == back
    page = soup(client.get(back))
    marked = page.select("#rows tbody tr.changed")
    assert len(marked) == 1 and "2071234567" in marked[0].get_text()
    assert page.select_one(".changed-elsewhere") is None


def test_a_refused_bulk_form_keeps_its_ticks_and_company(world):
    client = world.browser("root")
    back = address("ddis", {"company": ACME, "sort": "number"})
    data = {"scope": "selected", "key": KEY["ddis"], "action": "move", "to_company": "nope"}
    answer = post(client, "/ddis/bulk", {**data, "back": back})
    assert answer.status_code == 400
    page = soup(answer)
    bar = page.select_one("form#bulk")
    assert "refused" in bar["class"] and "has-error" not in bar["class"]
    # static/app.js shows the list's address in the address bar
    same_list(bar["data-list-url"], "ddis", {"company": ACME, "sort": "number", "dir": "asc"})
    # The company's problem beside its picker, the only field marked; nothing else is wrong.
    assert "unknown company" in bar.select_one("#bulk-company-error").get_text()
    assert [" ".join(f["class"]) for f in bar.select(".has-error")] == [
        "field picker wide has-error"
    ]
    assert bar.select_one("#bulk-error") is None
    ticked = [i["value"] for i in page.select("input.tick[checked]")]
    assert ticked == [KEY["ddis"]]
    assert page.find(id="bulk-company")["value"] == "nope"
    assert page.find(id="filter-company")["value"] == ACME


# --- the administration lists ------------------------------------------------------------------
# list state, the form a row's link opens, what its Save posts. The accounts list is searched
# and paged; the companies list also sorted.
ADMIN_LISTS = {
    "companies": {"q": "e", "sort": "name", "dir": "desc", "page": "2"},
    "accounts": {"q": "o", "page": "2"},
}
ADMIN_ACTIONS = [
    ("companies", "/admin/companies/acme/rename", {"name": "Acme Two"}),
    ("accounts", "/admin/accounts/nobody/grants", {"billing_summary": "y"}),
    ("accounts", "/admin/accounts/nobody/password", {"password": "a much longer password 1"}),
    ("accounts", "/admin/accounts/nobody/disable", {}),
]


@pytest.mark.parametrize(("plural", "path", "values"), ADMIN_ACTIONS)
def test_admin_forms_come_back_to_the_list_as_shown(world, monkeypatch, plural, path, values):
    from webapp.views import admin

    monkeypatch.setattr(admin, "PER_PAGE", 1)  # so that page 2 exists
    client = world.browser("root")
    state = ADMIN_LISTS[plural]
    listed = f"/admin/{plural}?{urlencode(state)}"
    page = soup(client.get(listed))
    # The row on this page may be another record's: what its links carry is what matters.
    links = [a["href"] for a in page.select("td.actions a[href*='back=']")]
    assert links, "the rows' links carry no back"
    back = parse_qs(urlsplit(links[0]).query)["back"][0]
    same_admin_list(back, plural, state)

    form = form_back(soup(client.get(f"{path}?" + urlencode({"back": back}))))
    for url in form:
        same_admin_list(url, plural, state)
    done = post(client, path, {**values, "back": back})
    assert done.status_code == 302, done.get_data(as_text=True)
    same_admin_list(done.headers["Location"], plural, state)


def same_admin_list(url: str, plural: str, state: dict[str, str]) -> None:
    parts = urlsplit(url)
    assert not parts.netloc and parts.path == f"/admin/{plural}", url
    assert {k: v[0] for k, v in parse_qs(parts.query).items()} == state, url


@pytest.mark.parametrize(
    "back",
    ["//evil.example/admin/accounts", "/admin/companies?q=a", "/admin/accounts?next=/x", "/x"],
)
def test_an_admin_forms_foreign_back_is_the_plain_list(world, back):
    client = world.browser("root")
    path = "/admin/accounts/nobody/disable"
    assert form_back(soup(client.get(f"{path}?" + urlencode({"back": back})))) == [
        "/admin/accounts",
        "/admin/accounts",
    ]
    assert post(client, path, {"back": back}).headers["Location"] == "/admin/accounts"


def test_a_ddis_own_page_is_come_back_to_from_its_edit_link_and_delete(world):
    """The DDI page's Edit, Link and Delete carry the page as `back`: Cancel, the save and the
    delete return to it (a deleted number's page says so), not to the list."""
    client = world.browser("root")
    page = RECORD["ddis"]
    links = soup(client.get(page)).select(".pagehead .actions a")
    assert [a.get_text() for a in links] == ["Edit", "Link", "Delete"]
    for link in links:
        assert parse_qs(urlsplit(link["href"]).query)["back"] == [page]
        assert form_back(soup(client.get(link["href"]))) == [page, page]
    saved = post(client, f"{page}/edit", {"virt_exten": "321", "company": ACME, "back": page})
    assert saved.status_code == 302 and saved.headers["Location"] == page
    linked = post(client, f"{page}/link", {"virt_exten": "322", "back": page})
    assert linked.status_code == 302 and linked.headers["Location"] == page
    shown = client.get(page).get_data(as_text=True)
    assert "Linked DDI" in shown and "322" in shown
    deleted = post(client, f"{page}/delete", {"back": page})
    assert deleted.status_code == 302 and deleted.headers["Location"] == page
    gone = soup(client.get(page))
    # Out of service, the number is back in the stock (no aging days): its page says so.
    assert gone.select_one("#now-state")["data-state"] == "available"
    assert gone.select_one(".pagehead .actions") is None
    assert "Deleted DDI" in gone.get_text()


def test_another_records_page_as_back_is_not_followed(world):
    client = world.browser("root")
    other = "/ddis/44/2079999999"
    form = soup(client.get(f"{RECORD['ddis']}/edit?" + urlencode({"back": other})))
    assert form_back(form) == ["/ddis", "/ddis"]
    saved = post(
        client, f"{RECORD['ddis']}/edit", {"virt_exten": "1", "company": ACME, "back": other}
    )
    assert saved.headers["Location"] == "/ddis"


@pytest.mark.parametrize(("plural", "path", "values"), ADMIN_ACTIONS)
def test_the_row_an_admin_form_saved_is_marked_once(world, plural, path, values):
    """As on the record lists: back on the filtered, sorted list, the row is marked (tr.changed,
    aria-current, "Just saved"), and only the first time the list is shown again."""
    client = world.browser("root")
    key = path.split("/")[3]
    state = {"q": key, "sort": "name", "dir": "desc"} if plural == "companies" else {"q": key}
    back = f"/admin/{plural}?{urlencode(state)}"
    done = post(client, path, {**values, "back": back})
    assert done.headers["Location"] == back
    page = soup(client.get(back))
    [marked] = page.select("tbody tr.changed[aria-current=true]")
    assert key in marked.get_text() and "Just saved" in marked.get_text()
    assert key in page.select_one("#flashes .flash").get_text()  # and the message says what
    again = soup(client.get(back))
    assert again.select("tbody tr.changed") == [] and "Just saved" not in again.get_text()


@pytest.mark.parametrize("plural", ["ddis", "users"])
def test_a_get_of_the_bulk_address_is_the_list(world, plural):
    """A reload (or bookmark) of the address a refused bulk form was answered at: the list,
    as its `back` names it when given, else the plain list; never 405."""
    client = world.browser("root")
    assert client.get(f"/{plural}/bulk").headers["Location"] == f"/{plural}"
    back = address("ddis", {"company": ACME, "sort": "number", "dir": "asc"})
    answer = client.get("/ddis/bulk?" + urlencode({"back": back}))
    assert answer.status_code == 302 and answer.headers["Location"] == back
    foreign = client.get("/ddis/bulk?" + urlencode({"back": "https://elsewhere.example/ddis"}))
    assert foreign.headers["Location"] == "/ddis"


def test_an_htmx_bulk_refusal_keeps_the_lists_address(world):
    client = world.browser("root")
    back = address("ddis", {"company": ACME, "sort": "number", "dir": "asc"})
    data = {"scope": "selected", "action": "move", "to_company": ACME, "back": back}
    answer = post(client, "/ddis/bulk", data, htmx_from=f"http://localhost{back}")
    assert answer.status_code == 400
    assert answer.headers["HX-Replace-Url"] == back
    assert post(client, "/ddis/bulk", data).headers.get("HX-Replace-Url") is None


def test_the_ddi_lists_state_is_part_of_back(world):
    """A DDI list in another state (docs/pages.md, "State filter") is come back to in it,
    with its filters and position; the phone-user list has no state, so a `back` naming one
    is not its address."""
    client = world.browser("root")
    state = {"state": "all", "company": ACME, "after": ["44", "2071234567"]}
    back = "/ddis?" + urlencode(state, doseq=True)
    shown = form_back(soup(client.get(f"{RECORD['ddis']}/edit?" + urlencode({"back": back}))))
    for url in shown:
        same_list(url, "ddis", {"state": "all", "company": ACME, "after": "44"})
    done = post(
        client, f"{RECORD['ddis']}/edit", {"virt_exten": "7", "company": ACME, "back": back}
    )
    assert parse_qs(urlsplit(done.headers["Location"]).query) == {
        "state": ["all"],
        "company": [ACME],
        "after": ["44", "2071234567"],
    }
    # In service is the default: it is left out of the address.
    plain = "/ddis?state=in_service&company=acme"
    done = post(
        client, f"{RECORD['ddis']}/edit", {"virt_exten": "8", "company": ACME, "back": plain}
    )
    assert done.headers["Location"] == "/ddis?company=acme"
    foreign = "/users?state=reserved"
    done = post(
        client, f"{RECORD['users']}/edit", {"virt_exten": "9", "company": ACME, "back": foreign}
    )
    assert done.headers["Location"] == "/users"
    # A bulk form refused on the list in a state comes back to it.
    data = {
        "scope": "selected",
        "action": "reserve",
        "f_state": "available",
        "back": "/ddis?state=available",
    }
    refused = post(client, "/ddis/bulk", data)
    assert refused.status_code == 400
    assert soup(refused).select_one("#filter-state option[selected]")["value"] == "available"
