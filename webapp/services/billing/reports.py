"""Billing counts: per company and calendar day, the peak number of DDIs or phone users active
at the same moment, from the history intervals alone (docs/reports.md).

One aggregate query per report. Each interval touching the period becomes a +1 event at its
start (clamped to the period start) and a -1 event at its end; a running sum per company,
ordered by time with ends before starts at the same instant (intervals are half-open), is the
number active right after each event. A 0 event at each day's start carries the level into days
without events. A day's peak is the largest running level among the events inside the day:
day_peak.sweep is the definition, this query its SQL equivalent for the report's fallback. The
cost grows with the intervals touching the period plus companies x days.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Any

from flask import current_app
from pydantic import Field, TypeAdapter, with_config
from sqlalchemy import (
    DateTime,
    Integer,
    and_,
    case,
    func,
    literal,
    null,
    or_,
    select,
    true,
    union_all,
)
from sqlalchemy.sql import Select
from sqlalchemy.sql.elements import Over
from sqlalchemy.sql.functions import FunctionElement
from typing_extensions import TypedDict

from ...access import Principal, within
from ...errors import Invalid
from ...extensions import db
from ...models import Company, HistoryInterval
from ...observability.metrics import REPORT_SECONDS, timed, timed_report
from ..fields import MAX_COMPANIES, STRICT, Bounded, CompanyList, validated
from . import _rollup_sums, closed_figures, periods, ranks, report_json, rollups

ANSWER_KEYS = {  # report kind: (per-day average key, month total key)
    "ddi": ("billableDDIDaysPerDay", "billableDDIDaysForMonth"),
    "user": ("billableUserDaysPerDay", "billableUserDaysForMonth"),
}
MIN_YEAR, MAX_YEAR = 1970, 9999
MONTH, YEAR = Bounded(1, 12), Bounded(MIN_YEAR, MAX_YEAR)
# A report month may not be in the future: the OpenAPI document states today's bounds, which
# periods.resolve checks.
FUTURE_MONTH = (
    "A month in the future is refused (400): `year` is at most the current year in "
    "REPORT_TIMEZONE and, in that year, `month` at most the current month. This document is "
    "made when it is served, so those bounds are today's."
)
YEAR_NEEDS_MONTH = "A `year` without a `month` is refused (400)."


@with_config(STRICT)
class ReportScope(TypedDict, total=False):
    company: Annotated[
        CompanyList | None,
        Field(
            description=f"The companies, at most {MAX_COMPANIES:,} (default: every company the "
            "caller may see); unknown or invisible ones are left out."
        ),
    ]
    month: Annotated[int, MONTH] | None
    year: Annotated[int, YEAR] | None


ReportScope.__doc__ = (
    "Which companies and month a report covers. No month: the current month to date; a month "
    f"without a year: its most recent occurrence that is not in the future. {YEAR_NEEDS_MONTH} "
    f"{FUTURE_MONTH}"
)
REPORT_SCOPE = TypeAdapter(ReportScope)


@dataclass(frozen=True)
class ReportRequest:
    companies: list[str] | None  # None: every visible company
    month: int | None
    year: int | None


def parse_scope(scope: Any) -> ReportRequest:
    """Validate a report `scope` object (ReportScope): Invalid naming the first field at fault.
    The month's own bounds today (not in the future) are periods.resolve's."""
    values = validated(REPORT_SCOPE, {} if scope is None else scope, scope_invalid)
    return ReportRequest(values.get("company"), values.get("month"), values.get("year"))


def scope_invalid(where: tuple[str | int, ...], why: str) -> Invalid:
    """A report's or a month's scope at fault, in the API's words: `fields` names the member
    without 'scope.'."""
    name = str(where[0]) if where else "scope"
    if why == "unknown field":
        message = f"Field '{name}' is not known here."
    elif len(where) > 1:
        message = f"Every company identifier {why}."
    elif why == "must be an array":
        message = "'scope.company' must be an array of company identifiers."
    else:
        said = "is required" if why == "required" else why
        message = f"'{'scope.' + name if where else 'scope'}' {said}."
    return Invalid(message, {name: why})


def report(principal: Principal, kind: str, request: ReportRequest, today: date | None = None):
    """The report for `kind` ('ddi' or 'user'): {company id: entry} for every requested company
    the principal may see, zeros included, in identifier order.

    Guarantees: every day of the period is present in order; each value is the exact peak of
    simultaneously active records that day in REPORT_TIMEZONE; the month total is their sum and
    the per-day figure that sum / days rounded half-up to 4 places. For a closed month every
    value is the one stored at its close instead, whatever the history says now
    (docs/month-close.md).
    """
    return answer(principal, kind, request, today)["values"]


@timed_report("answer", kind_at=1)
def answer(
    principal: Principal, kind: str, request: ReportRequest, today: date | None = None
) -> dict[str, Any]:
    """The API's report answer: {"period": the month and whether it is closed, "values":
    report()'s}; both from one decision on whether the month is closed."""
    found = _answered(principal, kind, request, today)
    return {
        "period": found.period,
        "values": {
            company_id: _entry(kind, name, found.labels, values)
            for company_id, name, values in found.entries()
        },
    }


