"""A phone user's own page (docs/pages.md#a-phone-users-page): its values now and its audit
entries, as a DDI has its page (services/records/ddi_timeline.py).

Who sees it: a System-Admin, and a Company-Admin of the user's company. Anyone else, like a
missing user, is told it does not exist: a page that answered 403 for another company's user
would say that the user exists.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...access import Principal
from ...errors import Forbidden, NotFound
from ..history import audit, audit_query
from . import kinds, record_query

AUDIT_ENTRIES = 20  # the latest; the audit log, filtered by the user, has them all


@dataclass(frozen=True)
class UserView:
    current: dict[str, str]  # username, virt_exten, company
    audit: audit_query.AuditPage[audit.Shown]

    @property
    def key(self) -> str:
        """How pages name the user: 'acme/ana.kim'."""
        return f"{self.current['company']}/{self.current['username']}"

    @property
    def target(self) -> str:
        """How the audit log names this user (its filter takes it as written)."""
        return f"user {self.key}"


def user_view(principal: Principal, company: str, username: str) -> UserView:
    """The phone user `username` of `company` now, and its latest AUDIT_ENTRIES audit entries
    (those the principal may read: a Company-Admin's own companies only).

    Guarantees: NotFound for a user that does not exist, one outside the principal's
    companies, a malformed name, and for an account that administers nothing, all alike, so
    existence does not leak.
    """
    keys = {"company": company, "username": username}
    try:
        current = record_query.get(principal, kinds.PHONE_USER, keys)
    except Forbidden:  # not an administrator: the same answer as for a missing user
        raise NotFound("No such phone user.") from None
    target = f"user {current['company']}/{current['username']}"
    entries = audit.search(principal, target=target, per_page=AUDIT_ENTRIES)
    return UserView(current=current, audit=entries)
