"""A number's description through the API's /rest/ops/ (docs/numbers.md, "Descriptions"):
`values.description` on create, update and link of DDIs, checked as every field is, written
on the number's inventory row through the change path (audited, evented, no history moved),
its words kept for the number search, and never in a /rest/ops/read/ answer."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from webapp.extensions import db
from webapp.models import AuditEntry, Number, NumberWord

from .factories import ACME, GLOBEX, INITECH, snapshot
from .invariants import assert_history_consistent, assert_words_consistent

KEY = {"dialcode": "44", "number": "2071230000"}
DDI = {**KEY, "virt_exten": "100", "company": ACME}


def description(number: str = "2071230000") -> str | None:
    db.session.rollback()
    return db.session.scalar(
        select(Number.description).where(Number.dialcode == "44", Number.number == number)
    )


def words(number: str = "2071230000") -> list[str]:
    db.session.rollback()
    query = select(NumberWord.word).where(NumberWord.dialcode == "44", NumberWord.number == number)
    return sorted(db.session.scalars(query))


def entries(action: str) -> list[AuditEntry]:
    db.session.rollback()
    query = select(AuditEntry).where(AuditEntry.action == action).order_by(AuditEntry.id)
    return list(db.session.scalars(query))


def ops(world, op: str, body: dict[str, Any], caller=None):
    return world.factory.api(caller or world.root, op, {"type": "ddi", **body})


def numbers(world, call: str, body: dict[str, Any]):
    return world.client.post(f"/rest/numbers/{call}", json=body, headers=world.root.headers)


def ok(response, numrows: int = 1) -> None:
    assert response.status_code == 200, response.json
    assert response.json == {"result": "success", "numrows": numrows}


def refused(response, status: int, fields: dict[str, str] | None = None) -> None:
    assert response.status_code == status, response.json
    assert response.json["result"] == "error"
    if fields is not None:
        assert response.json["error"]["fields"] == fields


# --- create ------------------------------------------------------------------------------


def test_a_create_with_a_description_keeps_it_and_its_words(world):
    ok(ops(world, "create", {"values": {**DDI, "description": "Sales floor, London"}}))
    assert description() == "Sales floor, London"
    assert words() == ["floor", "london", "sales"]
    (entry,) = entries("ddi.create")
    assert entry.after == {**DDI, "description": "Sales floor, London"}
    read = numbers(world, "read", {"scope": {"dialcode": "44"}}).json["values"]
    assert read[0]["description"] == "Sales floor, London"
    assert_history_consistent()


def test_a_batch_create_gives_each_row_its_own_description(world):
    rows = [
        {**DDI, "description": "Reception"},
        {**DDI, "number": "2071230001"},
        {**DDI, "number": "2071230002", "description": ""},
    ]
    ok(ops(world, "create", {"values": rows}), 3)
    assert [description(n) for n in ("2071230000", "2071230001", "2071230002")] == [
        "Reception",
        "",
        "",
    ]
    assert words() == ["reception"] and words("2071230001") == []


def test_a_stocked_number_keeps_its_description_unless_the_create_gives_one(world):
    stocked = [
        {**KEY, "description": "Old board line"},
        {"dialcode": "44", "number": "2071230001", "description": "Spare"},
    ]
    ok(numbers(world, "stock", {"values": stocked}), 2)
    assert words() == ["board", "line", "old"]
    ok(ops(world, "create", {"values": DDI}))  # none given: the stocked one stays
    assert description() == "Old board line"
    ok(ops(world, "create", {"values": {**DDI, "number": "2071230001", "description": "Desk"}}))
    assert description("2071230001") == "Desk" and words("2071230001") == ["desk"]
    assert_words_consistent()


# --- the field's checks -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("x" * 201, "must be at most 200 characters"),
        (12, "must be a string"),
        (None, "must be a string"),
        (["a"], "must be a string"),
        ("bell\x07", "must not contain control characters but tabs and line breaks"),
        ("nul\x00", "must not contain control characters but tabs and line breaks"),
    ],
)
def test_a_bad_description_is_a_400_naming_it_and_changes_nothing(world, given, why):
    world.factory.ddi("44", "2071230000", ACME)
    before = snapshot()
    r = ops(world, "create", {"values": {**DDI, "number": "1", "description": given}})
    refused(r, 400, {"description": why})
    r = ops(world, "update", {"scope": {"company": ACME}, "values": {"description": given}})
    refused(r, 400, {"description": why})
    values = {"virt_exten": "1", "company": ACME, "description": given}
    r = ops(world, "link", {"scope": KEY, "values": values})
    refused(r, 400, {"description": why})
    batch = [DDI | {"number": "2"}, DDI | {"number": "3", "description": given}]
    refused(ops(world, "create", {"values": batch}), 400, {"values[1].description": why})
    assert snapshot() == before and description() == ""


def test_200_characters_of_any_text_are_a_description(world):
    text = "Ünïcode ☎ — <b>&amp;</b>\t\n" + "x" * 174
    assert len(text) == 200
    ok(ops(world, "create", {"values": {**DDI, "description": text}}))
    assert description() == text


def test_phone_users_have_no_description(world):
    user = {"username": "ana", "virt_exten": "200", "company": ACME}
    r = world.factory.api(
        world.root, "create", {"type": "user", "values": {**user, "description": "x"}}
    )
    refused(r, 400, {"description": "unknown field"})
    world.factory.user("ana", ACME)
    r = world.factory.api(
        world.root,
        "update",
        {"type": "user", "scope": {"company": ACME}, "values": {"description": "x"}},
    )
    refused(r, 400, {"description": "unknown field"})


# --- update ------------------------------------------------------------------------------


def test_a_description_only_update_is_audited_and_evented_and_moves_no_history(world):
    world.factory.ddi("44", "2071230000", ACME)
    before = snapshot()
    scope = {"scope": {**KEY, "company": ACME}}
    ok(ops(world, "update", {**scope, "values": {"description": "Fax, 2nd floor"}}))
    after = snapshot()
    # The billing history is untouched: no interval closed or opened.
    assert (after["history"], after["open_history"]) == (before["history"], before["open_history"])
    assert after["ddis"] == before["ddis"]
    assert after["audit"] == before["audit"] + 1 and after["events"] == before["events"] + 1
    (entry,) = entries("ddi.update")
    assert entry.before == {**DDI, "description": ""}
    assert entry.after == {**DDI, "description": "Fax, 2nd floor"}
    assert words() == ["2nd", "fax", "floor"]
    event = world.client.post(
        "/rest/events/read", json={"scope": {"type": ["ddi.updated"]}}, headers=world.root.headers
    ).json["values"]
    assert [e["key"] for e in event] == [KEY]
    # The same description again changes nothing: no row, no entry.
    ok(ops(world, "update", {**scope, "values": {"description": "Fax, 2nd floor"}}), 0)
    assert len(entries("ddi.update")) == 1
    # A new one replaces the words; '' clears them.
    ok(ops(world, "update", {**scope, "values": {"description": "Lobby"}}))
    assert words() == ["lobby"]
    ok(ops(world, "update", {**scope, "values": {"description": ""}}))
    assert words() == [] and description() == ""
    assert_history_consistent()


def test_an_update_of_a_company_and_a_description_does_both(world):
    world.factory.ddi("44", "2071230000", ACME)
    values = {"company": GLOBEX, "description": "Moved"}
    ok(ops(world, "update", {"scope": {"company": ACME}, "values": values}))
    (entry,) = entries("ddi.update")
    assert entry.before == {**DDI, "description": ""}
    assert entry.after == {**DDI, "company": GLOBEX, "description": "Moved"}
    assert description() == "Moved"
    assert_history_consistent()


def test_an_update_without_a_description_leaves_it_and_its_entry_as_before(world):
    ok(ops(world, "create", {"values": {**DDI, "description": "Keep me"}}))
    ok(ops(world, "update", {"scope": {"company": ACME}, "values": {"virt_exten": "101"}}))
    assert description() == "Keep me"
    (entry,) = entries("ddi.update")
    assert "description" not in entry.before and "description" not in entry.after


def test_a_company_admin_describes_its_own_numbers_only(world):
    world.factory.ddi("44", "2071230000", ACME)
    world.factory.ddi("44", "2071230001", GLOBEX)
    values = {"values": {"description": "Ours"}}
    ok(ops(world, "update", {"scope": {"company": ACME}, **values}, world.cadmin))
    assert description() == "Ours"
    before = snapshot()
    # Another company's: forbidden as any update of it, and its link is the 404 of a DDI
    # the caller cannot see.
    r = ops(world, "update", {"scope": {"company": GLOBEX}, **values}, world.cadmin)
    refused(r, 403)
    link = {"scope": {**KEY, "number": "2071230001"}}
    link["values"] = {"virt_exten": "1", "company": ACME, "description": "Mine now"}
    refused(ops(world, "link", link, world.cadmin), 404)
    assert snapshot() == before and description("2071230001") == ""


# --- link --------------------------------------------------------------------------------


def test_a_link_sets_the_description_and_audits_it(world):
    world.factory.ddi("44", "2071230000", ACME)
    values = {"virt_exten": "321", "company": ACME, "description": "Help desk"}
    ok(ops(world, "link", {"scope": KEY, "values": values}, world.cadmin))
    (entry,) = entries("ddi.link")
    assert entry.after == {**DDI, "virt_exten": "321", "description": "Help desk"}
    assert entry.before == {**DDI, "description": ""}
    assert words() == ["desk", "help"]


def test_a_company_admins_link_of_a_reserved_number_may_describe_it(world):
    ok(numbers(world, "stock", {"values": [{**KEY, "description": "Spare"}]}))
    reserve = {"scope": KEY, "values": {"company": ACME}}
    assert numbers(world, "reserve", reserve).status_code == 200
    values = {"virt_exten": "321", "company": ACME, "description": "Night line"}
    ok(ops(world, "link", {"scope": KEY, "values": values}, world.cadmin))
    assert description() == "Night line" and words() == ["line", "night"]
    (entry,) = entries("ddi.create")
    assert entry.after["description"] == "Night line"
    assert_history_consistent()


# --- read and retire ---------------------------------------------------------------------


def test_the_ops_read_keeps_exactly_its_four_fields(world):
    ok(ops(world, "create", {"values": {**DDI, "description": "Not in a read"}}))
    r = ops(world, "read", {})
    assert r.json["values"] == [DDI]
    r = ops(world, "read", {"scope": {"company": ACME}}, world.cadmin)
    assert r.json["values"] == [DDI]


def test_a_retired_number_leaves_no_words(world):
    stocked = [{**KEY, "description": "Going away"}, {**KEY, "number": "1", "description": "Stay"}]
    ok(numbers(world, "stock", {"values": stocked}), 2)
    ok(numbers(world, "retire", {"scope": KEY}))
    assert words() == [] and words("1") == ["stay"]
    assert_words_consistent()


def test_a_deleted_ddi_keeps_its_description_in_the_inventory(world):
    ok(ops(world, "create", {"values": {**DDI, "description": "Back to stock"}}))
    ok(ops(world, "delete", {"scope": {"company": ACME}}))
    assert description() == "Back to stock" and words() == ["back", "stock", "to"]
    assert_history_consistent()


def test_inventory_checks_hold_with_three_companies(world):
    for i, company in enumerate((ACME, GLOBEX, INITECH)):
        values = {**DDI, "number": str(i), "company": company, "description": f"Line {i}"}
        ok(ops(world, "create", {"values": values}))
    assert_history_consistent()


def test_a_description_that_is_not_unicode_is_a_400(world):
    body = '{"type": "ddi", "values": {"dialcode": "44", "number": "1", "virt_exten": "1", '
    body += '"company": "acme", "description": "a\\ud800"}}'
    r = world.client.post(
        "/rest/ops/create/",
        data=body,
        headers={**world.root.headers, "Content-Type": "application/json"},
    )
    refused(r, 400, {"description": "must be valid Unicode"})


def test_the_openapi_document_states_the_description_where_it_is_taken_only(world):
    schemas = world.client.get("/rest/openapi.json").json["components"]["schemas"]
    described = {"$ref": "#/components/schemas/NumberDescription"}
    for name in ("Ddi", "DdiChanges", "DdiLink"):
        assert schemas[name]["properties"]["description"] == described, name
        assert "description" not in schemas[name].get("required", []), name
    assert schemas["NumberDescription"]["maxLength"] == 200
    # A read answers a DDI's four fields, exactly.
    answer = schemas["DdiRecord"]
    assert sorted(answer["properties"]) == sorted(answer["required"])
    assert sorted(answer["required"]) == ["company", "dialcode", "number", "virt_exten"]
    items = schemas["ReadResult"]["properties"]["values"]["items"]["oneOf"]
    assert {"$ref": "#/components/schemas/DdiRecord"} in items
    for name in ("PhoneUser", "RecordChanges"):
        assert "description" not in schemas[name]["properties"], name
