"""/ddis by state (docs/pages.md, "State filter"): the DDI list's numbers reserved, available,
aging, or in every state, read as POST /rest/numbers/read reads them (services/numbers/read.py:
its page statement, its rules of who sees what, its keyset order by dialcode then number).

The default state, in service, is not read here: it stays the DDI list of
services/records/listing.py, with its sorts, counts and paging both ways; this module only
adds the descriptions of its page's numbers (`descriptions`).

Guarantees: a System-Admin may list every state; a Company-Admin only in service and
reserved, and its reserved numbers are only those reserved for its companies (read.read's
rule): any other state is Invalid on `state`, so a Company-Admin never sees stock or aging
numbers; anyone else is Forbidden, as on the DDI list. A page is one keyset range per stored
state (and per company, for a Company-Admin), from the cursor on, stopped after the page:
never an offset, never a count of the whole view.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import and_, or_, select

from ...access import Principal
from ...errors import Invalid
from ...extensions import db
from ...models import Number
from .. import inventory
from ..fields import MAX_DIALCODE, MAX_NUMBER
from ..records import record_query
from . import answers, read

ALL = "all"
SYSTEM_CHOICES = (
    inventory.IN_SERVICE,
    inventory.RESERVED,
    inventory.AVAILABLE,
    inventory.AGING,
    ALL,
)
COMPANY_CHOICES = (inventory.IN_SERVICE, inventory.RESERVED)
LABELS = {
    inventory.IN_SERVICE: "in service",
    inventory.RESERVED: "reserved",
    inventory.AVAILABLE: "available",
    inventory.AGING: "aging",
    ALL: "all",
}
# The list's filters a state other than in service takes (the extension is only in service's).
FILTERS = ("dialcode", "number", "company")
# Read's scope members, named as the list's fields for its messages.
FIELD_NAMES = {"scope.dialcode": "dialcode", "scope.prefix": "number", "scope.company": "company"}

Key = tuple[str, str]


def choices(principal: Principal) -> tuple[str, ...]:
    """The states the principal may list /ddis in, the default first."""
    return SYSTEM_CHOICES if principal.system_admin else COMPANY_CHOICES


def check_state(principal: Principal, state: str) -> str:
    """`state` if the principal may list it; Forbidden unless an administrator (as the DDI
    list), Invalid on `state` for a state it may not list or that does not exist (the same
    message for both: a Company-Admin learns nothing from it)."""
    principal.require_admin()
    offered = choices(principal)
    if state not in offered:
        names = ", ".join(LABELS[s] for s in offered)
        raise Invalid(f"State must be one of: {names}.", {"state": f"must be one of {names}"})
    return state


@dataclass(frozen=True)
class NumberPage:
    """One page of numbers: `rows` in dialcode and number order (row), whether more follow,
    and the cursor (dialcode, number) of the last row, where the next page starts."""

    rows: list[dict[str, str]]
    has_next: bool
    last: Key | None


def row(answer: Mapping[str, Any]) -> dict[str, str]:
    """A number as the list shows it: answers.answer's fields, '' for null, and `held_until`
    (the last day of a running reservation or aging period)."""
    shown = {k: "" if v is None else str(v) for k, v in answer.items()}
    shown["held_until"] = shown["reserved_until"] or shown["aging_until"]
    return shown


def page(
    principal: Principal,
    state: str,
    filters: Mapping[str, str],
    *,
    q: str | None = None,
    after: Iterable[str] | None = None,
    limit: int = 50,
) -> NumberPage:
    """The numbers in `state` (not in service: see the module) that match the list's
    `filters` (dialcode exactly, number from its start, company: in service for it or
    reserved for it) and the number search `q` (its digits as dialcode followed by the start
    of the number), after the cursor `after`, at most `limit`, as `row` gives them.
    Invalid for a filter or state the list refuses (a message per field)."""
    check_state(principal, state)
    if state == inventory.IN_SERVICE:
        raise ValueError("in service is the DDI list's (services/records/listing.py)")
    cursor = None if after is None else tuple(after)
    queries = _queries(state, filters, q, limit, cursor)
    on = inventory.today()
    found = (read.page_statement(principal, x, on) for x in queries)
    statements = [s for s in found if s is not None]
    if not statements:
        return NumberPage([], False, None)
    rows = db.session.execute(read.merged(statements, limit + 1)).all()
    shown = [row(answers.answer(principal, r, on, r.company, r.virt_exten)) for r in rows[:limit]]
    last = (shown[-1]["dialcode"], shown[-1]["number"]) if shown else None
    return NumberPage(shown, len(rows) > limit, last)


def _queries(
    state: str,
    filters: Mapping[str, str],
    q: str | None,
    limit: int,
    after: tuple[str, ...] | None,
) -> list[read.Query]:
    """The reads of the view: one, or with a number search one per way its digits split into
    a dialcode and the start of a number (disjoint: each a different dialcode)."""
    if filters.get("virt_exten"):
        why = "only numbers in service have one: clear it for this state"
        raise Invalid(f"Extension: {why}.", {"virt_exten": why})
    unknown = sorted(f for f, v in filters.items() if v and f not in (*FILTERS, "virt_exten"))
    if unknown:
        raise Invalid(f"Unknown filter '{unknown[0]}'.", {unknown[0]: "unknown field"})
    scope: dict[str, Any] = {
        "state": sorted(read.ALL_STATES) if state == ALL else [state],
        **{("prefix" if f == "number" else f): v for f, v in filters.items() if v},
    }
    try:
        base = read.parse({"scope": scope})
    except Invalid as exc:
        named = {FIELD_NAMES.get(k, k): v for k, v in exc.fields.items()}
        raise Invalid(exc.message, named) from None
    cursor: Key | None = None
    if after is not None:
        if len(after) != 2:  # listing.parse_cursor has checked the rest
            raise Invalid("'after' must be 2 values: dialcode, number.", {"after": "malformed"})
        cursor = (after[0], after[1])
    base = replace(base, limit=limit, after=cursor)
    digits, words = record_query.parse_search(q)
    if words:
        why = "a description search is on the list in service only: search by number here"
        raise Invalid(f"The search: {why}.", {"q": why})
    if not digits:
        return [base]
    return [
        x for k in range(1, min(MAX_DIALCODE, len(digits)) + 1) if (x := _split(base, digits, k))
    ]


def _split(base: read.Query, digits: str, k: int) -> read.Query | None:
    """`base` narrowed to dialcode digits[:k] and numbers starting with the rest (and with
    its own prefix); None when the two cannot both hold."""
    dialcode, rest = digits[:k], digits[k:]
    if len(rest) > MAX_NUMBER or (base.dialcode is not None and base.dialcode != dialcode):
        return None
    prefix = base.prefix
    if rest:
        if prefix is None or rest.startswith(prefix):
            prefix = rest
        elif not prefix.startswith(rest):
            return None
    return replace(base, dialcode=dialcode, prefix=prefix)


def descriptions(principal: Principal, rows: Iterable[Mapping[str, str]]) -> dict[Key, str]:
    """The descriptions of the DDIs `rows` (a page of the DDI list: dialcode, number,
    company), by (dialcode, number): one query by the numbers' key. Only DDIs of companies
    the principal sees are looked up; Forbidden unless an administrator."""
    principal.require_admin()
    visible = principal.pickable_companies()
    grouped: dict[str, list[str]] = {}
    for r in rows:
        if visible is None or r["company"] in visible:
            grouped.setdefault(r["dialcode"], []).append(r["number"])
    if not grouped:
        return {}
    n = Number
    query = select(n.dialcode, n.number, n.description).where(
        or_(*(and_(n.dialcode == d, n.number.in_(ns)) for d, ns in grouped.items()))
    )
    return {(d, num): text for d, num, text in db.session.execute(query)}
