"""The webhook pages in a real browser: a System-Admin opens them from the navigation, adds a
webhook through the form (a refused URL first), copies the secret shown once, opens the
webhook's page, redelivers a failed event and deletes the webhook after the confirmation;
axe-core finds no violation at all on the list (with the secret) or on the webhook's page, at
desktop and phone width. The companies' chooser adds and removes chips as one picks; a refused
form focuses its first field at fault; the Copy button copies and says so; the edit page."""

from __future__ import annotations

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect
from sqlalchemy import select

from webapp.access import Principal
from webapp.database import utcnow, write_transaction
from webapp.extensions import db
from webapp.models import Webhook, WebhookAttempt
from webapp.services.events import webhooks

from .conftest import PASSWORD, wait_for_htmx, wait_for_settled
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
    page.get_by_label("Add a company").fill("acme")
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


def test_companies_are_chips_added_and_removed_and_the_first_error_is_focused(
    ready, page: Page, live_server, sign_in
):
    sign_in("boss")
    page.goto(f"{live_server}/admin/webhooks")
    wait_for_htmx(page)
    picker = page.get_by_label("Add a company")
    picker.fill("glo")
    page.get_by_role("option", name=re.compile("^globex")).click()
    chips = page.locator("#company-chosen input[name=company]")
    expect(chips).to_have_count(1)
    expect(page.locator("#company-chosen")).to_contain_text("globex")
    expect(picker).to_be_focused()  # ready for the next one
    wait_for_settled(page)
    picker.fill("acm")
    page.get_by_role("option", name=re.compile("^acme")).click()
    expect(chips).to_have_count(2)
    page.get_by_role("button", name="Remove globex").click()
    expect(chips).to_have_count(1)
    expect(page.locator("#company-chosen")).not_to_contain_text("globex")
    expect(picker).to_be_focused()  # htmx swapped the chooser alone: no page load under way

    # A refused form: every problem shown, the focus on the first field at fault.
    page.get_by_label("URL").fill("ftp://nowhere.example.com/")
    picker.fill("nosuchco")
    page.get_by_role("button", name="Add webhook").click()
    expect(page.locator("#url-error")).to_contain_text("must start with http:// or https://")
    expect(page.locator("#add_company-error")).to_contain_text("Company 'nosuchco' does not exist.")
    expect(page.get_by_label("URL")).to_be_focused()
    expect(page.locator("#company-chosen input[name=company]")).to_have_count(1)  # acme kept
    page.get_by_label("URL").fill(URL)
    page.get_by_role("button", name="Add webhook").click()
    expect(page.locator("#add_company")).to_be_focused()  # the URL is fine now
    page.locator("#add_company").fill("")
    page.get_by_role("button", name="Add webhook").click()
    expect(page.locator("#secret")).to_be_visible()
    db.session.rollback()
    assert db.session.scalars(select(Webhook)).one().companies == "acme"


def test_the_copy_button_copies_the_secret_and_says_so(ready, page: Page, live_server, sign_in):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server)
    sign_in("boss")
    page.goto(f"{live_server}/admin/webhooks")
    page.get_by_label("URL").fill(URL)
    page.get_by_role("button", name="Add webhook").click()
    secret = page.locator("#secret").inner_text()
    button = page.get_by_role("button", name="Copy the signing secret")
    expect(button).to_be_visible()
    button.click()
    expect(page.locator("#secret-copied")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == secret


def test_without_javascript_the_secret_is_text_and_no_button(ready, browser, live_server):
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(f"{live_server}/login")
        page.get_by_label("Username").fill("boss")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.goto(f"{live_server}/admin/webhooks")
        page.get_by_label("URL").fill(URL)
        page.get_by_label("Add a company").fill("acme")
        page.get_by_role("button", name="Add", exact=True).click()
        expect(page.locator("#company-chosen")).to_contain_text("acme")
        page.get_by_role("button", name="Add webhook").click()
        expect(page.locator("#secret")).to_have_text(re.compile("^whsec_"))
        expect(page.locator("button.copy")).to_be_hidden()
    finally:
        context.close()


def test_edit_pause_and_test_from_the_page(ready, page: Page, live_server, sign_in):
    hook, _ = webhooks.create(Principal.cli("test"), URL, (), ["acme"])
    sign_in("boss")
    page.goto(f"{live_server}/admin/webhooks/{hook.id}")
    page.get_by_role("link", name="Edit…").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Edit webhook {hook.id}")
    expect(page.locator("#company-chosen")).to_contain_text("acme")
    found = axe_violations(page)
    assert not found, "axe-core on the edit page:\n  " + "\n  ".join(found)
    page.get_by_label("user.created").check()
    page.get_by_role("button", name=f"Save webhook {hook.id}").click()
    expect(page.locator("#flashes")).to_contain_text(f"Webhook {hook.id} saved.")
    expect(page.locator("#settings")).to_contain_text("user.created")
    page.get_by_role("button", name="Pause").click()
    expect(page.locator("#state")).to_contain_text("paused since")
    found = axe_violations(page)
    assert not found, "axe-core on a paused webhook's page:\n  " + "\n  ".join(found)
    page.get_by_role("button", name="Resume").click()
    expect(page.locator("#state")).to_have_text("active")


def test_a_reload_after_adding_re_posts_and_adds_no_second_webhook(
    ready, page: Page, live_server, sign_in
):
    """The browser's reload of the answer that shows the secret sends the same form again
    (Chromium re-POSTs it): the one-time form (webapp/views/once.py) does nothing the second
    time and says so, and the secret is not shown again."""
    sign_in("boss")
    page.goto(f"{live_server}/admin/webhooks")
    page.get_by_label("URL").fill(URL)
    page.get_by_role("button", name="Add webhook").click()
    shown = page.locator("#secret").inner_text()
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    page.reload()
    assert posts == [f"{live_server}/admin/webhooks"]  # the reload did send the form again
    expect(page).to_have_url(f"{live_server}/admin/webhooks")
    expect(page.locator("#flashes")).to_contain_text("This was already done: webhook")
    expect(page.locator("#secret")).to_have_count(0)
    assert shown not in page.content()
    db.session.rollback()
    assert len(db.session.scalars(select(Webhook)).all()) == 1


def test_a_double_click_on_add_webhook_sends_it_once_and_shows_the_secret(
    ready, page: Page, live_server, sign_in
):
    """A double-clicked form is sent once (static/app.js: a form with a one-time key is
    submitted once; Chromium alone sent both on a slow machine): the answer shown is the one
    with the secret, not the "already done" a second POST would get."""
    sign_in("boss")
    page.goto(f"{live_server}/admin/webhooks")
    page.get_by_label("URL").fill(URL)
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    page.get_by_role("button", name="Add webhook").dblclick()
    expect(page.locator("#secret")).to_have_text(re.compile(r"^whsec_"))
    assert posts == [f"{live_server}/admin/webhooks"]
    db.session.rollback()
    assert len(db.session.scalars(select(Webhook)).all()) == 1
