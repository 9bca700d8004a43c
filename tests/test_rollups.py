"""The report rollup gives exactly the from-scratch numbers, whichever way it was kept.

Random sequences of live creates, batch creates, moves and deletes run through the services
with a scripted clock (instants on local midnights, repeated instants, a clock stepping back,
days on both sides of a daylight-saving change), then a history import of past intervals. After
each, the rollup rows must equal a rebuild from the history (tests/invariants.py) and the
rollup's daily peaks those of the from-scratch query for every month touched. Races between
real concurrent writers are checked by the same invariant in tests/test_races.py.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, func, select

from webapp.access import Principal
from webapp.cli.records import history_rollup
from webapp.database import write_clock, write_transaction
from webapp.errors import ServiceError
from webapp.extensions import db
from webapp.models import (
    Account,
    AuditEntry,
    DailyPeak,
    Ddi,
    HistoryInterval,
    PhoneUser,
    RollupState,
)
from webapp.services import changes
from webapp.services.billing import periods, reports, rollups
from webapp.services.imports import history_import
from webapp.services.records import crud, kinds

from .invariants import assert_rollup_exact
from .report_helpers import daily_peaks, rollup_peaks

COMPANIES = ("alpha", "beta", "gamma")
ROOT = Principal.cli()
START = datetime(2026, 3, 27, 21, 0)  # London changes to summer time on 29 March
TODAY = date(2026, 11, 22)


@pytest.fixture
def companies(factory):
    for company in COMPANIES:
        factory.company(company)


def fresh(app, zone: str) -> None:
    app.config["REPORT_TIMEZONE"] = zone
    with write_transaction() as session:
        for model in (DailyPeak, HistoryInterval, Ddi, PhoneUser):
            session.execute(delete(model))
        rollups.rebuild_all(session, periods.zone(zone))


class Clock:
    """write_clock for the services: each write is stamped with the next scripted instant."""

    def __init__(self, tz):
        self.now = START
        self.tz = tz

    def step(self, how: str, minutes: int) -> None:
        if how == "midnight":  # exactly the next local midnight
            day = periods.today_in(self.tz, self.now) + timedelta(days=1)
            self.now = periods.local_midnight_utc(day, self.tz)
        elif how == "same":
            pass
        elif how == "back":  # a clock stepping back (NTP, another host)
            self.now -= timedelta(minutes=minutes)
        else:
            self.now += timedelta(minutes=minutes)

    def __call__(self, _session) -> datetime:
        return self.now


OPS = st.tuples(
    st.sampled_from(["create", "batch", "move", "delete", "user", "user_move", "user_delete"]),
    st.integers(0, 5),  # key
    st.sampled_from(COMPANIES),
    st.sampled_from(["minutes", "minutes", "minutes", "hours", "midnight", "same", "back"]),
    st.integers(1, 600),
)


def run(op, key: int, company: str) -> None:
    ddi = {"dialcode": "44", "number": str(1000 + key), "virt_exten": "1", "company": company}
    try:
        if op == "create":
            crud.create(ROOT, kinds.DDI, ddi)
        elif op == "batch":
            crud.create(
                ROOT,
                kinds.DDI,
                [{**ddi, "number": str(2000 + key * 10 + i)} for i in range(3)],
            )
        elif op == "move":
            crud.update(ROOT, kinds.DDI, {"company": company}, {"company": COMPANIES[key % 3]})
        elif op == "delete":
            crud.delete_rows(ROOT, kinds.DDI, {"company": company, "number": str(1000 + key)})
        elif op == "user":
            crud.create(
                ROOT,
                kinds.PHONE_USER,
                {"company": company, "username": f"u{key}", "virt_exten": "1"},
            )
        elif op == "user_move":
            crud.update(
                ROOT, kinds.PHONE_USER, {"company": company}, {"company": COMPANIES[key % 3]}
            )
        else:
            crud.delete_rows(ROOT, kinds.PHONE_USER, {"company": company, "username": f"u{key}"})
    except ServiceError:
        pass  # a refused write writes nothing; the sequence goes on


def play(app, monkeypatch, zone: str, ops) -> Clock:
    """From empty tables, run `ops` through the services, each at its scripted instant."""
    fresh(app, zone)
    clock = Clock(periods.zone(zone))
    monkeypatch.setattr(changes, "write_clock", clock)
    for op, key, company, how, minutes in ops:
        clock.step(how, minutes * (60 if how == "hours" else 1))
        run(op, key, company)
    return clock


def assert_reports_match(zone: str, until: datetime) -> None:
    tz = periods.zone(zone)
    month = date(START.year, START.month, 1)
    last = periods.today_in(tz, until)
    while (month.year, month.month) <= (last.year, last.month):
        period = periods.resolve(month.month, month.year, tz, TODAY)
        for kind in rollups.KINDS:
            scratch = reports.scratch_peaks(kind, period, None)
            assert rollup_peaks(db.session, kind, period, None) == scratch, (kind, month)
            assert daily_peaks(kind, period, ["beta"]) == {
                k: v for k, v in scratch.items() if k[0] == "beta"
            }
        month = (month + timedelta(days=32)).replace(day=1)


@pytest.mark.slow
@pytest.mark.parametrize("zone", ["UTC", "Europe/London", "Australia/Lord_Howe"])
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(OPS, min_size=1, max_size=30))
def test_live_writes_keep_the_rollup_exact(app, companies, monkeypatch, zone, ops):
    clock = play(app, monkeypatch, zone, ops)
    # Not assert_history_consistent: a clock stepping back can end an interval before its
    # start, which the history keeps as it happened and every computation ignores alike.
    assert_rollup_exact()
    assert_reports_match(zone, clock.now)


@pytest.mark.slow
@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=st.lists(OPS, min_size=1, max_size=15),
    past=st.lists(
        st.tuples(st.sampled_from(COMPANIES), st.integers(-20, 40), st.integers(0, 3000)),
        min_size=1,
        max_size=6,
    ),
)
def test_an_import_rebuilds_what_it_touches(app, companies, monkeypatch, zone, ops, past):
    """Live changes, then a backfill of closed intervals reaching before and across them."""
    clock = play(app, monkeypatch, zone, ops)
    lines = ["kind,company,key,start,end"]
    for i, (company, hours, minutes) in enumerate(past):
        start = START + timedelta(hours=hours)
        end = start + timedelta(minutes=minutes + 1)
        lines.append(f"ddi,{company},99:{i},{start:%Y-%m-%dT%H:%M:%SZ},{end:%Y-%m-%dT%H:%M:%SZ}")
        lines.append(f"user,{company},old{i},{start:%Y-%m-%dT%H:%M:%SZ},{end:%Y-%m-%dT%H:%M:%SZ}")
    # The scripted clock stood for the live writers' only; the import reads the real one.
    monkeypatch.setattr(changes, "write_clock", write_clock)
    history_import.import_csv(ROOT, "\n".join(lines) + "\n")
    assert_rollup_exact()
    assert_reports_match(zone, max(clock.now, START + timedelta(days=3)))


def test_reports_compute_from_history_while_the_zone_differs(app, companies, factory):
    """Kept in UTC, asked in London: the report reads the history, and a rebuild (the CLI
    command, audited) brings the rollup to London; the numbers never change."""
    fresh(app, "UTC")
    crud.create(
        ROOT, kinds.DDI, {"dialcode": "44", "number": "1", "virt_exten": "1", "company": "alpha"}
    )
    app.config["REPORT_TIMEZONE"] = "Europe/London"
    scope = reports.parse_scope({})
    before = reports.report(ROOT, "ddi", scope)
    assert before["alpha"]["billableDDIDaysForMonth"] >= 1
    result = CliRunner().invoke(history_rollup, [], obj=None, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "Rebuilt the report rollup" in result.output
    assert rollups.built_zone(db.session, "ddi") == "Europe/London"
    assert db.session.scalar(
        select(func.count()).select_from(AuditEntry).where(AuditEntry.action == "history.rollup")
    )
    assert reports.report(ROOT, "ddi", scope) == before


def test_writes_skip_an_unbuilt_rollup_and_reports_still_count(app, companies):
    with write_transaction() as session:
        session.execute(delete(RollupState))
    crud.create(
        ROOT, kinds.DDI, {"dialcode": "44", "number": "1", "virt_exten": "1", "company": "beta"}
    )
    assert db.session.scalar(select(func.count()).select_from(DailyPeak)) == 0
    got = reports.report(ROOT, "ddi", reports.parse_scope({}))
    assert list(got["beta"]["dates"].values())[-1] == 1
    assert rollups.build(ROOT) == {"ddi": 1, "user": 0}
    assert reports.report(ROOT, "ddi", reports.parse_scope({})) == got


def test_only_a_system_admin_may_rebuild(app, companies, factory):
    factory.account("boss", admin_of=["alpha"])
    account = db.session.scalar(select(Account).where(Account.username == "boss"))
    with pytest.raises(ServiceError):
        rollups.build(Principal.from_account(account, via="ui"))
