"""A company's page (/companies/<id>): its DDIs and phone users now, this month's daily peaks,
the last twelve months' billable totals, and (System-Admin) the accounts granted on it.

Who may open it is Principal.may_view_company; a company outside it answers NotFound, exactly
like a missing one. The billing figures are the reports' own numbers (reports.peak_lists, read
for one company over the twelve months at once), shown only to a principal that may read this
company's reports (Principal.may_report_on): a Company-Admin without a reporting grant sees the
counts now and the links, not the billing history. The numbers reserved for the company
(docs/numbers.md) are shown to whoever administers it, who may list them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from flask import current_app
from sqlalchemy import func, select

from ..access import Principal
from ..errors import NotFound
from ..extensions import db
from ..models import (
    Account,
    Company,
    Ddi,
    Number,
    PhoneUser,
    account_admin_companies,
    account_reporting_companies,
)
from . import inventory
from .billing import month_changes, periods, reports

MONTHS = 12


@dataclass(frozen=True)
class DayPeaks:
    """One day's billable peaks: the most DDIs and phone users active at once."""

    day: date
    ddis: int
    users: int


@dataclass(frozen=True)
class MonthTotal:
    """One month's billable totals (the sum of its days' peaks), as the monthly report gives."""

    year: int
    month: int
    days: int  # days counted: the whole month, or the 1st to today for the current one
    ddi_days: int
    user_days: int
    to_date: bool  # the current month, still running


@dataclass(frozen=True)
class Billing:
    today: date
    days: list[DayPeaks]  # this month, the 1st to today
    months: list[MonthTotal]  # oldest first; the current month (to date) last
    changes: dict[str, month_changes.Changes]  # kind: added and removed this month, to date


@dataclass(frozen=True)
class Grantee:
    username: str
    active: bool


@dataclass(frozen=True)
class Overview:
    id: str
    name: str
    created_at: datetime | None
    ddis: int  # now
    users: int  # now
    billing: Billing | None  # None: the principal may not read this company's billing counts
    admins: list[Grantee] | None  # Company-Admin grants; None unless a System-Admin asks
    reporters: list[Grantee] | None  # Billing/Call Reporting grants; likewise
    # Numbers reserved for it today; None unless the principal administers the company.
    reserved: int | None = None


def overview(principal: Principal, company_id: str, today: date | None = None) -> Overview:
    """What the company page shows; NotFound for a company the principal may not see, as for
    one that does not exist. `today` (in REPORT_TIMEZONE) defaults to the real one."""
    if not principal.may_view_company(company_id):
        raise NotFound("No such company.")
    company = db.session.get(Company, company_id)
    if company is None:
        raise NotFound("No such company.")
    ddi_count = db.session.scalar(select(func.count()).where(Ddi.company == company_id)) or 0
    user_count = db.session.scalar(select(func.count()).where(PhoneUser.company == company_id)) or 0
    billing = billing_of(company_id, today) if principal.may_report_on(company_id) else None
    admins = reporters = None
    if principal.system_admin:
        admins = _grantees(account_admin_companies, company_id)
        reporters = _grantees(account_reporting_companies, company_id)
    reserved = reserved_count(company_id) if principal.may_admin(company_id) else None
    return Overview(
        company.id,
        company.name,
        company.created_at,
        ddi_count,
        user_count,
        billing,
        admins,
        reporters,
        reserved,
    )


def reserved_count(company_id: str) -> int:
    """How many numbers are reserved for the company today (held through today or later; a
    reservation past its last day is available, inventory.state_of). No access check:
    `overview` asks the Principal. One range of ix_numbers_held_for, the company's numbers
    held for it, however large the stock."""
    query = select(func.count()).where(
        Number.held_for == company_id, inventory.in_state(inventory.RESERVED, inventory.today())
    )
    return db.session.scalar(query) or 0


def _month_shift(year: int, month: int, step: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + step
    return index // 12, index % 12 + 1


def billing_of(company_id: str, today: date | None = None) -> Billing:
    """The company's daily peaks of this month and its totals of the last MONTHS months, the
    current one to date (no access check: `overview` asks the Principal). Two reads of the
    report rollup per kind, for the whole span at once."""
    tz = periods.zone(current_app.config["REPORT_TIMEZONE"])
    today = today or periods.today_in(tz)
    months = [
        periods.resolve(month, year, tz, today)
        for year, month in (
            _month_shift(today.year, today.month, -back) for back in range(MONTHS - 1, -1, -1)
        )
    ]
    span = periods.Period(
        months[0].year, months[0].month, tuple(day for m in months for day in m.days)
    )
    zeros = [0] * len(span.days)
    ddis = reports.peak_lists("ddi", span, [company_id]).get(company_id, zeros)
    users = reports.peak_lists("user", span, [company_id]).get(company_id, zeros)
    totals: list[MonthTotal] = []
    offset = 0
    for m in months:
        n = len(m.days)
        totals.append(
            MonthTotal(
                m.year,
                m.month,
                n,
                sum(ddis[offset : offset + n]),
                sum(users[offset : offset + n]),
                (m.year, m.month) == (today.year, today.month),
            )
        )
        offset += n
    current = months[-1]
    first = len(span.days) - len(current.days)
    days = [DayPeaks(d.day, ddis[first + i], users[first + i]) for i, d in enumerate(current.days)]
    changes = {kind: month_changes.changes(kind, company_id, current) for kind in ("ddi", "user")}
    return Billing(today, days, totals, changes)


def _grantees(table, company_id: str) -> list[Grantee]:
    query = (
        select(Account.username, Account.active)
        .join(table, table.c.account_id == Account.id)
        .where(table.c.company_id == company_id)
        .order_by(Account.username)
    )
    return [Grantee(username, active) for username, active in db.session.execute(query)]
