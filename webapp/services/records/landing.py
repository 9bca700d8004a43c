"""Where a list page lands after a save: whether a record still matches the list's filters, and
the keyset position whose page shows it first.

Both are reads of the list's own view (record_query's selection, listing's order), so they
agree with what the list shows: the same scope restriction, the same prefix matching.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, literal, or_, select

from ...access import Principal
from ...errors import Invalid, NotFound
from ...extensions import db
from . import listing, record_query
from .kinds import Kind


@dataclass(frozen=True)
class Located:
    """A record seen from a list: `matches` its filters, and if so `after`, the cursor of the
    row before it in the list's order (None: it is the first row), so the page `after` that
    cursor starts with it."""

    record: dict[str, str]
    matches: bool
    after: tuple[str, ...] | None = None


def _search(filters: Any) -> tuple[Any, str | None]:
    """The list's filters as its fields' filters and its number search (`q`, the DDI list's),
    which the list reads apart (listing.page)."""
    if not isinstance(filters, dict) or "q" not in filters:
        return filters, None
    return {f: v for f, v in filters.items() if f != "q"}, filters["q"]


def matches(principal: Principal, kind: Kind, filters: Any, key: dict[str, str]) -> bool:
    """Whether the record named by `key` (its order fields) is among the rows the list shows
    with `filters` (matched as the list matches them, the number search `q` included).
    Filters the list itself refuses match nothing."""
    fields, q = _search(filters)
    try:
        selection = record_query.select_rows(principal, kind, fields, prefix=True, q=q)
    except Invalid:
        return False
    if selection.empty:
        return False
    where = [*selection.where, *record_query.exact(kind, key)]
    if selection.branches:  # a search: the record is in one of its branches
        where.append(or_(*(and_(*branch) for branch in selection.branches)))
    query = select(literal(1)).select_from(record_query.table(kind)).where(*where).limit(1)
    return db.session.execute(query, dict(selection.params)).first() is not None


def locate(
    principal: Principal,
    kind: Kind,
    key: Any,
    filters: Any,
    *,
    sort: str | None = None,
    descending: bool = False,
) -> Located | None:
    """The record named by `key` as the list (`filters`, `sort`, `descending`) sees it; None
    if the principal does not see it at all (NotFound: gone, or another company's)."""
    try:
        record = record_query.get(principal, kind, key)
    except NotFound:
        return None
    key = {f: record[f] for f in kind.order}
    if not matches(principal, kind, filters, key):
        return Located(record, matches=False)
    cursor = tuple(record[f] for f in listing.order_fields(kind, sort))
    # The nearest row before the record; with none, the list's first row, which is the record.
    fields, q = _search(filters)
    before = listing.page(
        principal,
        kind,
        fields,
        q=q,
        sort=sort,
        descending=descending,
        before=cursor,
        per_page=1,
        count=False,
    )
    after = before.first if before.first is not None and before.first != cursor else None
    return Located(record, matches=True, after=after)
