"""Who is acting, and what their grants allow. Services receive a Principal and decide with it.

Which companies a principal may reach is decided here and nowhere else. Each question has its
scope method: None means every company, otherwise the exact set of company identifiers.
`within` turns such a scope into a SQL condition on a company column, so no caller tests a
scope for None itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from sqlalchemy import ColumnElement, true
from sqlalchemy.orm import QueryableAttribute

from .errors import Forbidden

if TYPE_CHECKING:
    from .models import Account

CompanyScope: TypeAlias = frozenset[str] | None
"""The companies a principal may reach for one purpose; None means every company."""
CompanyColumn: TypeAlias = (
    ColumnElement[str]
    | ColumnElement[str | None]
    | QueryableAttribute[str]
    | QueryableAttribute[str | None]
)
"""A column holding company identifiers (Company.id, Ddi.company, AuditEntry.company, …)."""


def within(column: CompanyColumn, scope: CompanyScope) -> ColumnElement[bool]:
    """A SQL condition: the company identifier in `column` lies in `scope` (always true for None,
    never for an empty scope)."""
    if scope is None:
        return true()
    return column.in_(sorted(scope))


def sole_company(scope: CompanyScope) -> str | None:
    """The company `scope` holds when it holds exactly one, else None: a company filter within
    such a scope cannot narrow anything, so pages leave it out (docs/pages.md)."""
    if scope is None or len(scope) != 1:
        return None
    [company] = scope
    return company


ANOTHER_COMPANY = "another company"
TARGET_COMPANY = re.compile(r"^\S+ ([^/\s]+)/")
"""The company an audit target names, as a phone user's does ('user acme/ana'): group 1."""
"""What a reader is shown in place of a company it may not see (the audit page and CSV)."""


@dataclass(frozen=True, slots=True)
class Seen:
    """One record's change as one reader may see it (`redact`). `company` is where the record
    is after the change (before it, for a deletion), `other_company` the company a move took it
    from; each is None when there is none or when it is hidden, and `company_hidden` /
    `other_hidden` say which was hidden."""

    company: str | None
    other_company: str | None
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None
    company_hidden: bool = False
    other_hidden: bool = False
    target: str | None = None

    @property
    def company_text(self) -> str:
        """The companies as the audit page and its CSV name them: 'acme', 'acme (from
        umbrella)', 'acme (from another company)', 'another company (from umbrella)'."""
        now = self.company or (ANOTHER_COMPANY if self.company_hidden else "")
        if self.other_company or self.other_hidden:
            return f"{now} (from {self.other_company or ANOTHER_COMPANY})"
        return now


def redact(
    scope: CompanyScope,
    company: str | None,
    other_company: str | None,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    target: str | None = None,
) -> Seen:
    """The one redaction rule, for every surface that shows a change of a record (the change
    feed, the webhook payloads, the audit page, its CSV, a DDI's page).

    Guarantees: whatever belongs to a company outside `scope` (None: every company) is absent.
    A change has two sides: the record before it belongs to the company it was in then
    (`other_company` for a move, else `company`), the record after it to `company`. A side in a
    hidden company is dropped as a whole (None), values and all, and that company's identifier
    with it; what is left names only companies in `scope`. `target`, the audit log's name of
    the record ('user acme/ana'), names it in `company`: hidden, it names the record where the
    reader last saw it, or 'another company'. Entries about no company (accounts, webhooks)
    are not a company's and are left as they are.
    """
    if scope is None:
        return Seen(company, other_company, before, after, target=target)
    then = other_company or company
    now_shown = company is None or company in scope
    then_shown = then is None or then in scope
    if target is not None and company is not None and not now_shown:
        instead = then if then_shown and then is not None else ANOTHER_COMPANY
        # The company part of '<kind> <company>/<name>': only that, never the name.
        if (named := TARGET_COMPANY.match(target)) is not None and named[1] == company:
            target = target[: named.start(1)] + instead + target[named.end(1) :]
    return Seen(
        company=company if now_shown else None,
        other_company=other_company if then_shown else None,
        before=before if then_shown else None,
        after=after if now_shown else None,
        company_hidden=not now_shown,
        other_hidden=other_company is not None and not then_shown,
        target=target,
    )


