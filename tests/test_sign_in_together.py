"""The parts of signing in together (docs/security.md): the security page shows every factor's
section, changing one's own factors asks a stale session to confirm first (the authenticator
app's and the passkeys' actions alike), the second step offers what the account has, and the
confirm page offers what the session was signed in with."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pyotp
import pytest
from bs4 import BeautifulSoup
from sqlalchemy import select, update

from webapp.database import utcnow, write_transaction
from webapp.extensions import db
from webapp.models import Account, AccountSession, Passkey, RecoveryCode
from webapp.services import sealing

from .factories import csrf_from
from .webauthn_device import Device

PASSWORD = "correct horse battery"


def _page(response) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def _row_id(client) -> str:
    with client.session_transaction() as session:
        key = session["_user_id"].split(":")[2]
    return hashlib.sha256(key.encode()).hexdigest()


def _stale(client) -> None:
    with write_transaction() as session:
        session.execute(
            update(AccountSession)
            .where(AccountSession.id == _row_id(client))
            .values(confirmed_at=utcnow() - timedelta(minutes=11))
        )


def _factors(username: str) -> dict[str, Any]:
    db.session.rollback()
    account = db.session.scalars(select(Account).where(Account.username == username)).one()
    return {
        "totp": account.totp_secret,
        "codes": sorted((c.digest, c.used_at) for c in db.session.scalars(select(RecoveryCode))),
        "passkeys": sorted((p.name, p.sign_count) for p in db.session.scalars(select(Passkey))),
    }


def _add_passkey(browser, device: Device, name: str) -> None:
    headers = {"X-CSRFToken": browser.csrf}
    options = browser.post("/account/passkeys/options", json={}, headers=headers).get_json()
    body = {"name": name, "credential": device.create(options), "back": "/account/security"}
    assert browser.post("/account/passkeys", json=body, headers=headers).status_code == 200


def _with_app_and_passkey(factory) -> tuple[Any, pyotp.TOTP, Device]:
    """alice with an authenticator app, a passkey and recovery codes, and her browser."""
    factory.account("alice")
    browser = factory.browser("alice")
    device = Device()
    _add_passkey(browser, device, "Laptop")  # the first factor: recovery codes made too
    secret = pyotp.random_base32()
    with write_transaction() as session:
        account = session.scalars(select(Account).where(Account.username == "alice")).one()
        account.totp_secret = sealing.seal(secret)
        account.totp_added_at = utcnow()
    return browser, pyotp.TOTP(secret), device


def test_the_security_page_shows_every_section_of_the_account(factory):
    browser, _, _ = _with_app_and_passkey(factory)
    page = _page(browser.get("/account/security"))
    headings = [h.get_text(" ", strip=True) for h in page.select("main h2")]
    for section in ("Authenticator app", "Passkeys", "Recovery codes", "Sessions", "Password"):
        assert any(section in heading for heading in headings), (section, headings)
    text = page.get_text(" ", strip=True)
    assert "Laptop" in text  # the passkey's name
    assert "10" in text  # recovery codes left
    assert page.find("form", action="/account/security/totp/remove") is not None


def _factor_actions(browser, passkey_id: int) -> list[tuple[str, str, dict[str, Any], bool]]:
    """(method, path, body, as JSON) of every change to one's own factors."""
    return [
        ("GET", "/account/security/totp", {}, False),
        ("POST", "/account/security/totp", {"code": "123456"}, False),
        ("POST", "/account/security/totp/remove", {}, False),
        ("POST", "/account/security/recovery-codes", {}, False),
        ("POST", "/account/passkeys/options", {"name": "Another"}, True),
        ("POST", "/account/passkeys", {"name": "Another", "credential": {}}, True),
        ("POST", f"/account/passkeys/{passkey_id}/remove", {}, False),
    ]


