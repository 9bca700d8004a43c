"""Coming back to the list after a save (docs/pages.md, "Coming back"): the list reopens
where the user was (filters, sort, position) with the changed row marked; after a create the new
record is shown. The forms carry the list's state as `back`, which is never an open redirect.
"""

from __future__ import annotations

from urllib.parse import parse_qs, quote, urlsplit

import pytest
from bs4 import BeautifulSoup

from webapp.access import Principal
from webapp.errors import Forbidden
from webapp.services.records import crud, kinds, landing

from .factories import OPERATOR, snapshot
from .snapshots import kept

ACME, GLOBEX, INITECH = "acme", "globex", "initech"
# 120 DDIs at acme (numbers 2070000000..119, extensions 1000..1119) and 3 at globex.
NUMBERS = [f"2070000{i:03d}" for i in range(120)]


@pytest.fixture
@kept
def world(world):
    crud.create(
        OPERATOR,
        kinds.DDI,
        [
            {"dialcode": "44", "number": n, "virt_exten": str(1000 + i), "company": ACME}
            for i, n in enumerate(NUMBERS)
        ]
        + [
            {"dialcode": "44", "number": f"3080000{i:03d}", "virt_exten": "1", "company": GLOBEX}
            for i in range(3)
        ],
    )
    for name in ("ana", "bob", "cid"):
        crud.create(
            OPERATOR, kinds.PHONE_USER, {"username": name, "virt_exten": "200", "company": ACME}
        )
    return world


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def number_of(tr) -> str:
    """A DDI row's number part: its Number cell reads "+44 2071234567"."""
    return tr.select_one("td[data-label='Number']").get_text(strip=True).split(" ")[-1]


def numbers_shown(page: BeautifulSoup) -> list[str]:
    return [number_of(tr) for tr in page.select("#rows tbody tr")]


def marked(page: BeautifulSoup) -> list[str]:
    rows = page.select("#rows tbody tr.changed")
    for tr in rows:
        assert tr["aria-current"] == "true" and tr.select_one(".changed-note")
    return [number_of(tr) for tr in rows]


def flashes(page: BeautifulSoup) -> list[str]:
    return [p.get_text(strip=True) for p in page.select("#flashes .flash")]


def note(page: BeautifulSoup) -> str | None:
    found = page.select_one(".changed-elsewhere")
    return found.get_text(" ", strip=True) if found else None


def post(client, url: str, data: dict, htmx: bool = False):
    headers = {"HX-Request": "true"} if htmx else {}
    return client.post(url, data={**data, "csrf_token": client.csrf}, headers=headers)


def edit_link(page: BeautifulSoup, number: str, action: str = "Edit") -> str:
    for tr in page.select("#rows tbody tr"):
        if number_of(tr) == number:
            return tr.find("a", string=action)["href"]
    raise AssertionError(f"{number} is not on the page")


def page_two(client) -> tuple[str, BeautifulSoup]:
    """Page 2 of acme's DDIs whose number starts 20700000, by number descending."""
    first = soup(client.get("/ddis?company=acme&number=20700000&sort=number&dir=desc"))
    url = first.find("a", rel="next")["href"]
    return url, soup(client.get(url))


# --- after an edit ---------------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_after_an_edit_the_list_reopens_where_it_was_with_the_row_marked(world, htmx):
    client = world.browser("root")
    url, page = page_two(client)
    query = parse_qs(urlsplit(url).query)
    assert query["company"] == [ACME] and query["sort"] == ["number"] and "after" in query
    shown = numbers_shown(page)
    assert shown == sorted((n for n in NUMBERS if n.startswith("20700000")), reverse=True)[50:]
    target = shown[7]

    form_url = edit_link(page, target)
    assert parse_qs(urlsplit(form_url).query)["back"] == [url]
    form = soup(client.get(form_url, headers={"HX-Request": "true"} if htmx else {}))
    assert form.find("input", attrs={"name": "back"})["value"] == url
    assert form.find("a", string="Cancel")["href"] == url

    response = post(
        client, urlsplit(form_url).path, {"virt_exten": "4242", "company": ACME, "back": url}, htmx
    )
    if htmx:
        assert response.status_code == 200 and response.headers["HX-Redirect"] == url
    else:
        assert response.status_code == 302 and response.headers["Location"] == url
    back = soup(client.get(url))
    assert numbers_shown(back) == shown
    assert marked(back) == [target]
    assert f"Saved DDI +44 {target}." in flashes(back)
    assert note(back) is None
    # Marked once: the next look at the list is plain.
    assert marked(soup(client.get(url))) == []


