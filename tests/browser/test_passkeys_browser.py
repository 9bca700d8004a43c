"""Passkeys in a real browser: Chromium's virtual authenticator (DevTools' WebAuthn domain)
makes and uses the credentials, static/passkeys.js talks to webapp/views/passkeys.py, and
py_webauthn checks what the browser signed (docs/security.md#passkeys).

WebAuthn needs a secure context and a relying party id that is a host name (an IP address is
none), so the pages are opened at http://localhost:<port>, which browsers count as secure."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from .conftest import PASSWORD
from .test_axe import WIDTHS, too_wide, violations

pytestmark = pytest.mark.slow  # a real browser

AUTHENTICATOR = {
    "protocol": "ctap2",
    "transport": "internal",
    "hasResidentKey": True,
    "hasUserVerification": True,
    "isUserVerified": True,
}


def _authenticator(page: Page):
    """A new virtual authenticator in the page's browser: (the DevTools session, its id)."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    added = cdp.send("WebAuthn.addVirtualAuthenticator", {"options": AUTHENTICATOR})
    return cdp, added["authenticatorId"]


def _password(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}/login")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()


def _add(page: Page, name: str) -> None:
    page.get_by_label("Name of the new passkey").fill(name)
    page.get_by_role("button", name="Add a passkey").click()


def _accessible(page: Page) -> None:
    for width in WIDTHS.values():
        page.set_viewport_size(width)
        assert violations(page) + too_wide(page) == [], page.url


def test_add_two_passkeys_remove_one_and_sign_in_with_the_other(factory, live_server, page):
    base = live_server.replace("127.0.0.1", "localhost")
    factory.account("alice")
    cdp, first = _authenticator(page)
    _password(page, base, "alice")
    expect(page.get_by_text("Signed in as alice.")).to_be_visible()

    page.goto(f"{base}/account/passkeys")
    _accessible(page)
    _add(page, "Laptop")
    codes = page.locator("[data-passkey-code-list] li")
    expect(page.get_by_role("heading", name="Your recovery codes")).to_be_visible()
    expect(codes).to_have_count(10)
    _accessible(page)
    page.get_by_role("link", name="Continue").click()
    expect(page.get_by_text("Passkey 'Laptop' added.")).to_be_visible()

    # The authenticator that holds "Laptop" is refused a second one (excludeCredentials).
    _add(page, "Again")
    refused = "That authenticator already holds one of your passkeys."
    expect(page.get_by_text(refused)).to_be_visible()

    # Another authenticator (a security key, say) in place of the first.
    cdp.send("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": first})
    _authenticator(page)
    _add(page, "Blue key")
    expect(page.get_by_text("Passkey 'Blue key' added.")).to_be_visible()
    names = page.locator("td[data-label=Name]")
    expect(names).to_have_text(["Laptop", "Blue key"])
    page.get_by_role("button", name="Remove Laptop").click()
    expect(page.get_by_text("Passkey 'Laptop' removed.")).to_be_visible()
    expect(names).to_have_text(["Blue key"])
    _accessible(page)

    page.get_by_role("button", name="Sign out").click()
    _password(page, base, "alice")
    expect(page).to_have_url(f"{base}/login/verify")
    _accessible(page)
    page.get_by_role("button", name="Use a passkey").click()
    expect(page.get_by_text("Signed in as alice.")).to_be_visible()
    page.goto(f"{base}/account/passkeys")
    expect(page.locator("td[data-label='Last used (UTC)']")).not_to_have_text(["never"])


def test_a_passkey_needs_a_name_before_the_browser_is_asked(factory, live_server, page):
    """The name is checked in the page first: no prompt for a passkey that could not be
    stored; the status line says why and nothing is added."""
    base = live_server.replace("127.0.0.1", "localhost")
    factory.account("alice")
    _password(page, base, "alice")
    page.goto(f"{base}/account/passkeys")
    page.get_by_role("button", name="Add a passkey").click()
    expect(page.get_by_text("Give the passkey a name first.")).to_be_visible()
    expect(page.get_by_text("No passkeys yet.")).to_be_visible()