def test_changing_ones_own_factors_asks_a_stale_session_to_confirm_first(factory):
    browser, _, _ = _with_app_and_passkey(factory)
    db.session.rollback()
    passkey_id = db.session.scalar(select(Passkey.id))
    _stale(browser)
    before = _factors("alice")
    for method, path, body, as_json in _factor_actions(browser, passkey_id):
        if method == "GET":
            response = browser.get(path)
        elif as_json:
            response = browser.post(path, json=body, headers={"X-CSRFToken": browser.csrf})
        else:
            response = browser.post(path, data={**body, "csrf_token": browser.csrf})
        assert response.status_code in (302, 303), (path, response.status_code)
        assert response.headers["Location"].startswith("/account/confirm?next="), path
        assert _factors("alice") == before, path


def test_the_confirm_page_takes_a_code_or_a_passkey_for_an_account_with_both(factory):
    browser, totp, device = _with_app_and_passkey(factory)
    _stale(browser)
    page = _page(browser.get("/account/confirm?next=/account/tokens"))
    assert page.find("input", attrs={"name": "password"}) is not None
    assert page.find("input", attrs={"name": "code"}) is not None
    assert page.select_one("section[data-passkeys]") is not None  # "Use a passkey"
    # The passkey alone confirms (it is the stronger proof: possession and, on the device,
    # the owner's fingerprint or PIN).
    headers = {"X-CSRFToken": browser.csrf}
    options = browser.post("/account/confirm/passkey/options", json={}, headers=headers)
    answer = {"credential": device.get(options.get_json()), "next": "/account/tokens"}
    confirmed = browser.post("/account/confirm/passkey", json=answer, headers=headers)
    assert confirmed.get_json() == {"next": "/account/tokens"}
    assert browser.get("/account/security/totp").status_code in (200, 303)  # no confirm asked
    # And the password with a code from the app, another time.
    _stale(browser)
    token = csrf_from(browser.get("/account/confirm").get_data(as_text=True))
    done = browser.post(
        "/account/confirm?next=/account/tokens",
        data={"csrf_token": token, "password": PASSWORD, "code": totp.now()},
    )
    assert done.status_code == 302 and done.headers["Location"] == "/account/tokens"


def _pending(app, username: str):
    client = app.test_client()
    token = csrf_from(client.get("/login").get_data(as_text=True))
    response = client.post(
        "/login", data={"csrf_token": token, "username": username, "password": PASSWORD}
    )
    assert response.headers["Location"] == "/login/verify"
    return client


@pytest.mark.parametrize("codes_left", [True, False])
def test_the_second_step_of_a_passkey_only_account(app, factory, codes_left):
    factory.account("bob")
    browser = factory.browser("bob")
    _add_passkey(browser, Device(), "Key")
    if not codes_left:
        with write_transaction() as session:
            session.execute(update(RecoveryCode).values(used_at=utcnow()))
    page = _page(_pending(app, "bob").get("/login/verify"))
    assert page.select_one("section[data-passkeys]") is not None
    # The code field is there only while a recovery code can stand in for the passkey.
    assert (page.find("input", attrs={"name": "code"}) is not None) is codes_left


def test_a_single_sign_on_session_confirms_at_the_identity_provider(app, factory):
    """With single sign-on configured, the confirm page of an OIDC session links to the
    provider's re-authentication instead of asking a password it may never have used."""
    app.config.update(
        OIDC_ISSUER="http://127.0.0.1:9/",
        OIDC_CLIENT_ID="telephony",
        OIDC_CLIENT_SECRET="not-a-real-secret",
    )
    factory.account("carol")
    browser = factory.browser("carol")
    with write_transaction() as session:
        session.execute(
            update(AccountSession)
            .where(AccountSession.id == _row_id(browser))
            .values(via="oidc", confirmed_at=utcnow() - timedelta(minutes=11))
        )
    page = _page(browser.get("/account/confirm?next=/account/tokens"))
    link = page.find("a", href=lambda h: bool(h) and h.startswith("/login/sso?"))
    assert link is not None and "confirm=1" in link["href"]
    assert page.find("input", attrs={"name": "password"}) is None
