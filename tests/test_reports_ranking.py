"""The many-company report's fast figures (reports.ranking, rollups.month_figures) and the paged
day drill-down (report_days.day_page, day_records) give exactly what the existing report and
drill-down give, on random histories, with the rollup built and while it is not.

Histories come from test_report_exactness's strategy (moves, gaps, zero-length intervals,
midnights, daylight-saving days, intervals spanning the month's ends, open ones), spread over
more companies here so the ranking has ties and companies without a row in the month.
"""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta

import pytest
from flask import current_app
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete

from webapp.access import Principal
from webapp.database import write_transaction
from webapp.errors import Invalid
from webapp.extensions import db
from webapp.models import ClosedFigures, MonthClose
from webapp.services.billing import (
    _rollup_sums,
    closed_figures,
    month_close,
    periods,
    ranks,
    report_days,
    reports,
    rollups,
)

from .databases import examples
from .factories import add_history
from .test_report_exactness import histories, store

COMPANIES = ("alpha", "beta", "gamma", "delta", "epsilon")
TODAY = date(2026, 11, 22)
ROOT = Principal.cli("test")


@pytest.fixture
def companies(factory):
    for company in COMPANIES:
        factory.company(company, f"{company.title()} Ltd")


def spread(intervals, seed: int):
    """The strategy's three companies spread over five (some then have no row at all)."""
    return [(COMPANIES[(COMPANIES.index(c) * 2 + seed) % 5], s, e) for c, s, e in intervals]


def check_pages(kind: str, request: reports.ReportRequest) -> list[int]:
    """The ranking of every company, whole and in pages, against report(); the day sums."""
    expected = reports.report(ROOT, kind, request, today=TODAY)
    per_day_key, month_key = reports.ANSWER_KEYS[kind]
    ranked = sorted(expected, key=lambda c: (-expected[c][month_key], c))
    whole = reports.ranking(ROOT, kind, request, limit=len(COMPANIES), today=TODAY)
    assert list(whole.rows) == ranked
    assert whole.rows == {c: expected[c] for c in ranked}  # every figure, every day
    assert whole.chosen == whole.matched == len(COMPANIES)
    labels = list(next(iter(expected.values()))["dates"])
    day_sums = [sum(entry["dates"][d] for entry in expected.values()) for d in labels]
    assert list(whole.totals["dates"].values()) == day_sums
    assert whole.totals[month_key] == sum(e[month_key] for e in expected.values())
    assert whole.totals[per_day_key] == reports._per_day(sum(day_sums), len(labels))
    # Pages of two and of three: the same order, cut; past the end, the last page.
    for size in (2, 3):
        for offset in range(0, len(COMPANIES), size):
            page = reports.ranking(ROOT, kind, request, offset=offset, limit=size, today=TODAY)
            assert list(page.rows) == ranked[offset : offset + size]
            assert page.offset == offset
            assert page.totals == whole.totals
    late = reports.ranking(ROOT, kind, request, offset=40, limit=2, today=TODAY)
    assert (late.offset, list(late.rows)) == (4, ranked[4:])
    return day_sums


def check_closed(kind: str, year: int, month: int) -> None:
    """Closed, the month's ranking (read from the stored totals, ranks.closed_page) is the
    report's of the closed month, and equal to the open month's."""
    request = reports.parse_scope({"month": month, "year": year})
    before = reports.ranking(ROOT, kind, request, limit=len(COMPANIES), today=TODAY)
    month_close.close_month(ROOT, month_close.parse_scope({"month": month, "year": year}))
    check_pages(kind, request)
    after = reports.ranking(ROOT, kind, request, limit=len(COMPANIES), today=TODAY)
    assert after.close is not None
    assert (after.rows, after.totals) == (before.rows, before.totals)
    with write_transaction() as session:  # the next example starts open
        session.execute(delete(ClosedFigures))
        session.execute(delete(MonthClose))


