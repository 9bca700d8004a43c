"""Billing truth under the number lifecycle (docs/numbers.md): random sequences of stock,
reserve, release, allocate, create (plain and forced), link of a reservation, move, delete into
aging and retire, through the real services, against a model kept here from the rules alone.

After every operation the model says whether it must succeed and what each number's state and
company are; at the end, today's report for every company must equal the model's peak (only
time in service counts: each operation is one instant, so a company's peak today is the most
numbers the model had in service for it after any operation), and the brute-force oracle of
tests/test_report_exactness.py over the recorded history agrees."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date

import pytest
from sqlalchemy import select

from webapp.access import Principal
from webapp.errors import ServiceError
from webapp.extensions import db
from webapp.models import HistoryInterval, Number
from webapp.services import inventory
from webapp.services.billing import periods, reports
from webapp.services.numbers import allocate, reserving, retiring, stock
from webapp.services.records import crud, ddis
from webapp.services.records.kinds import DDI

from .factories import ACME, GLOBEX, INITECH
from .invariants import assert_history_consistent
from .test_report_exactness import oracle, utc_days

ROOT = Principal.cli("lifecycle")
COMPANIES = (ACME, GLOBEX, INITECH)
POOL = [f"{n:04d}" for n in range(1000, 1024)]  # numbers of dialcode 44 the test plays with
OPERATIONS = (
    *("stock", "reserve", "release", "allocate", "create"),
    *("force", "link", "move", "delete", "retire"),
)


@dataclass
class Model:
    """Each number's state as the rules say it must be: (state, company) where company is the
    in-service company, the reservation's, or for aging the one it left."""

    numbers: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    peaks: dict[str, int] = field(default_factory=dict)

    def in_service(self, company: str) -> int:
        return sum(1 for s, c in self.numbers.values() if s == "in_service" and c == company)

    def note_peaks(self) -> None:
        for company in COMPANIES:
            self.peaks[company] = max(self.peaks.get(company, 0), self.in_service(company))

    def may_take(self, number: str, company: str, force: bool = False) -> bool:
        state, owner = self.numbers.get(number, ("unknown", None))
        if state in ("unknown", "available"):
            return True
        if state in ("reserved", "aging"):
            return force or owner == company
        return False  # in service


def key(number: str) -> dict[str, str]:
    return {"dialcode": "44", "number": number}


