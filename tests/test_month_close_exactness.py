"""A closed month against the brute-force oracle of tests/test_report_exactness.py, over random
histories of both kinds (docs/month-close.md).

Each example records a random history of DDIs and phone users around a month, closes the month,
then backfills random extra intervals (new keys, so they never overlap the recorded ones) either
as history rows with the rollup rebuilt (as an import leaves it) or through the history import
service itself; the rollup is then left so, rebuilt whole, or dropped (reports compute from the
history: adjustments cannot compare rollup marks). Then:

- the closed reports never change: equal to the reports before the backfill (and before the
  close) and to the oracle over the original intervals;
- the adjustments are exactly "oracle over every interval now" minus "oracle over the original
  intervals", built here from the oracle alone and compared whole;
- reopened and closed again, the reports equal the oracle over every interval, and there are no
  adjustments left.

And for a change of REPORT_TIMEZONE after a close (the rollup rebuilt in the new zone or not):
the closed reports stay, and the adjustments are the oracle in the new zone minus the figures
closed in the old one.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete

from webapp.access import Principal
from webapp.database import utcnow, write_transaction
from webapp.models import ClosedFigures, MonthClose, RollupState
from webapp.services.billing import month_close, reports
from webapp.services.imports import history_import

from .databases import examples
from .factories import add_history, rollup_rebuilt
from .test_report_exactness import (
    COMPANIES,
    MONTHS,
    TODAY,
    TOTAL_KEYS,
    ZONES,
    histories,
    oracle,
    store,
    utc_days,
)

pytestmark = pytest.mark.slow

KINDS = ("ddi", "user")
EXAMPLES = 100  # per test; each example closes a month twice and reads every report ~6 times
SETTINGS = settings(
    max_examples=examples(EXAMPLES),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
ADMIN = Principal.cli()

Intervals = list[tuple[str, datetime, datetime | None]]
Figures = dict[str, dict[str, dict[str, int]]]  # kind: company: day: peak


@pytest.fixture
def companies(factory):
    for company in COMPANIES:
        factory.company(company)


# --- the app's side ----------------------------------------------------------------------------


def forget_closes() -> None:
    """Examples share one test's database: each starts with no month ever closed."""
    with write_transaction() as session:
        session.execute(delete(ClosedFigures))
        session.execute(delete(MonthClose))


def record(history: dict[str, Intervals]) -> None:
    """Both kinds' intervals as the whole history (one key each), the rollup rebuilt."""
    store("ddi", history["ddi"])
    add_history(*(("user", c, f"k{i}", s, e) for i, (c, s, e) in enumerate(history["user"])))


def backfill_rows(extra: dict[str, Intervals]) -> dict[str, Intervals]:
    """The extra intervals as history rows of new keys, the rollup rebuilt; all of them."""
    add_history(
        *((kind, c, f"b{i}", s, e) for kind in KINDS for i, (c, s, e) in enumerate(extra[kind]))
    )
    return extra


def set_rollup(how: str) -> None:
    """The rollup "left" as the last write left it, "rebuilt" whole in REPORT_TIMEZONE (as
    `flask history rollup` does), or "dropped" (reports and adjustments then compute from the
    history)."""
    if how == "left":
        return
    with write_transaction() as session:
        if how == "rebuilt":
            rollup_rebuilt(session)
        else:
            session.execute(delete(RollupState))


def csv_key(kind: str, i: int) -> str:
    return f"44:{7000000 + i}" if kind == "ddi" else f"imported{i}"


def backfill_import(extra: dict[str, Intervals], month: tuple[int, int], zone: str):
    """The extra intervals the import takes (closed, not empty, ended) through
    history_import.import_csv; the intervals written. Checks the import's answer: every row
    written, and the closed month named exactly when a written interval overlaps it."""
    latest = utcnow() - timedelta(minutes=5)
    taken = {
        kind: [(c, s, e) for c, s, e in extra[kind] if e is not None and s < e <= latest]
        for kind in KINDS
    }
    lines = ["kind,company,key,start,end"] + [
        f"{kind},{c},{csv_key(kind, i)},{iso(s)},{iso(e)}"
        for kind in KINDS
        for i, (c, s, e) in enumerate(taken[kind])
    ]
    result = history_import.import_csv(ADMIN, "\n".join(lines) + "\n")
    rows = sum(len(v) for v in taken.values())
    assert (result.rows, result.written) == (rows, rows)
    days = utc_days(*month, zone)
    month_start, month_end = days[0][1], days[-1][2]
    overlaps = any(s < month_end and e > month_start for k in KINDS for _, s, e in taken[k])
    assert result.closed_months == ([f"{month[0]:04d}-{month[1]:02d}"] if overlaps else [])
    event(f"through the import; the closed month named: {overlaps}")
    return taken


def iso(moment: datetime) -> str:
    return moment.replace(tzinfo=UTC).isoformat()


def read_reports(year: int, month: int) -> dict[str, dict[str, Any]]:
    scope = reports.parse_scope({"month": month, "year": year})
    return {kind: reports.report(ADMIN, kind, scope, today=TODAY) for kind in KINDS}


def read_adjustments(year: int, month: int) -> dict[str, Any]:
    scope = reports.parse_scope({"month": month, "year": year})
    return month_close.adjustments(ADMIN, scope, today=TODAY)["values"]


def close(year: int, month: int, version: int, expected: Figures | None = None) -> None:
    """Close the month; with `expected`, its stored day sums (the totals row of a closed
    month's report page) must be each day's sum of those figures over every company."""
    done = month_close.close_month(ADMIN, month_close.MonthRequest(month, year), today=TODAY)
    assert (done.version, done.closed) == (version, True)
    for kind, figures_ in (expected or {}).items():
        per_company = [list(figures_[c].values()) for c in COMPANIES]
        assert done.day_totals[kind] == [sum(day) for day in zip(*per_company, strict=True)]


