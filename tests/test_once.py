"""One-time forms (webapp/views/once.py, docs/pages.md#one-time-forms): adding a webhook, making
an API token and rotating a webhook's signing secret act once however often the same form is
sent (a browser reload re-POSTs it with the same hidden fields); the secret is shown once, and
the repeat answers "This was already done: ..." with a 303 to the page, acting on nothing.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from bs4 import BeautifulSoup
from itsdangerous import TimestampSigner, URLSafeTimedSerializer
from sqlalchemy import func, select, update

from webapp.access import Principal
from webapp.database import write_transaction
from webapp.extensions import db
from webapp.models import ApiToken, AuditEntry, FormOnce, Webhook
from webapp.services import sealing
from webapp.services.events import webhooks
from webapp.views import once

ROOT = Principal.cli("test")
URL = "https://93.184.215.14/telephony"  # a public address as a literal: no name to resolve


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def form_data(response, action: str, **values: str) -> dict[str, str]:
    """What a browser sends for the form posting to `action`: its hidden fields, and values."""
    form = soup(response).select_one(f"form[action='{action}']")
    assert form is not None, action
    hidden = {i["name"]: i.get("value", "") for i in form.select("input[type=hidden]")}
    assert hidden.get("once"), "the form carries its one-time key"
    return {**hidden, **values}


def count(model, *where) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(model).where(*where)) or 0


def tokens(label: str = "ci") -> int:
    """The API tokens labelled so (the world's callers have tokens of their own)."""
    return count(ApiToken, ApiToken.label == label)


def flashes(client, response) -> str:
    assert response.status_code == 303
    return " ".join(soup(client.get(response.headers["Location"])).get_text(" ").split())


def test_a_webhook_form_sent_twice_adds_one_webhook_and_shows_its_secret_once(world):
    browser = world.browser("root")
    data = form_data(browser.get("/admin/webhooks"), "/admin/webhooks", url=URL)
    first = browser.post("/admin/webhooks", data=data)
    assert first.status_code == 200 and count(Webhook) == 1
    secret = soup(first).select_one("code#secret").get_text()
    assert secret.startswith("whsec_")

    again = browser.post("/admin/webhooks", data=data)  # the reload
    assert count(Webhook) == 1
    assert again.headers["Location"] == "/admin/webhooks"
    assert secret not in again.get_data(as_text=True)
    hook = db.session.scalars(select(Webhook)).one()
    shown = flashes(browser, again)
    assert f"This was already done: webhook {hook.id} was added for {URL} (its secret" in shown
    assert "if it was not copied, rotate it on the webhook's page)." in shown
    assert "Nothing was done again." in shown and secret not in shown


def test_a_token_form_sent_twice_makes_one_token_shown_once(world):
    browser = world.browser("nobody")
    data = form_data(browser.get("/account/tokens"), "/account/tokens", label="ci")
    first = browser.post("/account/tokens", data=data)
    assert first.status_code == 200 and tokens() == 1
    token = soup(first).select_one("code#new-token").get_text()

    again = browser.post("/account/tokens", data=data)
    assert tokens() == 1 and token not in again.get_data(as_text=True)
    assert again.headers["Location"] == "/account/tokens"
    shown = flashes(browser, again)
    assert "This was already done: a token labelled 'ci' was made (it is shown only" in shown
    assert token not in shown


def test_a_rotation_sent_twice_rotates_once_keeping_the_secret_in_use(world):
    created, old_secret = webhooks.create(ROOT, URL)
    path = f"/admin/webhooks/{created.id}/rotate-secret"
    browser = world.browser("root")
    data = form_data(browser.get(path), path)
    first = browser.post(path, data=data)
    assert first.status_code == 200
    new_secret = soup(first).select_one("code.secret").get_text()

    again = browser.post(path, data=data)
    assert again.headers["Location"] == f"/admin/webhooks/{created.id}"
    assert new_secret not in again.get_data(as_text=True)
    db.session.rollback()
    hook = db.session.get(Webhook, created.id)
    # The secret the receiver still uses keeps signing through the overlap.
    assert sealing.unseal(hook.previous_secret_sealed) == old_secret
    assert sealing.unseal(hook.secret_sealed) == new_secret
    rotations = select(func.count()).where(AuditEntry.action == "webhook.rotate-secret")
    assert db.session.scalar(rotations.select_from(AuditEntry)) == 1
    shown = flashes(browser, again)
    done = f"This was already done: the signing secret of webhook {created.id} was rotated"
    assert done in shown
    assert new_secret not in shown


def test_a_refused_form_leaves_its_key_free_for_the_corrected_one(world):
    browser = world.browser("root")
    data = form_data(browser.get("/admin/webhooks"), "/admin/webhooks", url="ftp://nowhere")
    refused = browser.post("/admin/webhooks", data=data)
    assert refused.status_code == 400 and count(Webhook) == 0 and count(FormOnce) == 0
    corrected = browser.post("/admin/webhooks", data={**data, "url": URL})
    assert corrected.status_code == 200 and count(Webhook) == 1


@pytest.mark.parametrize("tamper", ["forged", "other account", "too old"])
def test_a_key_forged_of_another_account_or_too_old_does_nothing(world, tamper):
    browser = world.browser("root")
    data = form_data(browser.get("/account/tokens"), "/account/tokens", label="ci")
    if tamper == "forged":
        data["once"] = data["once"][:-2] + "xx"
    elif tamper == "other account":
        data["once"] = form_data(world.browser("nobody").get("/account/tokens"), "/account/tokens")[
            "once"
        ]
    else:  # the same key, signed 13 hours ago (a session lives 12 at most)
        signer = URLSafeTimedSerializer(world.factory.app.secret_key, salt=once.SALT)
        made = signer.loads(data["once"])
        with pytest.MonkeyPatch.context() as mp:
            now = TimestampSigner.get_timestamp
            mp.setattr(TimestampSigner, "get_timestamp", lambda self: now(self) - 13 * 3600)
            data["once"] = signer.dumps(made)
    answer = browser.post("/account/tokens", data=data)
    assert answer.status_code == 303 and tokens() == 0
    assert "nothing was done" in flashes(browser, answer)


def test_keys_older_than_a_session_are_pruned(world):
    browser = world.browser("nobody")
    for label in ("a", "b"):
        data = form_data(browser.get("/account/tokens"), "/account/tokens", label=label)
        assert browser.post("/account/tokens", data=data).status_code == 200
        with write_transaction() as session:
            session.execute(update(FormOnce).values(used_at=FormOnce.used_at - timedelta(days=31)))
    db.session.rollback()
    assert count(FormOnce) == 1  # the second POST pruned the first key


def test_a_repeat_while_the_first_is_still_acting_does_nothing(world):
    """The key is recorded before the action (the second of two POSTs at once finds it, or waits
    for it and fails on its primary key): a repeat meanwhile is told it is being done."""
    browser = world.browser("nobody")
    data = form_data(browser.get("/account/tokens"), "/account/tokens", label="ci")
    signer = URLSafeTimedSerializer(world.factory.app.secret_key, salt=once.SALT)
    account_id, key = signer.loads(data["once"])
    with write_transaction() as session:  # what the first POST left before acting
        session.add(FormOnce(key=key, account_id=account_id, what=""))
    answer = browser.post("/account/tokens", data=data)
    assert tokens() == 0
    assert "This is being done. Nothing was done again." in flashes(browser, answer)
