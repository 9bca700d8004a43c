"""Single sign-on (webapp/services/identity/oidc.py, webapp/views/sso.py) against a real OpenID
provider on 127.0.0.1 (tests/oidc_provider.py): the test client plays the browser on our
side, `requests` plays it at the provider's authorization page."""

from __future__ import annotations

import socket
import time
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import select, update

from webapp.database import utcnow, write_transaction
from webapp.extensions import db
from webapp.models import Account, AccountSession, AuditEntry
from webapp.services.identity import accounts, oidc

from .factories import OPERATOR
from .oidc_provider import CLIENT_ID, configure, other_keys, running

pytestmark = [
    pytest.mark.slow,
    # The provider (oidc-provider-mock) uses Authlib's older ID-token interface.
    pytest.mark.filterwarnings("ignore:get_jwt_config:DeprecationWarning"),
]

USERS = {
    "sub-root": {"preferred_username": "root", "email": "root@example.com"},
    "sub-cadmin": {"preferred_username": "cadmin", "email": "cadmin@example.com"},
    "sub-stranger": {"preferred_username": "stranger"},
    "sub-nameless": {"email": "nameless@example.com"},
}


@pytest.fixture
def world_accounts():
    return {"root": "root", "cadmin": "cadmin"}


@pytest.fixture
def provider(app, world):
    with running(USERS) as provider:
        configure(app, provider.url, OIDC_NAME="Corporate SSO")
        yield provider


def text(response) -> str:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser").get_text(" ", strip=True)


def begin(client, path: str = "/login/sso") -> str:
    """Start single sign-on; the provider's authorization URL the browser is sent to."""
    response = client.get(path)
    assert response.status_code == 302, response.get_data(as_text=True)
    return response.headers["Location"]


def sign_in(provider, client, sub: str, path: str = "/login/sso", **changes: str):
    """The whole round: start, pick `sub` at the provider, come back; the callback's answer."""
    back = provider.authorize(begin(client, path), sub, **changes)
    return client.get(back)


def audit_entries(action: str) -> list[AuditEntry]:
    db.session.rollback()
    return list(db.session.scalars(select(AuditEntry).where(AuditEntry.action == action)))


def sessions() -> list[AccountSession]:
    db.session.rollback()
    return list(db.session.scalars(select(AccountSession)))


def signed_in(client) -> bool:
    return client.get("/account/tokens").status_code == 200


def test_the_sign_in_page_offers_sso_only_when_configured_and_never_calls_the_provider(
    app, client, provider
):
    page = client.get("/login")
    link = BeautifulSoup(page.get_data(as_text=True), "html.parser").find(
        "a", string="Sign in with Corporate SSO"
    )
    assert page.status_code == 200 and link is not None
    assert link["href"] == "/login/sso"
    assert provider.hits == {}  # rendering the page asked the provider nothing
    app.config.update(OIDC_ISSUER=None, OIDC_CLIENT_ID=None, OIDC_CLIENT_SECRET=None)
    assert "Sign in with" not in text(client.get("/login"))
    assert client.get("/login/sso").status_code == 404
    assert client.get("/login/sso/callback?state=x&code=y").status_code == 404


def test_the_flow_uses_pkce_state_and_nonce(client, provider):
    url = begin(client, "/login/sso?next=/account/tokens")
    query = parse_qs(urlsplit(url).query)
    assert url.startswith(f"{provider.url}/oauth2/authorize?")
    assert query["client_id"] == [CLIENT_ID]
    assert query["redirect_uri"] == ["http://localhost/login/sso/callback"]
    assert query["code_challenge_method"] == ["S256"]
    assert len(query["code_challenge"][0]) == 43  # base64url of a SHA-256
    assert len(query["state"][0]) >= 20 and len(query["nonce"][0]) >= 20
    assert query["scope"] == ["openid profile email"]
    assert "prompt" not in query and "max_age" not in query


def test_sso_signs_the_existing_account_in_and_goes_to_next(client, provider):
    response = sign_in(provider, client, "sub-cadmin", "/login/sso?next=/account/tokens")
    assert response.status_code == 302
    assert response.headers["Location"] == "/account/tokens"
    assert signed_in(client)
    (row,) = sessions()
    assert row.via == "oidc" and row.confirmed_at is not None
    (entry,) = audit_entries("account.sign-in")
    assert (entry.actor, entry.target) == ("cadmin", "account cadmin")
    assert entry.detail.startswith("signed in with single sign-on")
    assert provider.hits["/oauth2/token"] == 1


def test_an_unsafe_next_goes_to_the_start_page(client, provider):
    response = sign_in(provider, client, "sub-root", "/login/sso?next=https://evil.example/")
    assert response.status_code == 302
    assert response.headers["Location"] == "/"


