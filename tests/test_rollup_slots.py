"""A day's sums over every company (rollup_days) spread over writer slots (migration 0029):
read as one, equal to a rebuild, and a writer on another slot does not wait for an uncommitted
one (PostgreSQL; SQLite has one writer at a time and keeps slot 0)."""

from __future__ import annotations

from collections import Counter
from datetime import date, timedelta

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from webapp.database import utcnow, write_transaction
from webapp.extensions import db
from webapp.models import HistoryInterval, RollupDay
from webapp.services.billing import _rollup_sums, periods, rollups

from .factories import add_history
from .invariants import assert_rollup_exact

COMPANIES = ("acme", "globex")


@pytest.fixture
def built(factory):
    for company in COMPANIES:
        factory.company(company)
    add_history()  # builds the rollup (no intervals yet)


def write(at, company: str, key: str, slot: int) -> None:
    """One interval starting at `at`, rolled up as a live write does, on writer slot `slot`."""
    with write_transaction() as session:
        session.connection().info["rollup_slot"] = slot
        session.add(
            HistoryInterval(
                kind="ddi", company=company, key=key, start_at=at, end_at=None, source="live"
            )
        )
        session.flush()
        rollups.record_changes(session, "ddi", at, Counter(), Counter({company: 1}))


def test_day_sums_over_slots_equal_a_rebuild_and_the_report(built):
    start = utcnow() - timedelta(minutes=10)
    for i, slot in enumerate([0, 3, 5, 3, 7, 1]):
        write(start + timedelta(minutes=i), COMPANIES[i % 2], f"44:20{i:08}", slot)
    slots = set(db.session.scalars(select(RollupDay.slot).distinct()))
    if db.engine.dialect.name == "postgresql":
        assert slots == {0, 1, 3, 5, 7}
    else:
        assert slots == {0}  # one writer at a time: no slot to spread over
    assert_rollup_exact()
    tz = periods.zone(rollups.built_zone(db.session, "ddi") or "UTC")
    today = periods.today_in(tz)
    period = periods.resolve(today.month, today.year, tz, today)
    totals = _rollup_sums.day_totals(db.session, "ddi", period)
    assert totals[today.day - 1] == 6  # six DDIs active at the end of today, in two companies


def test_a_writer_on_another_slot_does_not_wait(built):
    if db.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL: SQLite's writers take turns on the whole database")
    day = date(2026, 11, 3)
    first, second = Session(db.engine), Session(db.engine)
    try:
        first.connection().info["rollup_slot"] = 1
        _rollup_sums.add_days(first, "ddi", _deltas(day))  # uncommitted: holds slot 1's row
        second.connection().info["rollup_slot"] = 1
        second.execute(text("SET LOCAL lock_timeout = '300ms'"))
        with pytest.raises(OperationalError, match="lock timeout"):
            _rollup_sums.add_days(second, "ddi", _deltas(day))  # the same slot waits
        second.rollback()
        second.connection().info["rollup_slot"] = 2
        second.execute(text("SET LOCAL lock_timeout = '300ms'"))
        _rollup_sums.add_days(second, "ddi", _deltas(day))  # another slot does not
        second.commit()
        first.commit()
    finally:
        first.close()
        second.close()
    rows = db.session.execute(
        select(RollupDay.slot, RollupDay.rise).where(RollupDay.day == day).order_by(RollupDay.slot)
    ).all()
    assert [tuple(r) for r in rows] == [(1, 1), (2, 1)]


def _deltas(day: date) -> _rollup_sums.DayDeltas:
    deltas = _rollup_sums.DayDeltas()
    deltas.add(day, 1, 1)
    return deltas
