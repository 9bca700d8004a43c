"""Single sign-on in a real browser: Chromium goes from the sign-in page to a real OpenID
provider on 127.0.0.1 (tests/oidc_provider.py), picks a user on its authorization page and
comes back signed in; the refusal and outage pages, and axe-core on them at both widths."""

from __future__ import annotations

import socket

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select

from webapp.extensions import db
from webapp.models import AccountSession, AuditEntry

from ..oidc_provider import configure, running
from .conftest import wait_for_htmx
from .test_axe import WIDTHS, too_wide, violations

pytestmark = [
    pytest.mark.slow,  # a real browser
    pytest.mark.filterwarnings("ignore:get_jwt_config:DeprecationWarning"),
]

USERS = {
    "sub-root": {"preferred_username": "root"},
    "sub-stranger": {"preferred_username": "stranger"},
}


@pytest.fixture
def world_accounts():
    return {"root": "root"}


@pytest.fixture
def provider(app, world):
    with running(USERS) as provider:
        configure(app, provider.url, OIDC_NAME="Corporate SSO")
        yield provider


def start(page: Page, live_server: str, next_path: str | None = None) -> None:
    """From the sign-in page to the provider's authorization page."""
    page.goto(f"{live_server}/login" + (f"?next={next_path}" if next_path else ""))
    page.get_by_role("link", name="Sign in with Corporate SSO").click()
    expect(page.get_by_role("heading", name="Authorize Client")).to_be_visible()


def test_signing_in_with_sso_in_a_browser(live_server, page, provider):
    start(page, live_server, "/account/tokens")
    page.get_by_role("button", name="sub-root").click()
    expect(page.get_by_text("Signed in as root.")).to_be_visible()
    assert page.url == f"{live_server}/account/tokens"  # next carried through the provider
    wait_for_htmx(page)
    db.session.rollback()
    (row,) = db.session.scalars(select(AccountSession))
    assert row.via == "oidc"
    (entry,) = db.session.scalars(select(AuditEntry).where(AuditEntry.action == "account.sign-in"))
    assert entry.detail.startswith("signed in with single sign-on")
    assert provider.hits["/oauth2/token"] == 1


def test_an_unknown_account_gets_a_page_saying_so(live_server, page, provider):
    start(page, live_server)
    page.get_by_role("button", name="sub-stranger").click()
    expect(page.get_by_role("heading", name="Single sign-on refused")).to_be_visible()
    expect(page.get_by_text("No account here has the username 'stranger'")).to_be_visible()
    page.get_by_role("link", name="Back to sign-in").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_provider_leaves_password_sign_in_working(
    app, world, live_server, page, sign_in
):
    configure(app, f"http://127.0.0.1:{free_port()}", OIDC_NAME="Corporate SSO")
    page.goto(f"{live_server}/login")
    page.get_by_role("link", name="Sign in with Corporate SSO").click()
    expect(page.get_by_text("The identity provider could not be reached")).to_be_visible()
    sign_in("root")  # the password form, on the same app, still signs in


@pytest.mark.parametrize("width", WIDTHS)
def test_the_sso_pages_pass_axe(live_server, page, provider, width):
    """The sign-in page with its button, and the page of a refused single sign-on."""
    page.set_viewport_size(WIDTHS[width])
    problems: dict[str, list[str]] = {}
    page.goto(f"{live_server}/login")
    if found := violations(page) + too_wide(page):
        problems["sign in with the SSO button"] = found
    start(page, live_server)
    page.get_by_role("button", name="sub-stranger").click()
    expect(page.get_by_role("heading", name="Single sign-on refused")).to_be_visible()
    if found := violations(page) + too_wide(page):
        problems["single sign-on refused"] = found
    assert not problems, problems