def test_link_and_delete_come_back_too(world):
    client = world.browser("root")
    url, page = page_two(client)
    target, gone = numbers_shown(page)[3], numbers_shown(page)[4]
    response = post(
        client,
        urlsplit(edit_link(page, target, "Link")).path,
        {"virt_exten": "9", "company": ACME, "back": url},
    )
    assert response.headers["Location"] == url
    assert marked(soup(client.get(url))) == [target]
    delete_url = edit_link(page, gone, "Delete")
    confirm = soup(client.get(delete_url))
    assert confirm.find("input", attrs={"name": "back"})["value"] == url
    response = post(client, urlsplit(delete_url).path, {"back": url})
    assert response.headers["Location"] == url
    back = soup(client.get(url))
    assert f"Deleted DDI +44 {gone}." in flashes(back) and gone not in numbers_shown(back)


def test_a_record_that_no_longer_matches_the_filters_is_announced(world):
    client = world.browser("root")
    url = "/ddis?virt_exten=100&company=acme"
    page = soup(client.get(url))
    target = numbers_shown(page)[0]
    response = post(
        client, f"/ddis/44/{target}/edit", {"virt_exten": "555", "company": ACME, "back": url}
    )
    assert response.headers["Location"] == url
    back = soup(client.get(url))
    assert target not in numbers_shown(back) and marked(back) == []
    assert f"Saved DDI +44 {target}." in flashes(back)
    assert note(back) == f"DDI +44 {target} no longer matches these filters."


def test_a_record_moved_elsewhere_in_the_order_gets_a_link_to_it(world):
    client = world.browser("root")
    url = "/ddis?company=acme&sort=virt_exten"
    target = numbers_shown(soup(client.get(url)))[0]  # extension 1000
    response = post(
        client, f"/ddis/44/{target}/edit", {"virt_exten": "1100", "company": ACME, "back": url}
    )
    back = soup(client.get(response.headers["Location"]))
    assert target not in numbers_shown(back)
    found = back.select_one(".changed-elsewhere")
    assert note(back).startswith(f"DDI +44 {target} is elsewhere in this order.")
    there = soup(client.get(found.find("a", string="Show it")["href"]))
    assert numbers_shown(there)[0] == target


def test_a_moved_phone_user_is_marked_under_its_new_key(world):
    client = world.browser("root")
    url = "/users?company=acme"
    response = post(
        client, "/users/acme/bob/edit", {"virt_exten": "200", "company": INITECH, "back": url}
    )
    assert response.headers["Location"] == url
    back = soup(client.get(url))
    assert note(back) == "phone user initech/bob no longer matches these filters."
    post(
        client,
        "/users/initech/bob/edit",
        {"virt_exten": "201", "company": INITECH, "back": "/users"},
    )
    page = soup(client.get("/users"))
    rows = page.select("#rows tbody tr.changed")
    assert [tr.select("td:not(.tick-cell)")[0].get_text(strip=True) for tr in rows] == ["bob"]
    assert rows[0].select("td:not(.tick-cell)")[2].select_one("[data-company]")["data-company"] == (
        INITECH
    )


HOSTILE_BACKS = [
    "https://evil.example/ddis",
    "//evil.example/ddis",
    "///evil.example/ddis",
    "/\\evil.example/ddis",
    "\\\\evil.example/ddis",
    "javascript:alert(1)//",
    "https:/ddis",
    "/ddis\r\nSet-Cookie: x=1",
    "/ddis?company=acme#frag",
    "/ddis?next=https://evil.example",
    "/ddis?company=acme&x=1",
    "/users",  # another list: a DDI form comes back only to /ddis
    "/ddis/../admin/accounts",
    "/ddis?after",
    "/" + "x" * 3000,
    "%2Fddis",
]


@pytest.mark.parametrize("back", HOSTILE_BACKS)
def test_a_back_that_is_not_the_lists_own_address_is_ignored(world, back):
    client = world.browser("root")
    form = soup(client.get(f"/ddis/44/{NUMBERS[0]}/edit?back={quote(back)}"))
    assert form.find("input", attrs={"name": "back"})["value"] == "/ddis"
    assert form.find("a", string="Cancel")["href"] == "/ddis"
    response = post(
        client, f"/ddis/44/{NUMBERS[0]}/edit", {"virt_exten": "1", "company": ACME, "back": back}
    )
    assert response.status_code == 302 and response.headers["Location"] == "/ddis"
    response = post(
        client,
        f"/ddis/44/{NUMBERS[1]}/edit",
        {"virt_exten": "1", "company": ACME, "back": back},
        htmx=True,
    )
    assert response.headers["HX-Redirect"] == "/ddis"


def test_back_is_rebuilt_from_its_parameters_never_echoed(world):
    client = world.browser("root")
    back = "/ddis?company=acme&dir=desc&sort=number&number=207&after=2070000100&after=44"
    response = post(
        client, f"/ddis/44/{NUMBERS[0]}/edit", {"virt_exten": "1", "company": ACME, "back": back}
    )
    location = response.headers["Location"]
    assert urlsplit(location).path == "/ddis"
    assert parse_qs(urlsplit(location).query) == {
        "company": [ACME],
        "number": ["207"],
        "sort": ["number"],
        "dir": ["desc"],
        "after": ["2070000100", "44"],
    }
    # A bad sort or cursor inside a local back falls back as the list itself does.
    response = post(
        client,
        f"/ddis/44/{NUMBERS[0]}/edit",
        {"virt_exten": "1", "company": ACME, "back": "/ddis?company=acme&sort=evil&after=x"},
    )
    assert response.headers["Location"] == "/ddis?company=acme"


