"""Reserve, release and retire (docs/numbers.md): POST /rest/numbers/{reserve,release,retire}
and their services (webapp/services/numbers/reserving.py, retiring.py, picking.py): the
answers, the refusals that change nothing, the audit entries and change events, the creates
that meet a reservation, and reservers racing for one prefix on PostgreSQL."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import date, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from webapp.database import write_transaction
from webapp.extensions import db
from webapp.models import AuditEntry, Number
from webapp.services import inventory

from .factories import ACME, GLOBEX, snapshot
from .invariants import assert_history_consistent
from .test_races import in_parallel, post_json

KEY = {"dialcode": "44", "number": "2071230000"}


@pytest.fixture
def on(app) -> date:
    with app.app_context():
        return inventory.today()


def stock(*numbers: str, dialcode: str = "44", **columns: Any) -> None:
    """Inventory rows set up directly (the stock call is another's): available by default."""
    with write_transaction() as session:
        for number in numbers:
            session.add(
                Number(
                    dialcode=dialcode,
                    number=number,
                    state=columns.get("state", "available"),
                    held_for=columns.get("held_for"),
                    previous_company=columns.get("previous_company"),
                    held_until=columns.get("held_until"),
                    description=columns.get("description", ""),
                )
            )
        # As every writer of a description keeps its words (the invariants check them).
        described = {(dialcode, n): columns.get("description", "") for n in numbers}
        inventory.add_words(session, described)


def row(number: str = "2071230000", dialcode: str = "44") -> Number | None:
    db.session.rollback()
    return db.session.scalars(
        select(Number).where(Number.dialcode == dialcode, Number.number == number)
    ).one_or_none()


def post(world, call: str, body: Any, caller=None):
    return world.factory.client.post(
        f"/rest/numbers/{call}", json=body, headers=(caller or world.root).headers
    )


def reserve(world, scope: dict, values: dict | None = None, caller=None, **extra: Any):
    body = {"scope": scope, "values": {"company": ACME, **(values or {})}, **extra}
    return post(world, "reserve", body, caller)


def audit(action: str) -> list[AuditEntry]:
    db.session.rollback()
    return list(
        db.session.scalars(
            select(AuditEntry).where(AuditEntry.action == action).order_by(AuditEntry.id)
        )
    )


def events(world, caller=None, types: tuple[str, ...] = ()) -> list[dict]:
    body: dict[str, Any] = {"limit": 1000}
    if types:
        body["scope"] = {"type": list(types)}
    r = world.factory.client.post(
        "/rest/events/read", json=body, headers=(caller or world.root).headers
    )
    assert r.status_code == 200, r.json
    return r.json["values"]


def answer(number: str, company: str | None, until: date, **fields: Any) -> dict:
    return {
        "dialcode": "44",
        "number": number,
        "state": "reserved",
        "company": company,
        "virt_exten": None,
        "description": "",
        "reserved_until": until.isoformat(),
        "aging_until": None,
        "previous_company": None,
        **fields,
    }


def refused(response, status: int, code: str, fields: dict | None = None) -> None:
    assert response.status_code == status, response.json
    error = response.json["error"]
    assert error["code"] == code, error
    if fields is not None:
        assert error["fields"] == fields, error
    assert error["message"]


# --- reserve -----------------------------------------------------------------------------


def test_reserve_one_number_with_a_default_of_30_days(world, on):
    stock("2071230000", description="main line")
    r = reserve(world, KEY)
    until = on + timedelta(days=30)
    assert r.status_code == 200, r.json
    assert r.json == {
        "result": "success",
        "values": [answer("2071230000", ACME, until, description="main line")],
        "numrows": 1,
    }
    n = row()
    assert n is not None
    assert (n.state, n.held_for, n.held_until) == ("reserved", ACME, until)
    assert n.since is not None
    [entry] = audit("number.reserve")
    assert (entry.target, entry.company, entry.actor, entry.detail) == (
        "ddi 44:2071230000",
        ACME,
        "root",
        None,
    )
    assert entry.before == {**KEY, "state": "available", "company": None}
    assert entry.after == {**KEY, "state": "reserved", "company": ACME, "until": str(until)}
    [event] = events(world, types=("number.reserved",))
    assert (event["company"], event["key"], event["actor"]) == (ACME, KEY, "root")
    assert event["before"] == {**KEY, "state": "available", "company": None}
    assert event["after"] == {**KEY, "state": "reserved", "company": ACME}
    assert_history_consistent()


def test_reserve_by_prefix_takes_the_lowest_available_numbers_in_order(world, on):
    stock("2071230005", "2071230001", "2071230003", "2071240000", "2071230002")
    stock("2071230000", state="reserved", held_for=GLOBEX, held_until=on)
    stock("2071230004", state="aging", previous_company=GLOBEX, held_until=on)
    # Holds past their last day are available: both ended yesterday.
    yesterday = on - timedelta(days=1)
    stock("2071230006", state="reserved", held_for=GLOBEX, held_until=yesterday)
    stock("2071230007", state="aging", previous_company=GLOBEX, held_until=yesterday)
    stock("2071230000", dialcode="45")
    until = on + timedelta(days=3)
    r = reserve(
        world,
        {"dialcode": "44", "prefix": "207123", "count": 5},
        {"until": until.isoformat()},
    )
    assert r.status_code == 200, r.json
    got = [v["number"] for v in r.json["values"]]
    assert got == ["2071230001", "2071230002", "2071230003", "2071230005", "2071230006"]
    assert r.json["numrows"] == 5
    assert all(v == answer(v["number"], ACME, until) for v in r.json["values"])
    assert {
        n.number for n in db.session.scalars(select(Number).where(Number.held_for == ACME))
    } == set(got)
    assert [e.target for e in audit("number.reserve")] == [f"ddi 44:{n}" for n in got]
    expired = audit("number.reserve")[-1]
    assert expired.before == {
        "dialcode": "44",
        "number": "2071230006",
        "state": "available",
        "company": None,
    }
    assert len(events(world, types=("number.reserved",))) == 5
    assert_history_consistent()


def test_reserve_by_prefix_with_too_few_numbers_is_a_409_naming_how_many(world, on):
    stock("2071230001", "2071230002")
    stock("2071230003", state="reserved", held_for=GLOBEX, held_until=on)
    before = snapshot()
    r = reserve(world, {"dialcode": "44", "prefix": "207123", "count": 3})
    refused(r, 409, "not_enough_numbers", {"count": "2 available"})
    assert "Only 2 numbers" in r.json["error"]["message"]
    r = reserve(world, {"dialcode": "44", "prefix": "999", "count": 1})
    refused(r, 409, "not_enough_numbers", {"count": "0 available"})
    assert snapshot() == before
    assert audit("number.reserve") == [] and events(world) == []


def test_reserve_again_for_the_same_company_sets_the_new_until(world, on):
    stock("2071230000", state="reserved", held_for=ACME, held_until=on + timedelta(days=2))
    until = on + timedelta(days=365)
    r = reserve(world, KEY, {"until": until.isoformat()})
    assert r.status_code == 200, r.json
    assert r.json["values"] == [answer("2071230000", ACME, until)]
    assert row().held_until == until  # type: ignore[union-attr]
    [entry] = audit("number.reserve")
    assert entry.before == {
        **KEY,
        "state": "reserved",
        "company": ACME,
        "until": str(on + timedelta(days=2)),
    }
    assert_history_consistent()


def test_an_aging_number_left_by_the_same_company_is_reserved_for_it(world, on):
    stock("2071230000", state="aging", previous_company=ACME, held_until=on)
    r = reserve(world, KEY)
    assert r.status_code == 200, r.json
    n = row()
    assert n is not None and (n.state, n.held_for, n.previous_company) == ("reserved", ACME, ACME)
    assert r.json["values"][0]["previous_company"] == ACME  # a System-Admin's answer


@pytest.mark.parametrize(
    ("columns", "code", "why"),
    [
        ({"state": "reserved", "held_for": GLOBEX}, "number_reserved", "reserved until"),
        ({"state": "aging", "previous_company": GLOBEX}, "number_aging", "aging until"),
    ],
)
def test_a_number_held_for_another_company_is_a_409_unless_forced_with_a_reason(
    world, on, columns, code, why
):
    held = on + timedelta(days=4)
    stock("2071230000", held_until=held, **columns)
    before = snapshot()
    refused(reserve(world, KEY), 409, code, {"number": f"{why} {held}"})
    assert snapshot() == before
    r = reserve(world, KEY, force=True, reason="customer moved the contract")
    assert r.status_code == 200, r.json
    n = row()
    assert n is not None and (n.state, n.held_for) == ("reserved", ACME)
    [entry] = audit("number.reserve")
    assert entry.detail == "customer moved the contract"
    assert entry.before["state"] == columns["state"]
    assert entry.before["company"] == columns.get("held_for")
    [event] = events(world, types=("number.reserved",))
    assert event["before"] == {**KEY, "state": columns["state"], "company": columns.get("held_for")}
    assert event["company"] == ACME
    assert event["after"] == {**KEY, "state": "reserved", "company": ACME}
    assert_history_consistent()


def test_reserve_refusals_change_nothing(world, on):
    stock("2071230000")
    world.factory.ddi("44", "2071239999", ACME)
    before = snapshot()
    refused(
        reserve(world, {"dialcode": "44", "number": "2071239999"}),
        409,
        "conflict",
        {"number": "in service"},
    )
    refused(
        reserve(world, {"dialcode": "44", "number": "2071238888"}),
        404,
        "not_found",
        {"number": "not in the inventory"},
    )
    refused(
        reserve(world, KEY, {"company": "nosuch"}),
        400,
        "bad_request",
        {"company": "unknown company"},
    )
    past, far = on - timedelta(days=1), on + timedelta(days=366)
    refused(
        reserve(world, KEY, {"until": past.isoformat()}),
        400,
        "bad_request",
        {"until": "before today"},
    )
    refused(
        reserve(world, KEY, {"until": far.isoformat()}),
        400,
        "bad_request",
        {"until": "at most 365 days ahead"},
    )
    for bad, fields in [
        ({"until": "2027-02-30"}, {"until": "must be a date written YYYY-MM-DD"}),
        ({"until": "20270101"}, {"until": "must be a date written YYYY-MM-DD"}),
        ({"until": 20270101}, {"until": "must be a string"}),
    ]:
        refused(reserve(world, KEY, bad), 400, "bad_request", fields)
    for scope, fields in [
        ({"dialcode": "44", "prefix": "207"}, {"count": "required with prefix"}),
        ({**KEY, "count": 1}, {"count": "only with prefix"}),
        ({**KEY, "prefix": "207"}, {"prefix": "not with number"}),
        ({"dialcode": "44"}, {"number": "required (or prefix)"}),
        ({"dialcode": "44", "prefix": "207", "count": 0}, {"count": "must be 1 to 10,000"}),
        ({"dialcode": "44", "prefix": "207", "count": 10_001}, {"count": "must be 1 to 10,000"}),
        ({"dialcode": "44", "prefix": "207", "count": "5"}, {"count": "must be 1 to 10,000"}),
        ({"dialcode": "44", "prefix": "2x", "count": 1}, {"prefix": "must be 1 to 15 digits"}),
        ({"dialcode": "44", "number": 2071230000}, {"number": "must be a string"}),
        ({"dialcode": "4" * 7, "number": "1" * 11}, None),
        ({**KEY, "extra": "1"}, {"extra": "unknown field"}),
    ]:
        refused(reserve(world, scope), 400, "bad_request", fields)
    refused(reserve(world, KEY, force=True), 400, "bad_request", {"reason": "required"})
    refused(
        reserve(world, KEY, reason="why"),
        400,
        "bad_request",
        {"force": "required with reason"},
    )
    refused(
        reserve(world, KEY, force=False, reason="why"),
        400,
        "bad_request",
        {"force": "required with reason"},
    )
    refused(
        reserve(world, KEY, force=True, reason=" "),
        400,
        "bad_request",
        {"reason": "required"},
    )
    refused(
        reserve(world, KEY, force=True, reason="x" * 501),
        400,
        "bad_request",
        {"reason": "must be at most 500 characters"},
    )
    refused(
        reserve(world, KEY, force="yes", reason="x"),
        400,
        "bad_request",
        {"force": "must be true or false"},
    )
    refused(post(world, "reserve", {"scope": KEY}), 400, "bad_request", {"values": "required"})
    refused(post(world, "reserve", [KEY]), 400, "bad_request")
    assert snapshot() == before


@pytest.mark.parametrize("call", ["reserve", "release", "retire"])
@pytest.mark.parametrize("role", ["cadmin", "summary", "reporter", "nobody"])
def test_only_a_system_admin_may(world, call, role):
    stock("2071230000")
    before = snapshot()
    body = {"scope": KEY, "values": {"company": ACME}} if call == "reserve" else {"scope": KEY}
    refused(post(world, call, body, world.caller(role)), 403, "forbidden")
    r = world.factory.client.post(f"/rest/numbers/{call}", json=body)
    assert r.status_code == 401
    assert snapshot() == before


def test_a_reserved_number_goes_in_service_only_for_its_company(world, on):
    stock("2071230000")
    assert reserve(world, KEY).status_code == 200
    ddi = {**KEY, "virt_exten": "100"}
    r = world.factory.api(
        world.root, "create", {"type": "ddi", "values": {**ddi, "company": GLOBEX}}
    )
    refused(r, 409, "number_reserved", {"number": f"reserved until {on + timedelta(days=30)}"})
    r = world.factory.api(world.root, "create", {"type": "ddi", "values": {**ddi, "company": ACME}})
    assert r.status_code == 200, r.json
    n = row()
    assert n is not None and (n.state, n.held_for, n.held_until) == ("in_service", None, None)
    assert_history_consistent()


def test_a_company_admin_sees_its_own_reservations_in_its_feed_only(world):
    world.add("globex_admin", "cadmin_reporter")  # administers globex
    stock("2071230000", "2071230001")
    assert reserve(world, KEY).status_code == 200
    assert reserve(world, {**KEY, "number": "2071230001"}, {"company": GLOBEX}).status_code == 200
    mine = events(world, world.cadmin)
    assert [(e["type"], e["key"]["number"], e["company"]) for e in mine] == [
        ("number.reserved", "2071230000", ACME)
    ]
    assert mine[0]["after"] == {**KEY, "state": "reserved", "company": ACME}
    theirs = events(world, world.globex_admin)
    assert [(e["type"], e["key"]["number"]) for e in theirs] == [("number.reserved", "2071230001")]


# --- release -----------------------------------------------------------------------------


def test_release_one_number_gives_it_back_to_the_stock(world, on):
    stock("2071230000")
    reserve(world, KEY)
    r = post(world, "release", {"scope": KEY})
    assert r.json == {"result": "success", "numrows": 1}
    n = row()
    assert n is not None and (n.state, n.held_for, n.held_until) == ("available", None, None)
    [entry] = audit("number.release")
    assert (entry.target, entry.company) == ("ddi 44:2071230000", ACME)
    assert entry.before == {
        **KEY,
        "state": "reserved",
        "company": ACME,
        "until": str(on + timedelta(days=30)),
    }
    assert entry.after == {**KEY, "state": "available", "company": None}
    [event] = events(world, types=("number.released",))
    assert event["before"] == {**KEY, "state": "reserved", "company": ACME}
    assert event["after"] == {**KEY, "state": "available", "company": None}
    assert [e["type"] for e in events(world, world.cadmin)] == [
        "number.reserved",
        "number.released",
    ]
    # Anyone may have it again.
    r = world.factory.api(
        world.root,
        "create",
        {"type": "ddi", "values": {**KEY, "virt_exten": "1", "company": GLOBEX}},
    )
    assert r.status_code == 200
    assert_history_consistent()


def test_release_of_a_number_not_reserved_is_a_409_and_unknown_a_404(world, on):
    stock("2071230000")
    stock("2071230001", state="reserved", held_for=ACME, held_until=on - timedelta(days=1))
    stock("2071230002", state="aging", previous_company=ACME, held_until=on)
    world.factory.ddi("44", "2071230003", ACME)
    before = snapshot()
    cases = [
        ("2071230000", {"number": "available"}),
        ("2071230001", {"number": f"reservation ended on {on - timedelta(days=1)}"}),
        ("2071230002", {"number": "aging"}),
        ("2071230003", {"number": "in service"}),
    ]
    for number, fields in cases:
        r = post(world, "release", {"scope": {**KEY, "number": number}})
        refused(r, 409, "conflict", fields)
        assert "is not reserved" in r.json["error"]["message"]
    refused(post(world, "release", {"scope": {**KEY, "number": "1"}}), 404, "not_found")
    for body, fields in [
        ({"scope": {"dialcode": "44", "prefix": "2", "count": 1}}, {"count": "unknown field"}),
        ({"scope": KEY, "values": {"company": ACME}}, {"values": "unknown field"}),
        ({"scope": KEY, "force": True, "reason": "x"}, {"force": "unknown field"}),
        ({}, {"scope": "required"}),
    ]:
        refused(post(world, "release", body), 400, "bad_request", fields)
    assert snapshot() == before


def test_release_by_prefix_releases_every_reservation_in_it(world, on):
    stock("2071230000", "2071230001", "2071230002", "2071240000")
    reserve(world, {"dialcode": "44", "prefix": "20712", "count": 4})
    stock("2071230003", state="reserved", held_for=GLOBEX, held_until=on - timedelta(days=1))
    r = post(world, "release", {"scope": {"dialcode": "44", "prefix": "207123"}})
    assert r.json == {"result": "success", "numrows": 3}
    assert row("2071240000").state == "reserved"  # type: ignore[union-attr]
    assert [e.target for e in audit("number.release")] == [f"ddi 44:207123000{i}" for i in range(3)]
    r = post(world, "release", {"scope": {"dialcode": "44", "prefix": "207123"}})
    assert r.json == {"result": "success", "numrows": 0}
    assert len(events(world, types=("number.released",))) == 3
    assert_history_consistent()


# --- retire ------------------------------------------------------------------------------


def test_retire_removes_an_available_number_and_keeps_its_past(world):
    world.factory.ddi("44", "2071230000", ACME)
    world.factory.api(world.root, "delete", {"type": "ddi", "scope": {**KEY, "company": ACME}})
    r = post(world, "retire", {"scope": KEY})
    assert r.json == {"result": "success", "numrows": 1}
    assert row() is None
    [entry] = audit("number.retire")
    assert (entry.target, entry.company, entry.detail, entry.after) == (
        "ddi 44:2071230000",
        None,
        None,
        None,
    )
    assert entry.before == {**KEY, "state": "available", "company": None}
    assert [e.action for e in audit("ddi.create")] == ["ddi.create"]  # the past stays
    [event] = events(world, types=("number.retired",))
    assert event["before"] == {**KEY, "state": "available", "company": None}
    assert event["after"] is None
    assert events(world, world.cadmin, types=("number.retired",)) == []
    refused(post(world, "retire", {"scope": KEY}), 404, "not_found")
    assert_history_consistent()


def test_retire_refuses_numbers_in_service_reserved_or_aging_without_force(world, on):
    world.factory.ddi("44", "2071230000", ACME)
    stock("2071230001", state="reserved", held_for=ACME, held_until=on)
    stock("2071230002", state="aging", previous_company=ACME, held_until=on)
    before = snapshot()
    one = {"dialcode": "44"}
    refused(
        post(world, "retire", {"scope": {**one, "number": "2071230000"}}),
        409,
        "conflict",
        {"number": "in service"},
    )
    refused(
        post(world, "retire", {"scope": {**one, "number": "2071230001"}}),
        409,
        "conflict",
        {"number": f"reserved until {on}"},
    )
    refused(
        post(world, "retire", {"scope": {**one, "number": "2071230002"}}),
        409,
        "number_aging",
        {"number": f"aging until {on}"},
    )
    refused(post(world, "retire", {"scope": {**one, "prefix": "2071"}}), 409, "number_aging")
    refused(
        post(world, "retire", {"scope": {**one, "number": "2071230002"}, "force": True}),
        400,
        "bad_request",
        {"reason": "required"},
    )
    assert snapshot() == before
    r = post(
        world,
        "retire",
        {"scope": {**one, "number": "2071230002"}, "force": True, "reason": "ported away"},
    )
    assert r.json == {"result": "success", "numrows": 1}
    [entry] = audit("number.retire")
    assert (entry.detail, entry.before["state"]) == ("ported away", "aging")


def test_retire_by_prefix_takes_available_and_forced_aging_numbers_only(world, on):
    world.factory.ddi("44", "2071230000", ACME)
    stock("2071230001", state="reserved", held_for=ACME, held_until=on)
    stock("2071230002", state="aging", previous_company=ACME, held_until=on)
    stock("2071230003", "2071230004", "2071240000")
    stock("2071230005", state="reserved", held_for=ACME, held_until=on - timedelta(days=1))
    r = post(
        world,
        "retire",
        {"scope": {"dialcode": "44", "prefix": "207123"}, "force": True, "reason": "returned"},
    )
    assert r.json == {"result": "success", "numrows": 4}
    left = db.session.scalars(select(Number.number).order_by(Number.number)).all()
    assert left == ["2071230000", "2071230001", "2071240000"]
    entries = audit("number.retire")
    assert [(e.target[-4:], e.before["state"], e.detail) for e in entries] == [
        ("0002", "aging", "returned"),
        ("0003", "available", None),
        ("0004", "available", None),
        ("0005", "available", None),
    ]
    assert len(events(world, types=("number.retired",))) == 4
    r = post(world, "retire", {"scope": {"dialcode": "44", "prefix": "207123"}})
    assert r.json == {"result": "success", "numrows": 0}
    assert_history_consistent()


# --- races -------------------------------------------------------------------------------


@pytest.mark.slow
def test_reservers_racing_for_one_prefix_take_distinct_numbers(app, factory, live_server):
    if db.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL only: SQLite writers are serial")
    companies = [factory.company(f"c{i}") for i in range(8)]
    root = factory.account("root", system_admin=True)
    stock(*(f"20712{i:05d}" for i in range(40)))
    stock(*(f"20713{i:05d}" for i in range(5)))  # outside the prefix

    def call(company: str):
        body = {
            "scope": {"dialcode": "44", "prefix": "20712", "count": 5},
            "values": {"company": company},
        }
        return lambda: post_json(live_server, root.token, "/rest/numbers/reserve", body)

    results = in_parallel([call(c) for c in companies])
    assert [status for status, _ in results] == [200] * 8, results
    taken = [v["number"] for _, body in results for v in body["values"]]
    assert len(taken) == 40 and set(taken) == {f"20712{i:05d}" for i in range(40)}
    for company, (_, body) in zip(companies, results, strict=True):
        assert {v["company"] for v in body["values"]} == {company}
    db.session.rollback()
    held = db.session.execute(
        select(Number.number, Number.held_for).where(Number.state == "reserved")
    ).all()
    assert sorted(held) == sorted(
        (v["number"], v["company"]) for _, body in results for v in body["values"]
    )
    assert len(audit("number.reserve")) == 40
    assert_history_consistent()


@pytest.mark.slow
def test_a_reserver_passes_over_numbers_another_holds_instead_of_waiting(app, world, live_server):
    if db.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL only: SQLite writers are serial")
    stock(*(f"20712{i:05d}" for i in range(10)))
    body = {
        "scope": {"dialcode": "44", "prefix": "20712", "count": 5},
        "values": {"company": ACME},
    }
    with db.engine.connect() as holder:
        # Another picker in the middle of its transaction: the five lowest numbers locked.
        holder.execute(select(Number.id).order_by(Number.number).limit(5).with_for_update()).all()
        with ThreadPoolExecutor(1) as pool:
            reserving = pool.submit(
                post_json, live_server, world.root.token, "/rest/numbers/reserve", body
            )
            try:
                status, answer = reserving.result(timeout=30)
            finally:
                holder.rollback()
    assert status == 200, answer
    assert [v["number"] for v in answer["values"]] == [f"20712{i:05d}" for i in range(5, 10)]
    assert_history_consistent()
