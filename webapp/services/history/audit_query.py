"""One page of the audit log, at any size of the log: newest first, found from a position, with
a count that stops at COUNT_CAP.

A provider's log holds millions of entries (one per change: an import of 500 numbers writes 500).
A page is therefore never an offset into everything that matches, nor a count of it:

- the newest page: the first entries of the order (at, id), newest first;
- `after` an entry (Older): the entries that follow it in that order;
- `before` an entry (Newer): those that precede it, read in the reversed order;
- the oldest page: the first entries of the reversed order, shown reversed;
- `number` (old `page=N` addresses): an offset, whose cost grows with the depth; past the
  end, the oldest page.

The entries matching the filters are the union of disjoint branches, each one index range in
(at, id) order: one per exact target the typed record may name (`targets`), else for the company
filter its own entries and the moves away from it, else for a Company-Admin of a few companies
one per company and side, else one per actor, else one per action, else the whole log by time.
A company's branches hold the actor and action filters themselves: its own entries of one
action or actor are one range of the company's index of that column. A page reads each branch
as an ordered range with LIMIT and keeps the first entries of their union, so it costs a page
per branch however many entries match, and the count is the sum of each branch's count, each
stopped at COUNT_CAP + 1 entries. Migrations 0010, 0017 and 0018 add the indexes these ranges
need.
"""

from __future__ import annotations

import heapq
import itertools
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import Column, ColumnElement, and_, func, literal_column, or_, select, true
from sqlalchemy.orm import QueryableAttribute
from sqlalchemy.sql import Select, visitors
from sqlalchemy.sql.elements import BooleanClauseList

from ...access import CompanyScope
from ...errors import Invalid
from ...extensions import db
from ...models import AuditEntry

COUNT_CAP = 10_000
MAX_PER_PAGE = 200
MAX_PAGE = 1_000_000
# A Company-Admin of at most this many companies reads one range per company and side; beyond,
# two ranges of the whole log filtered by company.
SCOPE_BRANCHES = 20
# The words the log's targets begin with (services/records/crud.py Kind.target and the accounts,
# companies and history services): a typed record without one may be any of them.
TARGET_KINDS = ("ddi", "user", "account", "company", "history")
NUMBER_PUNCTUATION = re.compile(r"[\s+\-.()]")
MAX_DIALCODE = 7  # services/fields.py: a dialcode is 1 to 7 digits


def targets(text: str) -> tuple[str, ...]:
    """The exact targets a typed record may name, as the log writes them: the text itself, the
    text after each kind word ('44:2071234567' -> 'ddi 44:2071234567', 'acme/ana' -> 'user
    acme/ana', 'bob' -> 'account bob'), and a number as people write it split after each
    possible dialcode ('+44 20 7123 4567' -> 'ddi 44:2071234567', 'ddi 4:42071234567', ...).
    Identifiers are lower case, so each form is tried as typed and in lower case."""
    found: list[str] = []
    for typed in dict.fromkeys((" ".join(text.split()), " ".join(text.split()).lower())):
        found.append(typed)
        if typed.split(" ", 1)[0].lower() not in TARGET_KINDS:
            found += [f"{kind} {typed}" for kind in TARGET_KINDS]
    digits = NUMBER_PUNCTUATION.sub("", text)
    if digits.isascii() and digits.isdigit():
        last = min(MAX_DIALCODE, len(digits) - 1)
        found += [f"ddi {digits[:k]}:{digits[k:]}" for k in range(1, last + 1)]
    return tuple(dict.fromkeys(found))


Entry = TypeVar("Entry")


@dataclass(frozen=True)
class AuditPage(Generic[Entry]):
    """One page of entries, newest first. `total` counts the view up to COUNT_CAP; `more` says
    there are more than COUNT_CAP (then `total` is COUNT_CAP). The entries are the log's rows
    here, and as the reader may see them once audit.search has redacted them."""

    rows: list[Entry]
    total: int
    more: bool
    has_newer: bool
    has_older: bool


Key = tuple[datetime, int]  # an entry's position in the order: (at, id)