@timed_report("answer", kind_at=1)
def answer_json(
    principal: Principal,
    kind: str,
    request: ReportRequest,
    today: date | None = None,
    *,
    ensure_ascii: bool = True,
) -> str:
    """json.dumps({"result": "success", **answer(...)}, separators=(",", ":"),
    ensure_ascii=ensure_ascii), byte for byte, written without building answer()'s dicts
    (report_json.py): the API's answer, whose dicts and their encoding cost more than reading
    the figures at 10,000 companies."""
    found = _answered(principal, kind, request, today)
    head = {"result": "success", "period": found.period}
    return report_json.answer_text(
        head, found.labels, ANSWER_KEYS[kind], found.entries(), _per_day, ensure_ascii=ensure_ascii
    )


@dataclass(frozen=True)
class _Answered:
    """What a report answer says, before it is written as dicts or as JSON text."""

    period: dict[str, Any]  # closed_figures.period_json's
    labels: list[str]  # each day of the period, yyyy-mm-dd
    companies: list[tuple[str, str]]  # (id, name) of the companies answered, in order
    peaks: dict[str, list[int]]  # their day values (a company missing: zeros)

    def entries(self) -> Iterator[tuple[str, str, list[int]]]:
        zeros = [0] * len(self.labels)
        peaks = self.peaks
        return ((c, name, peaks.get(c, zeros)) for c, name in self.companies)


def _answered(
    principal: Principal, kind: str, request: ReportRequest, today: date | None
) -> _Answered:
    """The answer's period, companies and figures, from one decision on whether the month
    is closed."""
    principal.require_report()
    period, close = _period(request, today)
    companies = visible_companies(principal, request.companies)
    everyone = principal.reportable_companies() is None and request.companies is None
    wanted = None if everyone else [c for c, _ in companies]
    return _Answered(
        period=closed_figures.period_json(period.year, period.month, close),
        labels=[d.day.isoformat() for d in period.days],
        companies=companies,
        peaks=_peak_lists(kind, period, wanted, close) if companies else {},
    )


def _period(
    request: ReportRequest, today: date | None
) -> tuple[periods.Period, closed_figures.Close | None]:
    """The period asked for, and the close whose stored figures answer for it (None: open)."""
    tz = periods.zone(current_app.config["REPORT_TIMEZONE"])
    period = periods.resolve(request.month, request.year, tz, today or periods.today_in(tz))
    return period, closed_figures.closing(db.session(), period)


