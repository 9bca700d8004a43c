"""Find free numbers (the /ddis/free page; docs/pages.md): how many numbers of a dialcode and
prefix are available now, and the lowest of them, before a reserve or an allocation takes them.

Read only: the numbers shown are the ones `picking.pick` would take at this moment; a reserve
or allocation a moment later picks its own (another writer may have taken some meanwhile).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...access import Principal
from ...errors import Invalid
from ...extensions import db
from .. import inventory
from ..fields import FORMATS, MAX_DDI_DIGITS
from . import picking, requests

SHOWN = 100  # numbers a page lists; past it, it says how many more the count takes
AT_MOST = 100_000  # numbers counted; past it the page says "more than"
COUNT_WHY = f"must be a whole number from 1 to {requests.MAX_COUNT:,}"
PREFIX_WHY = "must be 1 to 15 digits"


@dataclass(frozen=True)
class Search:
    """A checked search: `count` numbers of `dialcode` starting with `prefix`."""

    dialcode: str
    prefix: str
    count: int


@dataclass(frozen=True)
class Free:
    """`available` numbers match (AT_MOST meaning at least that many); `numbers`, the lowest
    of them, at most min(count, SHOWN)."""

    search: Search
    available: int
    numbers: list[str]

    @property
    def capped(self) -> bool:
        return self.available >= AT_MOST

    @property
    def enough(self) -> bool:
        return self.available >= self.search.count


def parse(dialcode: str, prefix: str, count: str) -> Search:
    """The page's three text fields checked: Invalid naming every field at fault at once
    (`dialcode`, `prefix`, `count`), worded as the API words them."""
    dialcode, prefix, count = dialcode.strip(), prefix.strip(), count.strip()
    problems: dict[str, str] = {}
    pattern, why = FORMATS["dialcode"]
    if not pattern.fullmatch(dialcode):
        problems["dialcode"] = why
    if not requests.PREFIX.fullmatch(prefix):
        problems["prefix"] = PREFIX_WHY
    elif "dialcode" not in problems and len(dialcode + prefix) > MAX_DDI_DIGITS:
        problems["prefix"] = f"dialcode and prefix together must be at most {MAX_DDI_DIGITS} digits"
    ok = count.isascii() and count.isdigit() and len(count) <= 6
    if not ok or not 1 <= int(count) <= requests.MAX_COUNT:
        problems["count"] = COUNT_WHY
    if problems:
        name, why = next(iter(problems.items()))
        raise Invalid(f"'{name}' {why}.", problems)
    return Search(dialcode, prefix, int(count))


def find_free(principal: Principal, search: Search) -> Free:
    """How many numbers of the search are available today (a reservation or aging period past
    its last day included; held numbers not), counted up to AT_MOST, and the lowest
    min(count, SHOWN) of them: those a reserve by prefix would take now.

    Guarantees: System-Admin only (Forbidden); reads only, locks nothing."""
    principal.require_system_admin("find free numbers")
    on = inventory.today()
    session = db.session()
    where = (session, search.dialcode, search.prefix)
    available = picking.count_free(*where, on, AT_MOST)
    shown = picking.lowest_free(*where, min(search.count, SHOWN), on) if available else []
    return Free(search, available, shown)
