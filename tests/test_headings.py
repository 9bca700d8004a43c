"""Every page has exactly one h1 (docs/pages.md, "Rules for every page"); the fragments htmx
swaps into a page have none. The pages are the one table in tests/pages.py."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from .pages import (
    AS_OTHERS,
    DDI,
    NOT_PAGES,
    PAGES,
    SIGNED_OUT,
    USER,
    add_page_records,
    page_paths,
)
from .snapshots import kept


@pytest.fixture
@kept
def world(world):
    add_page_records(world)
    return world


def h1s(html: str) -> list[str]:
    return [h.get_text(" ", strip=True) for h in BeautifulSoup(html, "html.parser").find_all("h1")]


@pytest.mark.parametrize("name", PAGES)
def test_every_page_has_exactly_one_h1(world, name):
    path = page_paths()[name]
    response = world.browser("root").get(path)
    assert response.status_code == (404 if "404" in name else 200), path
    assert response.mimetype == "text/html"
    assert len(h1s(response.get_data(as_text=True))) == 1, path


@pytest.mark.parametrize("name", AS_OTHERS)
def test_other_roles_pages_have_exactly_one_h1(world, name):
    username, path = AS_OTHERS[name]
    response = world.browser(username).get(path)
    assert response.status_code == 200, path
    assert len(h1s(response.get_data(as_text=True))) == 1, path


@pytest.mark.parametrize("path", SIGNED_OUT.values())
def test_signed_out_pages_have_exactly_one_h1(client, path):
    response = client.get(path)
    assert response.status_code == 200
    assert len(h1s(response.get_data(as_text=True))) == 1


def test_pages_shown_after_a_post_have_exactly_one_h1(world):
    """A form re-rendered with its messages (400), and the page showing a new password once."""
    browser = world.browser("root")
    bad = browser.post("/ddis/new", data={"csrf_token": browser.csrf, "number": "x"})
    assert bad.status_code == 400
    assert len(h1s(bad.get_data(as_text=True))) == 1
    secret = browser.post(
        "/admin/accounts/new",
        data={"csrf_token": browser.csrf, "username": "newbie"},  # no password: one is made
    )
    assert secret.status_code == 200, secret.get_data(as_text=True)
    assert h1s(secret.get_data(as_text=True)) == ["Account created"]


@pytest.mark.parametrize(
    "path",
    ["/ddis", "/ddis/new", f"{DDI}/edit", f"{DDI}/delete", f"{USER}/edit", "/audit"],
)
def test_htmx_fragments_have_no_h1(world, path):
    response = world.browser("root").get(path, headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert "<html" not in html  # a fragment, not the page
    assert h1s(html) == []


def test_the_day_fragment_has_no_h1(world):
    path = page_paths()["DDI counts, one day"]
    response = world.browser("root").get(path, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert h1s(response.get_data(as_text=True)) == []


def test_the_page_table_is_complete(app):
    """Every GET page the app routes (outside /rest/, static files and CSV downloads) is in
    tests/pages.py, so a new page cannot miss these checks (and the axe-core scan)."""
    others = [path for _, path in AS_OTHERS.values()]
    covered = {p.split("?")[0] for p in [*PAGES.values(), *SIGNED_OUT.values(), *others]}
    rules = [
        r
        for r in app.url_map.iter_rules()
        if "GET" in r.methods
        and not r.rule.startswith(("/rest", "/static"))
        and not r.rule.endswith(".csv")
        and r.rule not in NOT_PAGES
    ]
    missing = []
    for rule in rules:
        pattern = rule.rule
        if not any(_matches(pattern, path) for path in covered):
            missing.append(pattern)
    assert missing == [], f"pages missing from tests/pages.py: {missing}"


def _matches(rule: str, path: str) -> bool:
    a, b = rule.strip("/").split("/"), path.strip("/").split("/")
    return len(a) == len(b) and all(x == y or x.startswith("<") for x, y in zip(a, b, strict=True))
