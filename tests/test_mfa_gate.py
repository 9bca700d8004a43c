"""MFA_REQUIRED (webapp/views/mfa_gate.py, docs/security.md#required-second-factors): a covered
account without a second factor reaches only the pages that set one up; API tokens and single
sign-on sessions are unaffected."""

from __future__ import annotations

import pyotp
import pytest
from bs4 import BeautifulSoup
from sqlalchemy import update

from webapp.database import write_transaction
from webapp.models import AccountSession
from webapp.views.factors import security_page

from .factories import csrf_from

# Who each value covers, among the world's accounts.
COVERED = {
    "none": set(),
    "system-admin": {"root"},
    "admins": {"root", "cadmin", "cadmin2"},
    "all": {"root", "cadmin", "cadmin2", "summary", "reporter", "nobody"},
}
PAGE_OF = {  # a page each account may open when not held back
    "root": "/ddis",
    "cadmin": "/ddis",
    "cadmin2": "/ddis",
    "summary": "/reports/ddis",
    "reporter": "/reports/ddis",
    "nobody": "/account/tokens",
}
ENROL = "/account/security/totp"


@pytest.fixture
def landing(app) -> str:
    """Where a held-back account is sent: the security page, or the authenticator app's page
    where the security page is not part of the app."""
    with app.test_request_context():
        return security_page()


@pytest.mark.parametrize("setting", COVERED)
def test_each_value_holds_back_exactly_the_accounts_it_covers(app, world, landing, setting):
    app.config["MFA_REQUIRED"] = setting
    for username, path in PAGE_OF.items():
        browser = world.browser(username)
        answer = browser.get(path)
        if username in COVERED[setting]:
            assert answer.status_code == 302, (setting, username)
            assert answer.headers["Location"] == landing
        else:
            assert answer.status_code == 200, (setting, username)


def test_a_covered_account_is_sent_to_enrolment_with_the_reason(app, world, landing):
    app.config["MFA_REQUIRED"] = "admins"
    browser = world.browser("cadmin")
    page = browser.get("/ddis", follow_redirects=True)
    assert page.status_code == 200
    assert page.request.path == landing
    text = BeautifulSoup(page.get_data(as_text=True), "html.parser").get_text(" ")
    assert "Your account must have a second factor" in text
    # What it may still reach: the enrolment itself, signing out, static files, the probes.
    assert browser.get("/static/app.css").status_code == 200
    assert browser.get("/healthz").status_code == 200
    assert browser.get("/rest/docs").status_code == 200  # public, like the signed-out page
    assert browser.get("/no-such-page").status_code == 404
    # Signing in lands on the enrolment: / is held back like any other page.
    assert world.factory.browser("cadmin").get("/").headers["Location"] == landing
    out = browser.post("/logout", data={"csrf_token": browser.csrf})
    assert out.status_code == 302 and out.headers["Location"].endswith("/login")


def test_htmx_is_told_to_load_the_enrolment_page(app, world, landing):
    app.config["MFA_REQUIRED"] = "all"
    answer = world.browser("root").get(
        "/ddis", headers={"HX-Request": "true", "HX-Current-URL": "http://localhost/ddis"}
    )
    assert answer.status_code == 403
    assert answer.headers["HX-Redirect"] == landing


def test_the_api_refuses_the_cookie_but_not_a_token(app, world):
    app.config["MFA_REQUIRED"] = "all"
    browser = world.browser("root")
    by_cookie = browser.post(
        "/rest/ops/read", json={"type": "ddi"}, headers={"X-CSRFToken": browser.csrf}
    )
    assert by_cookie.status_code == 403
    body = by_cookie.get_json()
    assert body["result"] == "error" and body["error"]["code"] == "forbidden"
    assert "second factor" in body["error"]["message"]
    by_token = world.factory.client.post(
        "/rest/ops/read", json={"type": "ddi"}, headers=world.root.headers
    )
    assert by_token.status_code == 200


def test_a_single_sign_on_session_is_not_held_back(app, world):
    app.config["MFA_REQUIRED"] = "all"
    browser = world.browser("root")
    assert browser.get("/ddis").status_code == 302
    with write_transaction() as session:
        session.execute(update(AccountSession).values(via="oidc"))
    assert browser.get("/ddis").status_code == 200


def test_an_account_that_sets_up_a_factor_goes_on(app, world):
    app.config["MFA_REQUIRED"] = "all"
    browser = world.browser("nobody")
    page = browser.get(ENROL).get_data(as_text=True)
    secret = BeautifulSoup(page, "html.parser").select_one("#totp-secret").get_text()
    answer = browser.post(
        ENROL,
        data={"csrf_token": csrf_from(page), "code": pyotp.TOTP(secret.replace(" ", "")).now()},
    )
    assert answer.status_code == 200  # the recovery codes, shown once
    assert browser.get("/account/tokens").status_code == 200