def test_a_replayed_or_unknown_state_is_refused(app, client, provider):
    back = provider.authorize(begin(client), "sub-root")
    assert client.get(back).status_code == 302
    again = client.get(back)
    assert again.status_code == 400
    assert "unknown, expired or was already used" in text(again)
    stranger = app.test_client()  # someone else who got hold of the address
    replayed = stranger.get(back)
    assert replayed.status_code == 400 and not signed_in(stranger)
    assert client.get("/login/sso/callback?state=made-up&code=x").status_code == 400
    assert len(sessions()) == 1
    assert provider.hits["/oauth2/token"] == 1  # no replay reached the provider


def test_an_unknown_username_is_refused_and_audited(client, provider):
    response = sign_in(provider, client, "sub-stranger")
    assert response.status_code == 403
    assert "No account here has the username 'stranger'" in text(response)
    assert not signed_in(client) and sessions() == []
    (entry,) = audit_entries("account.sign-in-refused")
    assert (entry.actor, entry.via, entry.target) == ("sso:stranger", "ui", "account stranger")
    assert entry.detail == "single sign-on refused: no such account"
    assert audit_entries("account.sign-in") == []


def test_a_disabled_account_is_refused(client, provider):
    accounts.disable(OPERATOR, "cadmin")
    response = sign_in(provider, client, "sub-cadmin")
    assert response.status_code == 403
    assert "The account 'cadmin' is disabled." in text(response)
    assert not signed_in(client) and sessions() == []
    (entry,) = audit_entries("account.sign-in-refused")
    assert entry.detail == "single sign-on refused: account disabled"


def test_a_token_without_the_username_claim_is_refused(client, provider):
    response = sign_in(provider, client, "sub-nameless")
    assert response.status_code == 400
    assert "did not say your username (claim preferred_username)" in text(response)
    assert sessions() == []


def test_another_username_claim_can_be_configured(app, client, provider):
    app.config["OIDC_USERNAME_CLAIM"] = "email"
    response = sign_in(provider, client, "sub-nameless")
    assert response.status_code == 403  # nameless@example.com: no such account here
    assert "'nameless@example.com'" in text(response)


def test_a_token_issued_to_another_client_is_refused(client, provider):
    provider.issue_to = "some-other-client"
    response = sign_in(provider, client, "sub-root")
    assert response.status_code == 400
    assert "could not be verified" in text(response)
    assert not signed_in(client) and sessions() == []


def test_a_token_signed_with_a_key_the_issuer_does_not_publish_is_refused(client, provider, app):
    provider.published_keys = other_keys()
    response = sign_in(provider, client, "sub-root")
    assert response.status_code == 400
    assert "could not be verified" in text(response)
    assert provider.hits["/jwks"] == 1  # no key id in the token: the one published key failed
    # A token naming a key id the published keys lack: they are fetched again once, in case
    # the provider had just rotated them, and the token is still refused.
    provider.rotate_key("unpublished-key")
    response = sign_in(provider, app.test_client(), "sub-root")
    assert response.status_code == 400
    assert "could not be verified" in text(response)
    assert provider.hits["/jwks"] == 2
    assert sessions() == []


def test_a_rotated_signing_key_is_fetched_at_once(client, provider, app):
    assert sign_in(provider, client, "sub-root").status_code == 302
    assert provider.hits["/jwks"] == 1
    provider.rotate_key("second-key")
    other = app.test_client()
    assert sign_in(provider, other, "sub-root").status_code == 302
    assert provider.hits["/jwks"] == 2  # the cached keys lacked it: fetched again, once
    assert provider.hits["/.well-known/openid-configuration"] == 1  # discovery still cached


def test_an_expired_id_token_is_refused(app, client, world):
    with running(USERS, token_max_age=timedelta(minutes=-5)) as provider:
        configure(app, provider.url)
        response = sign_in(provider, client, "sub-root")
    assert response.status_code == 400
    assert "could not be verified" in text(response)
    assert sessions() == []


def test_a_nonce_mismatch_is_refused(client, provider):
    response = sign_in(provider, client, "sub-root", nonce="not-the-nonce-we-sent")
    assert response.status_code == 400
    assert "could not be verified" in text(response)
    assert sessions() == []


def test_a_swapped_code_is_refused(client, provider):
    """A code issued to another client (the authorization URL tampered with) is refused by
    the provider at the exchange: a clear page, not a 500."""
    response = sign_in(provider, client, "sub-root", client_id="some-other-client")
    assert response.status_code == 400
    assert "did not accept this sign-in" in text(response)


def test_refusing_at_the_provider_gives_a_clear_page(client, provider):
    back = provider.deny(begin(client))
    assert "error=access_denied" in back
    response = client.get(back)
    assert response.status_code == 400
    assert "cancelled or refused at the identity provider" in text(response)
    other = client.get("/login/sso/callback?error=server_error&state=x")
    assert other.status_code == 400
    assert "could not sign you in (server_error)" in text(other)
    assert provider.hits["/oauth2/token"] == 0


