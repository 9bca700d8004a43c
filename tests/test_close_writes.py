"""What changed since a close, from the record of writes into closed months
(services/billing/close_writes.py), against the full comparison of every company's rollup marks
that it replaces (docs/month-close.md, "How the changes stay fast and exact").

Each example records a random history around a month, may import a batch into it (or around it)
before closing it and the month before it, may reopen and close it again, then imports random
late batches through the history import service: into the month, into the month before (its
level carried into the month, or not), after it. Then, for both closed months, readAdjustments
(every company and a random few), and `billing status`, answer exactly what the full comparison
answers, and the record names every company whose marks differ (the invariant).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import Select, delete, update

from webapp.access import Principal
from webapp.database import utcnow, write_transaction
from webapp.extensions import db
from webapp.models import ClosedFigures, CloseWrite, MonthClose
from webapp.services.billing import close_writes, closed_figures, month_close, periods, reports
from webapp.services.imports import history_import

from .databases import examples
from .invariants import assert_close_writes_cover
from .test_month_close_exactness import draw_history, iso, record
from .test_report_exactness import COMPANIES, MONTHS, TODAY, ZONES, utc_days

pytestmark = pytest.mark.slow

KINDS = ("ddi", "user")
# Two companies the recorded history never names: a late batch may bring them in.
EVERY_COMPANY = (*COMPANIES, "delta", "epsilon")
ADMIN = Principal.cli()
SETTINGS = settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    # Each example is a second or so: shrinking one would take minutes.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)


@pytest.fixture
def companies(factory):
    for company in EVERY_COMPANY:
        factory.company(company)


def forget_closes() -> None:
    with write_transaction() as session:
        session.execute(delete(CloseWrite))
        session.execute(delete(ClosedFigures))
        session.execute(delete(MonthClose))


def previous(year: int, month: int) -> tuple[int, int]:
    return (year, month - 1) if month > 1 else (year - 1, 12)


@st.composite
def batches(draw, spans: list[tuple[datetime, datetime]], serial: list[int]):
    """CSV lines of a late batch: a few closed intervals of new keys, each within one of
    `spans` (the months around the closed one), in any company."""
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        start, end = draw(st.sampled_from(spans))
        hours = int((end - start).total_seconds() // 3600)
        begin = start + timedelta(hours=draw(st.integers(0, hours - 1)))
        length = timedelta(minutes=draw(st.integers(1, 40 * 24 * 60)))
        finish = min(begin + length, utcnow() - timedelta(minutes=5))
        kind = draw(st.sampled_from(KINDS))
        company = draw(st.sampled_from(EVERY_COMPANY))
        serial[0] += 1
        key = f"44:{7100000 + serial[0]}" if kind == "ddi" else f"late{serial[0]}"
        lines.append(f"{kind},{company},{key},{iso(begin)},{iso(finish)}")
    return lines


def import_batch(lines: list[str]) -> None:
    content = "\n".join(["kind,company,key,start,end", *lines]) + "\n"
    result = history_import.import_csv(ADMIN, content)
    assert result.written == len(lines)


def adjustments(year: int, month: int, companies: list[str] | None) -> dict[str, Any]:
    scope: dict[str, Any] = {"month": month, "year": year}
    if companies is not None:
        scope["company"] = companies
    request = reports.parse_scope(scope)
    return month_close.adjustments(ADMIN, request, today=TODAY)["values"]


def answers(months: list[tuple[int, int]], subset: list[str]) -> Any:
    """Every answer the record serves: readAdjustments of each closed month, for every company
    and for `subset`, and `billing status` (companies changed per month)."""
    return (
        {m: (adjustments(*m, None), adjustments(*m, subset)) for m in months},
        [(s.close.label, s.changed) for s in month_close.status(today=TODAY)],
    )


def set_kept(value: bool) -> None:
    with write_transaction() as session:
        session.execute(
            update(MonthClose).where(MonthClose.reopened_at.is_(None)).values(writes_kept=value)
        )


def close(year: int, month: int) -> None:
    done = month_close.close_month(ADMIN, month_close.MonthRequest(month, year), today=TODAY)
    assert done.writes_kept


@SETTINGS
@given(data=st.data())
def test_the_changes_from_the_record_equal_the_full_comparison(app, companies, data):
    year, month = data.draw(st.sampled_from(MONTHS), label="month")
    zone = data.draw(st.sampled_from(ZONES), label="zone")
    app.config["REPORT_TIMEZONE"] = zone
    before = previous(year, month)
    months = [(year, month), before]
    days = utc_days(year, month, zone)
    earlier = utc_days(*before, zone)
    after = days[-1][2]
    spans = [
        (days[0][1], days[-1][2]),  # the month
        (earlier[0][1], earlier[-1][2]),  # the month before: its level carries in, or not
        (after, after + timedelta(days=20)),  # after it: changes neither
        (earlier[10][1], days[12][1]),  # across the boundary
    ]
    serial = [0]
    forget_closes()
    record(draw_history(data, year, month, [zone], "original"))
    if data.draw(st.booleans(), label="a batch before the close"):
        import_batch(data.draw(batches(spans, serial), label="batch before"))
    close(*before)
    close(year, month)
    labels = [f"{y:04d}-{m:02d}" for y, m in months]
    assert answers(months, ["alpha"]) == ({m: ({}, {}) for m in months}, [(x, 0) for x in labels])
    if data.draw(st.booleans(), label="reopened and closed again"):
        import_batch(data.draw(batches(spans, serial), label="batch while closed once"))
        month_close.reopen_month(ADMIN, month_close.MonthRequest(month, year), "late", TODAY)
        close(year, month)
    for i in range(data.draw(st.integers(1, 3), label="late batches")):
        import_batch(data.draw(batches(spans, serial), label=f"late batch {i}"))
    subset = data.draw(
        st.lists(st.sampled_from(EVERY_COMPANY), min_size=1, max_size=3, unique=True),
        label="companies asked",
    )

    assert_close_writes_cover()
    fast = answers(months, subset)
    set_kept(False)  # the full comparison of every company's marks, as before the record
    try:
        full = answers(months, subset)
    finally:
        set_kept(True)
    event(f"companies changed: {sorted(n for _, n in full[1])}")
    assert fast == full


def test_every_company_noted_is_joined_and_only_those_changed_are_listed(app, companies):
    """For every company, the readers join the record in the database (no list of companies
    as parameters) and read the close's stored rows in one range: still exactly the companies
    whose figures differ. Beta is written to (a late interval in the month before, ended
    before the month) with figures that come back equal: noted, recomputed, not listed nor
    counted; alpha and delta (a company new to the month) are listed, in order."""
    year, month = 2025, 11
    app.config["REPORT_TIMEZONE"] = "Europe/London"
    days = utc_days(year, month, "Europe/London")
    earlier = utc_days(*previous(year, month), "Europe/London")
    forget_closes()
    record(
        {
            "ddi": [
                ("alpha", earlier[3][1], None),
                ("beta", days[2][1], days[9][1]),
                ("gamma", days[5][1], days[6][1]),
            ],
            "user": [],
        }
    )
    close(year, month)
    assert answers([(year, month)], ["beta"])[0][(year, month)] == ({}, {})  # nothing noted
    import_batch(
        [
            f"ddi,alpha,44:7000011,{iso(days[3][1])},{iso(days[4][1])}",
            f"ddi,beta,44:7000012,{iso(earlier[5][1])},{iso(earlier[6][1])}",
            f"ddi,delta,44:7000013,{iso(days[16][1])},{iso(days[18][1])}",
        ]
    )
    period = periods.resolve(month, year, periods.zone("Europe/London"), TODAY)
    shut = closed_figures.closing(db.session(), period)
    assert shut is not None and shut.writes_kept
    assert close_writes.written(db.session(), shut.id, "ddi") == {"alpha", "beta", "delta"}
    query = month_close._candidates(shut, "ddi", period, None)
    assert isinstance(query, Select)  # the path under test: the record joined
    assert closed_figures.lists_among(db.session(), shut, "ddi", query) == closed_figures.lists(
        db.session(), shut, "ddi", ["alpha", "beta", "delta"]
    )

    fast = answers([(year, month)], ["beta", "delta"])
    values = fast[0][(year, month)][0]
    assert list(values) == ["alpha", "delta"]
    alpha = values["alpha"]["ddi"]["dates"]
    assert list(alpha) == [days[3][0].isoformat()]  # one more DDI all day on the 4th
    assert alpha[days[3][0].isoformat()]["now"] == alpha[days[3][0].isoformat()]["closed"] + 1
    assert list(fast[0][(year, month)][1]) == ["delta"]  # beta asked for: unchanged
    assert fast[1] == [(f"{year:04d}-{month:02d}", 2)]
    set_kept(False)  # the full comparison of every company's marks
    try:
        assert answers([(year, month)], ["beta", "delta"]) == fast
    finally:
        set_kept(True)
