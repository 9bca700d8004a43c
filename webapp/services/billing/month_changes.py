"""A month of one company against the month before: the difference and percent of the month
totals, and how many records were added and removed in the month (docs/reports.md, "This
month against last month").

The totals are the reports' own (closed months' stored figures included); the counts read the
history: an interval of the company that starts within the month is one added, one that ends
within it one removed (a move is removed from one company and added to the other). An interval
of zero length counts nothing, as in the reports. Cost: two counts for one company (index
ranges on the starts and on the ends of the month), so only the single-company views ask for
it.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from sqlalchemy import func, select

from ...extensions import db
from ...models import HistoryInterval
from . import periods


@dataclass(frozen=True)
class Changes:
    """Records of one kind that began (added) and ended (removed) for a company in a period."""

    added: int
    removed: int


@dataclass(frozen=True)
class Comparison:
    """This month's total against last month's: the difference and, where last month's is not
    0, the percent of it (one decimal, half-up)."""

    this_total: int
    last_total: int
    difference: int
    percent: Decimal | None


def compare(this_total: int, last_total: int) -> Comparison:
    """The difference `this_total - last_total` and its percent of `last_total` (None when
    last month's total is 0: no percent of nothing)."""
    difference = this_total - last_total
    percent = None
    if last_total:
        percent = (Decimal(difference) * 100 / Decimal(last_total)).quantize(
            Decimal("0.1"), ROUND_HALF_UP
        )
    return Comparison(this_total, last_total, difference, percent)


def changes(kind: str, company: str, period: periods.Period) -> Changes:
    """How many of the company's `kind` intervals started and ended within the period's days
    ([period.start, period.end) in UTC), zero-length intervals left out. No access check: the
    caller has asked the Principal."""
    lo, hi = period.start, period.end
    h = HistoryInterval
    nonzero = (h.end_at.is_(None)) | (h.end_at > h.start_at)
    mine = (h.kind == kind, h.company == company, nonzero)
    # Two counts, each a range on one column, so each can use its index (kind, company,
    # start) for the starts, (kind, end) for the ends, rather than one scan of the company's
    # whole history.
    added = db.session.scalar(select(func.count()).where(*mine, h.start_at >= lo, h.start_at < hi))
    removed = db.session.scalar(select(func.count()).where(*mine, h.end_at >= lo, h.end_at < hi))
    return Changes(int(added or 0), int(removed or 0))