def _entry(kind: str, name: str, labels: list[str], day_values: list[int]) -> dict[str, Any]:
    """One company's answer: its name, the days, each day's peak, the month total and the
    per-day figure."""
    per_day_key, month_key = ANSWER_KEYS[kind]
    total = sum(day_values)
    days = len(labels)
    return {
        "name": name,
        "days": days,
        "dates": dict(zip(labels, day_values, strict=True)),
        per_day_key: _per_day(total, days),
        month_key: total,
    }


@dataclass(frozen=True)
class Ranking:
    """One page of a report's companies, largest billable month total first."""

    period: periods.Period
    close: closed_figures.Close | None  # the close whose stored figures these are (None: open)
    chosen: int  # the companies of the choice the principal may see
    matched: int  # of those, the ones the filter keeps
    offset: int  # the page's first company's position among the matched, from 0
    totals: dict[str, Any]  # an entry like report()'s: the sum over every company chosen
    rows: dict[str, dict[str, Any]]  # the page's companies, in rank order: report()'s entries


@timed_report("ranking", kind_at=1)
def ranking(
    principal: Principal,
    kind: str,
    request: ReportRequest,
    *,
    contains: str = "",
    offset: int = 0,
    limit: int = 50,
    today: date | None = None,
) -> Ranking:
    """The companies of `request` the principal may see, ranked by billable month total
    (largest first, ties by identifier), `limit` of them from `offset` (moved back to the last
    page's start when past the end); only those whose identifier or name contains `contains`
    (case-insensitive), while the totals row sums every company of the choice.

    Guarantees: every figure equals report()'s for the same request; the daily values are
    computed only for the page's companies. For every company, unfiltered, the database ranks
    them and answers the page alone (ranks.py); otherwise the ranking and the totals row come
    from one aggregate over the rollup (rollups.month_figures)."""
    principal.require_report()
    period, close = _period(request, today)
    everyone = principal.reportable_companies() is None and request.companies is None
    labels = [d.day.isoformat() for d in period.days]
    if everyone and not contains:
        fast = _ranked_page(kind, period, close, offset, limit)
        if fast is not None:
            count, start, page, day_totals = fast
            shown = [c for c, _ in page]
            counts = (count, count, start)
            return _ranking_of(
                kind, period, close, labels, counts, shown, _names(shown), day_totals
            )
    companies = (
        None if everyone and not contains else visible_companies(principal, request.companies)
    )
    return _ranked_here(kind, period, close, labels, companies, everyone, contains, offset, limit)


def _ranked_here(
    kind: str,
    period: periods.Period,
    close: closed_figures.Close | None,
    labels: list[str],
    companies: list[tuple[str, str]] | None,
    everyone: bool,
    contains: str,
    offset: int,
    limit: int,
) -> Ranking:
    """ranking() with every month total in hand, ranked here: `companies` the choice (None:
    every company, unfiltered, when the database cannot rank them: ranks.open_page)."""
    if companies is None:
        # Every company, unfiltered: the figures name every company, so only the page's
        # companies need their names (10,000 at a provider).
        month_totals, day_totals = _month_figures(kind, period, None, close)
        ids = sorted(month_totals)
        chosen = len(ids)
    else:
        names = dict(companies)
        if companies:
            wanted = None if everyone else [c for c, _ in companies]
            month_totals, day_totals = _month_figures(kind, period, wanted, close)
        else:
            month_totals, day_totals = {}, [0] * len(labels)
        needle = contains.casefold()
        ids = [c for c, name in companies if needle in c.casefold() or needle in name.casefold()]
        chosen = len(companies)
    # Largest total first, ties by identifier: a stable sort of the identifiers (in order) by
    # total alone, with C-level keys (10,000 companies).
    ranked = sorted(ids, key=lambda c: month_totals.get(c, 0), reverse=True)
    offset = _page_start(offset, len(ranked), limit)
    shown = ranked[offset : offset + limit]
    if companies is None:
        names = _names(shown)
    return _ranking_of(
        kind, period, close, labels, (chosen, len(ranked), offset), shown, names, day_totals
    )