def branches(
    scope: CompanyScope,
    record: tuple[str, ...],
    company: str | None,
    actor: str | None,
    action: str | None = None,
) -> list[ColumnElement[bool]]:
    """Disjoint conditions whose union, within the view's conditions (which hold these
    filters and the reader's scope, but for those `implied` says the branches hold), is the
    view; each one an index range in (at, id) order. `record`: the targets of the record filter
    (`targets`)."""
    a = AuditEntry
    if record:
        return [a.target == t for t in record]
    # A company's own entries of the actor or action: one range of (company, action, at, id)
    # or (company, actor, at, id). Its moves away are a short range of other_company's index:
    # the filters are read off the range, not an index of their own (see _unindexed).
    own_filters = [c == v for c, v in ((a.actor, actor), (a.action, action)) if v is not None]
    moved_filters = [
        _unindexed(c) == v for c, v in ((a.actor, actor), (a.action, action)) if v is not None
    ]
    if company is not None:
        return [
            and_(a.company == company, *own_filters),
            and_(a.other_company == company, _not_company([company]), *moved_filters),
        ]
    if scope is not None:
        mine = sorted(scope)
        if len(mine) <= SCOPE_BRANCHES:
            own = [and_(a.company == c, *own_filters) for c in mine]
            return own + [
                and_(a.other_company == c, _not_company(mine), *moved_filters) for c in mine
            ]
        return [
            and_(a.company.in_(mine), *own_filters),
            and_(a.other_company.in_(mine), _not_company(mine), *moved_filters),
        ]
    if actor is not None:
        return [a.actor == actor]
    if action is not None:
        return [a.action == action]
    return [true()]


def implied(scope: CompanyScope, record: tuple[str, ...], company: str | None) -> frozenset[str]:
    """Which filters every branch `branches` gives holds by itself: 'company' (the company
    filter's two branches are exactly its entries), 'scope' (each branch is about one of
    the reader's companies), 'actor' and 'action' (a company's branches hold them)."""
    if record:
        return frozenset()
    if company is not None:
        return (
            frozenset({"company", "scope", "actor", "action"})
            if scope is None or company in scope
            else frozenset({"company", "actor", "action"})
        )
    if scope is not None:
        return frozenset({"scope", "actor", "action"})
    return frozenset({"scope"})


def _not_company(companies: list[str]) -> ColumnElement[bool]:
    a = AuditEntry
    return or_(a.company.is_(None), a.company.not_in(companies))


def _unindexed(column: QueryableAttribute[str]) -> ColumnElement[str]:
    """`column` as no index can read it (`action || ''`, as SQLite's documented unary plus):
    in a branch of moves away, an equality on the actor or action would lead SQLite's planner
    to read the actor's or action's range of the whole log (its index may have no statistics
    yet: migration 0017's had none) for the company's few moves."""
    return column.concat("")


def check_position(per_page: Any, number: Any, given: dict[str, bool]) -> None:
    """Invalid for a page size or page number out of range, or for more than one position
    (`given`: each position's name, and whether it was asked for)."""
    asked = [name for name, present in given.items() if present]
    if len(asked) > 1:
        why = f"give only one of {', '.join(given)}"
        raise Invalid(f"Position: {why}.", {asked[-1]: why})
    if isinstance(per_page, bool) or not isinstance(per_page, int):
        raise Invalid("'per_page' must be an integer.", {"per_page": "must be an integer"})
    if not 1 <= per_page <= MAX_PER_PAGE:
        raise Invalid(f"'per_page' must be 1 to {MAX_PER_PAGE}.", {"per_page": "out of range"})
    if number is not None and (
        isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MAX_PAGE
    ):
        raise Invalid(f"'page' must be 1 to {MAX_PAGE}.", {"page": f"must be 1 to {MAX_PAGE}"})


def anchor(value: Any, name: str) -> Key:
    """The position of entry `value` (its id, as text or a number); Invalid if there is no
    such entry (entries are never deleted: only an edited address names none)."""
    text = (
        str(value).strip() if isinstance(value, str | int) and not isinstance(value, bool) else ""
    )
    found = None
    if text.isascii() and text.isdigit() and len(text) <= 18:
        found = db.session.execute(
            select(AuditEntry.at, AuditEntry.id).where(AuditEntry.id == int(text))
        ).first()
    if found is None:
        raise Invalid(f"'{name}' names no audit entry.", {name: "names no audit entry"})
    return (found.at, found.id)


