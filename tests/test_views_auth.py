"""/login and /logout (webapp/views/auth.py) beside what tests/test_views_records.py and
tests/test_signin.py already cover: a visitor already signed in who opens /login goes on to the
start page, or to a safe `next`, and is not signed in again (docs/pages.md)."""

from __future__ import annotations

from urllib.parse import quote, urlsplit

import pytest
from bs4 import BeautifulSoup

from .factories import BASIC_ROLES, csrf_from

# Where `/` sends each role (views/__init__.py index).
START = {
    "root": "/ddis",
    "cadmin": "/ddis",
    "cadmin2": "/ddis",
    "summary": "/reports/ddis",
    "reporter": "/reports/ddis",
    "nobody": "/account/tokens",
}


@pytest.mark.parametrize("role", BASIC_ROLES)
def test_a_signed_in_visitor_to_login_goes_to_the_start_page(world, role):
    browser = world.browser(role)
    response = browser.get("/login")
    assert response.status_code == 302 and response.headers["Location"] == "/"
    page = browser.get("/login", follow_redirects=True)
    assert urlsplit(page.request.url).path == START[role]
    assert page.status_code == 200
    # No sign-in form on the way, and no message as if it had signed in again.
    html = BeautifulSoup(page.get_data(as_text=True), "html.parser")
    assert html.select_one("input[name=username]") is None
    assert "Signed in as" not in html.get_text()


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("/users?company=acme", "/users?company=acme"),
        ("/reports/ddis", "/reports/ddis"),
        ("//evil.com", "/"),
        ("https://evil.com/x", "/"),
        ("/\\evil.com", "/"),
        ("", "/"),
    ],
)
def test_a_signed_in_visitor_follows_a_safe_next_only(world, target, expected):
    response = world.browser("root").get("/login?next=" + quote(target, safe=""))
    assert response.status_code == 302 and response.headers["Location"] == expected


def test_posting_the_form_while_signed_in_signs_nobody_else_in(world):
    browser = world.browser("summary")
    response = browser.post(
        "/login",
        data={"csrf_token": browser.csrf, "username": "root", "password": "correct horse battery"},
    )
    assert response.status_code == 302 and response.headers["Location"] == "/"
    # Still Billing Call-Summary: the System-Admin pages stay refused.
    assert browser.get("/admin/accounts").status_code == 403
    page = browser.get("/account/tokens").get_data(as_text=True)
    assert "summary" in BeautifulSoup(page, "html.parser").select_one(".who").get_text()


def test_after_signing_out_login_shows_the_form_again(world):
    browser = world.browser("cadmin")
    response = browser.post("/logout", data={"csrf_token": browser.csrf})
    assert response.status_code == 302 and response.headers["Location"] == "/login"
    page = browser.get("/login")
    assert page.status_code == 200
    assert csrf_from(page.get_data(as_text=True))
    html = BeautifulSoup(page.get_data(as_text=True), "html.parser")
    assert html.select_one("input[name=username]") is not None
