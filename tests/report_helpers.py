"""Report numbers as {(company, day index): peak} dicts, for tests that compare the ways a day's
peak is computed (the rollup, the report's own path, the from-scratch query)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from webapp.services.billing import periods, reports, rollups


def nonzero_days(lists: dict[str, list[int]]) -> dict[tuple[str, int], int]:
    """{company: [each day's peak]} as {(company, day index): peak}, zero days left out."""
    return {
        (company, i): peak
        for company, values in lists.items()
        for i, peak in enumerate(values)
        if peak
    }


def rollup_peaks(
    session: Session, kind: str, period: periods.Period, companies: list[str] | None
) -> dict[tuple[str, int], int]:
    """The non-zero days from the rollup; `companies` None means every company."""
    return nonzero_days(rollups.peak_lists(session, kind, period, companies))


def daily_peaks(
    kind: str, period: periods.Period, companies: list[str] | None
) -> dict[tuple[str, int], int]:
    """The non-zero days as the report computes them (rollup, or the history while it is not
    built in REPORT_TIMEZONE); `companies` None means every company."""
    return nonzero_days(reports.computed_lists(kind, period, companies))