def test_htmx_forms_take_the_list_state_from_the_address_shown(world):
    client = world.browser("root")
    headers = {
        "HX-Request": "true",
        "HX-Current-URL": "http://localhost/ddis?company=acme&sort=number",
    }
    form = soup(client.get("/ddis/new", headers=headers))
    assert (
        form.find("input", attrs={"name": "back"})["value"]
        == "/ddis?company=acme&sort=number&dir=asc"
    )
    other_site = {**headers, "HX-Current-URL": "http://evil.example/ddis?company=acme"}
    form = soup(client.get("/ddis/new", headers=other_site))
    assert form.find("input", attrs={"name": "back"})["value"] == "/ddis"


# --- after a create --------------------------------------------------------------------------


def test_after_a_create_the_list_shows_the_new_record_first_and_marked(world):
    client = world.browser("root")
    back = "/ddis?company=acme&number=2070"
    values = {"dialcode": "44", "number": "2070000060", "virt_exten": "7", "company": ACME}
    # 2070000060 exists; 20700000595 sorts right after 2070000059.
    values["number"] = "20700000595"
    response = post(client, "/ddis/new", {**values, "back": back})
    location = response.headers["Location"]
    query = parse_qs(urlsplit(location).query)
    assert query == {"company": [ACME], "number": ["2070"], "after": ["44", "2070000059"]}
    page = soup(client.get(location))
    assert numbers_shown(page)[0] == "20700000595" and marked(page) == ["20700000595"]
    assert "Created DDI +44 20700000595." in flashes(page)


def test_a_create_that_the_filters_would_hide_clears_them(world):
    client = world.browser("root")
    values = {"dialcode": "44", "number": "3080000500", "virt_exten": "7", "company": GLOBEX}
    response = post(client, "/ddis/new", {**values, "back": "/ddis?company=acme"}, htmx=True)
    location = response.headers["HX-Redirect"]
    assert parse_qs(urlsplit(location).query) == {"after": ["44", "3080000002"]}
    page = soup(client.get(location))
    assert numbers_shown(page) == ["3080000500"] and marked(page) == ["3080000500"]
    assert flashes(page) == ["Created DDI +44 3080000500.", "The filters were cleared to show it."]


def test_the_first_record_of_the_list_opens_the_first_page(world):
    client = world.browser("root")
    values = {"dialcode": "1", "number": "1", "virt_exten": "7", "company": ACME}
    response = post(client, "/ddis/new", values)
    assert response.headers["Location"] == "/ddis"
    assert marked(soup(client.get("/ddis"))) == ["1"]


def test_a_company_admin_creates_a_user_and_sees_it(world):
    client = world.browser("cadmin")
    response = post(client, "/users/new", {"username": "bea", "virt_exten": "1", "company": ACME})
    location = response.headers["Location"]
    assert parse_qs(urlsplit(location).query) == {"after": [ACME, "ana"]}
    page = soup(client.get(location))
    assert [
        tr.select("td:not(.tick-cell)")[0].get_text(strip=True) for tr in page.select("tr.changed")
    ] == ["bea"]


# --- the service ---------------------------------------------------------------------------------


def test_locate_answers_only_what_the_principal_sees(world):
    key = {"dialcode": "44", "number": "3080000000"}
    acme_admin = Principal(username="a", via="ui", admin_of=frozenset({ACME}))
    assert landing.locate(acme_admin, kinds.DDI, key, {}) is None  # globex's: not seen
    located = landing.locate(OPERATOR, kinds.DDI, key, {})
    assert located.matches and located.after == ("44", "2070000119")
    located = landing.locate(OPERATOR, kinds.DDI, key, {"company": GLOBEX, "number": "308"})
    assert located.matches and located.after is None  # the first of globex's
    located = landing.locate(OPERATOR, kinds.DDI, key, {}, sort="number", descending=True)
    assert located.after == ("3080000001", "44")  # the cursor's order: number, dialcode
    largest = {"dialcode": "44", "number": "3080000002"}
    assert (
        landing.locate(OPERATOR, kinds.DDI, largest, {}, sort="number", descending=True).after
        is None
    )
    assert not landing.locate(OPERATOR, kinds.DDI, key, {"company": ACME}).matches
    assert not landing.matches(OPERATOR, kinds.DDI, {"number": "abc"}, key)  # a bad filter
    with pytest.raises(Forbidden):
        landing.locate(Principal(username="n", via="ui"), kinds.DDI, key, {})
    before = snapshot()
    landing.locate(OPERATOR, kinds.DDI, key, {})
    assert snapshot() == before
