"""Confirming before a sensitive action in Chromium (docs/security.md#confirmation): a session
whose last proof is over 10 minutes old is sent to /account/confirm when it creates an API
token, confirms there with a passkey (Chromium's virtual authenticator), comes back, and the
token is made."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import update

from webapp.database import utcnow, write_transaction
from webapp.models import AccountSession

from .test_passkeys_browser import _add, _authenticator, _password

pytestmark = pytest.mark.slow  # a real browser


def test_a_stale_session_confirms_with_a_passkey_and_goes_on(factory, live_server, page: Page):
    base = live_server.replace("127.0.0.1", "localhost")  # WebAuthn wants a host name
    factory.account("alice")
    _authenticator(page)
    _password(page, base, "alice")
    expect(page.get_by_text("Signed in as alice.")).to_be_visible()
    page.goto(f"{base}/account/security")
    _add(page, "Laptop")
    expect(page.get_by_role("heading", name="Your recovery codes")).to_be_visible()

    with write_transaction() as session:  # the sign-in was 11 minutes ago
        session.execute(
            update(AccountSession).values(confirmed_at=utcnow() - timedelta(minutes=11))
        )
    page.goto(f"{base}/account/tokens")
    page.get_by_label("Label").fill("deploy script")
    page.get_by_role("button", name="Create token").click()
    expect(page).to_have_url(f"{base}/account/confirm?next=/account/tokens")
    page.get_by_role("button", name="Use a passkey").click()
    expect(page).to_have_url(f"{base}/account/tokens")
    # Submitted again, now within the 10 minutes: the token is made and shown once.
    page.get_by_label("Label").fill("deploy script")
    page.get_by_role("button", name="Create token").click()
    expect(page.get_by_text("deploy script").first).to_be_visible()
    expect(page.locator("main")).to_contain_text("it is shown this once")
