"""Checks that must hold after any sequence of writes, racing or not."""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

from sqlalchemy import func, select

from webapp.extensions import db
from webapp.models import (
    DailyPeak,
    Ddi,
    HistoryInterval,
    Number,
    NumberWord,
    PhoneUser,
    RollupDay,
    RollupLatest,
    RollupMonth,
)
from webapp.services.billing import close_writes, closed_figures, month_close, periods, rollups
from webapp.services.fields import words_of


def assert_history_consistent() -> None:
    """History agrees with the records: per key, intervals never overlap and are well-formed;
    the open intervals are exactly the stored rows, in the right company; and the report
    rollup, kept change by change, is exactly what a rebuild from the history gives."""
    db.session.rollback()
    by_key: dict[tuple[str, str], list[HistoryInterval]] = defaultdict(list)
    for iv in db.session.scalars(select(HistoryInterval).order_by(HistoryInterval.start_at)):
        assert iv.end_at is None or iv.start_at <= iv.end_at, (
            f"interval ends before it starts: {iv}"
        )
        # A DDI key is global; a phone-user key (username) is unique only within its company.
        identity = (iv.kind, iv.key if iv.kind == "ddi" else f"{iv.company}/{iv.key}")
        by_key[identity].append(iv)
    for identity, intervals in by_key.items():
        for a, b in pairwise(intervals):
            assert a.end_at is not None and a.end_at <= b.start_at, f"overlap for {identity}"
    open_ddis = {
        (iv.company, iv.key)
        for ivs in by_key.values()
        for iv in ivs
        if iv.kind == "ddi" and iv.end_at is None
    }
    stored_ddis = {
        (c, f"{d}:{n}")
        for d, n, c in db.session.execute(select(Ddi.dialcode, Ddi.number, Ddi.company))
    }
    assert open_ddis == stored_ddis
    assert_inventory_consistent()
    open_users = {
        (iv.company, iv.key)
        for ivs in by_key.values()
        for iv in ivs
        if iv.kind == "user" and iv.end_at is None
    }
    stored_users = {
        tuple(r) for r in db.session.execute(select(PhoneUser.company, PhoneUser.username))
    }
    assert open_users == stored_users
    assert_rollup_exact()
    assert_close_writes_cover()


def assert_inventory_consistent() -> None:
    """Every DDI is a number of the inventory in service, and every number in service is a
    DDI (docs/numbers.md): the two tables name the same numbers, each once."""
    in_service = {
        tuple(r)
        for r in db.session.execute(
            select(Number.dialcode, Number.number).where(Number.state == "in_service")
        )
    }
    ddis = {tuple(r) for r in db.session.execute(select(Ddi.dialcode, Ddi.number))}
    assert in_service == ddis, (sorted(in_service - ddis)[:5], sorted(ddis - in_service)[:5])
    held = db.session.execute(
        select(Number.dialcode, Number.number).where(
            Number.state != "in_service", Number.held_for.is_not(None), Number.state != "reserved"
        )
    ).all()
    assert not held, f"only a reservation is held for a company: {held[:5]}"
    assert_words_consistent()


def assert_words_consistent() -> None:
    """The description search's words (number_words) are exactly the words of the numbers'
    descriptions: none of a description replaced, none of a number retired."""
    described = db.session.execute(
        select(Number.dialcode, Number.number, Number.description).where(Number.description != "")
    )
    expected = {(w, d, n) for d, n, text in described for w in words_of(text)}
    w = NumberWord
    kept = {tuple(r) for r in db.session.execute(select(w.word, w.dialcode, w.number))}
    assert kept == expected, (sorted(kept - expected)[:5], sorted(expected - kept)[:5])


def _rollup_rows() -> dict[str, list[tuple]]:
    p, d, m, latest = DailyPeak, RollupDay, RollupMonth, RollupLatest
    queries = {
        "daily_peaks": select(p.kind, p.company, p.day, p.peak, p.level, p.last_at).order_by(
            p.kind, p.company, p.day
        ),
        # A day's sums are those of its slots' rows; a day whose sums went back to zero may
        # keep rows: the same sums as none.
        "rollup_days": select(d.kind, d.day, func.sum(d.rise), func.sum(d.change))
        .group_by(d.kind, d.day)
        .having((func.sum(d.rise) != 0) | (func.sum(d.change) != 0))
        .order_by(d.kind, d.day),
        "rollup_months": select(
            m.kind, m.month, m.company, m.through, m.last_day, m.level
        ).order_by(m.kind, m.month, m.company),
        "rollup_latest": select(latest.kind, latest.company, latest.month, latest.level).order_by(
            latest.kind, latest.company
        ),
    }
    return {name: [tuple(r) for r in db.session.execute(q)] for name, q in queries.items()}


def assert_rollup_exact() -> None:
    """The daily rollup and its sums (services/billing/_rollup_sums.py) as the writers left them
    equal a rebuild from the history alone."""
    db.session.rollback()
    kept = _rollup_rows()
    for kind in rollups.KINDS:
        zone = rollups.built_zone(db.session, kind)
        if zone is not None:
            rollups.rebuild(db.session, kind, None, periods.zone(zone))
    rebuilt = _rollup_rows()
    db.session.rollback()
    assert kept == rebuilt


def assert_close_writes_cover() -> None:
    """The record of writes since each close (services/billing/close_writes.py) names at least
    every company whose rollup marks differ now from those the close stored: what a close
    kept by the record answers as changed is then exactly the full comparison's answer."""
    db.session.rollback()
    for close in closed_figures.every_latest(db.session):
        if not (close.closed and close.writes_kept):
            continue
        tz = periods.zone(close.timezone)
        period = periods.resolve(close.month, close.year, tz, periods.today_in(tz))
        for kind in rollups.KINDS:
            if rollups.built_zone(db.session, kind) != close.timezone:
                continue
            differ = month_close._marks_differ(close, kind, period, None)
            noted = close_writes.written(db.session, close.id, kind)
            assert set(differ) <= noted, (close.label, kind, sorted(set(differ) - noted))
    db.session.rollback()
