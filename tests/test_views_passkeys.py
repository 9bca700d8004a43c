"""Passkeys through their JSON endpoints (webapp/views/passkeys.py) with a software
authenticator (tests/webauthn_device.py: real keys, real signatures, verified by the real
py_webauthn): adding and removing named passkeys, a passkey as the second step of a sign-in
and to confirm a session, and every refusal answered as JSON with a 4xx status
(docs/security.md#passkeys). The browser's side is tests/browser/test_passkeys_browser.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import select, update

from webapp.database import utcnow, write_transaction
from webapp.extensions import db
from webapp.models import Account, AccountSession, AuditEntry, Passkey, RecoveryCode

from .factories import csrf_from
from .webauthn_device import Device

PASSWORD = "correct horse battery"


def _post(client, url: str, body=None, **kwargs):
    return client.post(url, json=body, headers={"X-CSRFToken": client.csrf}, **kwargs)


def _add(client, device: Device, name: str):
    options = _post(client, "/account/passkeys/options", {})
    assert options.status_code == 200
    return _post(
        client,
        "/account/passkeys",
        {
            "name": name,
            "credential": device.create(options.get_json()),
            "back": "/account/passkeys",
        },
    )


def _audit(username: str) -> list[tuple[str, str | None]]:
    db.session.rollback()
    rows = db.session.execute(
        select(AuditEntry.action, AuditEntry.detail)
        .where(AuditEntry.target == f"account {username}")
        .order_by(AuditEntry.id)
    )
    return [tuple(row) for row in rows]


def _keys(username: str) -> list[Passkey]:
    db.session.rollback()
    return list(
        db.session.scalars(
            select(Passkey).join(Account).where(Account.username == username).order_by(Passkey.id)
        )
    )


def _with_passkey(factory, username: str, **device_args):
    """`username` with one passkey "Laptop": its device, and a client signed in before."""
    factory.account(username)
    device, browser = Device(**device_args), factory.browser(username)
    assert _add(browser, device, "Laptop").status_code == 200
    return device, browser


def _pending(app, username: str):
    """A client whose password was right: the second step is pending."""
    client = app.test_client()
    token = csrf_from(client.get("/login").get_data(as_text=True))
    response = client.post(
        "/login?next=/account/tokens",
        data={"csrf_token": token, "username": username, "password": PASSWORD},
    )
    assert response.status_code == 302 and response.headers["Location"] == "/login/verify"
    page = BeautifulSoup(client.get("/login/verify").get_data(as_text=True), "html.parser")
    client.csrf = page.select_one("section[data-passkeys]")["data-csrf"]
    return client


def _signed_in(client) -> bool:
    return client.get("/account/tokens").status_code == 200


def test_two_named_passkeys_are_added_and_one_removed(factory):
    factory.account("alice")
    browser = factory.browser("alice")
    first = _add(browser, Device(), "Laptop")
    assert first.status_code == 200
    codes = first.get_json()["recovery_codes"]
    assert first.get_json()["next"] == "/account/passkeys"
    assert len(codes) == 10 and len(set(codes)) == 10  # the first factor: codes shown once
    second = _add(browser, Device(), "Blue key")
    assert second.status_code == 200 and second.get_json()["recovery_codes"] is None
    assert [k.name for k in _keys("alice")] == ["Laptop", "Blue key"]
    assert all(k.transports == "internal" and k.sign_count == 0 for k in _keys("alice"))
    assert db.session.scalar(select(db.func.count()).select_from(RecoveryCode)) == 10

    page = browser.get("/account/passkeys")
    html = BeautifulSoup(page.get_data(as_text=True), "html.parser")
    assert [td.get_text() for td in html.select("td[data-label=Name]")] == ["Laptop", "Blue key"]
    assert "Passkey 'Blue key' added." in html.get_text()

    laptop = _keys("alice")[0]
    removed = browser.post(
        f"/account/passkeys/{laptop.id}/remove",
        data={"csrf_token": browser.csrf, "back": "/account/passkeys"},
    )
    assert removed.status_code == 303 and removed.headers["Location"] == "/account/passkeys"
    assert [k.name for k in _keys("alice")] == ["Blue key"]
    assert _audit("alice")[-4:] == [
        ("account.factor-added", "passkey 'Laptop'"),
        ("account.factor-added", "recovery codes generated"),
        ("account.factor-added", "passkey 'Blue key'"),
        ("account.factor-removed", "passkey 'Laptop'"),
    ]
    assert db.session.scalar(select(db.func.count()).select_from(RecoveryCode)) == 10
    # The last factor gone, the recovery codes that stood in for it go too.
    blue = _keys("alice")[0]
    browser.post(f"/account/passkeys/{blue.id}/remove", data={"csrf_token": browser.csrf})
    assert db.session.scalar(select(db.func.count()).select_from(RecoveryCode)) == 0


def test_another_accounts_passkey_cannot_be_removed(factory):
    _with_passkey(factory, "bob")
    factory.account("alice")
    bobs = _keys("bob")[0]
    alice = factory.browser("alice")
    response = alice.post(f"/account/passkeys/{bobs.id}/remove", data={"csrf_token": alice.csrf})
    assert response.status_code == 404
    assert [k.name for k in _keys("bob")] == ["Laptop"]


@pytest.mark.parametrize(
    ("name", "why"),
    [("", "1 to 64"), ("x" * 65, "1 to 64"), ("bell\x07", "1 to 64"), (" laptop ", "already used")],
)
def test_a_name_is_1_to_64_printable_characters_unique_per_account(factory, name, why):
    _, browser = _with_passkey(factory, "alice")
    response = _add(browser, Device(), name)
    assert response.status_code == 400
    assert why in response.get_json()["fields"]["name"]
    assert len(_keys("alice")) == 1
    # Checked before the browser is asked, too: no credential made on the authenticator.
    early = _post(browser, "/account/passkeys/options", {"name": name})
    assert early.status_code == 400 and why in early.get_json()["fields"]["name"]


def test_registration_answers_that_do_not_match_are_refused(factory):
    factory.account("alice")
    browser = factory.browser("alice")
    elsewhere = _add(browser, Device(origin="http://evil.example"), "Phished")
    assert elsewhere.status_code == 400 and "could not be verified" in elsewhere.get_json()["error"]
    # An answer to a challenge other than the one kept for this session.
    options = _post(browser, "/account/passkeys/options", {}).get_json()
    options["challenge"] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    other = _post(
        browser, "/account/passkeys", {"name": "Other", "credential": Device().create(options)}
    )
    assert other.status_code == 400
    # No options asked for: no challenge kept.
    device = Device()
    answer = device.create({"rp": {"id": "localhost"}, "challenge": "AAAA"})
    none = _post(browser, "/account/passkeys", {"name": "None", "credential": answer})
    assert none.status_code == 400 and "expired" in none.get_json()["error"]
    # One credential cannot be added twice (to this account or any other).
    assert _add(browser, device, "Once").status_code == 200
    twice = _add(browser, device, "Twice")
    assert twice.status_code == 400 and "already registered" in twice.get_json()["error"]
    assert [k.name for k in _keys("alice")] == ["Once"]


def test_an_old_cookie_cannot_answer_its_challenge_again(factory):
    factory.account("alice")
    browser = factory.browser("alice")
    options = _post(browser, "/account/passkeys/options", {}).get_json()
    kept = browser.get_cookie("session").value
    device = Device()
    body = {"name": "First", "credential": device.create(options)}
    assert _post(browser, "/account/passkeys", body).status_code == 200
    browser.set_cookie("session", kept)  # the cookie as it was, challenge and all
    again = Device().create(options)
    replay = _post(browser, "/account/passkeys", {"name": "Second", "credential": again})
    assert replay.status_code == 400 and "used already" in replay.get_json()["error"]
    assert [k.name for k in _keys("alice")] == ["First"]


def test_sign_in_with_password_and_passkey(app, factory):
    device, _ = _with_passkey(factory, "alice")
    client = _pending(app, "alice")
    assert not _signed_in(client)
    options = _post(client, "/login/passkey/options", {}).get_json()
    assert [c["id"] for c in options["allowCredentials"]] == [device.id]
    assert options["rpId"] == "localhost"
    answer = _post(client, "/login/passkey", {"credential": device.get(options)})
    assert answer.status_code == 200 and answer.get_json() == {"next": "/account/tokens"}
    client.csrf = None
    assert _signed_in(client)
    key = _keys("alice")[0]
    assert key.sign_count == 1 and key.last_used_at is not None
    assert _audit("alice")[-1] == (
        "account.sign-in",
        "signed in with password and passkey from 127.0.0.1",
    )


def test_a_passkey_of_another_account_is_refused(app, factory):
    _with_passkey(factory, "alice")
    bobs, _ = _with_passkey(factory, "bob")
    client = _pending(app, "alice")
    options = _post(client, "/login/passkey/options", {}).get_json()
    assert bobs.id not in [c["id"] for c in options["allowCredentials"]]
    refused = _post(client, "/login/passkey", {"credential": bobs.get(options)})
    assert refused.status_code == 400 and "not accepted" in refused.get_json()["error"]
    assert not _signed_in(client)
    assert _audit("alice")[-1] == ("account.second-factor-failed", "passkey")
    assert _keys("bob")[0].sign_count == 0  # bob's passkey was not counted as used


def test_a_wrong_or_replayed_challenge_is_refused(app, factory):
    # A synced passkey keeps no counter: only the one-use challenge stops a replay.
    device, _ = _with_passkey(factory, "alice", counts=False)
    client = _pending(app, "alice")
    options = _post(client, "/login/passkey/options", {}).get_json()
    wrong = dict(options, challenge="AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
    assert _post(client, "/login/passkey", {"credential": device.get(wrong)}).status_code == 400

    options = _post(client, "/login/passkey/options", {}).get_json()
    kept = client.get_cookie("session").value
    answer = {"credential": device.get(options)}
    assert _post(client, "/login/passkey", answer).status_code == 200
    replayer = app.test_client()
    replayer.set_cookie("session", kept)  # pending, with the challenge just answered
    replayer.csrf = client.csrf
    replay = _post(replayer, "/login/passkey", answer)
    assert replay.status_code == 400
    assert not _signed_in(replayer)
    assert _audit("alice").count(("account.second-factor-failed", "passkey")) == 2


def test_failed_passkeys_count_toward_the_sign_in_limit(app, factory):
    app.config["SIGN_IN_LIMIT"] = "2 per 15 minutes"
    device, _ = _with_passkey(factory, "alice")
    client = _pending(app, "alice")
    for _ in range(2):
        options = _post(client, "/login/passkey/options", {}).get_json()
        bad = device.get(options, rp_id="evil.example")
        assert _post(client, "/login/passkey", {"credential": bad}).status_code == 400
    blocked = _post(client, "/login/passkey/options", {})
    assert blocked.status_code == 429 and "Too many" in blocked.get_json()["error"]
    assert _post(client, "/login/passkey", {"credential": {}}).status_code == 429
    assert not _signed_in(client)


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        {"credential": "not an object"},
        {"credential": {"id": "%%%", "rawId": "%%%", "type": "public-key", "response": {}}},
        {"credential": {"id": 5}},
    ],
)
def test_malformed_answers_are_refused_as_json(app, factory, body):
    device, browser = _with_passkey(factory, "alice")
    _post(browser, "/account/passkeys/options", {})
    added = _post(
        browser,
        "/account/passkeys",
        {"name": "X", **(body or {})} if isinstance(body, dict) else body,
    )
    assert added.status_code == 400 and "error" in added.get_json()
    client = _pending(app, "alice")
    options = _post(client, "/login/passkey/options", {}).get_json()
    answer = device.get(options)
    answer["response"]["signature"] = "!!!"  # not base64url
    for sent in (body, {"credential": answer}):
        response = _post(client, "/login/passkey", sent)
        assert response.status_code == 400 and "error" in response.get_json()
    broken = client.post(
        "/login/passkey",
        data='{"credential": {',
        content_type="application/json",
        headers={"X-CSRFToken": client.csrf},
    )
    assert broken.status_code == 400 and "error" in broken.get_json()
    assert not _signed_in(client)


def test_without_a_csrf_token_nothing_is_done(app, factory):
    _, browser = _with_passkey(factory, "alice")
    response = browser.post("/account/passkeys/options", json={})
    assert response.status_code == 400 and "expired" in response.get_json()["error"]
    client = _pending(app, "alice")
    refused = client.post("/login/passkey/options", json={})
    assert refused.status_code == 400 and refused.is_json


def test_an_account_without_passkeys_gets_no_options_to_use_one(factory):
    factory.account("alice")
    browser = factory.browser("alice")
    response = _post(browser, "/account/confirm/passkey/options", {})
    assert response.status_code == 400 and "no passkey" in response.get_json()["error"]


def test_without_a_pending_sign_in_the_sign_in_endpoints_refuse(client):
    page = client.get("/login")
    client.csrf = csrf_from(page.get_data(as_text=True))
    response = _post(client, "/login/passkey/options", {})
    assert response.status_code == 400 and response.get_json()["next"] == "/login"


def test_confirm_with_a_passkey_sets_confirmed_at(factory):
    device, browser = _with_passkey(factory, "alice")
    with write_transaction() as session:
        session.execute(update(AccountSession).values(confirmed_at=utcnow() - timedelta(hours=1)))
    options = _post(browser, "/account/confirm/passkey/options", {}).get_json()
    answer = {"credential": device.get(options), "next": "/account/tokens"}
    confirmed = _post(browser, "/account/confirm/passkey", answer)
    assert confirmed.status_code == 200 and confirmed.get_json() == {"next": "/account/tokens"}
    db.session.rollback()
    newest = max(db.session.scalars(select(AccountSession.confirmed_at)))
    assert utcnow() - newest < timedelta(minutes=1)
    assert _audit("alice")[-1] == ("account.confirmed", "confirmed with a passkey")
    # `next` stays on this site.
    options = _post(browser, "/account/confirm/passkey/options", {}).get_json()
    answer = {"credential": device.get(options), "next": "//evil.example/x"}
    assert _post(browser, "/account/confirm/passkey", answer).get_json() == {"next": "/"}