@dataclass(frozen=True)
class Principal:
    """The acting account's grants, frozen at the start of the request.

    The company scopes (`visible_companies`, `pickable_companies`, `reportable_companies`,
    `auditable_companies`) answer None for "every company" and otherwise the exact set of
    company identifiers; callers filter with `within`, never by hand.
    """

    username: str
    via: str  # api | ui | cli: recorded in the audit log
    account_id: int | None = None
    system_admin: bool = False
    admin_of: frozenset[str] = frozenset()
    billing_summary: bool = False
    reporting_for: frozenset[str] = frozenset()

    @classmethod
    def cli(cls, username: str = "cli") -> Principal:
        """The operator at the command line, who has a shell on the server and so every right."""
        return cls(username=username, via="cli", system_admin=True)

    @classmethod
    def from_account(cls, account: Account, via: str) -> Principal:
        return cls(
            username=account.username,
            via=via,
            account_id=account.id,
            system_admin=account.system_admin,
            admin_of=frozenset(c.id for c in account.admin_of),
            billing_summary=account.billing_summary,
            reporting_for=frozenset(c.id for c in account.reporting_for),
        )

    # --- which companies ---------------------------------------------------------------------
    def visible_companies(self) -> CompanyScope:
        """Companies the principal may see at all: those it administers or reports on."""
        if self.system_admin or self.billing_summary:
            return None
        return self.admin_of | self.reporting_for

    def pickable_companies(self) -> CompanyScope:
        """Companies whose DDIs and phone users the principal may read and change, so the ones
        it may pick in a DDI or phone-user form or filter."""
        return None if self.system_admin else self.admin_of

    def reportable_companies(self) -> CompanyScope:
        """Companies whose billing counts the principal may read."""
        if self.system_admin or self.billing_summary:
            return None
        return self.reporting_for

    def auditable_companies(self) -> CompanyScope:
        """Companies whose audit entries the principal may read (empty for anyone who may not
        read the log: see `require_audit`)."""
        return None if self.system_admin else self.admin_of

    def may_view_company(self, company: str) -> bool:
        """Whether the principal may open this company's page (/companies/<id>): a System-Admin,
        its Company-Admin, Billing Call-Summary, or Billing/Call Reporting for it."""
        scope = self.visible_companies()
        return scope is None or company in scope

    # --- administration of DDIs and phone users -------------------------------------------
    @property
    def is_admin(self) -> bool:
        return self.system_admin or bool(self.admin_of)

    def may_admin(self, company: str) -> bool:
        return self.system_admin or company in self.admin_of

    def require_admin(self) -> None:
        if not self.is_admin:
            raise Forbidden("This account may not manage DDIs or phone users.")

    def require_system_admin(self, what: str = "do this") -> None:
        if not self.system_admin:
            raise Forbidden(f"Only a System-Admin may {what}.")

    def require_admin_of(self, companies: Iterable[str]) -> None:
        """403 if any named company is outside the principal's grants (whether it exists or not)."""
        if self.system_admin:
            return
        outside = sorted(set(companies) - self.admin_of)
        if outside:
            raise Forbidden("This account does not administer the company named in the request.")

    # --- billing reports -------------------------------------------------------------------
    @property
    def may_report(self) -> bool:
        return self.system_admin or self.billing_summary or bool(self.reporting_for)

    def may_report_on(self, company: str) -> bool:
        """Whether the principal may read this company's billing counts."""
        scope = self.reportable_companies()
        return scope is None or company in scope

    def require_report(self) -> None:
        if not self.may_report:
            raise Forbidden("This account has no billing report permission.")

    @property
    def may_close_months(self) -> bool:
        """Closing a month freezes every company's figures: a System-Admin or Billing
        Call-Summary (the grants that read every company's reports). Reopening is System-Admin
        only (`require_system_admin`)."""
        return self.system_admin or self.billing_summary

    def require_close_months(self) -> None:
        if not self.may_close_months:
            raise Forbidden("Only a System-Admin or Billing Call-Summary may close a month.")

    # --- change events -----------------------------------------------------------------------
    def event_companies(self) -> CompanyScope:
        """Companies whose change events the principal may read (docs/events.md): a
        System-Admin every company, a Company-Admin those it administers."""
        return self.pickable_companies()

    def require_events(self) -> None:
        if not self.is_admin:
            raise Forbidden("Only a System-Admin or a Company-Admin may read the change events.")

    # --- the audit log -----------------------------------------------------------------------
    @property
    def may_audit(self) -> bool:
        return self.system_admin or bool(self.admin_of)

    def require_audit(self) -> None:
        if not self.may_audit:
            raise Forbidden("Only a System-Admin or a Company-Admin may read the audit log.")

    # --- accounts: passwords and API tokens ----------------------------------------------------
    def may_manage_account(
        self, *, account_id: int | None = None, username: str | None = None
    ) -> bool:
        """Whether the principal may manage this account's password and tokens: a System-Admin
        any account, anyone else only its own. Name the account by id or by username."""
        if (account_id is None) == (username is None):
            raise TypeError("Name the account by account_id or by username.")
        if self.system_admin:
            return True
        if account_id is not None:
            return account_id == self.account_id
        return username == self.username

    def require_manage_account(
        self, what: str, *, account_id: int | None = None, username: str | None = None
    ) -> None:
        """Forbidden unless `may_manage_account`; `what` completes "Only a System-Admin may …"."""
        if not self.may_manage_account(account_id=account_id, username=username):
            raise Forbidden(f"Only a System-Admin may {what}.")
