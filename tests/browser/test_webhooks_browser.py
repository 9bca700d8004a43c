"""The webhook pages in a real browser: a System-Admin opens them from the navigation, adds a
webhook through the form (a refused URL first), copies the secret shown once, opens the
webhook's page, redelivers a failed event and deletes the webhook after the confirmation;
axe-core finds no violation at all on the list (with the secret) or on the webhook's page, at
desktop and phone width."""

from __future__ import annotations

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect
from sqlalchemy import select

from webapp.database import utcnow, write_transaction
from webapp.extensions import db
from webapp.models import Webhook, WebhookAttempt
from webapp.services.events import webhooks

from .test_axe import WIDTHS

pytestmark = pytest.mark.slow  # a real browser

URL = "https://93.184.215.14/telephony"  # a public address: the tests resolve no name
AXE = Axe()


@pytest.fixture
def ready(factory):
    factory.company("acme")
    factory.company("globex")
    factory.account("boss", system_admin=True)
    factory.ddi("44", "2071234567", "acme")  # event 1, recorded before the webhook


def axe_violations(page: Page) -> list[str]:
    """Every axe-core violation on the page, whatever its impact, at each width."""
    found = []
    for width, size in WIDTHS.items():
        page.set_viewport_size(size)
        for v in AXE.run(page).response["violations"]:
            targets = "; ".join(" ".join(map(str, n["target"])) for n in v["nodes"])
            found.append(f"{width} {v['id']} ({v['impact']}): {targets}")
    page.set_viewport_size(WIDTHS["1280px"])
    return found


def fail_event(webhook_id: int, event_id: int) -> None:
    """What the worker leaves after giving an event up (services/events/delivery.py)."""
    with write_transaction() as session:
        session.add(
            WebhookAttempt(
                webhook_id=webhook_id,
                event_id=event_id,
                at=utcnow(),
                status=None,
                duration_ms=10_000,
                error="timeout",
                outcome="failed",
            )
        )


def test_add_see_the_secret_redeliver_and_delete(ready, factory, page: Page, live_server, sign_in):
    sign_in("boss")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Webhooks").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Webhooks")
    expect(page.locator("#no-webhooks")).to_be_visible()

    page.get_by_label("URL").fill("ftp://hooks.example.com/")
    page.get_by_role("button", name="Add webhook").click()
    expect(page.locator("#url-error")).to_contain_text("must start with http:// or https://")
    page.get_by_label("URL").fill(URL)
    page.get_by_label("ddi.created").check()
    page.get_by_label("ddi.updated").check()
    page.get_by_label("Companies").fill("acme")
    page.get_by_role("button", name="Add webhook").click()

    secret = page.locator("#secret")
    expect(secret).to_have_text(re.compile(r"^whsec_[A-Za-z0-9+/=]{40,}$"))
    expect(page.locator("#new-secret")).to_contain_text("it will not be shown again")
    db.session.rollback()
    hook = db.session.scalars(select(Webhook)).one()
    shown = secret.inner_text()
    assert webhooks.signing_secrets(hook, utcnow()) == [shown]
    hook_id = hook.id
    row = page.locator(f"#webhook-{hook_id}")
    expect(row).to_contain_text(URL)
    expect(row).to_contain_text("ddi.created, ddi.updated")
    expect(row).to_contain_text("up to date")
    found = axe_violations(page)
    assert not found, "axe-core on the list with a new secret:\n  " + "\n  ".join(found)

    # A DDI change after the webhook was added, which the (absent) worker gave up on.
    factory.ddi("44", "2071234568", "acme")
    fail_event(hook_id, 2)
    page.get_by_role("link", name=f"Open webhook {hook_id}").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Webhook {hook_id}")
    expect(page.locator("#secret")).to_have_count(0)  # shown once only
    assert shown not in page.content()
    expect(page.locator("#delivery")).to_contain_text("1 behind")
    expect(page.locator("#failed-2")).to_contain_text("timeout")
    found = axe_violations(page)
    assert not found, "axe-core on the webhook's page:\n  " + "\n  ".join(found)

    page.get_by_role("button", name="Redeliver event 2").click()
    expect(page.locator("#flashes")).to_contain_text("Event 2 is queued for redelivery.")
    expect(page.locator("#failed-2")).to_contain_text("queued")

    page.get_by_role("link", name="Delete…").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Delete webhook {hook_id}?")
    page.get_by_role("button", name=f"Delete webhook {hook_id}").click()
    expect(page).to_have_url(f"{live_server}/admin/webhooks")
    expect(page.locator("#flashes")).to_contain_text(f"Webhook {hook_id} ({URL}) deleted")
    expect(page.locator("#no-webhooks")).to_be_visible()
    db.session.rollback()
    assert db.session.scalars(select(Webhook)).all() == []


def test_other_accounts_see_no_link_and_get_the_403_page(
    ready, factory, page, live_server, sign_in
):
    factory.account("billing", billing_summary=True)
    sign_in("billing")
    expect(
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Webhooks")
    ).to_have_count(0)
    response = page.goto(f"{live_server}/admin/webhooks")
    assert response is not None and response.status == 403
    expect(page.get_by_role("heading", level=1)).to_have_text("Not allowed (403)")