def read_page(
    conditions: list[ColumnElement[bool]],
    parts: list[ColumnElement[bool]],
    *,
    after: Key | None = None,
    before: Key | None = None,
    oldest: bool = False,
    number: int | None = None,
    per_page: int = 50,
) -> AuditPage[AuditEntry]:
    """One page of the entries matching `conditions`, the union of the disjoint `parts`
    (`branches`), at the position asked for: at most one of `after` or `before` an entry's
    position, `oldest`, or a page `number`; none: the newest page."""
    counted = sum(_count(conditions, part) for part in parts)
    total, more = min(counted, COUNT_CAP), counted > COUNT_CAP
    if after is not None:
        rows = _merged(conditions, parts, older_than(after), newest_first=True, limit=per_page + 1)
        newer = newer_than(_key(rows[0])) if rows else newer_than((after[0], after[1] - 1))
        return AuditPage(
            rows[:per_page], total, more, _any(conditions, parts, newer), len(rows) > per_page
        )
    if before is not None:
        rows = _merged(
            conditions, parts, newer_than(before), newest_first=False, limit=per_page + 1
        )
        shown = list(reversed(rows[:per_page]))
        older = older_than(_key(shown[-1])) if shown else older_than((before[0], before[1] + 1))
        return AuditPage(shown, total, more, len(rows) > per_page, _any(conditions, parts, older))
    if oldest:
        rows = _merged(conditions, parts, None, newest_first=False, limit=per_page + 1)
        shown = list(reversed(rows[:per_page]))
        return AuditPage(shown, total, more, len(rows) > per_page, False)
    skip = (number - 1) * per_page if number else 0
    rows = _merged(conditions, parts, None, newest_first=True, limit=skip + per_page + 1)
    shown = rows[skip : skip + per_page]
    if not shown and rows:
        # A page number past the end (an old address): the oldest page, as the other lists do.
        return read_page(conditions, parts, oldest=True, per_page=per_page)
    return AuditPage(shown, total, more, skip > 0, len(rows) > skip + per_page)


def _key(entry: AuditEntry) -> Key:
    return (entry.at, entry.id)


def older_than(key: Key) -> ColumnElement[bool]:
    """Entries after `key` in the newest-first order, written so both databases read it as one
    range of an index ending in (at, id) (a plain OR of the two cases makes SQLite sort)."""
    a = AuditEntry
    return (a.at <= key[0]) & or_(a.at < key[0], a.id < key[1])


def newer_than(key: Key) -> ColumnElement[bool]:
    a = AuditEntry
    return (a.at >= key[0]) & or_(a.at > key[0], a.id > key[1])


def _ordered(query: Select[Any], newest_first: bool) -> Select[Any]:
    a = AuditEntry
    if newest_first:
        return query.order_by(a.at.desc(), a.id.desc())
    return query.order_by(a.at, a.id)


def _merged(
    conditions: list[ColumnElement[bool]],
    parts: list[ColumnElement[bool]],
    position: ColumnElement[bool] | None,
    *,
    newest_first: bool,
    limit: int,
) -> list[AuditEntry]:
    """The first `limit` entries of the union of `parts` from `position` on, in the order:
    each part read as its own ordered range, then merged."""
    extra = [] if position is None else [position]
    ranges = [
        list(
            db.session.scalars(
                _ordered(
                    select(AuditEntry).where(*conditions, _planned(part), *extra),
                    newest_first,
                ).limit(limit)
            )
        )
        for part in parts
    ]
    merged = heapq.merge(*ranges, key=_key, reverse=newest_first)
    return list(itertools.islice(merged, limit))


def _moved_away(part: ColumnElement[bool]) -> bool:
    """Whether `part` is a branch of entries moved away from a company (its first term is on
    other_company)."""
    columns = [e for e in visitors.iterate(part) if isinstance(e, Column)]
    return bool(columns) and columns[0].key == "other_company"


def _planned(part: ColumnElement[bool]) -> ColumnElement[bool]:
    """A moved-away branch as SQLite's planner must see it: other_company is NULL in nearly
    every entry and ANALYZE counts the NULLs, so with statistics the planner judges its index
    useless and scans 3 million entries (0.3 s) for a company's moves. likelihood() tells it
    the equality is rare (SQLite only; other databases take the branch as it is)."""
    if not _moved_away(part) or db.session.get_bind().dialect.name != "sqlite":
        return part
    first, *rest = part.clauses if isinstance(part, BooleanClauseList) else [part]
    return and_(func.likelihood(first, literal_column("0.0001")), *rest)


def _count(conditions: list[ColumnElement[bool]], part: ColumnElement[bool]) -> int:
    """How many entries the part holds, stopped at COUNT_CAP + 1."""
    capped = (
        select(AuditEntry.id).where(*conditions, _planned(part)).limit(COUNT_CAP + 1).subquery()
    )
    return int(db.session.scalar(select(func.count()).select_from(capped)) or 0)


def _any(
    conditions: list[ColumnElement[bool]],
    parts: list[ColumnElement[bool]],
    position: ColumnElement[bool],
) -> bool:
    return any(
        db.session.scalar(
            select(AuditEntry.id).where(*conditions, position, _planned(part)).limit(1)
        )
        is not None
        for part in parts
    )
