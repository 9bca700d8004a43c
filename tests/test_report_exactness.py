"""The reports equal a brute-force computation over random histories.

The oracle here shares no code with the app: for each local calendar day it counts, at the day's
start and at every interval start inside the day, how many intervals of the company are active
(start <= t < end), and takes the largest count. The peak of a step function that only rises at
interval starts is always reached at one of those instants.
"""

from __future__ import annotations

import random
from calendar import monthrange
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, insert

from bench.reference import reference_query, window_reference_query
from webapp.access import Principal
from webapp.database import write_transaction
from webapp.extensions import db
from webapp.models import HistoryInterval, RollupState
from webapp.services.billing import periods, reports, rollups

from .databases import examples
from .factories import rollup_rebuilt
from .report_helpers import rollup_peaks

COMPANIES = ("alpha", "beta", "gamma")
TODAY = date(2026, 11, 22)
# Months with a daylight-saving change in at least one zone, a leap February, a plain month.
MONTHS = [(2026, 3), (2026, 10), (2025, 11), (2024, 2), (2026, 4)]
ZONES = ["UTC", "Europe/London", "America/New_York", "Australia/Lord_Howe"]
TOTAL_KEYS = {
    "ddi": ("billableDDIDaysPerDay", "billableDDIDaysForMonth"),
    "user": ("billableUserDaysPerDay", "billableUserDaysForMonth"),
}


def utc_days(year: int, month: int, zone: str) -> list[tuple[date, datetime, datetime]]:
    tz = ZoneInfo(zone)
    out = []
    for n in range(1, monthrange(year, month)[1] + 1):
        day = date(year, month, n)
        nxt = day + timedelta(days=1)
        start = datetime(day.year, day.month, day.day, tzinfo=tz).astimezone(UTC)
        end = datetime(nxt.year, nxt.month, nxt.day, tzinfo=tz).astimezone(UTC)
        out.append((day, start.replace(tzinfo=None), end.replace(tzinfo=None)))
    return out


def oracle(intervals, days, company) -> dict[str, int]:
    mine = [(s, e) for c, s, e in intervals if c == company]
    result = {}
    for day, ds, de in days:
        instants = {ds} | {s for s, _ in mine if ds < s < de}
        result[day.isoformat()] = max(
            sum(1 for s, e in mine if s <= t and (e is None or t < e)) for t in instants
        )
    return result


@st.composite
def histories(draw, year: int, month: int, zone: str):
    """Intervals for a handful of keys: moves (back-to-back, other company), gaps including
    zero-length ones, intervals spanning the month's ends, instants on midnights and DST days."""
    days = utc_days(year, month, zone)
    anchors = [ds for _, ds, _ in days] + [days[0][1] - timedelta(days=3), days[-1][2]]
    keys = draw(st.integers(1, 7))
    intervals = []
    for _ in range(keys):
        at = draw(st.sampled_from(anchors)) + timedelta(
            minutes=draw(st.one_of(st.just(0), st.integers(-3000, 3000)))
        )
        company = draw(st.sampled_from(COMPANIES))
        for _segment in range(draw(st.integers(1, 5))):
            length = draw(st.one_of(st.just(0), st.integers(1, 90), st.integers(60, 60 * 24 * 12)))
            open_ended = draw(st.booleans()) and _segment > 0
            end = None if open_ended else at + timedelta(minutes=length)
            intervals.append((company, at, end))
            if end is None:
                break
            # Next segment: a move (same instant, other company) or a gap (maybe of zero length).
            if draw(st.booleans()):
                company = draw(st.sampled_from([c for c in COMPANIES if c != company]))
            at = end + timedelta(minutes=draw(st.one_of(st.just(0), st.integers(1, 2000))))
    return intervals


def store(kind: str, intervals, built: bool = True) -> None:
    """The (company, start, end) intervals as the whole history, one key each; the rollup
    rebuilt from them, or left unbuilt (reports then compute from the history)."""
    with write_transaction() as session:
        session.execute(delete(HistoryInterval))
        if intervals:
            session.execute(
                insert(HistoryInterval),
                [
                    {
                        "kind": kind,
                        "company": c,
                        "key": f"k{i}",
                        "start_at": s,
                        "end_at": e,
                        "source": "test",
                    }
                    for i, (c, s, e) in enumerate(intervals)
                ],
            )
        rollup_rebuilt(session)
        if not built:
            session.execute(delete(RollupState))


@pytest.fixture
def companies(factory):
    for company in COMPANIES:
        factory.company(company)


def check(app, kind: str, year: int, month: int, zone: str, intervals) -> None:
    app.config["REPORT_TIMEZONE"] = zone
    store(kind, intervals)
    got = reports.report(
        Principal.cli(), kind, reports.parse_scope({"month": month, "year": year}), today=TODAY
    )
    days = utc_days(year, month, zone)
    per_day_key, month_key = TOTAL_KEYS[kind]
    assert sorted(got) == list(COMPANIES)
    for company in COMPANIES:
        expected = oracle(intervals, days, company)
        entry = got[company]
        assert list(entry["dates"]) == list(expected), "every day, in order"
        assert entry["dates"] == expected, (company, intervals)
        assert entry["days"] == len(days)
        assert entry[month_key] == sum(expected.values())
        assert entry[per_day_key] == round(sum(expected.values()) / len(days), 4)
    # The bench's hand-written reference must agree too, or its timings compare nothing.
    period = periods.resolve(month, year, periods.zone(zone), TODAY)
    reference = {
        (c, int(d)): int(p) for c, d, p in db.session.execute(reference_query(kind, period)) if p
    }
    scratch = reports.scratch_peaks(kind, period, None)
    assert reference == scratch
    window = {
        (c, int(d)): int(p)
        for c, d, p in db.session.execute(window_reference_query(kind, period))
        if p
    }
    assert window == scratch
    # The report above read the rollup (rebuilt in this zone by store); so must a subset.
    assert rollups.built_zone(db.session, kind) == zone
    assert rollup_peaks(db.session, kind, period, None) == scratch
    assert rollup_peaks(db.session, kind, period, ["beta"]) == {
        k: v for k, v in scratch.items() if k[0] == "beta"
    }


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ddi", "user"])
@pytest.mark.parametrize(
    ("year", "month", "zone"),
    [
        (2026, 3, "Europe/London"),
        (2026, 10, "Europe/London"),
        (2026, 3, "America/New_York"),
        (2025, 11, "America/New_York"),
        (2024, 2, "UTC"),
        (2026, 4, "Australia/Lord_Howe"),
    ],
)
@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_reports_equal_brute_force_on_random_histories(
    app, companies, kind, year, month, zone, data
):
    check(app, kind, year, month, zone, data.draw(histories(year, month, zone)))