def check_ranking(kind: str, year: int, month: int) -> None:
    request = reports.parse_scope({"month": month, "year": year})
    day_sums = check_pages(kind, request)
    expected = reports.report(ROOT, kind, request, today=TODAY)
    month_key = reports.ANSWER_KEYS[kind][1]
    # A subset of companies: the totals are over the subset.
    subset = reports.parse_scope({"month": month, "year": year, "company": ["beta", "delta"]})
    part = reports.ranking(ROOT, kind, subset, today=TODAY)
    assert sorted(part.rows) == ["beta", "delta"]
    assert part.totals[month_key] == expected["beta"][month_key] + expected["delta"][month_key]
    # The fast figures themselves, when the rollup is built.
    zone = current_app.config["REPORT_TIMEZONE"]
    if rollups.built_zone(db.session, kind) == zone:
        period = periods.resolve(month, year, periods.zone(zone), TODAY)
        totals, days = rollups.month_figures(db.session, kind, period, None)
        assert totals == {c: expected[c][month_key] for c in COMPANIES}
        assert days == day_sums
        # And read from the sums kept beside the rollup (None only when some company's rows
        # go past the period's last day: a current month with writes stamped after today).
        kept = _rollup_sums.everyone_figures(db.session, kind, period)
        if kept is None:
            assert (year, month) == (TODAY.year, TODAY.month)
        else:
            assert kept == (totals, days)
        # The marks a close stores, from the rows it read for its figures: the database's.
        carried = rollups.carried_levels(db.session, kind, period.days[0].day, None)
        figures = list(rollups.close_figures(db.session, kind, period, carried))
        stored = {c: marks for c, _, _, marks in figures}
        assert len(stored) == len(figures)  # one row per company
        lists = rollups.peak_lists(db.session, kind, period, None)
        # The figures a close stores: every company's days but those all zeros, as their text,
        # and their sum.
        assert {c: text for c, _, text, _ in figures} == {
            c: closed_figures.encode(days) for c, days in lists.items() if c in stored
        }
        assert all(not any(days) for c, days in lists.items() if c not in stored)
        assert all(total == sum(lists[c]) for c, total, _, _ in figures)
        now = rollups.month_marks(db.session, kind, period, carried)
        assert stored.keys() == now.keys()
        assert all(rollups.same_marks(stored[c], now[c]) for c in now)
        # The database's pages, read as shallowly as possible (ranks._top's threshold scan
        # deepened a row at a time) and at once: the report's order and totals.
        ranked = sorted(expected, key=lambda c: (-expected[c][month_key], c))
        for depth in (1, 2, None):
            for offset, limit in ((0, 1), (0, 2), (1, 2), (2, 3), (0, 5), (4, 1)):
                found = ranks.open_page(db.session, kind, period, offset, limit, depth)
                if found is None:  # rows stamped after today: the caller sums the rows
                    assert kept is None
                    continue
                want = [(c, expected[c][month_key]) for c in ranked[offset : offset + limit]]
                assert found == (want, days)


@pytest.mark.slow
@pytest.mark.parametrize("built", [True, False], ids=["rollup", "history"])
@pytest.mark.parametrize(
    ("year", "month", "zone"),
    [
        (2026, 10, "Europe/London"),  # clocks go back on the 25th
        (2026, 3, "America/New_York"),  # and forward on the 8th
        (2024, 2, "UTC"),  # a leap February
        (2026, 11, "Asia/Kolkata"),  # the current month, to date
    ],
)
@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_ranking_and_totals_equal_the_report(app, companies, built, year, month, zone, data):
    app.config["REPORT_TIMEZONE"] = zone
    kind = data.draw(st.sampled_from(["ddi", "user"]))
    intervals = spread(data.draw(histories(year, month, zone)), data.draw(st.integers(0, 4)))
    store(kind, intervals, built)
    check_ranking(kind, year, month)
    if (year, month) != (TODAY.year, TODAY.month):
        check_closed(kind, year, month)


@pytest.mark.parametrize("built", [True, False], ids=["rollup", "history"])
def test_ranking_of_a_fixed_history(app, companies, built):
    """Ties by identifier; a company without any row ranks by its zero; the level carried
    into the month counts on the days before a company's first row."""
    app.config["REPORT_TIMEZONE"] = "UTC"
    store(
        "ddi",
        [
            ("alpha", datetime(2026, 9, 1), None),  # 1 every day
            ("beta", datetime(2026, 10, 11), datetime(2026, 10, 21)),  # 1 on days 11-20
            ("beta", datetime(2026, 10, 15), datetime(2026, 10, 15, 1)),  # 2 on the 15th
            ("gamma", datetime(2026, 9, 20), datetime(2026, 10, 11)),  # carried in, 10 days
            ("gamma", datetime(2026, 10, 11), datetime(2026, 10, 12)),  # 1 more day: 11
            ("delta", datetime(2026, 10, 1), datetime(2026, 10, 12)),  # 11 days
        ],
        built,
    )
    check_ranking("ddi", 2026, 10)
    request = reports.parse_scope({"month": 10, "year": 2026})
    got = reports.ranking(ROOT, "ddi", request, today=TODAY)
    assert list(got.rows) == ["alpha", "beta", "delta", "gamma", "epsilon"]
    assert [e["billableDDIDaysForMonth"] for e in got.rows.values()] == [31, 11, 11, 11, 0]
    check_closed("ddi", 2026, 10)  # epsilon, without a stored row, ranks by its zero


