"""The full rebuild (`flask history rollup`, rollups.rebuild with starts None: the history
streamed per company and swept in Python, _rollup_stream, through SQLite's or PostgreSQL's store)
writes exactly the rows the row-by-row sweep it replaced wrote (bench/rollup_reference.py):
daily_peaks, rollup_days, rollup_months and rollup_latest identical row for row, on random
histories, on both databases.

The histories are written straight into history_intervals, as an import or the bench data
would: instants on local midnights and a second around them, repeated instants, intervals
ending where the next starts, zero-length and backwards ones (a clock stepping back), open
intervals starting long before, moves between companies, days on both sides of a
daylight-saving change (London, Lord Howe's half hour, New York). The rebuild runs over an
empty rollup, over the correct one (it then writes only what differs) and over a wrong one.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.orm import Session

from bench.rollup_reference import rebuild_all_row_by_row
from webapp.database import write_transaction
from webapp.extensions import db
from webapp.models import (
    Company,
    DailyPeak,
    HistoryInterval,
    RollupDay,
    RollupLatest,
    RollupMonth,
    RollupState,
)
from webapp.services import companies as company_service
from webapp.services.billing import _rollup_build, _rollup_stream_pg, periods, rollups

from .conftest import BACKEND
from .factories import OPERATOR
from .invariants import _rollup_rows, assert_rollup_exact

COMPANIES = ("alpha", "beta", "gamma")
START = datetime(2026, 3, 27, 21, 0)  # London changes to summer time on 29 March


@pytest.fixture
def companies(factory):
    for company in COMPANIES:
        factory.company(company)


def instant(tz, day: int, where: str, minutes: int) -> datetime:
    """A local midnight, a microsecond either side of one, or minutes into the history."""
    midnight = periods.local_midnight_utc(periods.today_in(tz, START) + timedelta(days=day), tz)
    if where == "midnight":
        return midnight
    if where == "before":
        return midnight - timedelta(microseconds=1)
    if where == "after":
        return midnight + timedelta(microseconds=1)
    return START + timedelta(minutes=minutes)


INSTANTS = st.tuples(
    st.integers(-3, 40),
    st.sampled_from(["midnight", "before", "after", "minutes", "minutes"]),
    st.integers(-600, 60 * 24 * 40),
)

INTERVALS = st.lists(
    st.tuples(
        st.sampled_from(["ddi", "user"]),
        st.lists(st.sampled_from(COMPANIES), min_size=1, max_size=3),  # moves: one per company
        INSTANTS,
        # how the last one ends: open, after its start, at it, before it (a clock step back)
        st.sampled_from(["open", "later", "later", "same", "back"]),
        st.integers(1, 60 * 24 * 20),
        st.booleans(),  # starts long before the rest: open at both ends of every report
    ),
    min_size=0,
    max_size=25,
)


def write_history(tz, intervals) -> None:
    rows = []
    for n, (kind, owners, at, ending, minutes, ancient) in enumerate(intervals):
        start = instant(tz, *at) - (timedelta(days=400) if ancient else timedelta(0))
        for i, company in enumerate(owners):
            last = i == len(owners) - 1
            if not last:  # moved on: the next company's interval starts where this one ends
                end: datetime | None = start + timedelta(minutes=minutes // len(owners) + 1)
            elif ending == "open":
                end = None
            elif ending == "later":
                end = start + timedelta(minutes=minutes)
            elif ending == "same":
                end = start
            else:
                end = start - timedelta(minutes=minutes)
            rows.append(
                {
                    "kind": kind,
                    "company": company,
                    "key": f"k{n}",
                    "start_at": start,
                    "end_at": end,
                    "source": "import",
                }
            )
            if end is None or end <= start:
                break
            start = end
    with write_transaction() as session:
        session.execute(delete(HistoryInterval))
        if rows:
            session.execute(insert(HistoryInterval), rows)


def both_ways(tz) -> tuple[dict, dict]:
    """The rollup tables as the reference rebuilds them, then as rollups.rebuild_all does
    over whatever the tables held before (each in its own rolled-back transaction)."""
    session = db.session
    rebuild_all_row_by_row(session, tz)
    expected = _rollup_rows()
    session.rollback()
    rollups.rebuild_all(session, tz)
    got = _rollup_rows()
    session.rollback()
    return expected, got


@pytest.mark.slow
@pytest.mark.parametrize(
    "zone", ["UTC", "Europe/London", "Australia/Lord_Howe", "America/New_York"]
)
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(intervals=INTERVALS, before=st.sampled_from(["empty", "correct", "wrong"]))
def test_the_set_based_rebuild_equals_the_row_by_row_one(app, companies, zone, intervals, before):
    tz = periods.zone(zone)
    write_history(tz, intervals)
    with write_transaction() as session:
        for model in (DailyPeak, RollupDay, RollupMonth, RollupLatest):
            session.execute(delete(model))
        if before != "empty":
            rebuild_all_row_by_row(session, tz)
        if before == "wrong":  # a rollup kept in another zone, or damaged: every value moves
            session.execute(update(DailyPeak).values(peak=DailyPeak.peak + 1))
            session.execute(update(RollupMonth).values(through=RollupMonth.through + 2))
            session.execute(delete(RollupMonth).where(RollupMonth.company == "beta"))
            session.execute(update(RollupLatest).values(level=RollupLatest.level + 1))
    expected, got = both_ways(tz)
    assert got == expected


def test_an_empty_history_empties_the_rollup(app, companies):
    tz = periods.zone("Europe/London")
    write_history(tz, [("ddi", ["alpha"], (1, "minutes", 30), "open", 1, False)])
    with write_transaction() as session:
        rebuild_all_row_by_row(session, tz)
        session.execute(delete(HistoryInterval))
    assert rollups.rebuild_all(db.session, tz) == {"ddi": 0, "user": 0}
    every = db.session.scalars(select(Company.id).order_by(Company.id)).all()
    assert every, "no companies to keep levels of"
    assert _rollup_rows() == {
        "daily_peaks": [],
        "rollup_days": [],
        "rollup_months": [],
        # Every company keeps its level: 0, without a month (models.RollupLatest).
        "rollup_latest": [(kind, c, None, 0) for kind in ("ddi", "user") for c in every],
    }


def test_a_database_without_companies_rebuilds_to_an_empty_rollup(app):
    """A new database has no company: the rebuild reads none and writes nothing (PostgreSQL
    sends the first batch's read before the loop over the batches; there is none)."""
    with app.app_context():
        assert db.session.scalar(select(Company.id).limit(1)) is None
        assert rollups.rebuild_all(db.session, periods.zone("Europe/London")) == {
            "ddi": 0,
            "user": 0,
        }
        assert _rollup_rows() == {
            "daily_peaks": [],
            "rollup_days": [],
            "rollup_months": [],
            "rollup_latest": [],
        }


@pytest.mark.parametrize("before", ["empty", "wrong"])
def test_companies_read_batch_by_batch_each_come_once(app, companies, factory, monkeypatch, before):
    """PostgreSQL reads the companies a batch at a time (_rollup_stream_pg: a plan per batch,
    made as the tables fill): with batches of two, five companies (four with history, one
    with none: over an empty rollup nothing, over a wrong one kept rows to delete) still give
    exactly the reference's rows."""
    monkeypatch.setattr(_rollup_stream_pg, "_COMPANIES_BATCH", 2)
    for company in ("delta", "epsilon"):
        factory.company(company)
    tz = periods.zone("Europe/London")
    history = [
        ("ddi", ["alpha", "gamma"], (1, "minutes", 30), "open", 3000, False),
        ("user", ["beta"], (2, "midnight", 0), "later", 600, False),
        ("ddi", ["gamma"], (-2, "before", 0), "open", 1, True),
        ("ddi", ["delta"], (3, "after", 0), "later", 5000, False),
    ]
    write_history(tz, history)
    with write_transaction() as session:
        if before == "wrong":  # kept rows of a company the history no longer has, and others
            rebuild_all_row_by_row(session, tz)
            moved = update(DailyPeak).where(DailyPeak.company == "alpha")
            session.execute(moved.values(company="epsilon"))
            session.execute(update(RollupMonth).values(through=RollupMonth.through + 2))
    expected, got = both_ways(tz)
    assert got == expected
    assert {row[1] for row in got["daily_peaks"]} == {"alpha", "beta", "gamma", "delta"}


def test_the_rebuild_reads_instants_whatever_the_session_formats(app, companies):
    """PostgreSQL: the stream compares and bisects instants as text, and writes them back. The
    session's DateStyle and TimeZone (another order of day and month, another zone) change
    nothing: the rows are the reference's, fractions of a second and DST days included."""
    if db.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL: SQLite's stored text has one format")
    tz = periods.zone("America/New_York")  # summer time from 8 March 2026
    write_history(
        tz,
        [
            ("ddi", ["alpha", "beta"], (-1, "before", 0), "later", 3000, False),
            ("ddi", ["alpha"], (0, "after", 0), "open", 1, True),
            ("user", ["gamma"], (2, "midnight", 0), "later", 61, False),
        ],
    )
    session = db.session
    rebuild_all_row_by_row(session, tz)
    expected = _rollup_rows()
    session.rollback()
    session.execute(text("SET DateStyle = 'SQL, DMY'"))
    session.execute(text("SET TimeZone = 'Pacific/Chatham'"))
    rollups.rebuild_all(session, tz)
    got = _rollup_rows()
    session.rollback()  # and with it the SETs
    assert got == expected


@pytest.mark.parametrize(
    "at",
    [
        datetime(2026, 3, 8, 7, 0),
        datetime(2026, 3, 8, 7, 0, 0, 1),
        datetime(2026, 3, 8, 6, 59, 59, 999999),
        datetime(2026, 11, 1, 5, 59, 59, 500000),
        datetime(1999, 12, 31, 23, 59, 59, 120),
    ],
)
def test_midnights_are_written_as_postgresql_writes_timestamps(app, at):
    """The midnights the stream bisects are the text PostgreSQL gives an instant (ISO, the
    fraction without trailing zeros), so text order is time order on both sides."""
    if db.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's text of a timestamp")
    session = db.session
    session.execute(text("SET LOCAL DateStyle = 'ISO, YMD'"))
    written = session.execute(text("SELECT CAST(CAST(:at AS timestamp) AS text)"), {"at": at})
    assert _rollup_build._pg_text(at) == written.scalar_one()
    session.rollback()


@pytest.mark.skipif(BACKEND != "postgresql", reason="SQLite has one writer at a time")
@pytest.mark.parametrize("first_build", [True, False])
def test_a_company_created_during_a_rebuild_waits_and_gets_its_levels(app, companies, first_build):
    """Every company has a rollup_latest row once the rollup is built (models.RollupLatest).
    A company created while a full rebuild is under way on PostgreSQL would be in neither the
    rebuild's rows (not there when it read the companies) nor its own (the rollup not built
    yet, or its row deleted by the rebuild's sync): its creation waits for the rebuild to
    commit, then finds the rollup built and adds its level-0 rows."""
    tz = periods.zone("Europe/London")
    write_history(tz, [("ddi", ["alpha"], (1, "minutes", 30), "open", 1, False)])
    with write_transaction() as session:
        if first_build:
            session.execute(delete(RollupState))
    rebuilding = Session(db.engine)
    rollups.rebuild_all(rebuilding, tz)  # its locks held until it commits

    def create():
        with app.app_context():
            company_service.create(OPERATOR, "omega", "Omega")

    creator = threading.Thread(target=create)
    creator.start()
    creator.join(timeout=1.5)
    waited = creator.is_alive()
    rebuilding.commit()
    rebuilding.close()
    creator.join(timeout=30)
    assert waited and not creator.is_alive()
    db.session.rollback()
    latest = db.session.execute(
        select(RollupLatest.kind, RollupLatest.month, RollupLatest.level)
        .where(RollupLatest.company == "omega")
        .order_by(RollupLatest.kind)
    ).all()
    assert [tuple(row) for row in latest] == [("ddi", None, 0), ("user", None, 0)]
    assert_rollup_exact()


def test_each_companys_latest_row_is_found_by_seeks_whatever_the_statistics(app):
    """rollup_latest's rows come from index seeks per company, never a scan of the month
    rows per company: a first build runs before any statistics exist for the rows it just
    wrote, and a join to a window over all of them was scanned once per company there
    (SQLite; a first build at 100,000 companies never ended). PostgreSQL takes each company's
    last row by one lateral seek (a LIMIT 1 per company)."""
    with app.app_context():
        if BACKEND == "sqlite":
            query = f"EXPLAIN QUERY PLAN {_rollup_build._LATEST_ROWS}"
        else:
            query = f"EXPLAIN {_rollup_build._LATEST_ROWS_PG}"
        plan = "\n".join(
            str(row[-1]) for row in db.session.execute(text(query), {"kind": "ddi"}).all()
        )
    if BACKEND == "sqlite":
        assert "SCAN r" not in plan and "SCAN m" not in plan, plan
        assert "SEARCH r " in plan and "SEARCH m " in plan, plan
    else:
        assert "Nested Loop Left Join" in plan and "Limit" in plan, plan
