"""Closing and reopening report months, and what changed since a close (docs/month-close.md).

Closing a month stores both reports, every company, as computed at that moment; from then on
the reports of that month answer the stored figures (reports.py asks closed_figures), and
`adjustments` compares them with what the history gives now. A close reads every figure from
one snapshot (write_transaction(snapshot=True)): a write committed meanwhile is wholly in the
figures or wholly out of them. Each close of a month is a new version; reopening keeps the old
versions' figures for the record.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Any, NotRequired

from flask import current_app
from pydantic import Field, TypeAdapter, with_config
from sqlalchemy import Select, update
from sqlalchemy.exc import IntegrityError
from typing_extensions import TypedDict

from ...access import Principal
from ...database import (
    bulk_cache,
    collector_paused,
    insert_values,
    utcnow,
    write_transaction,
)
from ...errors import Conflict, Invalid
from ...extensions import db
from ...models import ClosedFigures, MonthClose
from .. import fields
from ..fields import STRICT, validated
from ..history import audit, intervals
from . import _rollup_sums, close_writes, closed_figures, periods, reports, rollups
from .closed_figures import Close

KINDS = ("ddi", "user")
REASON_MAX = fields.REASON_MAX
REASON_PATTERN = fields.REASON_PATTERN
# How long a close waits for a history import or rollup rebuild to finish (PostgreSQL) before
# answering 409 "try again" instead of hanging.
LOCK_WAIT_SECONDS = 10


@dataclass(frozen=True)
class MonthRequest:
    month: int
    year: int | None  # None: the month's most recent occurrence, as for reports


@with_config(STRICT)
class Month(TypedDict):
    """A month: without a year, its most recent occurrence that is not in the future."""

    month: Annotated[int, reports.MONTH]
    year: NotRequired[Annotated[int, reports.YEAR] | None]


Month.__doc__ = f"{Month.__doc__} {reports.FUTURE_MONTH}"
MONTH = TypeAdapter(Month)


@with_config(STRICT)
class ClosableMonth(Month):
    """An ended month: the current month (to date) and future ones cannot be closed (400).
    Without a year, the month's most recent occurrence that is not in the future, so not the
    current month. This document is made when it is served, so these bounds are today's in
    REPORT_TIMEZONE."""


# A reopening's reason (parse_reason), as JSON Schema states it.
Reason = Annotated[
    str,
    Field(
        min_length=1,
        max_length=REASON_MAX,
        pattern=REASON_PATTERN,
        description="Why the month is reopened: not only white space, no control character but "
        "line breaks and tabs.",
    ),
]


def parse_scope(scope: Any) -> MonthRequest:
    """Validate closeMonth's and reopenMonth's `scope` (Month; ClosableMonth has the same
    fields): Invalid naming the first field at fault. Whether the month has ended is
    ended_period's to check, whether it is in the future periods.resolve's."""
    values = validated(MONTH, {} if scope is None else scope, reports.scope_invalid)
    return MonthRequest(values["month"], values.get("year"))


def parse_label(text: str) -> MonthRequest:
    """A month written YYYY-MM (the command line's form)."""
    match = re.fullmatch(r"(\d{4})-(\d{2})", text.strip())
    if match is None or not 1 <= int(match[2]) <= 12:
        raise Invalid(
            f"'{text}' is not a month: write YYYY-MM, e.g. 2026-10.", {"month": "YYYY-MM"}
        )
    year = int(match[1])
    if year < reports.MIN_YEAR:
        raise Invalid(f"'{text}': the year must be {reports.MIN_YEAR} or later.", {"month": "year"})
    return MonthRequest(int(match[2]), year)


def parse_reason(value: Any) -> str:
    """A reopening's reason: fields.parse_reason's rule (1 to 500 characters, not only white
    space, no control character but line breaks and tabs), kept as given."""
    return fields.parse_reason(value, "say why the month is reopened")


def _tz():
    return periods.zone(current_app.config["REPORT_TIMEZONE"])


def ended_period(request: MonthRequest, today: date | None = None) -> periods.Period:
    """The month asked for, whole; Invalid unless it has ended in REPORT_TIMEZONE."""
    tz = _tz()
    today = today or periods.today_in(tz)
    period = periods.resolve(request.month, request.year, tz, today)
    if (period.year, period.month) == (today.year, today.month):
        raise Invalid(
            f"{period.year:04d}-{period.month:02d} has not ended in "
            f"{current_app.config['REPORT_TIMEZONE']}: only an ended month can be closed.",
            {"month": "not ended"},
        )
    return period


def check_closable(principal: Principal, request: MonthRequest, today: date | None = None) -> None:
    """What close_month would refuse before computing anything (permission, a month not ended,
    a closed month), for a page that should not offer a Close it would refuse."""
    principal.require_close_months()
    period = ended_period(request, today)
    close = closed_figures.latest(db.session(), period.year, period.month)
    if close is not None and close.closed:
        label = f"{period.year:04d}-{period.month:02d}"
        raise Conflict(f"{label} is already closed (version {close.version}).")


def close_month(principal: Principal, request: MonthRequest, today: date | None = None) -> Close:
    """Close an ended month: store both reports, every company, as they are now.

    Guarantees: every figure stored is the one the open month's report gave at one instant
    (one snapshot, on PostgreSQL too); the new close's version is one more than the month's
    previous close; of concurrent closes of one month exactly one succeeds, every other is a
    Conflict, as is closing a closed month; audited with the version."""
    principal.require_close_months()
    period = ended_period(request, today)
    label = f"{period.year:04d}-{period.month:02d}"
    try:
        with write_transaction(snapshot=True) as session:
            # Before the first read, which takes the snapshot: a history import is wholly
            # before the close (in its figures) or wholly after it (and then warns).
            intervals.exclude_table_lockers(session, wait_seconds=LOCK_WAIT_SECONDS)
            # And a rollup writer is in the figures or notes its write (close_writes).
            close_writes.hold_writers(session, wait_seconds=LOCK_WAIT_SECONDS)
            previous = closed_figures.latest(session, period.year, period.month)
            if previous is not None and previous.closed:
                raise Conflict(f"{label} is already closed (version {previous.version}).")
            row = MonthClose(
                year=period.year,
                month=period.month,
                version=previous.version + 1 if previous is not None else 1,
                timezone=current_app.config["REPORT_TIMEZONE"],
                closed_at=utcnow().replace(microsecond=0),
                closed_by=principal.username,
                ddi_days="",
                user_days="",
                with_marks=_rollups_ready(),
            )
            # The record of writes since the close starts with it, when marks make it usable.
            row.writes_kept = row.with_marks
            session.add(row)
            session.flush()  # claims the version: a concurrent close of the month fails here
            with collector_paused(), bulk_cache(session):  # a million rows at 100,000 companies
                row.ddi_days = closed_figures.encode(_store(row, "ddi", period))
                row.user_days = closed_figures.encode(_store(row, "user", period))
            done = closed_figures.from_row(row)  # the answer: what this close stored
            detail = f"version {row.version}, figures in {row.timezone}"
            audit.record(
                session,
                [
                    audit.entry(
                        principal, "month.close", f"month {label}", detail=detail, at=row.closed_at
                    )
                ],
            )
    except IntegrityError:
        raise Conflict(f"{label} was closed by a concurrent request.") from None
    return done


def _rollups_ready() -> bool:
    """Whether both rollups are kept in REPORT_TIMEZONE (then a close stores their marks)."""
    zone = current_app.config["REPORT_TIMEZONE"]
    return all(rollups.built_zone(db.session(), kind) == zone for kind in KINDS)


def _store(close: MonthClose, kind: str, period: periods.Period) -> list[int]:
    """Write the close's figures of `kind`: each company with a non-zero day or rollup marks
    (with the marks, when the close keeps them); return each day's sum over every company.
    Linear in the companies, with no per-company query: the level each carries into the month
    and the month's rows are read once for both the figures and the marks, the rows go in one
    bulk insert."""
    session = db.session()
    figures: Iterable[rollups.Stored]  # (company, total, days as text, marks)
    if close.with_marks:  # both rollups kept in REPORT_TIMEZONE: computed_lists reads them
        carried = rollups.carried_levels(session, kind, period.days[0].day, None)
        # One read of the month's rows for the figures, their text and the marks; every
        # company it names has marks (a row in the month or a level carried in): stored.
        # Each company's row is worked out as the insert takes it: on PostgreSQL the server
        # stores the rows sent while Python works out the next (the two took 4.6 s and
        # 3.3 s one after the other at 100,000 companies, bench/README.md).
        figures = rollups.close_figures(session, kind, period, carried)
        # The day sums the open month's report shows (ranks.open_page), from the sums kept
        # beside the rollup: equal to the stored figures' (tests/invariants.py), without
        # adding 100,000 companies' days again.
        sums = _rollup_sums.day_totals(session, kind, period)
    else:
        encode = closed_figures.encode
        lists = {
            company: values
            for company, values in reports.computed_lists(kind, period, None).items()
            if any(values)
        }
        figures = [(c, sum(v), encode(v), None) for c, v in sorted(lists.items())]
        days = list(lists.values())
        sums = [sum(day) for day in zip(*days, strict=True)] if days else [0] * len(period.days)
    close_id = close.id
    insert_values(
        session,
        ClosedFigures.__table__,
        ["close_id", "kind", "company", "total", "days", "marks"],
        ((close_id, kind, company, total, text, marks) for company, total, text, marks in figures),
    )
    return sums


def reopen_month(
    principal: Principal, request: MonthRequest, reason: Any, today: date | None = None
) -> Close:
    """Reopen a closed month, with a reason (System-Admin only).

    Guarantees: the month's reports compute from the history again; the close's stored figures
    are kept; its next close is the next version; a month that is not closed is a Conflict
    (also when a concurrent reopen won); audited with the reason."""
    principal.require_system_admin("reopen a closed month")
    text = parse_reason(reason)
    tz = _tz()
    period = periods.resolve(request.month, request.year, tz, today or periods.today_in(tz))
    label = f"{period.year:04d}-{period.month:02d}"
    with write_transaction() as session:
        close = closed_figures.latest(session, period.year, period.month)
        if close is None or not close.closed:
            raise Conflict(f"{label} is not closed.")
        reopened = session.scalars(
            update(MonthClose)
            .where(MonthClose.id == close.id, MonthClose.reopened_at.is_(None))
            .values(
                reopened_at=utcnow().replace(microsecond=0),
                reopened_by=principal.username,
                reopen_reason=text,
            )
            .returning(MonthClose.id)
        ).all()
        if not reopened:  # a concurrent reopen got there first
            raise Conflict(f"{label} is not closed.")
        audit.record(
            session,
            [
                audit.entry(
                    principal,
                    "month.reopen",
                    f"month {label}",
                    detail=f"version {close.version}: {text}",
                )
            ],
        )
    after = closed_figures.latest(db.session(), period.year, period.month)
    assert after is not None
    return after


# --- what changed since a close ------------------------------------------------------------


def adjustments(
    principal: Principal,
    request: reports.ReportRequest,
    today: date | None = None,
    kinds: tuple[str, ...] = KINDS,
) -> dict[str, Any]:
    """readAdjustments' answer for a closed month: {"period": …, "values": {company: {kind:
    {"dates": {day: {"closed", "now"}}, month total key: {"closed", "now"}}}}}.

    Guarantees: exactly the companies (of those requested that the principal may see), kinds
    and days whose figure computed from the history now differs from the stored one; the month
    totals of each kind listed; a month that is not closed is a Conflict. `kinds`: only those
    kinds are compared (a report page shows one)."""
    principal.require_report()
    tz = _tz()
    period = periods.resolve(request.month, request.year, tz, today or periods.today_in(tz))
    close = closed_figures.closing(db.session(), period)
    if close is None:
        raise Conflict(f"{period.year:04d}-{period.month:02d} is not closed.")
    everyone = principal.reportable_companies() is None and request.companies is None
    # Every company: no need to list them (10,000) to learn which differ.
    wanted = (
        None
        if everyone
        else [c for c, _ in reports.visible_companies(principal, request.companies)]
    )
    values: dict[str, dict[str, Any]] = {}
    if wanted != []:
        for company, kind, entry in _differences(close, period, wanted, kinds):
            values.setdefault(company, {})[kind] = entry
    ordered = {c: values[c] for c in sorted(values)}
    return {
        "period": closed_figures.period_json(period.year, period.month, close),
        "values": ordered,
    }


def _differences(
    close: Close,
    period: periods.Period,
    companies: list[str] | None,
    kinds: tuple[str, ...] = KINDS,
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(company, kind, adjustment entry) for each company and kind whose figures now differ
    from the close's, for the companies named (None: every company)."""
    labels = [d.day.isoformat() for d in period.days]
    zeros = [0] * len(labels)
    for kind in kinds:
        month_key = reports.ANSWER_KEYS[kind][1]
        candidates = _candidates(close, kind, period, companies)
        if isinstance(candidates, Select):  # every company noted in the record
            # None noted (the page right after a close): nothing to read.
            if db.session().scalar(candidates.limit(1)) is None:
                continue
            now = reports.computed_lists(kind, period, candidates)
            stored = closed_figures.lists_among(db.session(), close, kind, candidates)
        elif candidates == []:
            continue
        else:
            now = reports.computed_lists(kind, period, candidates)
            stored = closed_figures.lists(db.session(), close, kind, candidates)
        for company in sorted(now.keys() | stored.keys()):
            before, after = stored.get(company, zeros), now.get(company, zeros)
            if before == after:
                continue
            dates = {
                labels[i]: {"closed": b, "now": a}
                for i, (b, a) in enumerate(zip(before, after, strict=True))
                if a != b
            }
            yield (
                company,
                kind,
                {
                    "dates": dates,
                    month_key: {"closed": sum(before), "now": sum(after)},
                },
            )


def _candidates(
    close: Close, kind: str, period: periods.Period, companies: list[str] | None
) -> list[str] | Select[Any] | None:
    """The companies (of those named; None: every one) whose figures may differ from the
    close's: those whose rollup marks differ from the stored ones, when the close stored them
    and the rollup is still kept in the close's zone (equal marks give equal figures:
    rollups.month_marks). Otherwise `companies` itself: every one is recomputed.

    When the close's record of writes is kept (close_writes), the companies noted there: a
    company whose marks differ had its rows written since the close, so they include every one
    the comparison would find, and one written to whose figures came back equal is recomputed
    and not listed (_differences compares the figures), as by the comparison. For every
    company, the record as a query (close_writes.written_query), which the readers join."""
    zone = current_app.config["REPORT_TIMEZONE"]
    if not close.with_marks or close.timezone != zone:
        return companies
    if rollups.built_zone(db.session(), kind) != zone:
        return companies
    if close.writes_kept:
        if companies is None:  # every one noted: the readers join the record themselves
            return close_writes.written_query(close.id, kind)
        return sorted(close_writes.written(db.session(), close.id, kind) & set(companies))
    return _marks_differ(close, kind, period, companies)


def _marks_differ(
    close: Close, kind: str, period: periods.Period, companies: list[str] | None
) -> list[str]:
    """The companies (of those named; None: every one) whose rollup marks now differ from
    those the close stored: one aggregate over the month's rollup rows."""
    now = rollups.month_marks(db.session(), kind, period)
    stored = closed_figures.marks(db.session(), close, kind)
    differ = {
        c for c in now.keys() | stored.keys() if not rollups.same_marks(now.get(c), stored.get(c))
    }
    if companies is not None:
        differ &= set(companies)
    return sorted(differ)


@dataclass(frozen=True)
class Status:
    close: Close
    changed: int  # companies whose figures differ now from the close's


def status(today: date | None = None) -> list[Status]:
    """Every closed month, newest first, with how many companies' figures (either kind) differ
    now from the close's (no access check: for the operator's command line)."""
    tz = _tz()
    today = today or periods.today_in(tz)
    found = []
    for close in closed_figures.every_latest(db.session()):
        if not close.closed:
            continue
        period = periods.resolve(close.month, close.year, tz, today)
        changed = {company for company, _, _ in _differences(close, period, None)}
        found.append(Status(close, len(changed)))
    return found


def latest_close(principal: Principal, year: int, month: int) -> Close | None:
    """The month's latest close, reopened or not (None: never closed), for a report reader:
    a month's state is not company data."""
    principal.require_report()
    return closed_figures.latest(db.session(), year, month)


def closed_day(
    principal: Principal, kind: str, company: str, day: date
) -> tuple[Close, int] | None:
    """For a day of a closed month, its close and the figure it stored for the company that
    day (None: the month is open, or the company is not the principal's to report on)."""
    if not principal.may_report_on(company):
        return None
    close = latest_close(principal, day.year, day.month)
    if close is None or not close.closed:
        return None
    stored = closed_figures.lists(db.session(), close, kind, [company]).get(company)
    return close, stored[day.day - 1] if stored else 0


@dataclass(frozen=True)
class MonthState:
    year: int
    month: int
    running: bool  # the current month, to date: it cannot be closed yet
    close: Close | None  # the month's latest close, reopened or not (None: never closed)

    @property
    def label(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"


RECENT_MONTHS = 12  # ended months the months page lists whether or not they were ever closed


def months(principal: Principal, today: date | None = None) -> list[MonthState]:
    """The months page's rows, newest first: the running month, the last RECENT_MONTHS ended
    months, and every older month ever closed, each with its latest close. Two queries at
    most, whatever the history's length (the months' states are not company data: every report
    reader may see them)."""
    principal.require_report()
    tz = _tz()
    today = today or periods.today_in(tz)
    index = today.year * 12 + today.month - 1
    recent = [divmod(i, 12) for i in range(index, index - RECENT_MONTHS - 1, -1)]
    recent = [(y, m + 1) for y, m in recent if y >= reports.MIN_YEAR]
    closes = {(c.year, c.month): c for c in closed_figures.every_latest(db.session())}
    keys = sorted(set(recent) | set(closes), reverse=True)
    return [
        MonthState(y, m, (y, m) == (today.year, today.month), closes.get((y, m)))
        for y, m in keys
        if (y, m) <= (today.year, today.month)
    ]