def test_ranking_filter_offset_and_scope(app, companies):
    app.config["REPORT_TIMEZONE"] = "UTC"
    add_history(
        *[
            ("ddi", c, f"{c}{n}", datetime(2026, 10, 1), None)
            for i, c in enumerate(COMPANIES)
            for n in range(i + 1)
        ]
    )
    request = reports.parse_scope({"month": 10, "year": 2026})
    # The filter: identifier or name contains, case-insensitive; the totals stay the choice's.
    everyone = reports.ranking(ROOT, "ddi", request, today=TODAY)
    found = reports.ranking(ROOT, "ddi", request, contains="TA", today=TODAY)
    assert list(found.rows) == ["delta", "beta"]  # delta has 4 a day, beta 2
    assert (found.matched, found.chosen) == (2, 5)
    assert found.totals == everyone.totals
    assert list(reports.ranking(ROOT, "ddi", request, contains="beta ltd", today=TODAY).rows) == [
        "beta"
    ]
    nothing = reports.ranking(ROOT, "ddi", request, contains="zzz", today=TODAY)
    assert (nothing.rows, nothing.matched, nothing.offset) == ({}, 0, 0)
    # An offset past the end shows the last page.
    late = reports.ranking(ROOT, "ddi", request, offset=40, limit=2, today=TODAY)
    assert (late.offset, list(late.rows)) == (4, ["alpha"])
    # A reporter sees its companies only, totals included.
    reporter = Principal(username="r", via="ui", reporting_for=frozenset({"beta", "gamma"}))
    mine = reports.ranking(reporter, "ddi", request, today=TODAY)
    assert list(mine.rows) == ["gamma", "beta"]
    assert mine.totals["billableDDIDaysForMonth"] == (3 + 2) * 31
    # The stream holds the whole choice, in identifier order, whatever the chunk.
    period, pairs = reports.report_rows(ROOT, "ddi", request, today=TODAY, chunk=2)
    assert [c for c, _ in pairs] == sorted(COMPANIES)
    _, pairs = reports.report_rows(ROOT, "ddi", request, today=TODAY, chunk=2)
    assert dict(pairs) == reports.report(ROOT, "ddi", request, today=TODAY)
    assert len(period.days) == 31


# --- the paged drill-down ----------------------------------------------------------------


def day_intervals(rng_seed: int):
    """Records active all day, ending and starting within it, zero-length, open, at midnight."""
    rng = random.Random(rng_seed)
    day = datetime(2026, 10, 12)
    rows = []
    for n in range(rng.randint(5, 60)):
        start = day + timedelta(minutes=rng.randint(-3000, 1500))
        if rng.random() < 0.2:
            start = start.replace(hour=0, minute=0)
        length = rng.choice([0, rng.randint(1, 600), rng.randint(600, 6000)])
        end = None if rng.random() < 0.2 else start + timedelta(minutes=length)
        rows.append(("ddi", rng.choice(["alpha", "beta"]), f"4420{n:03d}", start, end))
    return rows


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("zone", ["UTC", "Europe/London"])
def test_day_page_agrees_with_the_whole_day(app, companies, seed, zone):
    app.config["REPORT_TIMEZONE"] = zone
    add_history(*day_intervals(seed))
    for company in ("alpha", "beta"):
        for iso in ("2026-10-11", "2026-10-12", "2026-10-13"):
            whole = report_days.day_detail(ROOT, "ddi", company, iso, today=TODAY)
            first = report_days.day_page(ROOT, "ddi", company, iso, limit=7, today=TODAY)
            assert (first.peak, first.peak_at) == (whole.peak, whole.peak_at)
            assert first.total == len(whole.records)
            pages = []
            for offset in range(0, max(first.total, 1), 7):
                page = report_days.day_page(
                    ROOT, "ddi", company, iso, offset=offset, limit=7, today=TODAY
                )
                assert page.offset == offset
                pages += page.records
            # The same records, in start order (records from an earlier day first).
            assert sorted(pages, key=repr) == sorted(whole.records, key=repr)
            assert [r.start for r in pages] == sorted(r.start for r in pages)
            detail, records = report_days.day_records(ROOT, "ddi", company, iso, today=TODAY)
            assert list(records) == pages
            assert (detail.peak, detail.total) == (whole.peak, first.total)


def test_day_page_rules(app, companies):
    app.config["REPORT_TIMEZONE"] = "UTC"
    add_history(
        *[("ddi", "alpha", f"k{n}", datetime(2026, 10, 1), None) for n in range(5)],
        ("ddi", "alpha", "late", datetime(2026, 10, 12, 9), datetime(2026, 10, 12, 10)),
    )
    page = report_days.day_page(ROOT, "ddi", "alpha", "2026-10-12", offset=99, limit=4)
    assert (page.total, page.offset, len(page.records)) == (6, 4, 2)  # the last page
    assert (page.peak, page.peak_at.hour) == (6, 9)
    assert [r.key for r in page.records] == ["k4", "late"]
    with pytest.raises(Invalid):
        report_days.day_page(ROOT, "ddi", "alpha", "2026-10-12", today=date(2026, 10, 11))
    quiet = report_days.day_page(ROOT, "ddi", "beta", "2026-10-12")
    assert (quiet.peak, quiet.peak_at, quiet.total, quiet.records) == (0, None, 0, ())