def test_discovery_and_keys_are_cached_briefly(client, provider, app, monkeypatch):
    for _ in range(2):
        assert sign_in(provider, app.test_client(), "sub-root").status_code == 302
    assert provider.hits["/.well-known/openid-configuration"] == 1
    assert provider.hits["/jwks"] == 1
    monkeypatch.setattr(oidc, "CACHE_FOR", -1)  # as if CACHE_FOR had passed
    assert sign_in(provider, app.test_client(), "sub-root").status_code == 302
    assert provider.hits["/.well-known/openid-configuration"] > 1
    assert provider.hits["/jwks"] == 2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_provider_gives_a_clear_page_and_passwords_still_work(
    app, client, world, factory
):
    configure(app, f"http://127.0.0.1:{free_port()}")  # nothing listens there
    assert "Sign in with single sign-on" in text(client.get("/login"))
    response = client.get("/login/sso")
    assert response.status_code == 502
    assert "The identity provider could not be reached" in text(response)
    assert factory.browser("root").get("/account/tokens").status_code == 200


def test_a_provider_that_does_not_answer_times_out(app, client, world, monkeypatch):
    monkeypatch.setattr(oidc, "TIMEOUT", 0.5)
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        configure(app, f"http://127.0.0.1:{silent.getsockname()[1]}")
        started = time.monotonic()
        response = client.get("/login/sso")
    assert response.status_code == 502
    assert time.monotonic() - started < 5
    assert "could not be reached" in text(response)


def test_a_token_endpoint_gone_between_the_two_steps_gives_a_clear_page(app, client, world):
    with running(USERS) as provider:
        configure(app, provider.url)
        back = provider.authorize(begin(client), "sub-root")
    response = client.get(back)  # the provider has stopped since
    assert response.status_code == 502
    assert "could not be reached" in text(response)
    assert sessions() == []


def test_discovery_naming_another_issuer_is_not_used(app, client, provider):
    provider.discovery_changes = {"issuer": "https://impostor.example"}
    response = client.get("/login/sso")
    assert response.status_code == 502
    assert "could not be reached" in text(response)
    provider.discovery_changes = {"jwks_uri": None}
    assert client.get("/login/sso").status_code == 502


# Confirmation before a sensitive action, for a session signed in with single sign-on.


def test_confirming_asks_the_provider_again_and_confirms_the_session(client, provider):
    assert sign_in(provider, client, "sub-root").status_code == 302
    long_ago = utcnow() - timedelta(hours=1)
    with write_transaction() as session:  # the sign-in's confirmation is old by now
        session.execute(update(AccountSession).values(confirmed_at=long_ago))
    url = begin(client, "/login/sso?confirm=1&next=/account/tokens")
    query = parse_qs(urlsplit(url).query)
    assert query["prompt"] == ["login"] and query["max_age"] == ["0"]
    response = client.get(provider.authorize(url, "sub-root"))
    assert response.status_code == 302 and response.headers["Location"] == "/account/tokens"
    (after,) = sessions()
    assert after.confirmed_at > long_ago + timedelta(minutes=59)
    (entry,) = audit_entries("account.confirmed")
    assert (entry.actor, entry.detail) == ("root", "confirmed with single sign-on")
    assert signed_in(client)


def test_confirming_as_someone_else_is_refused(client, provider):
    assert sign_in(provider, client, "sub-root").status_code == 302
    (before,) = sessions()
    response = sign_in(provider, client, "sub-cadmin", "/login/sso?confirm=1&next=/")
    assert response.status_code == 403
    assert "signed in someone else" in text(response)
    (after,) = sessions()
    assert after.confirmed_at == before.confirmed_at
    assert audit_entries("account.confirmed") == []
    assert signed_in(client)  # still root's session, unconfirmed


def test_confirming_needs_a_session_signed_in_with_sso(client, provider, factory):
    password_session = factory.browser("root")
    response = password_session.get("/login/sso?confirm=1&next=/")
    assert response.status_code == 400
    assert "not signed in with single sign-on" in text(response)
    signed_out = client.get("/login/sso?confirm=1&next=/account/tokens")
    assert signed_out.status_code == 302
    assert signed_out.headers["Location"].startswith("/login?next=")
    assert provider.hits == {}


def test_a_confirmation_the_provider_did_not_ask_for_again_is_refused(app, client, provider):
    """A provider that answers prompt=login with an old sign-in (its auth_time before the
    request) confirms nothing."""
    assert sign_in(provider, client, "sub-root").status_code == 302
    db.session.rollback()
    (row,) = sessions()
    account = db.session.get(Account, row.account_id)
    now = int(time.time())
    with pytest.raises(oidc.Rejected, match="did not ask you to sign in again"):
        oidc.confirm(account, {"preferred_username": "root", "auth_time": now - 3600}, now)
    assert audit_entries("account.confirmed") == []


def test_a_few_sign_ins_may_be_under_way_at_once(client, provider):
    """Two tabs each started single sign-on: either answer works (the session keeps the
    newest few states), the older one too."""
    first = begin(client)
    second = begin(client)
    back = provider.authorize(first, "sub-root")
    assert client.get(back).status_code == 302
    assert signed_in(client)
    assert urlsplit(first).query != urlsplit(second).query
