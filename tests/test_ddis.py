"""Number blocks (services/records/ddis.py), by the service and on /ddis/new
(docs/pages.md#number-blocks): a first number and a count, extensions incremented or one for
all; nothing created if any number is taken."""

from __future__ import annotations

import html

import pytest
from sqlalchemy import func, select

from webapp.access import Principal
from webapp.errors import Conflict, Forbidden, Invalid
from webapp.extensions import db
from webapp.models import AuditEntry, Ddi
from webapp.services.records import ddis

from .factories import ACME, snapshot
from .invariants import assert_history_consistent

ROOT = Principal.cli("root-cli")


def numbers(dialcode: str = "44") -> list[tuple[str, str, str]]:
    db.session.rollback()
    return [
        tuple(r)
        for r in db.session.execute(
            select(Ddi.number, Ddi.virt_exten, Ddi.company)
            .where(Ddi.dialcode == dialcode)
            .order_by(Ddi.number)
        )
    ]


def values(number: str = "2070000100", exten: str = "100") -> dict[str, str]:
    return {"dialcode": "44", "number": number, "virt_exten": exten, "company": ACME}


def test_a_block_with_incremented_extensions(world):
    block = ddis.create_block(ROOT, values(), 5, same_extension=False)
    assert (block.count, block.first["number"], block.last["number"]) == (
        5,
        "2070000100",
        "2070000104",
    )
    assert numbers() == [(f"207000010{i}", f"10{i}", ACME) for i in range(5)]
    assert_history_consistent()
    assert (
        db.session.scalar(
            select(func.count()).select_from(AuditEntry).where(AuditEntry.action == "ddi.create")
        )
        == 5
    )


def test_a_block_with_one_extension_for_all_and_leading_zeros_kept(world):
    ddis.create_block(ROOT, values("0099", "7"), 3, same_extension=True)
    assert numbers() == [("0099", "7", ACME), ("0100", "7", ACME), ("0101", "7", ACME)]


def test_ten_thousand_numbers_in_one_block(world):
    block = ddis.create_block(ROOT, values("2070000000", "1"), 10_000, same_extension=False)
    assert block.last == {**values("2070009999", "10000")}
    assert len(numbers()) == 10_000
    with pytest.raises(Invalid):
        ddis.create_block(ROOT, values("3070000000"), 10_001, same_extension=False)


def test_nothing_is_created_if_any_number_is_taken(world, factory):
    factory.ddi("44", "2070000103", ACME, "1")
    factory.ddi("44", "2070000104", ACME, "1")
    before = snapshot()
    with pytest.raises(Conflict) as taken:
        ddis.create_block(ROOT, values(), 10, same_extension=False)
    assert "2 of these numbers are taken already (the first: +44 2070000103)" in taken.value.message
    assert snapshot() == before


@pytest.mark.parametrize(
    ("first", "exten", "count", "field"),
    [
        ("998", "1", 3, "number"),  # past 999
        ("100", "9999999999", 2, "virt_exten"),  # past 10 digits
        ("100", "1", 0, "count"),
    ],
)
def test_a_block_that_does_not_fit_is_refused(world, first, exten, count, field):
    before = snapshot()
    with pytest.raises(Invalid) as refused:
        ddis.create_block(ROOT, values(first, exten), count, same_extension=False)
    assert field in refused.value.fields
    assert snapshot() == before


def test_only_a_system_admin_creates_blocks(world):
    cadmin = Principal(username="cadmin", via="ui", admin_of=frozenset({ACME}))
    with pytest.raises(Forbidden):
        ddis.create_block(cadmin, values(), 3, same_extension=False)


# --- the form ---------------------------------------------------------------------------------


def post_new(client, **fields: str):
    data = {
        "csrf_token": client.csrf,
        **values(),
        "count": "1",
        "extensions": "increment",
        **fields,
    }
    return client.post("/ddis/new", data=data)


def test_the_form_creates_a_block(world):
    client = world.browser("root")
    form = client.get("/ddis/new").get_data(as_text=True)
    assert "How many" in form and "count up by one from the first" in form
    done = post_new(client, count="250", extensions="same")
    assert done.status_code == 302
    assert len(numbers()) == 250 and {e for _, e, _ in numbers()} == {"100"}
    page = client.get(done.headers["Location"]).get_data(as_text=True)
    assert "Created 250 DDIs, +44 2070000100 to +44 2070000349." in html.unescape(page)


def test_the_form_creates_one_number_by_default(world):
    client = world.browser("root")
    assert post_new(client, count="").status_code == 302
    assert numbers() == [("2070000100", "100", ACME)]


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"count": "lots"}, "must be a whole number from 1 to 10,000"),
        ({"count": "20000"}, "How many"),
        ({"number": "999", "count": "5"}, "the block would run past 999"),
    ],
)
def test_the_form_shows_why_a_block_is_refused(world, fields, words):
    client = world.browser("root")
    answer = post_new(client, **fields)
    assert answer.status_code == 400
    assert words in html.unescape(answer.get_data(as_text=True))
    assert numbers() == []


def test_the_form_names_a_taken_number(world, factory):
    factory.ddi("44", "2070000101", ACME, "1")
    answer = post_new(world.browser("root"), count="3")
    assert answer.status_code == 400
    assert "+44 2070000101 is taken" in answer.get_data(as_text=True)
    assert len(numbers()) == 1


def test_a_company_admin_does_not_get_the_create_form(world):
    assert world.browser("cadmin").get("/ddis/new").status_code == 403
