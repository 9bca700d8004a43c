"""The number inventory under §4 (docs/numbers.md): every DDI is a number in service; a delete
gives the number back, available at once or aging for NUMBER_AGING_DAYS; a create takes an
available number, or one held for the same company, and meets a 409 naming the date for one
held for another; the DDI import follows the same rules."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from sqlalchemy import select, update

from webapp.database import write_transaction
from webapp.extensions import db
from webapp.models import AuditEntry, Ddi, Number
from webapp.services import inventory

from .factories import ACME, GLOBEX
from .invariants import assert_history_consistent

KEY = {"dialcode": "44", "number": "2071230000"}


def ddi(company: str = ACME, exten: str = "100", **key: str) -> dict[str, str]:
    return {**KEY, **key, "virt_exten": exten, "company": company}


def number_row(dialcode: str = "44", number: str = "2071230000") -> Number | None:
    db.session.rollback()
    return db.session.scalars(
        select(Number).where(Number.dialcode == dialcode, Number.number == number)
    ).one_or_none()


def create(world, values: dict[str, str]):
    return world.factory.api(world.root, "create", {"type": "ddi", "values": values})


def delete(world, company: str = ACME):
    scope = {**KEY, "company": company}
    return world.factory.api(world.root, "delete", {"type": "ddi", "scope": scope})


def today(app) -> date:
    with app.app_context():
        return inventory.today()


def test_a_created_ddi_is_a_number_in_service(world):
    assert create(world, ddi()).status_code == 200
    row = number_row()
    assert row is not None
    assert (row.state, row.held_for, row.held_until, row.since) == ("in_service", None, None, None)
    assert_history_consistent()


def test_a_deleted_number_is_available_at_once_by_default_and_anyone_may_take_it(world):
    create(world, ddi())
    assert delete(world).json == {"result": "success", "numrows": 1}
    row = number_row()
    assert row is not None
    assert (row.state, row.previous_company, row.held_until) == ("available", ACME, None)
    assert row.since is not None
    r = create(world, ddi(GLOBEX, "7"))
    assert r.status_code == 200 and r.json["numrows"] == 1
    row = number_row()
    assert row is not None and row.state == "in_service"
    assert db.session.scalars(select(Ddi.company)).all() == [GLOBEX]
    assert_history_consistent()


def test_an_aging_number_is_held_for_the_company_that_left_it(world, app):
    app.config["NUMBER_AGING_DAYS"] = 30
    create(world, ddi())
    delete(world)
    row = number_row()
    until = today(app) + timedelta(days=29)
    assert row is not None
    assert (row.state, row.previous_company, row.held_until) == ("aging", ACME, until)
    r = create(world, ddi(GLOBEX))
    assert r.status_code == 409
    assert r.json["error"]["code"] == "number_aging"
    assert r.json["error"]["fields"] == {"number": f"aging until {until.isoformat()}"}
    assert number_row().state == "aging"  # type: ignore[union-attr]
    # The company that gave it back takes it again.
    assert create(world, ddi(ACME, "200")).status_code == 200
    assert number_row().state == "in_service"  # type: ignore[union-attr]
    assert_history_consistent()


def test_an_aging_period_past_its_last_day_is_available(world, app):
    app.config["NUMBER_AGING_DAYS"] = 10
    create(world, ddi())
    delete(world)
    with app.app_context(), write_transaction() as session:
        yesterday = inventory.today() - timedelta(days=1)
        session.execute(update(Number).values(held_until=yesterday))
    assert create(world, ddi(GLOBEX)).status_code == 200
    assert_history_consistent()


def test_a_number_reserved_for_another_company_is_a_409_and_for_the_same_one_goes_in_service(
    world, app
):
    until = today(app) + timedelta(days=5)
    with app.app_context(), write_transaction() as session:
        session.add(Number(**KEY, state="reserved", held_for=ACME, held_until=until))
    r = create(world, ddi(GLOBEX))
    assert r.status_code == 409
    assert r.json["error"]["code"] == "number_reserved"
    assert r.json["error"]["fields"] == {"number": f"reserved until {until.isoformat()}"}
    assert create(world, ddi(ACME)).status_code == 200
    row = number_row()
    assert row is not None and (row.state, row.held_for, row.held_until) == (
        "in_service",
        None,
        None,
    )
    assert_history_consistent()


def test_a_batch_with_one_held_number_creates_nothing(world, app):
    app.config["NUMBER_AGING_DAYS"] = 3
    create(world, ddi())
    delete(world)
    batch = [ddi(GLOBEX, number="2071239999"), ddi(GLOBEX)]
    r = create(world, batch)
    assert r.status_code == 409 and r.json["error"]["code"] == "number_aging"
    assert number_row(number="2071239999") is None
    assert db.session.scalars(select(Ddi.number)).all() == []
    assert_history_consistent()


@pytest.mark.parametrize("days", ["-1", "3651", "x"])
def test_number_aging_days_out_of_range_stops_the_start(days):
    from webapp.config import SETTINGS

    setting = next(s for s in SETTINGS if s.env == "NUMBER_AGING_DAYS")
    with pytest.raises(ValueError):
        setting.parse(days)
    assert setting.parse("0") == 0 and setting.parse("3650") == 3650


def test_the_import_takes_available_numbers_and_refuses_a_held_one_by_its_line(world, app):
    app.config["NUMBER_AGING_DAYS"] = 3
    create(world, ddi())
    delete(world)
    text = "dialcode,number,virt_exten,company\n44,2071230000,5,globex\n44,2071230001,6,globex\n"
    r = world.factory.client.post(
        "/rest/ops/import/",
        data=text,
        headers={**world.root.headers, "Content-Type": "text/csv"},
    )
    assert r.status_code == 400, r.json
    until = today(app) + timedelta(days=2)
    assert r.json["error"]["fields"] == {
        "line 2": f"number 44:2071230000 is aging until {until.isoformat()}"
    }
    assert number_row(number="2071230001") is None
    app.config["NUMBER_AGING_DAYS"] = 0
    with app.app_context(), write_transaction() as session:
        session.execute(update(Number).values(state="available", held_until=None))
    r = world.factory.client.post(
        "/rest/ops/import/",
        data=text,
        headers={**world.root.headers, "Content-Type": "text/csv"},
    )
    assert r.status_code == 200, r.json
    assert {n.state for n in db.session.scalars(select(Number))} == {"in_service"}
    assert_history_consistent()


def test_a_system_admin_takes_a_held_number_with_force_and_a_reason_which_is_audited(world, app):
    app.config["NUMBER_AGING_DAYS"] = 30
    create(world, ddi())
    delete(world)
    body = {"type": "ddi", "values": ddi(GLOBEX), "force": True, "reason": "ported in by ticket 42"}
    r = world.factory.api(world.root, "create", body)
    assert r.status_code == 200, r.json
    row = number_row()
    assert row is not None and row.state == "in_service"
    entry = db.session.scalars(
        select(AuditEntry).where(AuditEntry.action == "ddi.create").order_by(AuditEntry.id.desc())
    ).first()
    assert entry is not None and entry.detail == "force: ported in by ticket 42"
    assert_history_consistent()


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"force": True}, "reason"),
        ({"force": True, "reason": "   "}, "reason"),
        ({"force": True, "reason": "x" * 501}, "reason"),
        ({"reason": "because"}, "force"),
        ({"force": "yes", "reason": "because"}, "force"),
    ],
)
def test_force_and_reason_come_together_or_the_create_is_a_400(world, app, extra, field):
    app.config["NUMBER_AGING_DAYS"] = 30
    create(world, ddi())
    delete(world)
    r = world.factory.api(world.root, "create", {"type": "ddi", "values": ddi(GLOBEX), **extra})
    assert r.status_code == 400, r.json
    assert field in r.json["error"]["fields"]
    assert number_row().state == "aging"  # type: ignore[union-attr]


def test_force_is_for_ddis_only(world):
    values = {"username": "ana", "virt_exten": "1", "company": ACME}
    body = {"type": "user", "values": values, "force": True, "reason": "x"}
    r = world.factory.api(world.root, "create", body)
    assert r.status_code == 400 and r.json["error"]["fields"] == {"force": "not for this type"}


def reserve_directly(app, company: str, number: str = KEY["number"], days: int = 5) -> None:
    with app.app_context(), write_transaction() as session:
        until = inventory.today() + timedelta(days=days)
        session.add(
            Number(
                dialcode="44", number=number, state="reserved", held_for=company, held_until=until
            )
        )


def link(world, caller: str, company: str = ACME, number: str = KEY["number"]):
    body = {
        "type": "ddi",
        "scope": {"dialcode": "44", "number": number},
        "values": {"virt_exten": "321", "company": company},
    }
    return world.factory.api(world.caller(caller), "link", body)


def test_a_company_admin_links_a_number_reserved_for_its_company_into_service(world, app):
    reserve_directly(app, ACME)
    r = link(world, "cadmin")
    assert r.status_code == 200 and r.json == {"result": "success", "numrows": 1}
    assert [
        tuple(d) for d in db.session.execute(select(Ddi.number, Ddi.virt_exten, Ddi.company))
    ] == [(KEY["number"], "321", ACME)]
    entry = db.session.scalars(select(AuditEntry).where(AuditEntry.action == "ddi.create")).one()
    assert entry.detail == f"link of a number reserved for {ACME}"
    feed = world.factory.client.post(
        "/rest/events/read", json={}, headers=world.caller("cadmin").headers
    )
    assert [e["type"] for e in feed.json["values"]] == ["ddi.created"]
    assert_history_consistent()


def test_a_company_admin_cannot_link_stock_or_another_company_s_reservation(world, app):
    reserve_directly(app, GLOBEX)
    with app.app_context(), write_transaction() as session:
        session.add(Number(dialcode="44", number="2071230001", state="available"))
    for number in (KEY["number"], "2071230001", "2071230002"):
        r = link(world, "cadmin", number=number)
        assert r.status_code == 404, (number, r.json)
        assert r.json["error"]["message"] == "No such DDI."
    # Linking into a company the reservation is not for is refused the same way.
    assert link(world, "cadmin_all", company=ACME).status_code == 404
    assert db.session.scalars(select(Ddi)).all() == []
    assert {n.state for n in db.session.scalars(select(Number))} == {"reserved", "available"}