def step(rng: random.Random, model: Model) -> tuple[str, bool]:
    """One random operation carried out; its name, and whether it succeeded (checked against
    the model inside)."""
    # Mostly numbers the inventory knows, so most operations have something to act on.
    known = sorted(model.numbers)
    number = rng.choice(known if known and rng.random() < 0.7 else POOL)
    company = rng.choice(COMPANIES)
    op = rng.choice(OPERATIONS)
    free = sorted(n for n, (s, _) in model.numbers.items() if s == "available")
    if op == "reserve" and free and rng.random() < 0.8:
        number = rng.choice(free)  # stock is scarce (taken fast, and deletes age): aim at it
    state, owner = model.numbers.get(number, ("unknown", None))
    expect: bool
    after: dict[str, tuple[str, str | None]] = {}
    if op == "stock":
        expect = state == "unknown"
        after[number] = ("available", None)
        call = lambda: stock.stock(ROOT, {"values": [key(number)]})  # noqa: E731
    elif op == "reserve":
        expect = state in ("available", "unknown") and state != "unknown"
        expect = expect or (state == "reserved" and owner == company)
        expect = expect or (state == "aging" and owner == company)
        after[number] = ("reserved", company)
        body = {"scope": key(number), "values": {"company": company}}
        call = lambda: reserving.reserve(ROOT, body)  # noqa: E731
    elif op == "release":
        expect = state == "reserved"
        after[number] = ("available", None)
        call = lambda: reserving.release(ROOT, {"scope": key(number)})  # noqa: E731
    elif op == "allocate":
        count = rng.randint(1, 3)
        mine = sorted(n for n, (s, c) in model.numbers.items() if s == "reserved" and c == company)
        free = sorted(n for n, (s, _) in model.numbers.items() if s == "available")
        taken = (mine + free)[:count]
        expect = len(taken) == count
        after = {n: ("in_service", company) for n in taken}
        body = {
            "scope": {"dialcode": "44", "count": count},
            "values": {"company": company, "virt_exten": "100"},
        }
        call = lambda: allocate.allocate(ROOT, body)  # noqa: E731
    elif op in ("create", "force"):
        force = op == "force"
        expect = model.may_take(number, company, force)
        after[number] = ("in_service", company)
        extra = {"force": True, "reason": "test"} if force else {}
        values = {**key(number), "virt_exten": "200", "company": company}
        call = lambda: crud.create(ROOT, DDI, values, **extra)  # noqa: E731
    elif op == "link":
        # A link of a number not in service: only one reserved for the company goes in.
        expect = state == "reserved" and owner == company
        if state == "in_service":
            expect = True  # a link of a DDI in service moves it (a System-Admin may)
        after[number] = ("in_service", company)
        body_values = {"virt_exten": "300", "company": company}
        call = lambda: ddis.link(ROOT, key(number), body_values)  # noqa: E731
    elif op == "move":
        expect = True  # a scope that matches nothing changes nothing, without an error (§4)
        if state == "in_service":
            after[number] = ("in_service", company)
        scope = {**key(number), "company": owner or company}
        call = lambda: crud.update(ROOT, DDI, scope, {"company": company})  # noqa: E731
    elif op == "delete":
        expect = True  # as a move: nothing matched is 0 deleted
        if state == "in_service":
            after[number] = ("aging", owner)
        scope = {**key(number), "company": owner or company}
        call = lambda: crud.delete_rows(ROOT, DDI, scope)  # noqa: E731
    else:  # retire
        expect = state in ("available", "aging")
        force = state == "aging"
        body = {"scope": key(number), **({"force": True, "reason": "test"} if force else {})}
        call = lambda: retiring.retire(ROOT, body)  # noqa: E731
    try:
        done = call()
    except ServiceError:
        done = None
    db.session.rollback()
    ok = done is not None  # refused: a ServiceError (a move to the same company changes 0)
    assert ok == expect, (op, number, company, state, owner, done)
    if ok:
        if op == "retire":
            del model.numbers[number]
        else:
            model.numbers.update(after)
    model.note_peaks()
    return op, ok


def stored_states(on: date) -> dict[str, tuple[str, str | None]]:
    """What the inventory says, in the model's terms."""
    from webapp.models import Ddi

    db.session.rollback()
    in_service = {n: c for n, c in db.session.execute(select(Ddi.number, Ddi.company))}
    found: dict[str, tuple[str, str | None]] = {}
    for row in db.session.scalars(select(Number)):
        state = inventory.state_of(row, on)
        if state == "in_service":
            found[row.number] = (state, in_service[row.number])
        elif state == "reserved":
            found[row.number] = (state, row.held_for)
        elif state == "aging":
            found[row.number] = (state, row.previous_company)
        else:
            found[row.number] = (state, None)
    return found


@pytest.mark.parametrize("seed", range(6))
def test_reports_equal_the_model_after_any_mix_of_lifecycle_operations(app, factory, seed):
    app.config["NUMBER_AGING_DAYS"] = 3
    for company in COMPANIES:
        factory.company(company)
    rng = random.Random(seed)
    model = Model()
    done = []
    for _ in range(200):
        done.append(step(rng, model))
    # Every kind of operation succeeded at least once, so the mix is a real one.
    assert {op for op, ok in done if ok} >= {"stock", "reserve", "allocate", "delete"}
    with app.app_context():
        on = inventory.today()
    assert stored_states(on) == model.numbers
    assert_history_consistent()
    tz = periods.zone(app.config["REPORT_TIMEZONE"])
    today = periods.today_in(tz)
    scope = reports.parse_scope({"month": today.month, "year": today.year})
    values = reports.report(ROOT, "ddi", scope)
    rows = db.session.execute(
        select(HistoryInterval.company, HistoryInterval.start_at, HistoryInterval.end_at).where(
            HistoryInterval.kind == "ddi"
        )
    ).all()
    days = [d for d in utc_days(today.year, today.month, app.config["REPORT_TIMEZONE"])]
    for company in COMPANIES:
        got = values[company]["dates"][today.isoformat()]
        assert got == model.peaks.get(company, 0), (company, got, model.peaks)
        brute = oracle([tuple(r) for r in rows], [d for d in days if d[0] == today], company)
        assert brute[today.isoformat()] == got
