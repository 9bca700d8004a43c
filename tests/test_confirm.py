"""Confirmation before sensitive actions (docs/security.md#confirmation): /account/confirm
(webapp/views/confirm.py) with the password, and the code when the account has a second
factor; and every sensitive action of decisions §15 refused to a session whose last
confirmation is more than 10 minutes old, on the pages and through /rest/ with the cookie.

A session is made stale by setting its row's confirmed_at back 11 minutes, never by waiting.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pyotp
import pytest
from bs4 import BeautifulSoup
from sqlalchemy import func, select, update

from webapp.access import Principal
from webapp.database import utcnow, write_transaction
from webapp.extensions import db
from webapp.models import Account, AccountSession, ApiToken, AuditEntry, Webhook
from webapp.services import sealing
from webapp.services.billing import month_close

from .factories import ACME, snapshot
from .snapshots import kept

PASSWORD = "correct horse battery"
CLOSED = (2025, 9)
LABEL = "2025-09"


@pytest.fixture
@kept
def world(world):
    month_close.close_month(Principal.cli(), month_close.MonthRequest(CLOSED[1], CLOSED[0]))
    return world


def row_id(client) -> str:
    with client.session_transaction() as session:
        key = session["_user_id"].split(":")[2]
    return hashlib.sha256(key.encode()).hexdigest()


def make_stale(client, minutes: int = 11) -> None:
    """The client's session last confirmed `minutes` ago (signing in counts as confirming)."""
    db.session.execute(
        update(AccountSession)
        .where(AccountSession.id == row_id(client))
        .values(confirmed_at=utcnow() - timedelta(minutes=minutes))
    )
    db.session.commit()


def confirmed_at(client):
    db.session.rollback()
    return db.session.get(AccountSession, row_id(client), populate_existing=True).confirmed_at


def audits(action: str) -> list[AuditEntry]:
    db.session.rollback()
    return list(db.session.scalars(select(AuditEntry).where(AuditEntry.action == action)))


def form_of(response) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def state() -> dict[str, Any]:
    """What the sensitive actions change, beside factories.snapshot()."""
    db.session.rollback()
    closes = month_close.latest_close(Principal.cli(), *CLOSED)
    return {
        **snapshot(),
        "accounts": sorted(
            (a.username, a.password_hash, a.system_admin, a.billing_summary, a.totp_secret)
            for a in db.session.scalars(select(Account))
        ),
        "tokens": db.session.scalar(select(func.count()).select_from(ApiToken)),
        "webhooks": db.session.scalar(select(func.count()).select_from(Webhook)),
        "closed": closes is not None and closes.closed,
    }


def give_totp(username: str) -> pyotp.TOTP:
    """An authenticator app for `username`, made directly (enrolment is the factor pages')."""
    secret = pyotp.random_base32()
    with write_transaction() as session:
        account = session.scalars(select(Account).where(Account.username == username)).one()
        account.totp_secret = sealing.seal(secret)
        account.totp_added_at = utcnow()
    return pyotp.TOTP(secret)


# --- every sensitive action ------------------------------------------------------------------
# (what, method, path, form data, the page a stale session comes back to after confirming).
SENSITIVE: list[tuple[str, str, str, dict[str, Any], str]] = [
    ("create an API token", "POST", "/account/tokens", {"label": "ci"}, "/account/tokens"),
    (
        "change one's own password",
        "POST",
        "/account/password",
        {"pw-current_password": PASSWORD, "pw-password": "a brand new password"},
        "/account/security",
    ),
    ("open the new account form", "GET", "/admin/accounts/new", {}, "/admin/accounts/new"),
    (
        "create an account",
        "POST",
        "/admin/accounts/new",
        {"username": "newbie", "password": "a long enough password"},
        "/admin/accounts/new",
    ),
    (
        "change grants",
        "POST",
        "/admin/accounts/cadmin/grants",
        {"billing_summary": "y", "admin_of": ACME},
        "/admin/accounts/cadmin/grants",
    ),
    (
        "set another's password",
        "POST",
        "/admin/accounts/cadmin/password",
        {"password": "another long password"},
        "/admin/accounts/cadmin/password",
    ),
    (
        "reset another's second factors",
        "POST",
        "/admin/accounts/cadmin/reset-mfa",
        {},
        "/admin/accounts/cadmin/reset-mfa",
    ),
    (
        "create a webhook",
        "POST",
        "/admin/webhooks",
        {"url": "https://93.184.215.14/in", "event": ["ddi.created"], "company": ACME},
        "/admin/webhooks",
    ),
    (
        "reopen a month",
        "POST",
        f"/reports/months/{LABEL}/reopen",
        {"reason": "a late correction"},
        f"/reports/months/{LABEL}/reopen",
    ),
]


