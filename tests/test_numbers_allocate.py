"""POST /rest/numbers/allocate (docs/numbers.md, "Allocate"): the company's reservations
first, then the lowest available numbers, in service in one transaction with extensions
counting up; too few is a 409 not_enough_numbers changing nothing; eight allocators at once
never take the same number."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from webapp.database import write_transaction
from webapp.extensions import db
from webapp.models import AuditEntry, Ddi, Number
from webapp.services import inventory

from .factories import ACME, GLOBEX
from .invariants import assert_history_consistent
from .test_races import in_parallel, post_json


def stock(app, numbers: list[str], state: str = "available", **columns) -> None:
    with app.app_context(), write_transaction() as session:
        for number in numbers:
            row = Number(dialcode="44", number=number, state=state, description="")
            for name, value in columns.items():
                setattr(row, name, value)
            session.add(row)


def allocate(world, scope: dict, values: dict | None = None, caller=None, **extra):
    body = {
        "scope": {"dialcode": "44", **scope},
        "values": values or {"company": ACME, "virt_exten": "2001"},
        **extra,
    }
    caller = caller or world.root
    return world.factory.client.post("/rest/numbers/allocate", json=body, headers=caller.headers)


def in_service() -> list[tuple[str, str, str]]:
    db.session.rollback()
    query = select(Ddi.number, Ddi.virt_exten, Ddi.company).order_by(Ddi.number)
    return [tuple(r) for r in db.session.execute(query)]  # type: ignore[misc]


def test_the_company_s_reservations_first_then_the_lowest_available(world, app):
    stock(app, ["2071230005", "2071230001", "2071230009", "2081230000"])
    with app.app_context():
        until = inventory.today() + timedelta(days=3)
    stock(app, ["2071230007"], state="reserved", held_for=ACME, held_until=until)
    stock(app, ["2071230002"], state="reserved", held_for=GLOBEX, held_until=until)
    r = allocate(world, {"prefix": "20712", "count": 3})
    assert r.status_code == 200, r.json
    assert r.json["numrows"] == 3
    got = [(v["number"], v["state"], v["company"], v["virt_exten"]) for v in r.json["values"]]
    assert got == [  # in number order, extensions counting up in it
        ("2071230001", "in_service", ACME, "2001"),
        ("2071230005", "in_service", ACME, "2002"),
        ("2071230007", "in_service", ACME, "2003"),
    ]
    assert set(r.json["values"][0]) == {
        "dialcode",
        "number",
        "state",
        "company",
        "virt_exten",
        "description",
        "reserved_until",
        "aging_until",
        "previous_company",
    }
    assert in_service() == [
        ("2071230001", "2001", ACME),
        ("2071230005", "2002", ACME),
        ("2071230007", "2003", ACME),
    ]
    entries = db.session.scalars(select(AuditEntry).where(AuditEntry.action == "ddi.create"))
    assert {e.detail for e in entries} == {"allocate"}
    events = world.factory.client.post("/rest/events/read", json={}, headers=world.root.headers)
    assert [e["type"] for e in events.json["values"]] == ["ddi.created"] * 3
    assert_history_consistent()


def test_a_hold_past_its_last_day_is_stock_and_extensions_keep_their_width(world, app):
    with app.app_context():
        yesterday = inventory.today() - timedelta(days=1)
    stock(app, ["300"], state="aging", previous_company=GLOBEX, held_until=yesterday)
    stock(app, ["301"])
    r = allocate(world, {"count": 2}, {"company": ACME, "virt_exten": "0099"})
    assert r.status_code == 200, r.json
    assert in_service() == [("300", "0099", ACME), ("301", "0100", ACME)]
    assert_history_consistent()


def test_too_few_is_a_409_saying_how_many_and_nothing_changes(world, app):
    stock(app, ["2071230001", "2071230002"])
    with app.app_context():
        until = inventory.today() + timedelta(days=3)
    stock(app, ["2071230003"], state="aging", previous_company=GLOBEX, held_until=until)
    r = allocate(world, {"prefix": "2071", "count": 3})
    assert r.status_code == 409
    assert r.json["error"]["code"] == "not_enough_numbers"
    assert r.json["error"]["fields"] == {"count": "2 available"}
    assert in_service() == []
    assert {n.state for n in db.session.scalars(select(Number))} == {"available", "aging"}
    # A System-Admin's override takes the held one too, and says why.
    r = allocate(world, {"prefix": "2071", "count": 3}, force=True, reason="customer asked")
    assert r.status_code == 200, r.json
    assert [v["number"] for v in r.json["values"]] == ["2071230001", "2071230002", "2071230003"]
    entries = select(AuditEntry).where(AuditEntry.action == "ddi.create")
    details = {e.detail for e in db.session.scalars(entries)}
    assert details == {"force: customer asked"}
    assert_history_consistent()


def body(scope: dict, values: dict | None = None, **extra) -> dict:
    values = {"company": ACME, "virt_exten": "1"} if values is None else values
    return {"scope": {"dialcode": "44", **scope}, "values": values, **extra}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scope": {"dialcode": "44", "count": 1}}, "values"),
        (body({}), "scope.count"),
        (body({"count": 0}), "scope.count"),
        (body({"count": 10001}), "scope.count"),
        (body({"count": 1, "prefix": "2x"}), "scope.prefix"),
        (body({"count": 1, "number": "1"}), "scope.number"),
        (body({"count": 1}, {"company": "nope", "virt_exten": "1"}), "company"),
        (body({"count": 1}, force=True), "reason"),
        (body({"count": 2}, {"company": ACME, "virt_exten": "9999999999"}), "virt_exten"),
    ],
)
def test_bad_bodies_are_400s_naming_the_field(world, app, body, field):
    stock(app, ["1", "2"])
    r = world.factory.client.post("/rest/numbers/allocate", json=body, headers=world.root.headers)
    assert r.status_code == 400, r.json
    assert field in r.json["error"]["fields"], r.json
    assert in_service() == []


def test_only_a_system_admin_allocates(world, app):
    stock(app, ["1"])
    r = allocate(world, {"count": 1}, caller=world.caller("cadmin"))
    assert r.status_code == 403
    r = world.factory.client.post("/rest/numbers/allocate", json={})
    assert r.status_code == 401
    assert in_service() == []


def test_eight_allocators_at_once_take_distinct_numbers(live_server, factory, app):
    companies = [f"co{i}" for i in range(8)]
    for company in companies:
        factory.company(company)
    root = factory.account("root", system_admin=True)
    stock(app, [f"2071230{i:03d}" for i in range(40)])

    def call(company: str):
        body = {
            "scope": {"dialcode": "44", "prefix": "2071230", "count": 5},
            "values": {"company": company, "virt_exten": "100"},
        }
        return lambda: post_json(live_server, root.token, "/rest/numbers/allocate", body)

    answers = in_parallel([call(c) for c in companies])
    assert [status for status, _ in answers] == [200] * 8, answers
    taken = [v["number"] for _, body in answers for v in body["values"]]
    assert len(taken) == len(set(taken)) == 40
    by_company = {body["values"][0]["company"] for _, body in answers}
    assert by_company == set(companies)
    assert len(in_service()) == 40
    assert_history_consistent()