def _page_start(offset: int, count: int, limit: int) -> int:
    """`offset`, or the last page's start when it is past the last of `count` rows."""
    return max(0, (count - 1) // limit * limit) if offset >= count else offset


def _ranked_page(
    kind: str,
    period: periods.Period,
    close: closed_figures.Close | None,
    offset: int,
    limit: int,
) -> tuple[int, int, ranks.Page, list[int]] | None:
    """(company count, the offset used, the page ranked in the database, the day sums) for
    every company, unfiltered: no per-company row leaves the database but the page's
    (ranks.py). None when the kept sums cannot answer (ranks.open_page) or the rollup is not
    kept in REPORT_TIMEZONE."""
    if close is None and not _rollup_ready(kind):
        return None
    session = db.session()
    count = ranks.company_count(session)
    offset = _page_start(offset, count, limit)
    if close is not None:
        return count, offset, *ranks.closed_page(session, close, kind, offset, limit)
    found = ranks.open_page(session, kind, period, offset, limit, companies=count)
    return None if found is None else (count, offset, *found)


def _ranking_of(
    kind: str,
    period: periods.Period,
    close: closed_figures.Close | None,
    labels: list[str],
    counts: tuple[int, int, int],
    shown: list[str],
    names: Mapping[str, str],
    day_totals: list[int],
) -> Ranking:
    """The Ranking of a page: `counts` (chosen, matched, offset), the page's companies in
    order with their names, and the totals row's day sums; only the page's daily values are
    read (_peak_lists)."""
    chosen, matched, offset = counts
    lists = _peak_lists(kind, period, shown, close) if shown else {}
    zeros = [0] * len(labels)
    return Ranking(
        period=period,
        close=close,
        chosen=chosen,
        matched=matched,
        offset=offset,
        totals=_entry(kind, "All companies", labels, day_totals),
        rows={c: _entry(kind, names[c], labels, lists.get(c, zeros)) for c in shown},
    )


def report_rows(
    principal: Principal,
    kind: str,
    request: ReportRequest,
    today: date | None = None,
    chunk: int = 1000,
) -> tuple[periods.Period, Iterator[tuple[str, dict[str, Any]]]]:
    """report() as (period, lazy (company id, entry) pairs in identifier order), computed
    `chunk` companies at a time, for a download that streams. Permission, parameters and the
    choice are checked before it returns; the pairs need the request's database session."""
    principal.require_report()
    period, close = _period(request, today)
    companies = visible_companies(principal, request.companies)
    everyone = principal.reportable_companies() is None and request.companies is None
    labels = [d.day.isoformat() for d in period.days]
    zeros = [0] * len(labels)

    def pairs() -> Iterator[tuple[str, dict[str, Any]]]:
        # From the history (no rollup) one query for the whole choice costs about what one
        # for a chunk does: then one chunk.
        step = chunk if close is not None or _rollup_ready(kind) else max(len(companies), 1)
        # Timed while the download streams: the time its consumer takes between rows counts.
        with timed(REPORT_SECONDS, kind, "rows"):
            for start in range(0, len(companies), step):
                part = companies[start : start + step]
                wanted = None if everyone and step >= len(companies) else [c for c, _ in part]
                lists = _peak_lists(kind, period, wanted, close)
                for company_id, name in part:
                    yield company_id, _entry(kind, name, labels, lists.get(company_id, zeros))

    return period, pairs()


def _per_day(total: int, days: int) -> float | int:
    """total / days rounded half-up to 4 places (0 for no days), for a total of 0 or more.

    In integers, exactly: n = round-half-up(total x 10,000 / days), and n / 10,000 is the
    nearest float to the 4-place decimal, as float(Decimal) gives it (tests/test_report_json.py
    holds it to the Decimal computation); a tenth of its cost, paid per company."""
    if days == 0:
        return 0
    return (total * 20_000 + days) // (2 * days) / 10_000


def visible_companies(principal: Principal, wanted: list[str] | None) -> list[tuple[str, str]]:
    """(id, name) of the companies asked for (None: every one) whose reports the principal may
    read, in identifier order: unknown and other companies are left out silently."""
    query = (
        select(Company.id, Company.name)
        .where(within(Company.id, principal.reportable_companies()))
        .order_by(Company.id)
    )
    if wanted is not None:
        query = query.where(Company.id.in_(sorted(set(wanted))))
    # Plain rows on the connection: every company, for a many-company report (10,000 at a
    # provider), without the ORM's per-row work.
    return [(c, name) for c, name in db.session.connection().execute(query).all()]


def _names(companies: list[str]) -> dict[str, str]:
    query = select(Company.id, Company.name).where(Company.id.in_(companies))
    return {c: name for c, name in db.session.connection().execute(query).all()}


@timed_report("peaks", kind_at=0)
def peak_lists(
    kind: str, period: periods.Period, companies: list[str] | None
) -> dict[str, list[int]]:
    """{company: [each day's peak]} for any run of consecutive days (`period.days` may span
    several months: the company page reads twelve at once), with no access check: the caller
    has asked the Principal. The same numbers as `report` for each of its days: a closed
    month's whole-month run answers its stored figures."""
    result = computed_lists(kind, period, companies)
    months: dict[tuple[int, int], list[int]] = {}  # (year, month): its days' indexes
    for i, d in enumerate(period.days):
        months.setdefault((d.day.year, d.day.month), []).append(i)
    closes = closed_figures.latest_of(db.session(), list(months))
    for key, indexes in months.items():
        close = closes.get(key)
        if close is None or not closed_figures.serves(
            close, period.days[indexes[0] : indexes[-1] + 1]
        ):
            continue
        stored = closed_figures.lists(db.session(), close, kind, companies)
        first = indexes[0]
        for company in result.keys() | stored.keys():
            values = result.setdefault(company, [0] * len(period.days))
            values[first : first + len(indexes)] = stored.get(company, [0] * len(indexes))
    return result


def _rollup_ready(kind: str) -> bool:
    """Whether kind's rollup is built in REPORT_TIMEZONE (else reports use the history)."""
    return rollups.built_zone(db.session(), kind) == current_app.config["REPORT_TIMEZONE"]


def _month_figures(
    kind: str,
    period: periods.Period,
    companies: list[str] | None,
    close: closed_figures.Close | None,
) -> tuple[dict[str, int], list[int]]:
    """({company: month total}, [each day's total over the companies]): for every company, from
    the sums kept beside the rollup (a row per company and per day); for a choice, one
    aggregate over the choice's rollup rows; without the rollup, the sums of the lists
    computed from the history. The same numbers every way (tests/test_reports_ranking.py);
    every company named (None: every company there is) is a key, zeros included. A closed
    month's are the stored ones (closed_figures.month_figures)."""
    if close is not None:
        return closed_figures.month_figures(db.session(), close, kind, companies)
    if _rollup_ready(kind):
        if companies is None:
            figures = _rollup_sums.everyone_figures(db.session(), kind, period)
            if figures is not None:
                return figures
        return rollups.month_figures(db.session(), kind, period, companies)
    lists = computed_lists(kind, period, companies)
    day_totals = [0] * len(period.days)
    for values in lists.values():
        day_totals = [a + b for a, b in zip(day_totals, values, strict=True)]
    named = companies if companies is not None else db.session.scalars(select(Company.id))
    totals = dict.fromkeys(named, 0)
    totals.update((company, sum(values)) for company, values in lists.items())
    return totals, day_totals


def _peak_lists(
    kind: str,
    period: periods.Period,
    companies: list[str] | None,
    close: closed_figures.Close | None,
) -> dict[str, list[int]]:
    """{company: [each day's peak]} as the report answers them: stored by `close`, else
    computed now. Companies without a non-zero day may be missing: all zeros."""
    if close is not None:
        return closed_figures.lists(db.session(), close, kind, companies)
    return computed_lists(kind, period, companies)


def computed_lists(
    kind: str, period: periods.Period, companies: list[str] | Select[Any] | None
) -> dict[str, list[int]]:
    """{company: [each day's peak]} from the history as it is now, closed month or not: read
    from the daily rollup when it is built in
    REPORT_TIMEZONE, else computed from the history (the same numbers either way;
    tests/test_rollups.py). Companies without a row may be missing: all zeros."""
    zone_name = rollups.built_zone(db.session(), kind)
    if zone_name == current_app.config["REPORT_TIMEZONE"]:
        return rollups.peak_lists(db.session(), kind, period, companies)
    if zone_name is not None:
        current_app.logger.warning(
            "The %s rollup is kept in %s, not REPORT_TIMEZONE %s: computing from the history. "
            "Run `flask history rollup` to rebuild it.",
            kind,
            zone_name,
            current_app.config["REPORT_TIMEZONE"],
        )
    lists: dict[str, list[int]] = {}
    for (company, i), peak in scratch_peaks(kind, period, companies).items():
        lists.setdefault(company, [0] * len(period.days))[i] = peak
    return lists


def scratch_peaks(
    kind: str, period: periods.Period, companies: list[str] | Select[Any] | None
) -> dict[tuple[str, int], int]:
    """{(company, day index): peak} for the days with a non-zero peak, computed from the
    history intervals alone in one query (the fallback while the rollup is not built)."""
    query = peaks_query(kind, period, companies)
    return {(company, day): int(peak) for company, day, peak in db.session.execute(query) if peak}


def peaks_query(
    kind: str, period: periods.Period, companies: list[str] | Select[Any] | None
) -> Select:
    """The aggregate behind scratch_peaks (exposed for EXPLAIN in bench/): day_peak.sweep, the
    definition of a day's peak, in SQL.

    One sort and one window pass: the running sum is the level after each event, and the
    running maximum of the day marks' indexes tells which day each event falls in. At one
    instant, ends sort before the day mark and starts after it. An end at exactly midnight is
    thus counted in the day before, harmlessly: the level after an end is below one that day
    really had, and the mark that follows carries the same level into the new day.
    """
    h = HistoryInterval
    start, end = period.start, period.end
    days = union_all(
        *[
            select(literal(i, Integer).label("day"), literal(d.start, DateTime).label("ds"))
            for i, d in enumerate(period.days)
        ]
    ).cte("days")
    touching = (
        select(h.company, h.start_at, h.end_at)
        .where(
            h.kind == kind,
            true() if companies is None else h.company.in_(companies),
            h.start_at < end,
            or_(h.end_at.is_(None), and_(h.end_at > start, h.end_at > h.start_at)),
        )
        .cte("touching")
    )
    no_day = null().cast(Integer)
    starts = select(
        touching.c.company,
        case(
            (touching.c.start_at < start, literal(start, DateTime)), else_=touching.c.start_at
        ).label("t"),
        literal(1, Integer).label("d"),
        no_day.label("day"),
    )
    ends = select(touching.c.company, touching.c.end_at, literal(-1, Integer), no_day).where(
        touching.c.end_at.is_not(None), touching.c.end_at < end
    )
    active_companies = select(touching.c.company).distinct().subquery()
    day_marks = select(
        active_companies.c.company, days.c.ds, literal(0, Integer), days.c.day
    ).select_from(active_companies.join(days, literal(True)))
    events = union_all(starts, ends, day_marks).subquery("events")

    def running_total(aggregate: FunctionElement[Any]) -> Over[Any]:
        return aggregate.over(
            partition_by=events.c.company, order_by=(events.c.t, events.c.d), rows=(None, 0)
        )

    running = select(
        events.c.company,
        running_total(func.sum(events.c.d)).label("level"),
        running_total(func.max(events.c.day)).label("day"),
    ).subquery("running")
    return select(running.c.company, running.c.day, func.max(running.c.level)).group_by(
        running.c.company, running.c.day
    )