def send(client, method: str, path: str, data: dict[str, Any], referer: str):
    if method == "GET":
        return client.get(path)
    headers = {"Referer": f"http://localhost{referer}"}
    return client.post(path, data={**data, "csrf_token": client.csrf}, headers=headers)


@pytest.mark.parametrize(
    ("method", "path", "data", "back"),
    [row[1:] for row in SENSITIVE],
    ids=[row[0] for row in SENSITIVE],
)
def test_every_sensitive_action_asks_a_stale_session_to_confirm_first(
    world, factory, method, path, data, back
):
    browser = factory.browser("cadmin" if "/account/" in path else "root")
    make_stale(browser)
    before = state()
    response = send(browser, method, path, data, back)
    assert response.status_code == (302 if method == "GET" else 303), path
    location = response.headers["Location"]
    assert location.startswith("/account/confirm?next="), location
    assert state() == before, path  # nothing changed
    page = browser.get(location)
    assert page.status_code == 200
    if method == "POST":
        flashes = form_of(page).select("#flashes .flash")
        assert "submit the form again" in flashes[0].get_text()

    # Confirming sends it back to the form's page, and the same request now goes through.
    token = form_of(page).find("input", attrs={"name": "csrf_token"})["value"]
    confirmed = browser.post(location, data={"csrf_token": token, "password": PASSWORD})
    assert confirmed.status_code == 302 and confirmed.headers["Location"] == back
    assert audits("account.confirmed")[-1].detail == "confirmed with password"
    again = send(browser, method, path, data, back)
    assert again.status_code in (200, 302, 303), (path, again.get_data(as_text=True)[:500])
    assert not again.headers.get("Location", "").startswith("/account/confirm")
    if method == "POST":
        assert state() != before, path  # it did what it does


def test_a_session_confirmed_within_10_minutes_is_not_asked(world, factory):
    browser = factory.browser("root")
    make_stale(browser, minutes=9)
    assert browser.get("/admin/accounts/new").status_code == 200


def test_htmx_is_told_to_load_the_confirm_page(world, factory):
    browser = factory.browser("root")
    make_stale(browser)
    response = browser.post(
        "/admin/webhooks",
        data={"csrf_token": browser.csrf, "url": "https://93.184.215.14/in"},
        headers={"HX-Request": "true", "HX-Current-URL": "http://localhost/admin/webhooks"},
    )
    assert response.status_code == 200
    assert response.headers["HX-Redirect"] == "/account/confirm?next=/admin/webhooks"


def test_a_stale_session_still_reads_the_pages_that_list(world, factory):
    browser = factory.browser("root")
    make_stale(browser)
    for path in ("/admin/webhooks", "/account/tokens", "/account/security", "/admin/accounts"):
        assert browser.get(path).status_code == 200, path


# --- the API with a session cookie -------------------------------------------------------------
def test_reopening_a_month_through_the_api_with_a_stale_cookie_is_refused(world, factory):
    browser = factory.browser("root")
    make_stale(browser)
    body = {"type": "cdr", "scope": {"year": CLOSED[0], "month": CLOSED[1]}, "reason": "late"}
    before = state()
    refused = browser.post(
        "/rest/call/reopenMonth", json=body, headers={"X-CSRFToken": browser.csrf}
    )
    assert refused.status_code == 403
    assert refused.json["result"] == "error"
    assert refused.json["error"]["code"] == "confirmation_required"
    assert state() == before

    # A Bearer token is its own credential: never asked.
    token = world.caller("root").headers
    done = factory.client.post("/rest/call/reopenMonth", json=body, headers=token)
    assert done.status_code == 200, done.json
    assert state()["closed"] is False


def test_reopening_through_the_api_with_a_fresh_cookie_works(world, factory):
    browser = factory.browser("root")
    body = {"type": "cdr", "scope": {"year": CLOSED[0], "month": CLOSED[1]}, "reason": "late"}
    done = browser.post("/rest/call/reopenMonth", json=body, headers={"X-CSRFToken": browser.csrf})
    assert done.status_code == 200, done.json


