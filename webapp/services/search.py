"""The top bar's search (/search): one text looked up as a DDI number, a company and a phone
user at once, each kind only as far as the account may see it (docs/pages.md, "Search").

Nothing here matches on its own: each kind is matched by the rule of its list, in that list's
code, so a result is what that list shows for the same text (the number search of /ddis, the
companies lists' identifier-or-name search, the phone-user list's username filter), and a
kind's link opens that list filtered the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..access import Principal
from ..errors import Invalid
from . import companies
from .records import kinds, listing, record_query

LIMIT = 20  # at most this many results of each kind
MAX_TEXT = record_query.MAX_Q  # characters as typed: a number as written fits with room


@dataclass(frozen=True)
class Found:
    """One kind's results: at most LIMIT `rows`; `more` says there are more than LIMIT."""

    rows: list[Any]
    more: bool

    @property
    def count(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class Results:
    """What a search found. A kind is None when it was not searched: the account may not see
    that kind, or the text cannot be one (a number search of letters, a username with spaces).
    `text` is the search as typed, stripped; `username` the form searched as a username."""

    text: str
    ddis: Found | None
    companies: Found | None
    users: Found | None
    username: str = ""

    @property
    def kinds(self) -> list[Found]:
        return [f for f in (self.ddis, self.companies, self.users) if f is not None]

    @property
    def total(self) -> int:
        return sum(f.count for f in self.kinds)

    @property
    def only(self) -> tuple[str, Any] | None:
        """("ddi" | "company" | "user", row) when exactly one record matched, across kinds."""
        if self.total != 1 or any(f.more for f in self.kinds):
            return None
        for name, found in (("ddi", self.ddis), ("company", self.companies), ("user", self.users)):
            if found is not None and found.rows:
                return name, found.rows[0]
        return None  # pragma: no cover - total == 1 means one kind has a row


def check_text(q: object) -> str:
    """The search as typed, stripped; "" for none. Invalid when it is not text, is longer than
    MAX_TEXT characters or holds control characters: the only refusal of the whole search."""
    if q is None:
        return ""
    if not isinstance(q, str) or len(q) > MAX_TEXT or any(ord(ch) < 32 for ch in q):
        why = f"at most {MAX_TEXT} printable characters"
        raise Invalid(f"The search is {why}.", {"q": why})
    return q.strip()


def may_search(principal: Principal) -> bool:
    """Whether any kind is searched for this account (DDIs and phone users: an administrator;
    companies: an account that may open some company's page)."""
    scope = principal.visible_companies()
    return principal.is_admin or scope is None or bool(scope)


def search(principal: Principal, q: object) -> Results:
    """Look `q` up in every kind the principal may see, at most LIMIT of each.

    Guarantees: DDIs only for an administrator (a System-Admin every DDI, a Company-Admin those
    of its companies; no Billing account) and only when `q` is a number as /ddis's number
    search reads it (that search's own code); companies only among those the principal may
    open (`Principal.visible_companies`, as /companies and /admin/companies), by the lists'
    rule, identifier or name containing `q` in any case, by identifier; phone users only for
    an administrator, of its companies, whose username starts with `q` lower-cased (the /users
    list's own filter code; one index range). Invalid only for an unusable text
    (`check_text`); an empty one searches nothing."""
    text = check_text(q)
    if not text:
        return Results(text, None, None, None)
    username = text.lower()
    return Results(
        text,
        _ddis(principal, text),
        _companies(principal, text),
        _users(principal, username),
        username,
    )


def _ddis(principal: Principal, text: str) -> Found | None:
    if not principal.is_admin:
        return None
    try:
        if not record_query.parse_q(text):
            return None
        page = listing.page(principal, kinds.DDI, {}, q=text, per_page=LIMIT, count=False)
    except Invalid:  # not a number as people write one: simply not searched as one
        return None
    return Found(page.rows, page.has_next)


def _companies(principal: Principal, text: str) -> Found | None:
    scope = principal.visible_companies()
    if scope is not None and not scope:  # an account that may open no company's page
        return None
    rows, more = companies.first_matching(principal, text, LIMIT)
    return Found(list(rows), more)


def _users(principal: Principal, username: str) -> Found | None:
    if not principal.is_admin:
        return None
    try:
        page = listing.page(
            principal, kinds.PHONE_USER, {"username": username}, per_page=LIMIT, count=False
        )
    except Invalid:  # no username looks like this (spaces, capitals aside, other characters)
        return None
    return Found(page.rows, page.has_next)