@pytest.mark.parametrize("zone", ["Europe/London", "America/New_York"])
def test_a_large_random_history_matches_too(app, companies, zone):
    rng = random.Random(7)
    base = datetime(2026, 9, 20)
    intervals = []
    for _ in range(600):
        at = base + timedelta(minutes=rng.randint(0, 60 * 24 * 45))
        company = rng.choice(COMPANIES)
        for _segment in range(rng.randint(1, 4)):
            end = at + timedelta(minutes=rng.randint(0, 60 * 24 * 6))
            intervals.append((company, at, end))
            company = rng.choice(COMPANIES)
            at = end + timedelta(minutes=rng.choice([0, 0, rng.randint(1, 3000)]))
        intervals.append((company, at, None))
    check(app, "ddi", 2026, 10, zone, intervals)


def test_dst_days_are_23_and_25_hours_long(app, companies):
    """Europe/London, 2026: clocks go forward on 29 March, back on 25 October."""
    app.config["REPORT_TIMEZONE"] = "Europe/London"
    # 23:30 UTC on 29 March is 00:30 BST on the 30th: it belongs to the 30th.
    spring = [("alpha", datetime(2026, 3, 29, 23, 30), datetime(2026, 3, 29, 23, 45))]
    store("ddi", spring)
    got = reports.report(
        Principal.cli(), "ddi", reports.parse_scope({"month": 3, "year": 2026}), today=TODAY
    )
    assert got["alpha"]["dates"]["2026-03-29"] == 0 and got["alpha"]["dates"]["2026-03-30"] == 1
    # 23:30 UTC on 25 October is 23:30 GMT, still the 25th (a 25-hour day).
    autumn = [
        ("alpha", datetime(2026, 10, 25, 23, 30), datetime(2026, 10, 25, 23, 45)),
        ("beta", datetime(2026, 10, 24, 23, 30), datetime(2026, 10, 24, 23, 45)),
    ]
    store("ddi", autumn)
    got = reports.report(
        Principal.cli(), "ddi", reports.parse_scope({"month": 10, "year": 2026}), today=TODAY
    )
    assert got["alpha"]["dates"]["2026-10-25"] == 1 and got["alpha"]["dates"]["2026-10-26"] == 0
    # 23:30 UTC on 24 October is 00:30 BST on the 25th.
    assert got["beta"]["dates"]["2026-10-24"] == 0 and got["beta"]["dates"]["2026-10-25"] == 1


def test_month_to_date_stops_today_and_counts_open_intervals(app, companies):
    store(
        "user",
        [("alpha", datetime(2026, 10, 30), None), ("alpha", datetime(2026, 11, 5, 12), None)],
    )
    got = reports.report(Principal.cli(), "user", reports.parse_scope({}), today=date(2026, 11, 10))
    entry = got["alpha"]
    assert entry["days"] == 10 and list(entry["dates"])[-1] == "2026-11-10"
    assert list(entry["dates"].values()) == [1, 1, 1, 1, 2, 2, 2, 2, 2, 2]
    assert entry["billableUserDaysForMonth"] == 16 and entry["billableUserDaysPerDay"] == 1.6


def test_closed_month_is_identical_after_later_changes(app, factory, companies):
    """Reproducible: later creates, moves and deletes leave a closed month's numbers alone."""
    root = factory.account("root", system_admin=True)
    ddi = {"dialcode": "44", "number": "1", "virt_exten": "1", "company": "alpha"}
    with write_transaction() as session:
        session.execute(
            insert(HistoryInterval),
            [
                {
                    "kind": "ddi",
                    "company": "alpha",
                    "key": "44:9",
                    "start_at": datetime(2025, 1, 3),
                    "end_at": datetime(2025, 1, 20),
                    "source": "test",
                },
                {
                    "kind": "ddi",
                    "company": "beta",
                    "key": "44:8",
                    "start_at": datetime(2025, 1, 10),
                    "end_at": None,
                    "source": "test",
                },
            ],
        )
        rollup_rebuilt(session)
    scope = reports.parse_scope({"month": 1, "year": 2025})
    before = reports.report(Principal.cli(), "ddi", scope)
    assert factory.api(root, "create", {"type": "ddi", "values": ddi}).status_code == 200
    assert (
        factory.api(
            root,
            "update",
            {"type": "ddi", "scope": {"company": "alpha"}, "values": {"company": "beta"}},
        ).status_code
        == 200
    )
    assert (
        factory.api(root, "delete", {"type": "ddi", "scope": {"company": "beta"}}).status_code
        == 200
    )
    assert reports.report(Principal.cli(), "ddi", scope) == before
