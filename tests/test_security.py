"""Headers on every response, and sign-in failure limits."""

from __future__ import annotations

import pytest
from werkzeug.wrappers import Response

from webapp.security import add_vary

from .factories import csrf_from


def test_every_response_carries_the_security_headers(factory):
    factory.company("acme")
    admin = factory.account("root", system_admin=True)
    browser = factory.browser("root")
    responses = [
        factory.client.get("/login"),
        factory.client.get("/rest/version"),
        factory.api(admin, "read", {"type": "ddi"}),
        factory.api(None, "read", {"type": "ddi"}),
        browser.get("/ddis"),
        browser.get("/nope"),
    ]
    for response in responses:
        csp = response.headers["Content-Security-Policy"]
        for directive in (
            "script-src 'self'",
            "object-src 'none'",
            "base-uri 'self'",
            "frame-ancestors 'none'",
        ):
            assert directive in csp
        assert "unsafe-inline" not in csp
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "same-origin"
        assert "Strict-Transport-Security" not in response.headers  # HTTPS not configured


def test_signed_in_pages_and_api_answers_are_not_cached(factory):
    factory.account("root", system_admin=True)
    browser = factory.browser("root")
    assert browser.get("/ddis").headers["Cache-Control"] == "no-store"
    assert factory.client.get("/rest/version").headers["Cache-Control"] == "no-store"
    assert "no-store" not in factory.client.get("/static/app.css").headers.get("Cache-Control", "")


def test_hsts_when_https_is_configured(app, factory):
    app.config["HTTPS"] = True
    response = factory.client.get("/login")
    assert response.headers["Strict-Transport-Security"].startswith("max-age=")


def test_pages_have_no_inline_script_or_style(factory):
    factory.company("acme")
    factory.account("root", system_admin=True)
    browser = factory.browser("root")
    from bs4 import BeautifulSoup

    for path in ("/login", "/ddis", "/users", "/ddis/new"):
        soup = BeautifulSoup(browser.get(path).get_data(as_text=True), "html.parser")
        assert all(script.get("src") for script in soup.find_all("script")), path
        assert not soup.find_all("style"), path
        assert not soup.select("[style]"), path
        assert not [t for t in soup.find_all(True) if any(a.startswith("on") for a in t.attrs)], (
            path
        )


def _attempts(factory):
    client = factory.client
    token = csrf_from(client.get("/login").get_data(as_text=True))

    def attempt(username, password, address):
        return client.post(
            "/login",
            data={"csrf_token": token, "username": username, "password": password},
            environ_base={"REMOTE_ADDR": address},
        )

    return attempt


@pytest.mark.slow
def test_ten_failed_sign_ins_of_an_account_from_one_address_then_429(factory):
    factory.account("root", system_admin=True)
    attempt = _attempts(factory)
    for _ in range(10):
        assert attempt("root", "wrong password!", "10.0.0.1").status_code == 400
    assert attempt("root", "correct horse battery", "10.0.0.1").status_code == 429
    # The owner, from elsewhere, is not locked out by someone else's failures.
    assert attempt("root", "correct horse battery", "10.0.0.2").status_code == 302


@pytest.mark.slow
def test_failed_sign_ins_from_one_address_over_all_accounts_then_429(app, factory):
    factory.account("root", system_admin=True)
    factory.account("other", system_admin=False)
    app.config["SIGN_IN_ADDRESS_LIMIT"] = "10 per 15 minutes"  # default 100: fewer requests
    attempt = _attempts(factory)
    for i in range(10):
        assert attempt(f"u{i}", "wrong password!", "10.0.0.9").status_code == 400
    assert attempt("root", "correct horse battery", "10.0.0.9").status_code == 429
    # Another address is unaffected.
    assert attempt("other", "correct horse battery", "10.9.9.9").status_code == 302


@pytest.mark.parametrize(
    "vary", [None, "Cookie", "cookie", "A,B", "A , B", "Accept-Encoding, Cookie", "*", '"x"', "a b"]
)
@pytest.mark.parametrize("value", ["HX-Request", "Cookie"])
def test_add_vary_writes_what_werkzeug_writes(vary, value):
    """add_vary's shortcut gives the header werkzeug's response.vary.add gives, to the byte."""
    ours, theirs = Response(), Response()
    for response in (ours, theirs):
        if vary is not None:
            response.headers["Vary"] = vary
        response.headers["X-Other"] = "1"
    add_vary(ours, value)
    if "Vary" in theirs.headers:
        theirs.vary.add(value)
    else:
        theirs.headers["Vary"] = value
    assert ours.headers.to_wsgi_list() == theirs.headers.to_wsgi_list()
