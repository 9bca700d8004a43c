"""Stock (docs/numbers.md, "Stock"): POST /rest/numbers/stock and `flask numbers stock` add
numbers to the inventory as available, all or nothing, with one audit entry and one change
event each; a number already in the inventory, in any state, is a 409 naming it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update

from webapp.access import Principal
from webapp.database import write_transaction
from webapp.errors import FileRejected
from webapp.extensions import db
from webapp.models import AuditEntry, Event, Number
from webapp.services import inventory
from webapp.services.numbers import stock, stock_file

from .factories import ACME
from .invariants import assert_history_consistent

PATH = "/rest/numbers/stock"
STOCK = "number.stock"
STOCKED = select(AuditEntry).where(AuditEntry.action == STOCK)


def post(world, body: Any, caller=None):
    caller = world.root if caller is None else caller
    return world.factory.client.post(PATH, json=body, headers=caller.headers)


def row(number: str, description: str | None = None, dialcode: str = "44") -> dict[str, str]:
    values = {"dialcode": dialcode, "number": number}
    return values if description is None else {**values, "description": description}


def stored() -> list[tuple[str, str, str, str]]:
    """Every inventory row: (dialcode, number, state, description), in key order."""
    db.session.rollback()
    query = select(Number.dialcode, Number.number, Number.state, Number.description)
    return [tuple(r) for r in db.session.execute(query.order_by(Number.dialcode, Number.number))]


def count(model: Any) -> int:
    """How many rows `model` has (AuditEntry: how many stock entries)."""
    db.session.rollback()
    query = select(func.count()).select_from(model)
    if model is AuditEntry:
        query = query.where(AuditEntry.action == STOCK)
    return db.session.scalar(query) or 0


def set_state(number: str, **values: Any) -> None:
    with write_transaction() as session:
        session.execute(update(Number).where(Number.number == number).values(**values))


def assert_error(response, status: int, code: str, fields: dict[str, str] | None = None) -> None:
    assert response.status_code == status, response.json
    error = response.json["error"]
    assert error["code"] == code
    if fields is not None:
        assert error["fields"] == fields


# --- success ---------------------------------------------------------------------------------


def test_values_go_in_as_available_with_their_descriptions(world):
    text = "<b>Main line</b> — é 🙂"
    body = {"values": [row("2071230001", text), row("2071230000"), row("5", "x" * 200, "1")]}
    r = post(world, body)
    assert r.status_code == 200, r.json
    assert r.json == {"result": "success", "numrows": 3}
    assert stored() == [
        ("1", "5", "available", "x" * 200),
        ("44", "2071230000", "available", ""),
        ("44", "2071230001", "available", text),
    ]
    rows = db.session.scalars(select(Number)).all()
    assert {(n.held_for, n.previous_company, n.held_until) for n in rows} == {(None, None, None)}
    # One instant: the change's (its audit entries are stamped with it).
    at = db.session.scalars(select(AuditEntry.at).where(AuditEntry.action == STOCK)).all()
    assert len(set(at)) == 1 and {n.since for n in rows} == set(at)
    assert_history_consistent()


def test_a_block_keeps_the_width_of_its_first_number(world):
    r = post(world, {"block": {"dialcode": "44", "first": "0099", "count": 3}})
    assert r.json == {"result": "success", "numrows": 3}
    assert [n for _, n, _, _ in stored()] == ["0099", "0100", "0101"]
    r = post(world, {"block": {"dialcode": "44", "first": "2071230000", "count": 10_000}})
    assert r.json == {"result": "success", "numrows": 10_000}
    assert count(Number) == 10_003
    assert stored()[-1] == ("44", "2071239999", "available", "")
    r = post(world, {"block": {"dialcode": "1", "first": "9990", "count": 10}})
    assert r.json == {"result": "success", "numrows": 10}
    assert_history_consistent()


def test_audit_entries_and_events_one_per_number(world):
    post(world, {"values": [row("2071230000"), row("2071230001")]})
    entries = db.session.scalars(STOCKED.order_by(AuditEntry.id)).all()
    assert [(e.action, e.target, e.actor, e.company) for e in entries] == [
        ("number.stock", "ddi 44:2071230000", "root", None),
        ("number.stock", "ddi 44:2071230001", "root", None),
    ]
    assert entries[0].before is None
    assert entries[0].after == {
        "dialcode": "44",
        "number": "2071230000",
        "state": "available",
        "company": None,
    }
    r = world.factory.client.post("/rest/events/read", json={}, headers=world.root.headers)
    events = r.json["values"]
    assert [(e["type"], e["key"], e["company"]) for e in events] == [
        ("number.stocked", {"dialcode": "44", "number": "2071230000"}, None),
        ("number.stocked", {"dialcode": "44", "number": "2071230001"}, None),
    ]
    assert events[0]["before"] is None
    assert events[0]["after"]["state"] == "available"
    # Stock is nothing of a Company-Admin's: its feed is empty.
    r = world.factory.client.post("/rest/events/read", json={}, headers=world.cadmin.headers)
    assert r.json["values"] == []


# --- a number already in the inventory: 409 ----------------------------------------------------


def make_state(world, app, state: str) -> None:
    """The number 44:2071230003 in `state`."""
    if state == "in_service":
        ddi = {**row("2071230003"), "virt_exten": "100", "company": ACME}
        r = world.factory.api(world.root, "create", {"type": "ddi", "values": ddi})
        assert r.status_code == 200
        return
    assert post(world, {"values": [row("2071230003")]}).status_code == 200
    with app.app_context():
        until = inventory.today() + timedelta(days=5)
    if state == "reserved":
        set_state("2071230003", state="reserved", held_for=ACME, held_until=until)
    elif state == "aging":
        set_state("2071230003", state="aging", previous_company=ACME, held_until=until)


@pytest.mark.parametrize("state", ["in_service", "available", "reserved", "aging"])
def test_a_number_in_the_inventory_in_any_state_is_a_409_and_nothing_is_written(world, app, state):
    make_state(world, app, state)
    before = (stored(), count(AuditEntry), count(Event))
    values = [row(f"207123000{i}") for i in range(6)]
    r = post(world, {"values": values})
    assert_error(r, 409, "conflict", {"values[3]": "44:2071230003 exists"})
    assert "44:2071230003" in r.json["error"]["message"]
    r = post(world, {"block": {"dialcode": "44", "first": "2071230000", "count": 5}})
    assert_error(r, 409, "conflict", {"block": "44:2071230003 exists"})
    assert (stored(), count(AuditEntry), count(Event)) == before
    assert_history_consistent()


def test_a_409_names_the_first_few_numbers_that_exist(world):
    post(world, {"block": {"dialcode": "44", "first": "100", "count": 8}})
    r = post(world, {"block": {"dialcode": "44", "first": "098", "count": 20}})
    assert_error(r, 409, "conflict")
    named = "44:100, 44:101, 44:102, 44:103, 44:104 exist"
    assert r.json["error"]["fields"] == {"block": named}
    assert "(and 7 more)" in r.json["error"]["message"]
    assert count(Number) == 8


# --- bad requests: 400, nothing written --------------------------------------------------------

TOO_MANY = {"values": [row(str(n)) for n in range(10_001)]}
BAD = {
    "unknown top-level field": ({"values": [row("1")], "force": True}, "force"),
    "unknown row field": ({"values": [{**row("1"), "company": ACME}]}, "values[0].company"),
    "unknown block field": (
        {"block": {"dialcode": "44", "first": "1", "count": 1, "step": 2}},
        "block.step",
    ),
    "neither": ({}, "values"),
    "both": ({"values": [row("1")], "block": {"dialcode": "44", "first": "2", "count": 1}}, None),
    "empty values": ({"values": []}, "values"),
    "too many rows": (TOO_MANY, "values"),
    "values not a list": ({"values": row("1")}, "values"),
    "count 0": ({"block": {"dialcode": "44", "first": "1", "count": 0}}, "block.count"),
    "count 10,001": ({"block": {"dialcode": "44", "first": "1", "count": 10_001}}, "block.count"),
    "count a string": ({"block": {"dialcode": "44", "first": "1", "count": "5"}}, "block.count"),
    "count missing": ({"block": {"dialcode": "44", "first": "1"}}, "block.count"),
    "block overflows its width": (
        {"block": {"dialcode": "44", "first": "9998", "count": 3}},
        "block.count",
    ),
    "dialcode letters": ({"values": [row("1"), row("2", dialcode="4a")]}, "values[1].dialcode"),
    "dialcode too long": ({"values": [row("1", dialcode="12345678")]}, "values[0].dialcode"),
    "dialcode a number": ({"values": [{"dialcode": 44, "number": "1"}]}, "values[0].dialcode"),
    "number empty": ({"values": [row("")]}, "values[0].number"),
    "number 16 digits": ({"values": [row("1" * 16)]}, "values[0].number"),
    "17 digits exceeded": ({"values": [row("1" * 14, dialcode="1234")]}, "values[0].number"),
    "block first letters": (
        {"block": {"dialcode": "44", "first": "12x", "count": 1}},
        "block.first",
    ),
    "description of 201": ({"values": [row("1", "x" * 201)]}, "values[0].description"),
    "description not text": ({"values": [{**row("1"), "description": 5}]}, None),
    "description not Unicode": ({"values": [row("1", "a\ud800")]}, None),
    "description with a NUL": ({"values": [row("1", "a\x00b")]}, "values[0].description"),
    "repeated number": ({"values": [row("1"), row("2"), row("1")]}, "values[2]"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_requests_are_400_and_write_nothing(world, case):
    body, field = BAD[case]
    r = post(world, body)
    assert_error(r, 400, "bad_request")
    if field is not None:
        assert field in r.json["error"]["fields"], r.json
    assert count(Number) == 0 and count(AuditEntry) == 0


def test_the_messages_of_a_few_400s(world):
    r = post(world, {"values": [row("1"), row("2"), row("1")]})
    assert r.json["error"]["fields"] == {"values[2]": "44:1 repeats values[0]"}
    r = post(world, {"values": [row("1", "x" * 201)]})
    assert r.json["error"]["fields"] == {"values[0].description": "must be at most 200 characters"}
    r = post(world, {"values": [row("1", "tab\tok"), row("2", "bell\x07")]})
    why = "must not contain control characters but tabs and line breaks"
    assert r.json["error"]["fields"] == {"values[1].description": why}
    r = post(world, {"block": {"dialcode": "44", "first": "9998", "count": 3}})
    assert r.json["error"]["fields"] == {
        "block.count": "runs past 9999, the widest number of 4 digits"
    }
    r = post(world, {"block": {"dialcode": "44", "first": "1", "count": 0}})
    assert r.json["error"]["fields"] == {"block.count": "must be from 1 to 10,000"}
    r = post(world, TOO_MANY)
    assert r.json["error"]["fields"] == {"values": "must hold at most 10,000 items"}


def test_only_a_system_admin_may_stock(world):
    r = post(world, {"values": [row("1")]}, world.cadmin)
    assert_error(r, 403, "forbidden")
    r = post(world, {"bad": 1}, world.cadmin)  # the body is not looked at
    assert_error(r, 403, "forbidden")
    r = world.factory.client.post(PATH, json={"values": [row("1")]})
    assert r.status_code == 401
    assert count(Number) == 0


# --- the command line --------------------------------------------------------------------------


def test_cli_stocks_a_file_and_a_block(world, flask, tmp_path):
    good = tmp_path / "good.csv"
    good.write_text("dialcode,number,description\n44,2071230000,Main line\n\n1,0005,\n")
    done = flask("numbers", "stock", str(good))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "stocked 2\n"
    two = tmp_path / "two.csv"
    two.write_text("\ufeffDialcode,Number\n44,2071230001\n")
    assert flask("numbers", "stock", str(two)).stdout == "stocked 1\n"
    block = flask("numbers", "stock", "--block", "44", "0099", "3")
    assert block.returncode == 0, block.stderr
    assert block.stdout == "stocked 3\n"
    assert stored() == [
        ("1", "0005", "available", ""),
        ("44", "0099", "available", ""),
        ("44", "0100", "available", ""),
        ("44", "0101", "available", ""),
        ("44", "2071230000", "available", "Main line"),
        ("44", "2071230001", "available", ""),
    ]
    actors = set(db.session.scalars(select(AuditEntry.actor).where(AuditEntry.action == STOCK)))
    assert len(actors) == 1 and next(iter(actors)).startswith("cli:")
    assert count(AuditEntry) == 6 and count(Event) == 6


def one_line_error(result) -> str:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_cli_refuses_a_bad_file_naming_its_line_and_writes_nothing(world, flask, tmp_path):
    bad = tmp_path / "bad.csv"
    rows = [f"44,20712300{i:02d}" for i in range(5)] + ["44,20712x"] + ["44,2071230099"]
    bad.write_text("dialcode,number\n" + "\n".join(rows) + "\n")
    assert one_line_error(flask("numbers", "stock", str(bad))) == (
        "Error: line 7: number '20712x' must be 1 to 15 digits; nothing was imported."
    )
    bad.write_text("dialcode,number,description\n44,1,\n44,2,\n44,1,again\n")
    assert "line 4: 44:1 repeats line 2" in one_line_error(flask("numbers", "stock", str(bad)))
    bad.write_text("dialcode,number,description\n44,1,x\n44,2\n")
    assert "line 3: expected 3 columns, found 2" in one_line_error(
        flask("numbers", "stock", str(bad))
    )
    bad.write_text("dialcode,number,description\n44,1,a\x00b\n")
    assert "line 2: description must not contain control characters" in one_line_error(
        flask("numbers", "stock", str(bad))
    )
    bad.write_text("number,dialcode\n1,44\n")
    assert "line 1: the header must be" in one_line_error(flask("numbers", "stock", str(bad)))
    assert "no such file" in one_line_error(flask("numbers", "stock", str(tmp_path / "no.csv")))
    assert "count" in one_line_error(flask("numbers", "stock", "--block", "44", "1", "0"))
    assert "either" in one_line_error(flask("numbers", "stock"))
    assert count(Number) == 0 and count(AuditEntry) == 0


def test_cli_refuses_a_number_already_in_the_inventory(world, flask, tmp_path):
    post(world, {"values": [row("2")]})
    bad = tmp_path / "bad.csv"
    bad.write_text("dialcode,number\n44,1\n44,2\n")
    line = one_line_error(flask("numbers", "stock", str(bad)))
    assert "44:2 is already in the inventory" in line and "line 3" in line
    assert "44:2" in one_line_error(flask("numbers", "stock", "--block", "44", "1", "5"))
    assert stored() == [("44", "2", "available", "")]


def test_a_file_over_the_row_limit_is_refused_at_the_row_past_it(world, app, tmp_path, monkeypatch):
    monkeypatch.setattr(stock_file, "MAX_ROWS", 3)
    path = tmp_path / "four.csv"
    path.write_text("dialcode,number\n44,1\n44,2\n\n44,3\n44,4\n44,5\n")
    with app.app_context(), pytest.raises(FileRejected) as refused:
        stock_file.stock_file(Principal.cli("cli:test"), path)
    assert refused.value.problems == ["line 6: a file holds at most 3 rows"]
    path.write_text("dialcode,number\n44,1\n44,2\n44,3\n")
    with app.app_context():
        assert stock_file.stock_file(Principal.cli("cli:test"), path) == 3
    assert count(Number) == 3


def test_a_number_a_racing_writer_added_is_a_409_by_the_unique_key(world, monkeypatch):
    """The racing writer's row is there but the check before the insert did not see it (it
    committed in between): the inventory's unique key refuses the insert, nothing is written."""
    post(world, {"values": [row("2")]})
    monkeypatch.setattr(stock, "_refuse_existing", lambda _session, _chunk: None)
    r = post(world, {"values": [row("1"), row("2")]})
    assert_error(r, 409, "conflict")
    assert "someone else meanwhile" in r.json["error"]["message"]
    assert stored() == [("44", "2", "available", "")]
    assert count(AuditEntry) == 1 and count(Event) == 1


def test_a_large_stock_leaves_fresh_statistics_on_postgresql(world, monkeypatch):
    """After a stock of ANALYZE_AFTER numbers or more the inventory is analyzed at once
    (PostgreSQL): the planner then knows the new numbers' ranges, instead of judging them
    empty until autovacuum comes by. Shown by pg_class.reltuples, which ANALYZE sets."""
    if db.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL only: SQLite's planner is not given statistics here")
    from sqlalchemy import text

    def counted() -> float:
        return db.session.scalar(text("SELECT reltuples FROM pg_class WHERE relname = 'numbers'"))

    monkeypatch.setattr(stock, "ANALYZE_AFTER", 3)
    # Two numbers, then three: the second stock is large enough, and counts all five.
    assert post(world, {"values": [row("2071000000"), row("2071000001")]}).status_code == 200
    body = {"block": {"dialcode": "44", "first": "2072000000", "count": 3}}
    assert post(world, body).status_code == 200
    db.session.rollback()
    assert counted() == 5
