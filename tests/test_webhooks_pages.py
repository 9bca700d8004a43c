"""The webhook pages (docs/pages.md#webhooks): /admin/webhooks, a webhook's page, redeliver,
rotate the signing secret, delete.

System-Admin only (every other account gets the 403 page and no navigation link; signed out:
the sign-in page), the list's delivery state, a webhook created through the form (its secret
shown once, in the POST's answer only), each refused input shown beside its field with nothing
written, redelivering a failed event, deleting after a confirmation, 404 for an unknown
webhook, CSRF on every POST, escaped output, labelled inputs and no inline script or style.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import func, select

from webapp.access import Principal
from webapp.database import utcnow, write_transaction
from webapp.extensions import db
from webapp.models import AuditEntry, EventCounter, Webhook, WebhookAttempt, WebhookRedelivery
from webapp.services.events import webhooks

from .factories import ACME, INITECH, SIGN_IN_ACTIONS

ROOT = Principal.cli("test")
# A public address, as a literal: a webhook's host must resolve (the tests resolve no name
# on the network) to public addresses. Nothing is ever sent to it here.
URL = "https://93.184.215.14/telephony"
HOSTILE_URL = "https://93.184.215.14/<script>alert(1)</script>"
OTHERS = ("cadmin", "summary", "reporter", "nobody")  # one of each other grant, and none


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def h1(response) -> str:
    return " ".join(soup(response).h1.get_text(" ", strip=True).split())


def text(response, selector: str) -> str:
    found = soup(response).select_one(selector)
    assert found is not None, selector
    return " ".join(found.get_text(" ", strip=True).split())


def post(client, path: str, data: dict[str, Any] | None = None, *, csrf: bool = True):
    data = dict(data or {})
    if csrf:
        data["csrf_token"] = client.csrf
    return client.post(path, data=data)


def stored() -> dict[str, Any]:
    """What the webhook pages may write."""
    db.session.rollback()
    state = {
        "webhooks": sorted(
            (h.id, h.url, h.event_types, h.companies, h.secret_sealed, h.previous_secret_sealed)
            for h in db.session.scalars(select(Webhook))
        ),
        "redeliveries": sorted(
            db.session.execute(
                select(WebhookRedelivery.webhook_id, WebhookRedelivery.event_id)
            ).all()
        ),
        "attempts": db.session.scalar(select(func.count()).select_from(WebhookAttempt)),
        "audit": db.session.scalar(
            select(func.count())
            .select_from(AuditEntry)
            .where(AuditEntry.action.not_in(SIGN_IN_ACTIONS))
        ),
    }
    db.session.rollback()
    return state


def audits(action: str) -> list[AuditEntry]:
    db.session.rollback()
    return list(db.session.scalars(select(AuditEntry).where(AuditEntry.action == action)))


def newest_event() -> int:
    db.session.rollback()
    return db.session.scalar(select(EventCounter.last_id)) or 0


def add_attempt(webhook_id: int, event_id: int, outcome: str, **values: Any) -> None:
    row = {"status": None, "duration_ms": 15, "error": None, "at": utcnow(), **values}
    with write_transaction() as session:
        session.add(
            WebhookAttempt(webhook_id=webhook_id, event_id=event_id, outcome=outcome, **row)
        )


@pytest.fixture
def hook(world) -> int:
    """A webhook for every event, and one kept event after it (a DDI of acme created)."""
    created, _ = webhooks.create(ROOT, URL)
    world.factory.ddi("44", "2071234567", ACME)
    return created.id


# --- who may -------------------------------------------------------------------------------------


def test_only_a_system_admin_opens_the_pages(world, hook):
    pages = {
        "/admin/webhooks": "Webhooks",
        f"/admin/webhooks/{hook}": f"Webhook {hook}",
        f"/admin/webhooks/{hook}/delete": f"Delete webhook {hook}?",
        f"/admin/webhooks/{hook}/rotate-secret": f"Rotate the signing secret of webhook {hook}?",
    }
    for path, title in pages.items():
        response = world.browser("root").get(path)
        assert response.status_code == 200, path
        assert h1(response) == title, path
        for username in OTHERS:
            refused = world.browser(username).get(path)
            assert refused.status_code == 403, (username, path)
            assert h1(refused) == "Not allowed (403)", (username, path)
            assert URL not in refused.get_data(as_text=True)
            assert not soup(refused).select("main form[method=post]"), (username, path)
        signed_out = world.client.get(path)
        assert signed_out.status_code == 302
        assert signed_out.headers["Location"].startswith("/login?next=")


def test_posts_from_other_accounts_are_refused_and_change_nothing(world, hook):
    event = newest_event()
    add_attempt(hook, event, "failed")
    before = stored()
    for username in OTHERS:
        browser = world.browser(username)
        for path, data in (
            ("/admin/webhooks", {"url": "https://evil.example.com/"}),
            ("/admin/webhooks", {"url": "not a url"}),  # 403 before the form is read
            (f"/admin/webhooks/{hook}/redeliver/{event}", {}),
            (f"/admin/webhooks/{hook}/delete", {}),
            (f"/admin/webhooks/{hook}/rotate-secret", {}),
        ):
            response = post(browser, path, data)
            assert response.status_code == 403, (username, path)
            assert "whsec_" not in response.get_data(as_text=True)
            assert h1(response) == "Not allowed (403)"
    assert stored() == before


def test_the_navigation_links_the_webhooks_for_a_system_admin_only(world):
    for username in ("root", *OTHERS):
        page = soup(world.browser(username).get("/account/tokens"))
        links = {a["href"] for a in page.select("header.topbar nav a[href]")}
        assert ("/admin/webhooks" in links) == (username == "root"), username
    current = soup(world.browser("root").get("/admin/webhooks")).select_one(
        "header nav a[aria-current=page]"
    )
    assert current is not None and current["href"] == "/admin/webhooks"


# --- the list ------------------------------------------------------------------------------------


@pytest.mark.usefixtures("allow_loopback_webhooks")
def test_the_list_shows_filters_and_how_far_delivery_is(world, hook):
    other = webhooks.create(ROOT, "http://127.0.0.1:9/x", ["ddi.created"], [ACME, INITECH])[0].id
    browser = world.browser("root")
    rows = {
        tr["id"]: tr for tr in soup(browser.get("/admin/webhooks")).select("#webhooks tbody tr")
    }
    assert list(rows) == [f"webhook-{hook}", f"webhook-{other}"]  # oldest first
    first = " ".join(rows[f"webhook-{hook}"].get_text(" ", strip=True).split())
    assert URL in first and "1 behind" in first  # the DDI created after it
    cells = [" ".join(td.get_text().split()) for td in rows[f"webhook-{other}"].find_all("td")]
    assert cells[1:5] == ["http://127.0.0.1:9/x", "ddi.created", "acme, initech", "up to date"]
    assert cells[5] == "0"
    link = rows[f"webhook-{hook}"].select_one("a[href]")
    assert link["href"] == f"/admin/webhooks/{hook}"

    # The worker's state: retrying an event (when next), and a failed one with one queued.
    event = newest_event()
    with write_transaction() as session:
        row = session.get(Webhook, hook)
        row.head_event, row.head_attempts = event, 3
        row.next_attempt_at = utcnow().replace(microsecond=0) + timedelta(minutes=2)
        next_at = row.next_attempt_at
    add_attempt(hook, event, "retry", status=503)
    world.factory.ddi("44", "2071234568", ACME)
    add_attempt(hook, newest_event(), "failed", error="connection refused")
    add_attempt(hook, event, "failed")
    webhooks.redeliver(ROOT, hook, event)
    page = soup(browser.get("/admin/webhooks"))
    row_text = " ".join(page.select_one(f"#webhook-{hook}").get_text(" ", strip=True).split())
    assert "2 behind" in row_text
    assert f"retrying event {event} (3 failed attempts)" in row_text
    assert f"next attempt {next_at:%Y-%m-%d %H:%M:%S} UTC" in row_text
    failed = page.select_one(f"#webhook-{hook} td[data-label=Failed]")
    assert " ".join(failed.get_text().split()) == f"1 failed, webhook {hook} (1 queued)"
    assert failed.a["href"] == f"/admin/webhooks/{hook}#failed-head"


def test_no_webhook_yet(world):
    page = soup(world.browser("root").get("/admin/webhooks"))
    assert page.select_one("#no-webhooks") is not None and page.select_one("#webhooks") is None
    # The form offers every event type as a check box, and the companies as a chooser: none
    # chosen yet, a picker to add one (a text field without JavaScript), never a list of all.
    boxes = [i["value"] for i in page.select("input[type=checkbox][name=event]")]
    assert boxes == list(webhooks.TYPES)
    assert page.select_one("input[name=add_company]")["type"] == "text"
    assert page.select_one("#company-chooser button[name=add][value=company]") is not None
    assert not page.select("input[name=company]")
    assert page.select_one("select") is None


# --- create --------------------------------------------------------------------------------------


def test_create_shows_the_secret_once(world):
    browser = world.browser("root")
    response = post(
        browser,
        "/admin/webhooks",
        {"url": f"  {URL}  ", "event": ["ddi.created", "user.deleted"], "company": "acme, initech"},
    )
    assert response.status_code == 200
    assert "no-store" in response.headers["Cache-Control"]
    assert response.headers["Pragma"] == "no-cache"
    [hook] = db.session.scalars(select(Webhook)).all()
    assert (hook.url, hook.event_types, hook.companies) == (
        URL,
        "ddi.created,user.deleted",
        "acme,initech",
    )
    secret = text(response, "#secret")
    assert webhooks.signing_secrets(hook, utcnow()) == [secret] and secret.startswith("whsec_")
    assert "Copy it now: it will not be shown again." in text(response, "#new-secret")
    assert f"Webhook {hook.id} created" in text(response, "#flashes")
    assert h1(response) == "Webhooks"
    assert text(response, f"#webhook-{hook.id}").startswith(f"Webhook {hook.id} {URL}")
    # The form is empty again, ready for another.
    form = soup(response).select_one("#new-webhook + form")
    assert form.select_one("input[name=url]").get("value", "") == ""
    assert not form.select("input[name=event][checked]")
    with browser.session_transaction() as session:
        assert secret not in repr(dict(session))  # not in a flash cookie
    for later in (browser.get("/admin/webhooks"), browser.get(f"/admin/webhooks/{hook.id}")):
        html = later.get_data(as_text=True)
        assert secret not in html and "will not be shown again" not in html
        assert "created" not in text(later, "#flashes")  # the message went with the POST
    [entry] = audits("webhook.create")
    assert (entry.actor, entry.via, entry.target) == ("root", "ui", f"webhook {hook.id}")
    assert secret not in repr(entry.after)


def test_no_event_ticked_and_no_company_is_everything(world):
    browser = world.browser("root")
    response = post(
        browser, "/admin/webhooks", {"url": "http://93.184.215.14:8080/in", "company": " "}
    )
    assert response.status_code == 200
    hook = db.session.scalars(select(Webhook)).one()
    assert hook.event_types is None and hook.companies is None
    cells = [td.get_text(" ", strip=True) for td in soup(response).select(f"#webhook-{hook.id} td")]
    assert cells[2:4] == ["all", "all"]
    page = browser.get(f"/admin/webhooks/{hook.id}")
    assert "every event type" in text(page, "#settings")
    assert "every company" in text(page, "#settings")


BAD_INPUTS = {
    "no URL": ({"url": "  "}, "url", "Give the webhook's URL."),
    "not http": (
        {"url": "ftp://files.example.com/in"},
        "url",
        "The URL must start with http:// or https:// and name a host.",
    ),
    "no host": ({"url": "https://"}, "url", "must start with http:// or https://"),
    "white space": ({"url": "https://a.example.com/x y"}, "url", "white space"),
    "too long": ({"url": "https://a.example.com/" + "x" * 2000}, "url", "longer than 2000"),
    "unknown event": (
        {"url": URL, "event": ["ddi.created", "ddi.exploded"]},
        "event",
        "Unknown event type 'ddi.exploded'.",
    ),
    "unknown company": (
        {"url": URL, "company": "acme, nosuchco"},
        "add_company",
        "Company 'nosuchco' does not exist.",
    ),
    "malformed company": ({"url": URL, "company": "acme a/b"}, "add_company", "Company 'a/b'"),
    "unknown company typed": (
        {"url": URL, "company": "acme", "add_company": "nosuchco"},
        "add_company",
        "Company 'nosuchco' does not exist.",
    ),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_is_shown_beside_its_field_and_nothing_is_written(world, case):
    data, field, message = BAD_INPUTS[case]
    browser = world.browser("root")
    before = stored()
    response = post(browser, "/admin/webhooks", data)
    assert response.status_code == 400
    assert message in text(response, f"#{field}-error")
    assert stored() == before
    page = soup(response)
    assert page.select_one("#secret") is None
    # The field says so, and what was typed or ticked is kept.
    if field == "event":
        assert page.select_one("fieldset.event-types")["aria-describedby"] == "event-error"
        ticked = [i["value"] for i in page.select("input[name=event][checked]")]
        assert ticked == ["ddi.created"]  # the unknown one has no box to tick
    else:
        assert page.select_one(f"#{field}")["aria-invalid"] == "true"
        assert f"{field}-error" in page.select_one(f"#{field}")["aria-describedby"].split()
        assert page.select_one(f"#{field}")["value"] == data.get(field, "")
        assert page.select_one(f"#{field}").has_attr("autofocus")  # the first at fault
    if field == "add_company":  # the companies sent stay chosen
        kept = [i["value"] for i in page.select("#company-chosen input[name=company]")]
        assert "acme" in kept


# --- a webhook's page ----------------------------------------------------------------------------


def test_the_page_shows_settings_and_recent_attempts(world, hook):
    event = newest_event()
    add_attempt(hook, event, "retry", status=503, duration_ms=1234)
    add_attempt(hook, event, "retry", error="timeout", duration_ms=10000)
    add_attempt(hook, event, "retry", duration_ms=2)
    add_attempt(hook, event, "delivered", status=204, duration_ms=8)
    page = world.browser("root").get(f"/admin/webhooks/{hook}")
    assert page.status_code == 200
    settings = text(page, "#settings")
    assert URL in settings and "by test" in settings
    assert f"handled up to event {event - 1} of {event}" in text(page, "#delivery")
    rows = [
        [td.get_text(" ", strip=True) for td in tr.find_all("td")]
        for tr in soup(page).select("#attempts tbody tr")
    ]
    assert [(r[0], r[2], r[3], r[4]) for r in rows] == [  # newest first
        (str(event), "HTTP 204", "8", "delivered"),
        (str(event), "no answer", "2", "will retry"),
        (str(event), "timeout", "10,000", "will retry"),
        (str(event), "HTTP 503", "1,234", "will retry"),
    ]
    assert rows[0][1].endswith(" UTC")
    assert text(page, "#no-failed") == "None."


def test_redeliver_a_failed_event(world, hook):
    event = newest_event()
    add_attempt(hook, event, "failed", error="connection refused")
    browser = world.browser("root")
    page = browser.get(f"/admin/webhooks/{hook}")
    row = soup(page).select_one(f"#failed-{event}")
    assert "connection refused" in row.get_text(" ", strip=True)
    form = row.select_one("form[method=post]")
    assert form["action"] == f"/admin/webhooks/{hook}/redeliver/{event}"
    assert form.select_one("input[name=csrf_token]") is not None
    assert form.button.get_text(" ", strip=True) == f"Redeliver event {event}"

    response = post(browser, form["action"])
    assert response.status_code == 302
    assert response.headers["Location"] == f"/admin/webhooks/{hook}#failed-head"
    assert stored()["redeliveries"] == [(hook, event)]
    [entry] = audits("webhook.redeliver")
    assert (entry.actor, entry.via, entry.detail) == ("root", "ui", f"event {event}")
    page = browser.get(f"/admin/webhooks/{hook}")
    assert f"Event {event} is queued for redelivery." in text(page, "#flashes")
    row = soup(page).select_one(f"#failed-{event}")
    assert row.select_one("form") is None and "queued" in row.get_text(" ", strip=True)
    assert text(browser.get("/admin/webhooks"), f"#webhook-{hook} td[data-label=Failed]") == (
        "0 (1 queued)"
    )

    # Twice: already queued (409); an event that did not fail: refused (400). Nothing written.
    before = stored()
    again = post(browser, form["action"])
    assert again.status_code == 409
    assert "already queued" in text(again, "#page-error")
    never = post(browser, f"/admin/webhooks/{hook}/redeliver/{event + 100}")
    assert never.status_code == 400
    assert "no failed delivery" in text(never, "#page-error")
    assert h1(never) == f"Webhook {hook}"
    assert stored() == before


def test_an_event_failed_twice_is_one_row(world, hook):
    event = newest_event()
    add_attempt(hook, event, "failed", status=500)
    add_attempt(hook, event, "failed", status=502)
    page = soup(world.browser("root").get(f"/admin/webhooks/{hook}"))
    [row] = page.select("#failed tbody tr")
    assert "502" in row.get_text(" ", strip=True)  # the newest


def test_delete_after_a_confirmation(world, hook):
    add_attempt(hook, newest_event(), "failed")
    browser = world.browser("root")
    page = browser.get(f"/admin/webhooks/{hook}")
    link = soup(page).select_one(f"a[href='/admin/webhooks/{hook}/delete']")
    assert link is not None
    confirm = browser.get(link["href"])
    assert "Are you sure?" in text(confirm, "main")
    assert URL in text(confirm, "main")
    form = soup(confirm).select_one("main form[method=post]")
    assert form["action"] == f"/admin/webhooks/{hook}/delete"
    assert form.select_one("input[name=csrf_token]") is not None
    assert stored()["webhooks"]  # the GET changed nothing

    response = post(browser, form["action"])
    assert response.status_code == 302 and response.headers["Location"] == "/admin/webhooks"
    after = stored()
    assert after["webhooks"] == [] and after["attempts"] == 0
    [entry] = audits("webhook.delete")
    assert (entry.actor, entry.via, entry.target) == ("root", "ui", f"webhook {hook}")
    listing = browser.get("/admin/webhooks")
    assert f"Webhook {hook} ({URL}) deleted" in text(listing, "#flashes")
    assert soup(listing).select_one("#no-webhooks") is not None
    assert browser.get(f"/admin/webhooks/{hook}").status_code == 404


def test_rotate_the_secret_after_a_confirmation_shows_the_new_one_once(world, hook):
    """The button on the webhook's page, a confirmation, then the page with the new secret,
    once; both secrets sign for 24 h (the worker's path: test_delivery.py), then the new one."""
    db.session.rollback()
    old_sealed = db.session.get(Webhook, hook).secret_sealed
    browser = world.browser("root")
    page = browser.get(f"/admin/webhooks/{hook}")
    assert text(page, "#signing").startswith("one secret")
    link = soup(page).select_one(f"a[href='/admin/webhooks/{hook}/rotate-secret']")
    assert link is not None and link.get_text(strip=True) == "Rotate secret…"
    confirm = browser.get(link["href"])
    assert "24 hours" in text(confirm, "main") and URL in text(confirm, "main")
    form = soup(confirm).select_one("main form[method=post]")
    assert form["action"] == f"/admin/webhooks/{hook}/rotate-secret"
    assert form.select_one("input[name=csrf_token]") is not None
    db.session.rollback()
    assert db.session.get(Webhook, hook).secret_sealed == old_sealed  # the GET changed nothing

    response = post(browser, form["action"])
    assert response.status_code == 200
    assert "no-store" in response.headers["Cache-Control"]
    assert h1(response) == f"Webhook {hook}"
    secret = text(response, "#secret")
    assert secret.startswith("whsec_")
    assert "Copy it now: it will not be shown again." in text(response, "#new-secret")
    assert f"webhook {hook} was rotated" in text(response, "#flashes")
    db.session.rollback()
    row = db.session.get(Webhook, hook)
    until = row.previous_secret_until
    assert until is not None
    assert webhooks.signing_secrets(row, until - timedelta(seconds=1))[0] == secret
    assert len(webhooks.signing_secrets(row, until - timedelta(seconds=1))) == 2
    assert webhooks.signing_secrets(row, until) == [secret]
    assert "the previous secret also signs until" in text(response, "#signing")
    with browser.session_transaction() as session:
        assert secret not in repr(dict(session))
    for later in (browser.get("/admin/webhooks"), browser.get(f"/admin/webhooks/{hook}")):
        html = later.get_data(as_text=True)
        assert secret not in html and "whsec_" not in html
    [entry] = audits("webhook.rotate-secret")
    assert (entry.actor, entry.via, entry.target) == ("root", "ui", f"webhook {hook}")
    assert "whsec_" not in repr((entry.before, entry.after, entry.detail))


def test_an_unknown_webhook_is_the_404_page(world, hook):
    browser = world.browser("root")
    before = stored()
    for response in (
        browser.get(f"/admin/webhooks/{hook + 1}"),
        browser.get(f"/admin/webhooks/{hook + 1}/delete"),
        post(browser, f"/admin/webhooks/{hook + 1}/delete"),
        post(browser, f"/admin/webhooks/{hook + 1}/redeliver/1"),
        browser.get(f"/admin/webhooks/{hook + 1}/rotate-secret"),
        post(browser, f"/admin/webhooks/{hook + 1}/rotate-secret"),
    ):
        assert response.status_code == 404
        assert h1(response) == "Not found (404)"
        assert f"There is no webhook {hook + 1}." in text(response, "main")
    assert browser.get("/admin/webhooks/abc").status_code == 404
    assert stored() == before


# --- CSRF, escaping, markup ----------------------------------------------------------------------


def test_posts_without_the_csrf_token_change_nothing(world, hook):
    event = newest_event()
    add_attempt(hook, event, "failed")
    browser = world.browser("root")
    before = stored()
    for path, data in (
        ("/admin/webhooks", {"url": "https://other.example.com/"}),
        (f"/admin/webhooks/{hook}/redeliver/{event}", {}),
        (f"/admin/webhooks/{hook}/delete", {}),
        (f"/admin/webhooks/{hook}/rotate-secret", {}),
    ):
        response = post(browser, path, data, csrf=False)
        assert response.status_code == 400, path
        assert "expired or is not valid" in text(response, "main"), path
        forged = post(browser, path, {**data, "csrf_token": "forged"}, csrf=False)
        assert forged.status_code == 400, path
        assert "whsec_" not in forged.get_data(as_text=True)
    assert stored() == before


def test_hostile_text_is_escaped(world):
    browser = world.browser("root")
    created = post(browser, "/admin/webhooks", {"url": HOSTILE_URL})
    assert created.status_code == 200
    hook = db.session.scalars(select(Webhook)).one()
    refused = post(browser, "/admin/webhooks", {"url": URL, "company": "<script>alert(2)</script>"})
    assert refused.status_code == 400
    for response in (
        created,
        refused,
        browser.get("/admin/webhooks"),
        browser.get(f"/admin/webhooks/{hook.id}"),
        browser.get(f"/admin/webhooks/{hook.id}/delete"),
    ):
        html = response.get_data(as_text=True)
        assert "<script>alert" not in html
        assert not [s for s in soup(response).find_all("script") if "alert" in s.text]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in browser.get("/admin/webhooks").text


def test_inputs_are_labelled_and_there_is_no_inline_script_or_style(world, hook):
    add_attempt(hook, newest_event(), "failed")
    browser = world.browser("root")
    bad = post(browser, "/admin/webhooks", {"url": "x", "event": ["ddi.x"]})
    for response in (
        browser.get("/admin/webhooks"),
        bad,
        browser.get(f"/admin/webhooks/{hook}"),
        browser.get(f"/admin/webhooks/{hook}/delete"),
        browser.get(f"/admin/webhooks/{hook}/rotate-secret"),
        post(browser, f"/admin/webhooks/{hook}/rotate-secret"),
    ):
        page = soup(response)
        for control in page.select("main input, main select, main textarea"):
            if control.get("type") in ("hidden", "submit"):
                continue
            assert page.select_one(f"label[for='{control['id']}']"), control
        for form in page.select("form[method=post]"):
            assert form.select_one("input[name$=csrf_token]")
        assert not page.select("[style]") and not page.select("style")
        assert all(s.get("src") for s in page.find_all("script"))
        assert len(page.find_all("h1")) == 1


# --- every problem at once, the company chooser without JavaScript -------------------------------


def test_every_refused_field_is_shown_at_once_and_the_first_is_focused(world):
    browser = world.browser("root")
    before = stored()
    response = post(
        browser,
        "/admin/webhooks",
        {"url": "ftp://x.example.com/", "event": ["ddi.exploded"], "company": "nosuchco"},
    )
    assert response.status_code == 400
    assert "must start with http:// or https://" in text(response, "#url-error")
    assert "Unknown event type 'ddi.exploded'." in text(response, "#event-error")
    assert "Company 'nosuchco' does not exist." in text(response, "#add_company-error")
    page = soup(response)
    assert [e.get("id") for e in page.select("[autofocus]")] == ["url"]
    assert stored() == before
    # Without a URL problem the focus goes to the next field at fault.
    second = post(browser, "/admin/webhooks", {"url": URL, "add_company": "nosuchco"})
    assert second.status_code == 400
    assert [e.get("id") for e in soup(second).select("[autofocus]")] == ["add_company"]
    assert stored() == before


def test_the_chooser_adds_and_removes_companies_without_javascript(world):
    browser = world.browser("root")
    before = stored()
    added = post(browser, "/admin/webhooks", {"url": URL, "add": "company", "add_company": "ACME"})
    assert added.status_code == 200
    assert [i["value"] for i in soup(added).select("#company-chosen input[name=company]")] == [ACME]
    assert soup(added).select_one("#url")["value"] == URL  # what was typed stays
    two = post(
        browser,
        "/admin/webhooks",
        {"url": URL, "company": ACME, "add": "company", "add_company": INITECH},
    )
    chosen = [i["value"] for i in soup(two).select("#company-chosen input[name=company]")]
    assert chosen == [ACME, INITECH]
    removed = post(
        browser,
        "/admin/webhooks",
        {"url": URL, "company": [ACME, INITECH], "remove": f"company:{ACME}"},
    )
    chosen = [i["value"] for i in soup(removed).select("#company-chosen input[name=company]")]
    assert chosen == [INITECH]
    unknown = post(browser, "/admin/webhooks", {"url": URL, "add": "company", "add_company": "zz"})
    assert unknown.status_code == 400
    assert "unknown company" in text(unknown, "#add_company-error")
    assert stored() == before  # Add and Remove save nothing
    saved = post(browser, "/admin/webhooks", {"url": URL, "company": [INITECH, ACME]})
    assert saved.status_code == 200
    assert db.session.scalars(select(Webhook)).one().companies == f"{INITECH},{ACME}"


# --- edit ----------------------------------------------------------------------------------------

EDITS = {
    "the URL": ({"url": "https://93.184.215.15/new"}, ("https://93.184.215.15/new", None, None)),
    "the events": (
        {"url": URL, "event": ["user.created", "ddi.deleted"]},
        (URL, "user.created,ddi.deleted", None),
    ),
    "the companies": ({"url": URL, "company": [INITECH, ACME]}, (URL, None, "initech,acme")),
    "a company typed": (
        {"url": URL, "company": INITECH, "add_company": "Acme"},
        (URL, None, "initech,acme"),
    ),
    "all three": (
        {"url": "http://93.184.215.15:8080/", "event": ["ddi.updated"], "company": ACME},
        ("http://93.184.215.15:8080/", "ddi.updated", "acme"),
    ),
}


@pytest.mark.parametrize("case", EDITS)
def test_edit_a_webhook(world, hook, case):
    data, expected = EDITS[case]
    db.session.rollback()
    cursor = db.session.get(Webhook, hook).cursor
    browser = world.browser("root")
    page = browser.get(f"/admin/webhooks/{hook}")
    link = soup(page).select_one(f"a[href='/admin/webhooks/{hook}/edit']")
    assert link is not None and link.get_text(strip=True) == "Edit…"
    form = browser.get(link["href"])
    assert form.status_code == 200 and h1(form) == f"Edit webhook {hook}"
    assert soup(form).select_one("#url")["value"] == URL
    response = post(browser, f"/admin/webhooks/{hook}/edit", data)
    assert response.status_code == 302
    assert response.headers["Location"] == f"/admin/webhooks/{hook}"
    db.session.rollback()
    row = db.session.get(Webhook, hook)
    assert (row.url, row.event_types, row.companies) == expected
    assert row.cursor == cursor  # its place in the feed stays
    [entry] = audits("webhook.update")
    assert (entry.actor, entry.target) == ("root", f"webhook {hook}")
    assert entry.before["url"] == URL and entry.after["url"] == expected[0]
    assert f"Webhook {hook} saved." in text(browser.get(f"/admin/webhooks/{hook}"), "#flashes")


def test_the_edit_form_shows_the_settings_and_every_problem_at_once(world, hook):
    webhooks.edit(ROOT, hook, URL, ["ddi.created"], [ACME, INITECH])
    browser = world.browser("root")
    form = soup(browser.get(f"/admin/webhooks/{hook}/edit"))
    assert [i["value"] for i in form.select("input[name=event][checked]")] == ["ddi.created"]
    chosen = [i["value"] for i in form.select("#company-chosen input[name=company]")]
    assert chosen == [ACME, INITECH]
    before = stored()
    # The URL check of targets.py runs on edit too: a private address is refused.
    response = post(
        browser,
        f"/admin/webhooks/{hook}/edit",
        {"url": "http://10.1.2.3/in", "event": ["nope"], "company": [ACME, "gone"]},
    )
    assert response.status_code == 400
    assert "not allowed" in text(response, "#url-error") or "private" in text(
        response, "#url-error"
    )
    assert "Unknown event type 'nope'." in text(response, "#event-error")
    assert "Company 'gone' does not exist." in text(response, "#add_company-error")
    assert [e.get("id") for e in soup(response).select("[autofocus]")] == ["url"]
    assert stored() == before


def test_an_edit_that_changes_nothing_is_not_audited(world, hook):
    browser = world.browser("root")
    response = post(browser, f"/admin/webhooks/{hook}/edit", {"url": URL})
    assert response.status_code == 302
    assert audits("webhook.update") == []


# --- pause and resume ----------------------------------------------------------------------------


def test_pause_and_resume_from_the_page(world, hook):
    browser = world.browser("root")
    page = browser.get(f"/admin/webhooks/{hook}")
    assert text(page, "#state") == "active"
    button = soup(page).select_one("#pause-button")
    assert button.get_text(strip=True) == "Pause"
    assert button.find_parent("form")["action"] == f"/admin/webhooks/{hook}/pause"
    response = post(browser, f"/admin/webhooks/{hook}/pause")
    assert response.status_code == 302
    db.session.rollback()
    assert db.session.get(Webhook, hook).paused_at is not None
    page = browser.get(f"/admin/webhooks/{hook}")
    assert text(page, "#state").startswith("paused since")
    assert f"Webhook {hook} is paused" in text(page, "#flashes")
    assert soup(page).select_one("#pause-button").get_text(strip=True) == "Resume"
    assert "paused" in text(browser.get("/admin/webhooks"), f"#webhook-{hook}")
    post(browser, f"/admin/webhooks/{hook}/pause")  # again: nothing more
    assert len(audits("webhook.pause")) == 1
    response = post(browser, f"/admin/webhooks/{hook}/resume")
    assert response.status_code == 302
    db.session.rollback()
    assert db.session.get(Webhook, hook).paused_at is None
    assert text(browser.get(f"/admin/webhooks/{hook}"), "#state") == "active"
    assert len(audits("webhook.resume")) == 1


# --- who may, CSRF and 404 for the new addresses -------------------------------------------------


def test_other_accounts_may_not_edit_pause_resume_or_test(world, hook):
    """Webhooks are a System-Admin's: a Company-Admin (of acme, or of any company) may neither
    open the edit form nor post it, even to add only its own company, nor pause, resume or
    test one."""
    before = stored()
    for username in OTHERS:
        browser = world.browser(username)
        refused = browser.get(f"/admin/webhooks/{hook}/edit")
        assert refused.status_code == 403 and h1(refused) == "Not allowed (403)", username
        for path, data in (
            (f"/admin/webhooks/{hook}/edit", {"url": URL, "company": ACME}),
            (f"/admin/webhooks/{hook}/edit", {"url": URL, "add": "company", "add_company": ACME}),
            (f"/admin/webhooks/{hook}/pause", {}),
            (f"/admin/webhooks/{hook}/resume", {}),
            (f"/admin/webhooks/{hook}/test", {}),
        ):
            response = post(browser, path, data)
            assert response.status_code == 403, (username, path)
        suggest = browser.get("/companies/suggest?for=webhooks&q=a")
        assert suggest.status_code == 403, username
    assert stored() == before


def test_the_new_posts_need_the_csrf_token_and_a_known_webhook(world, hook):
    browser = world.browser("root")
    before = stored()
    for path in ("edit", "pause", "resume", "test"):
        response = post(browser, f"/admin/webhooks/{hook}/{path}", {"url": URL}, csrf=False)
        assert response.status_code == 400, path
        missing = post(browser, f"/admin/webhooks/{hook + 1}/{path}", {"url": URL})
        assert missing.status_code == 404, path
    assert browser.get(f"/admin/webhooks/{hook + 1}/edit").status_code == 404
    assert stored() == before


# --- copy buttons and the API documentation ------------------------------------------------------


def test_secrets_have_a_copy_button_hidden_until_the_script_shows_it(world):
    browser = world.browser("root")
    response = post(browser, "/admin/webhooks", {"url": URL})
    page = soup(response)
    button = page.select_one("button.copy[data-copy=secret]")
    assert button is not None and button.has_attr("hidden") and button["type"] == "button"
    assert page.select_one("#secret-copied[role=status]") is not None
    assert page.select_one("script[src$='copy.js']") is not None
    tokens = world.browser("root")
    created = post(tokens, "/account/tokens", {"label": "ci"})
    if created.status_code == 302:
        created = tokens.get(created.headers["Location"])
    token_page = soup(created)
    assert token_page.select_one("button.copy[data-copy=new-token]") is not None


def test_the_api_documentation_is_linked_from_the_tokens_page_and_the_footer(world):
    for username in ("root", "nobody"):
        page = soup(world.browser(username).get("/account/tokens"))
        assert page.select_one("#api-docs a[href='/rest/docs']") is not None
        assert page.select_one("footer a[href='/rest/docs']") is not None
    signed_out = soup(world.client.get("/login"))
    assert signed_out.select_one("footer a[href='/rest/docs']") is not None
