"""Records added and removed in a month (services/billing/month_changes) equal a plain count over
random histories, and the month-against-last-month comparison is exact arithmetic.

The oracle shares no code with the app: over the (company, start, end) intervals it counts, per
company, those of non-zero length whose start, and those whose end, lies within the month's
local days (REPORT_TIMEZONE midnights, computed here with zoneinfo).
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webapp.services.billing import month_changes, periods

from .test_report_exactness import COMPANIES, histories, store, utc_days
from .test_report_exactness import companies as companies  # the fixture

TODAY = date(2026, 11, 22)


def oracle(intervals, year: int, month: int, zone: str, company: str) -> tuple[int, int]:
    days = utc_days(year, month, zone)
    lo, hi = days[0][1], days[-1][2]
    mine = [(s, e) for c, s, e in intervals if c == company and (e is None or e > s)]
    added = sum(1 for s, _ in mine if lo <= s < hi)
    removed = sum(1 for _, e in mine if e is not None and lo <= e < hi)
    return added, removed


def check(app, kind: str, year: int, month: int, zone: str, intervals) -> None:
    app.config["REPORT_TIMEZONE"] = zone
    store(kind, intervals)
    period = periods.resolve(month, year, periods.zone(zone), TODAY)
    for company in COMPANIES:
        got = month_changes.changes(kind, company, period)
        assert (got.added, got.removed) == oracle(intervals, year, month, zone, company), (
            company,
            intervals,
        )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ddi", "user"])
@pytest.mark.parametrize(
    ("year", "month", "zone"),
    [
        (2026, 3, "Europe/London"),
        (2026, 10, "America/New_York"),
        (2024, 2, "UTC"),
        (2026, 4, "Australia/Lord_Howe"),
    ],
)
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_added_and_removed_equal_a_plain_count(app, companies, kind, year, month, zone, data):
    check(app, kind, year, month, zone, data.draw(histories(year, month, zone)))


def test_a_move_is_removed_from_one_company_and_added_to_the_other(app, companies):
    days = utc_days(2026, 10, "Europe/London")
    noon = days[9][1].replace(hour=12)
    before = days[0][1].replace(year=2026, month=9, day=1)
    intervals = [
        ("alpha", before, noon),  # moved to beta at noon on the 10th
        ("beta", noon, None),
        ("gamma", noon, noon),  # zero length: counts nothing
    ]
    check(app, "ddi", 2026, 10, "Europe/London", intervals)
    app.config["REPORT_TIMEZONE"] = "Europe/London"
    period = periods.resolve(10, 2026, periods.zone("Europe/London"), TODAY)
    assert month_changes.changes("ddi", "alpha", period) == month_changes.Changes(0, 1)
    assert month_changes.changes("ddi", "beta", period) == month_changes.Changes(1, 0)
    assert month_changes.changes("ddi", "gamma", period) == month_changes.Changes(0, 0)


@given(this=st.integers(0, 10**9), last=st.integers(0, 10**9))
def test_comparison_is_the_difference_and_its_percent_of_last_month(this, last):
    got = month_changes.compare(this, last)
    assert got.difference == this - last
    if last == 0:
        assert got.percent is None
    else:
        # Half-up to one decimal: within 0.05 of the exact percent, and a multiple of 0.1.
        exact = Decimal(this - last) * 100 / Decimal(last)
        assert abs(got.percent - exact) <= Decimal("0.05")
        assert got.percent == got.percent.quantize(Decimal("0.1"))
