"""Behind reverse proxies (TRUSTED_PROXY_COUNT, Werkzeug's ProxyFix), through a real HTTP hop
(tests/forwarding_proxy.py): the client's own address, scheme and host, and sign-in limits
that key on the real client, so one address's failures never lock another's sign-in."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest

from webapp import create_app

from .conftest import serve_app
from .factories import csrf_from
from .forwarding_proxy import Browser, forwarding_proxy
from .observability import other_apps

PASSWORD = "correct horse battery"


@pytest.fixture
def serve(app, test_config) -> Iterator[Callable[..., str]]:
    """Serve an app with extra settings on a free port (the test database, emptied after)."""
    with other_apps(app, test_config) as make, contextlib.ExitStack() as servers:
        yield lambda **settings: servers.enter_context(serve_app(make(**settings)))


def sign_in(browser: Browser, username: str, password: str, **headers: str) -> int:
    status, _, page = browser.request("GET", "/login")
    assert status == 200
    form = {"csrf_token": csrf_from(page), "username": username, "password": password}
    return browser.request("POST", "/login", form, **headers)[0]


def test_behind_a_trusted_proxy_one_clients_failures_never_lock_another(factory, serve):
    factory.account("alice", system_admin=True)
    base = serve(TRUSTED_PROXY_COUNT=1)
    with forwarding_proxy(base) as proxy:
        attacker = Browser(proxy, "127.0.0.2")
        for i in range(10):
            # A forged X-Forwarded-For does not help: the proxy appends the real peer, and
            # only the last (trusted) entry is believed.
            status = sign_in(attacker, "alice", "wrong password!", X_Forwarded_For=f"10.0.0.{i}")
            assert status == 400
        assert sign_in(attacker, "alice", PASSWORD) == 429
        owner = Browser(proxy, "127.0.0.3")
        assert sign_in(owner, "alice", PASSWORD) == 302
        status, _, page = owner.request("GET", "/ddis")
        assert status == 200 and "alice" in page


def test_without_the_setting_every_client_behind_a_proxy_is_the_proxy(factory, serve):
    """The failure the setting exists for (and why docs/deploy.md asks for it)."""
    factory.account("alice")
    base = serve()
    with forwarding_proxy(base) as proxy:
        attacker = Browser(proxy, "127.0.0.2")
        for _ in range(10):
            assert sign_in(attacker, "alice", "wrong password!") == 400
        assert sign_in(Browser(proxy, "127.0.0.3"), "alice", PASSWORD) == 429


def test_without_a_proxy_a_forged_forwarded_for_is_ignored(factory, serve):
    factory.account("alice")
    base = serve()  # TRUSTED_PROXY_COUNT=0: nothing in front, headers are the client's own
    attacker = Browser(base, "127.0.0.2")
    for i in range(10):
        status = sign_in(attacker, "alice", "wrong password!", X_Forwarded_For=f"10.0.0.{i}")
        assert status == 400
    assert sign_in(attacker, "alice", PASSWORD, X_Forwarded_For="10.9.9.9") == 429
    assert sign_in(Browser(base, "127.0.0.3"), "alice", PASSWORD) == 302


def test_address_limit_over_all_accounts_keys_on_the_real_client(factory, serve):
    factory.account("alice")
    base = serve(TRUSTED_PROXY_COUNT=1, SIGN_IN_ADDRESS_LIMIT="5 per 15 minutes")
    with forwarding_proxy(base) as proxy:
        sprayer = Browser(proxy, "127.0.0.2")
        for i in range(5):
            assert sign_in(sprayer, f"user{i}", "wrong password!") == 400
        assert sign_in(sprayer, "alice", PASSWORD) == 429
        assert sign_in(Browser(proxy, "127.0.0.3"), "alice", PASSWORD) == 302


def test_scheme_and_host_come_from_a_trusted_tls_proxy(factory, serve):
    """With HTTPS=1 behind a TLS-terminating proxy, the app knows the request was https, so
    Flask-WTF's strict referrer check applies: a sign-in form posted from another site is
    refused, one posted from the app's own (forwarded) host is accepted."""
    factory.account("alice")
    base = serve(TRUSTED_PROXY_COUNT=1, HTTPS=True)
    with forwarding_proxy(base, proto="https", host="admin.example.net") as proxy:
        browser = Browser(proxy, "127.0.0.2")
        foreign = {"Referer": "https://evil.example.org/login"}
        assert sign_in(browser, "alice", PASSWORD, **foreign) == 400
        own = {"Referer": "https://admin.example.net/login"}
        assert sign_in(browser, "alice", PASSWORD, **own) == 302


def test_trusted_proxy_count_is_checked():
    from webapp.config import ConfigError

    for bad in ("-1", "two", "6", "1.5"):
        with pytest.raises(ConfigError, match=r"^TRUSTED_PROXY_COUNT: "):
            create_app({"TRUSTED_PROXY_COUNT": bad, "SECRET_KEY": "x" * 32})
