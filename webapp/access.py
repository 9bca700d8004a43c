"""Who is acting, and what their grants allow. Services receive a Principal and decide with it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .services.errors import Forbidden


@dataclass(frozen=True)
class Principal:
    """The acting account's grants, frozen at the start of the request.

    `admin_scope()` and `report_scope()` answer None for "every company" and otherwise the exact
    set of company identifiers the principal may see; callers filter with it, never by hand.
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
    def from_account(cls, account, via: str) -> Principal:
        return cls(
            username=account.username,
            via=via,
            account_id=account.id,
            system_admin=account.system_admin,
            admin_of=frozenset(c.id for c in account.admin_of),
            billing_summary=account.billing_summary,
            reporting_for=frozenset(c.id for c in account.reporting_for),
        )

    # --- administration of DDIs and phone users -------------------------------------------
    @property
    def is_admin(self) -> bool:
        return self.system_admin or bool(self.admin_of)

    def admin_scope(self) -> frozenset[str] | None:
        """Companies whose records this principal may read and change; None means all."""
        return None if self.system_admin else self.admin_of

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

    def report_scope(self) -> frozenset[str] | None:
        """Companies whose billing counts this principal may read; None means all."""
        if self.system_admin or self.billing_summary:
            return None
        return self.reporting_for

    def require_report(self) -> None:
        if not self.may_report:
            raise Forbidden("This account has no billing report permission.")
