"""A DDI's description on its forms (docs/numbers.md, "Descriptions"): the new, edit and link
forms have the field, filled with the number's description and escaped; a bad one is a 400
with the message beside the field and nothing written; a phone user's forms have none."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from webapp.extensions import db
from webapp.models import AuditEntry, Number

from .factories import World, snapshot
from .snapshots import kept
from .test_views_records import (
    ACME,
    DDI_URL,
    GOOD,
    USER_URL,
    field_error,
    flashes,
    html,
    main_form,
    post,
    soup,
)


@pytest.fixture
@kept
def world(world: World) -> World:
    """The shared world with an ACME DDI and phone user (those of test_views_records)."""
    world.factory.ddi("44", "2071234567", ACME, "100")
    world.factory.user("ana.acme", ACME)
    return world


HOSTILE = '<script>alert("x")</script> & "quotes"'


def description(dialcode: str = "44", number: str = "2071234567") -> str | None:
    db.session.rollback()
    return db.session.scalar(
        select(Number.description).where(Number.dialcode == dialcode, Number.number == number)
    )


def shown(client, url: str) -> str:
    control = main_form(soup(client.get(url))).find("input", attrs={"name": "description"})
    assert control is not None, url
    return control.get("value", "")


@pytest.mark.parametrize("action", ["edit", "link"])
def test_the_edit_and_link_forms_show_the_description_escaped_and_save_it(world, action):
    client = world.browser("root")
    url = f"{DDI_URL[ACME]}/{action}"
    assert shown(client, url) == ""
    data = {"virt_exten": "100", "company": ACME, "description": HOSTILE}
    response = post(client, url, data)
    assert response.status_code == 302, html(response)
    assert description() == HOSTILE
    page = client.get(url)
    assert "<script>alert" not in html(page)  # escaped in the value attribute
    assert shown(client, url) == HOSTILE
    (entry,) = [e for e in audit() if e.action == f"ddi.{'link' if action == 'link' else 'update'}"]
    assert entry.after["description"] == HOSTILE


def audit() -> list[AuditEntry]:
    db.session.rollback()
    return list(db.session.scalars(select(AuditEntry).order_by(AuditEntry.id)))


def test_a_description_only_edit_saves_and_says_so(world):
    client = world.browser("cadmin")
    before = snapshot()
    data = {"virt_exten": "100", "company": ACME, "description": "Front desk"}
    response = post(client, f"{DDI_URL[ACME]}/edit", data)
    assert response.status_code == 302
    assert "Saved DDI +44 2071234567." in flashes(soup(client.get("/ddis")))
    after = snapshot()
    assert after["history"] == before["history"] and after["ddis"] == before["ddis"]
    assert description() == "Front desk"
    # The same form again: nothing to save.
    post(client, f"{DDI_URL[ACME]}/edit", data)
    assert "No changes to DDI +44 2071234567." in flashes(soup(client.get("/ddis")))


def test_an_edit_posted_without_the_field_keeps_the_description(world):
    client = world.browser("root")
    post(
        client,
        f"{DDI_URL[ACME]}/edit",
        {"virt_exten": "100", "company": ACME, "description": "Kept"},
    )
    post(client, f"{DDI_URL[ACME]}/edit", {"virt_exten": "101", "company": ACME})
    assert description() == "Kept"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("x" * 201, "must be at most 200 characters"),
        ("bell\x07", "must not contain control characters but tabs and line breaks"),
    ],
)
@pytest.mark.parametrize("action", ["edit", "link", "new"])
def test_a_bad_description_is_shown_beside_the_field_and_nothing_is_written(
    world, text, why, action
):
    client = world.browser("root")
    before = snapshot()
    if action == "new":
        url, data = "/ddis/new", {**GOOD["ddi"], "description": text}
    else:
        url, data = (
            f"{DDI_URL[ACME]}/{action}",
            {"virt_exten": "100", "company": ACME, "description": text},
        )
    for htmx in (False, True):
        response = post(client, url, data, htmx=htmx)
        assert response.status_code == 400
        assert field_error(soup(response), "description") == why
    assert snapshot() == before and description() == ""


def test_the_new_form_describes_the_number_or_keeps_a_stocked_one(world):
    client = world.browser("root")
    form = main_form(soup(client.get("/ddis/new")))
    assert form.find("input", attrs={"name": "description"}) is not None
    response = post(client, "/ddis/new", {**GOOD["ddi"], "description": "New line"})
    assert response.status_code == 302, html(response)
    assert description("44", "2071239999") == "New line"
    stocked = {"values": [{"dialcode": "44", "number": "2070000000", "description": "Stocked"}]}
    r = world.client.post("/rest/numbers/stock", json=stocked, headers=world.root.headers)
    assert r.status_code == 200
    data = {**GOOD["ddi"], "number": "2070000000", "description": ""}
    assert post(client, "/ddis/new", data).status_code == 302
    assert description("44", "2070000000") == "Stocked"


def test_a_phone_users_forms_have_no_description(world):
    client = world.browser("root")
    for url in ("/users/new", f"{USER_URL[ACME]}/edit"):
        assert main_form(soup(client.get(url))).find(attrs={"name": "description"}) is None