def reopen(year: int, month: int) -> None:
    request = month_close.MonthRequest(month, year)
    assert not month_close.reopen_month(ADMIN, request, "a backfill", today=TODAY).closed


# --- the oracle's side ---------------------------------------------------------------------------


def figures(history: dict[str, Intervals], days) -> Figures:
    return {kind: {c: oracle(history[kind], days, c) for c in COMPANIES} for kind in KINDS}


def expected_adjustments(closed: Figures, now: Figures) -> dict[str, Any]:
    """readAdjustments' values for figures `closed` and `now` ({kind: {company: {day:
    value}}}): every company and kind whose figures differ, with the days that differ and both
    month totals."""
    expected: dict[str, Any] = {}
    for company in sorted(closed["ddi"]):
        for kind in KINDS:
            before, after = closed[kind][company], now[kind][company]
            if before == after:
                continue
            expected.setdefault(company, {})[kind] = {
                "dates": {
                    day: {"closed": before[day], "now": after[day]}
                    for day in before
                    if before[day] != after[day]
                },
                TOTAL_KEYS[kind][1]: {"closed": sum(before.values()), "now": sum(after.values())},
            }
    return expected


def assert_reports_are(got: dict[str, dict[str, Any]], expected: Figures, days) -> None:
    for kind in KINDS:
        per_day_key, month_key = TOTAL_KEYS[kind]
        assert list(got[kind]) == list(COMPANIES)
        for company in COMPANIES:
            entry, want = got[kind][company], expected[kind][company]
            assert list(entry["dates"]) == list(want), "every day, in order"
            assert entry["dates"] == want, (kind, company)
            assert entry[month_key] == sum(want.values())
            assert entry[per_day_key] == round(sum(want.values()) / len(days), 4)


def draw_history(data, year: int, month: int, zones: list[str], label: str):
    """Both kinds' intervals, each drawn around the midnights of one of `zones`."""
    return {
        kind: data.draw(
            histories(year, month, data.draw(st.sampled_from(zones), label=f"{label} {kind} zone")),
            label=f"{label} {kind}",
        )
        for kind in KINDS
    }


# --- the properties ------------------------------------------------------------------------------


@SETTINGS
@given(data=st.data())
def test_a_backfill_never_changes_a_closed_month_and_shows_exactly_as_adjustments(
    app, companies, data
):
    year, month = data.draw(st.sampled_from(MONTHS), label="month")
    zone = data.draw(st.sampled_from(ZONES), label="zone")
    app.config["REPORT_TIMEZONE"] = zone
    days = utc_days(year, month, zone)
    forget_closes()
    original = draw_history(data, year, month, [zone], "original")
    record(original)
    at_close = figures(original, days)
    open_reports = read_reports(year, month)

    close(year, month, version=1, expected=at_close)
    closed = read_reports(year, month)
    assert closed == open_reports, "closing changes no figure"
    assert_reports_are(closed, at_close, days)
    assert read_adjustments(year, month) == {}

    extra = draw_history(data, year, month, [zone], "backfill")
    if data.draw(st.booleans(), label="through the import"):
        extra = backfill_import(extra, (year, month), zone)
    else:
        extra = backfill_rows(extra)
    set_rollup(
        data.draw(st.sampled_from(["left", "rebuilt", "dropped"]), label="rollup afterwards")
    )
    everything = {kind: original[kind] + extra[kind] for kind in KINDS}
    now_figures = figures(everything, days)

    assert read_reports(year, month) == closed, "a closed month's reports never change"
    expected = expected_adjustments(at_close, now_figures)
    event(f"the backfill adjusts {len(expected)} of {len(COMPANIES)} companies")
    assert read_adjustments(year, month) == expected

    reopen(year, month)
    assert_reports_are(read_reports(year, month), now_figures, days)
    close(year, month, version=2, expected=now_figures)
    assert_reports_are(read_reports(year, month), now_figures, days)
    assert read_adjustments(year, month) == {}


@SETTINGS
@given(data=st.data())
def test_a_time_zone_change_keeps_the_closed_figures_and_adjusts_to_the_new_zone(
    app, companies, data
):
    year, month = data.draw(st.sampled_from(MONTHS), label="month")
    old, new = data.draw(st.lists(st.sampled_from(ZONES), min_size=2, max_size=2, unique=True))
    app.config["REPORT_TIMEZONE"] = old
    forget_closes()
    history = draw_history(data, year, month, [old, new], "history")
    record(history)  # the rollup is built in the old zone
    old_figures = figures(history, utc_days(year, month, old))
    close(year, month, version=1, expected=old_figures)
    closed = read_reports(year, month)
    assert_reports_are(closed, old_figures, utc_days(year, month, old))

    app.config["REPORT_TIMEZONE"] = new
    if data.draw(st.booleans(), label="rollup rebuilt in the new zone"):
        set_rollup("rebuilt")  # as `flask history rollup` after the change
    new_days = utc_days(year, month, new)
    new_figures = figures(history, new_days)
    assert read_reports(year, month) == closed, "a closed month's reports never change"
    expected = expected_adjustments(old_figures, new_figures)
    event(f"the zone change adjusts {len(expected)} of {len(COMPANIES)} companies")
    assert read_adjustments(year, month) == expected

    reopen(year, month)
    close(year, month, version=2, expected=new_figures)
    assert_reports_are(read_reports(year, month), new_figures, new_days)
    assert read_adjustments(year, month) == {}