# --- the confirm page --------------------------------------------------------------------------
def confirm(browser, **data: str):
    return browser.post(
        "/account/confirm?next=/admin/accounts", data={"csrf_token": browser.csrf, **data}
    )


def test_confirming_with_the_password_refreshes_the_session(world, factory):
    browser = factory.browser("root")
    make_stale(browser)
    page = browser.get("/account/confirm")
    assert page.status_code == 200
    assert page.headers["Cache-Control"] == "no-store"
    assert form_of(page).find(id="code") is None  # no second factor: no code asked
    old = confirmed_at(browser)
    response = confirm(browser, password=PASSWORD)
    assert response.status_code == 302 and response.headers["Location"] == "/admin/accounts"
    assert confirmed_at(browser) > old
    [entry] = audits("account.confirmed")
    assert (entry.actor, entry.target) == ("root", "account root")


def test_a_wrong_password_is_refused_and_counted(world, factory):
    browser = factory.browser("root")
    make_stale(browser)
    old = confirmed_at(browser)
    response = confirm(browser, password="not the password")
    assert response.status_code == 400
    assert "Wrong password or code." in response.get_data(as_text=True)
    assert confirmed_at(browser) == old
    for _ in range(9):
        assert confirm(browser, password="not the password").status_code == 400
    # The sign-in limit (10 per account and address in 15 minutes): now even the right one waits.
    assert confirm(browser, password=PASSWORD).status_code == 429
    assert confirmed_at(browser) == old


def test_an_unsafe_next_goes_to_the_start_page(world, factory):
    browser = factory.browser("root")
    response = browser.post(
        "/account/confirm?next=https://evil.example.com/",
        data={"csrf_token": browser.csrf, "password": PASSWORD},
    )
    assert response.status_code == 302 and response.headers["Location"] == "/"


def test_with_an_authenticator_app_the_code_is_asked_too(world, factory):
    # Signed in first: signing in with an app is the second-step page's (the factor views').
    browser = factory.browser("root")
    totp = give_totp("root")
    make_stale(browser)
    page = browser.get("/account/confirm")
    assert form_of(page).find(id="code") is not None
    old = confirmed_at(browser)
    # The password alone, a wrong code, or the right code with a wrong password: refused.
    assert confirm(browser, password=PASSWORD).status_code == 400
    assert confirm(browser, password=PASSWORD, code="000000").status_code == 400
    assert confirm(browser, password="not the password", code=totp.now()).status_code == 400
    assert confirmed_at(browser) == old
    assert len(audits("account.second-factor-failed")) == 2  # the code was checked twice
    response = confirm(browser, password=PASSWORD, code=totp.now())
    assert response.status_code == 302
    assert confirmed_at(browser) > old
    assert audits("account.confirmed")[-1].detail == "confirmed with password and authenticator app"


def test_a_single_sign_on_session_without_the_sso_pages_confirms_with_the_password(world, factory):
    """An OIDC session confirms at its identity provider (a link to sso.start, views/sso.py);
    where that view is not there, the password form is the way."""
    browser = factory.browser("root")
    db.session.execute(
        update(AccountSession).where(AccountSession.id == row_id(browser)).values(via="oidc")
    )
    db.session.commit()
    page = form_of(browser.get("/account/confirm"))
    assert page.find(id="password") is not None
    assert page.find("a", string="Confirm at your identity provider") is None


def test_a_stale_post_without_a_referer_comes_back_to_its_page_or_the_start(world, factory):
    browser = factory.browser("root")
    make_stale(browser)
    response = browser.post("/admin/webhooks", data={"csrf_token": browser.csrf})
    assert response.headers["Location"] == "/account/confirm?next=/admin/webhooks"
    other = browser.post(
        "/admin/webhooks",
        data={"csrf_token": browser.csrf},
        headers={"Referer": "https://evil.example.com/admin/webhooks"},
    )
    assert other.headers["Location"] == "/account/confirm?next=/admin/webhooks"
    password = browser.post("/account/password", data={"csrf_token": browser.csrf})
    assert password.headers["Location"] == "/account/confirm?next=/"  # no page at that address


def test_wrong_codes_count_toward_the_sign_in_limit(world, factory):
    browser = factory.browser("root")
    totp = give_totp("root")
    make_stale(browser)
    for _ in range(10):
        assert confirm(browser, password=PASSWORD, code="000000").status_code == 400
    assert confirm(browser, password=PASSWORD, code=totp.now()).status_code == 429
    assert len(audits("account.second-factor-failed")) == 10
    assert audits("account.confirmed") == []
