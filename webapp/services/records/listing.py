"""Keyset paging for the list pages (/ddis, /users) and their CSV downloads.

Guarantees: the order is total (the sort field, then the kind's key fields, all one way); a
page is found from a cursor (the order fields of one row), never by counting rows to skip, so
every page is one index range scan whatever its depth, and rows added or deleted between two
requests never make paging skip or repeat a row. The rows are record_query's selection, so
they are what the API's read would answer. Extensions sort numerically (models.extension_order).
With a number search (`q`) the rows are a union of index ranges, each read as its own ordered
range: a page costs a page per branch however many rows match.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Integer, Select, func, select, tuple_, union

from ...access import Principal
from ...database import on_postgresql
from ...errors import Invalid
from ...extensions import db
from ...models import extension_order, padded_extension
from . import record_query
from .kinds import Kind

MAX_PER_PAGE = 10_000
MAX_CURSOR_VALUE = 200  # longer than any stored field may be
MAX_PAGE_NUMBER = 999_999


@dataclass(frozen=True)
class Listing:
    """One page of a list. `start` is the 1-based position of its first row in the whole view
    (0 when the page is empty or positions were not asked for); `total` counts the view."""

    rows: list[dict[str, str]]
    total: int | None
    start: int
    has_prev: bool
    has_next: bool
    first: tuple[str, ...] | None  # cursor of rows[0]: the Previous link goes before it
    last: tuple[str, ...] | None  # cursor of rows[-1]: the Next link goes after it


def order_fields(kind: Kind, sort: str | None) -> tuple[str, ...]:
    """The fields of the list's total order, and so of its cursors: the sort field, then the
    key fields it does not already name."""
    head = (sort,) if sort else ()
    return head + tuple(f for f in kind.order if f not in head)


def parse_cursor(kind: Kind, sort: str | None, values: Any, name: str) -> tuple[str, ...]:
    """A cursor for this order, or Invalid: one string per order field, no NUL, at most
    MAX_CURSOR_VALUE characters each. Any such values name a position, whether or not a row
    holds them (rows come and go between requests)."""
    fields = order_fields(kind, sort)
    if (
        not isinstance(values, Sequence)
        or isinstance(values, str)
        or len(values) != len(fields)
        or not all(
            isinstance(v, str) and len(v) <= MAX_CURSOR_VALUE and "\x00" not in v for v in values
        )
    ):
        why = f"must be {len(fields)} values: {', '.join(fields)}"
        raise Invalid(f"'{name}' {why}.", {name: why})
    try:
        for v in values:
            v.encode("utf-8")
    except UnicodeEncodeError:
        raise Invalid(f"'{name}' must be text.", {name: "must be text"}) from None
    return tuple(values)


def page(
    principal: Principal,
    kind: Kind,
    filters: Any,
    *,
    sort: str | None = None,
    descending: bool = False,
    after: Any = None,
    before: Any = None,
    last: bool = False,
    number: int | None = None,
    per_page: int = 50,
    count: bool = True,
    q: str | None = None,
) -> Listing:
    """One page of the rows matching `filters`, restricted silently to the principal's
    companies. `company` matches exactly, every other field from its start (as someone types).

    At most one position: `after` or `before` a cursor, `last`, or a page `number` (1-based,
    for old addresses: an offset, so its cost grows with the depth). None: the first page. A
    `before` page at the start of the list holds only the rows before the cursor. With
    `count`, `total` and `start` are filled; without it (CSV export) both are left out. `q` is
    the number or description search (record_query.parse_search).
    """
    selection = record_query.select_rows(principal, kind, filters, prefix=True, q=q)
    _check(kind, sort, per_page, number)
    after = None if after is None else parse_cursor(kind, sort, after, "after")
    before = None if before is None else parse_cursor(kind, sort, before, "before")
    view = _View(selection, sort, descending, per_page, count)
    if after is not None:
        return _after(view, after)
    if before is not None:
        return _before(view, before)
    if last:
        return _last(view)
    return _from_offset(view, (number - 1) * per_page if number else 0)


def _check(kind: Kind, sort: str | None, per_page: int, number: int | None) -> None:
    if sort is not None and sort not in kind.fields:
        raise Invalid(f"Cannot sort by '{sort}'.", {"sort": "unknown field"})
    if not 1 <= per_page <= MAX_PER_PAGE:
        raise Invalid(f"'per_page' must be 1 to {MAX_PER_PAGE}.", {"per_page": "out of range"})
    if number is not None and not 1 <= number <= MAX_PAGE_NUMBER:
        raise Invalid(f"'page' must be 1 to {MAX_PAGE_NUMBER}.", {"page": "out of range"})


# One function per position. Each reads one row more than the page in its direction, so that
# side's link is known from the page itself; the other side's from the counts when the page is
# counted, else from one more row.
def _from_offset(view: _View, offset: int) -> Listing:
    """The first page, or an old-style page number's: `offset` rows skipped."""
    rows = view.fetch(view.per_page + 1, offset=offset)
    has_next, rows = len(rows) > view.per_page, rows[: view.per_page]
    total = view.count() if view.counted else None
    if rows or not offset:
        has_prev = offset > 0
    else:  # past the end: is there any row at all?
        has_prev = total > 0 if total is not None else view.exists()
    start = offset + 1 if rows and total is not None else 0
    return view.listing(rows, total, start, has_prev=has_prev, has_next=has_next)


def _after(view: _View, cursor: tuple[str, ...]) -> Listing:
    """The rows that follow a cursor (Next); the last page if none does (they were deleted)."""
    rows = view.fetch(view.per_page + 1, after=cursor)
    if not rows:
        return _last(view)
    has_next, rows = len(rows) > view.per_page, rows[: view.per_page]
    if not view.counted:
        has_prev = view.exists(before=view.cursor(rows[0]))
        return view.listing(rows, None, 0, has_prev=has_prev, has_next=has_next)
    total = view.count()
    start = view.count(before=view.cursor(rows[0])) + 1
    return view.listing(rows, total, start, has_prev=start > 1, has_next=has_next)


def _before(view: _View, cursor: tuple[str, ...]) -> Listing:
    """The rows that precede a cursor (Previous), read in the reversed order; the first page
    if none does. At the start of the list this page may be short: it holds exactly the rows
    before the cursor, so walking back from the last page shows every row once."""
    rows = view.fetch(view.per_page + 1, before=cursor)
    if not rows:
        return _from_offset(view, 0)
    has_prev, rows = len(rows) > view.per_page, rows[-view.per_page :]
    if not view.counted:
        has_next = view.exists(after=view.cursor(rows[-1]))
        return view.listing(rows, None, 0, has_prev=has_prev, has_next=has_next)
    total = view.count()
    start = view.count(before=view.cursor(rows[0])) + 1 if has_prev else 1
    has_next = start + len(rows) - 1 < total
    return view.listing(rows, total, start, has_prev=has_prev, has_next=has_next)


def _last(view: _View) -> Listing:
    """The last page: the first rows of the reversed order, shown in the list's order."""
    rows = view.fetch(view.per_page + 1, from_end=True)
    has_prev, rows = len(rows) > view.per_page, rows[-view.per_page :]
    total = view.count() if view.counted else None
    start = total - len(rows) + 1 if rows and total is not None else 0
    return view.listing(rows, total, start, has_prev=has_prev, has_next=False)


# A number search's branch of at most this many rows is read from its range and sorted.
SORT_BRANCH = 5000


def _unindexed(terms: list[ColumnElement[Any]]) -> list[ColumnElement[Any]]:
    """The same order, in expressions no index holds (text || '', number + 0)."""
    return [t + 0 if isinstance(t.type, Integer) else t.concat("") for t in terms]


class _View:
    """The selected rows of one kind in one order, the queries over them, and the page size."""

    def __init__(
        self,
        selection: record_query.Selection,
        sort: str | None,
        descending: bool,
        per_page: int,
        counted: bool,
    ):
        self.selection = selection
        self.kind = selection.kind
        self.session = db.session
        self.descending = descending
        self.per_page = per_page
        self.counted = counted
        self.postgresql = on_postgresql()
        # A fixed company (see record_query) drops out of the order (a constant), so the order
        # is a range of a (company, order fields) index.
        self.company = selection.company
        self.fields = order_fields(self.kind, sort)
        self.active = [
            i for i, f in enumerate(self.fields) if not (self.company and f == "company")
        ]
        self.columns = self.order_terms(record_query.table(self.kind).c)
        self._piece_counts: list[int] | None = None

    def order_terms(self, columns: Any) -> list[ColumnElement[Any]]:
        """The order's terms over `columns` (the table's, or a union's): each active field's
        column, an extension's numeric terms (extension_order) in its place."""
        terms: list[ColumnElement[Any]] = []
        for i in self.active:
            field = self.fields[i]
            terms += extension_order(columns[field]) if field == "virt_exten" else [columns[field]]
        return terms

    def cursor_terms(self, cursor: tuple[str, ...]) -> list[Any]:
        """A cursor's values for order_terms: an extension's as extension_order computes them."""
        values: list[Any] = []
        for i in self.active:
            value = cursor[i]
            if self.fields[i] == "virt_exten":
                values += [padded_extension(value), value]
            else:
                values.append(value)
        return values

    def cursor(self, row: Any) -> tuple[str, ...]:
        """A row's position: its order fields' values (see order_fields)."""
        return tuple(getattr(row, f) for f in self.fields)

    def listing(
        self, rows: list[Any], total: int | None, start: int, *, has_prev: bool, has_next: bool
    ) -> Listing:
        return Listing(
            rows=[self.kind.as_dict(r) for r in rows],
            total=total,
            start=start,
            has_prev=has_prev,
            has_next=has_next,
            first=self.cursor(rows[0]) if rows else None,
            last=self.cursor(rows[-1]) if rows else None,
        )

    def _where(
        self, cursor: tuple[str, ...] | None = None, later: bool = True, lead: bool = True
    ) -> list[ColumnElement[bool]]:
        """The view's conditions, and with a cursor only the rows later (or earlier) in the
        list's order than it.

        With a fixed company SQLite seeks (company, order fields) on `company = ? AND (order
        fields) > (…)`. PostgreSQL estimates a row comparison from its first column alone:
        (dialcode, number) > ('44', …) looks nearly empty when '44' is the largest dialcode,
        and for a page (ORDER BY, LIMIT) it may then walk the unique (dialcode, number) index
        filtering on company, through rows of every company. With `lead` the comparison
        starts with the company, (company, order fields) > (X, …), which only the company's
        index can use: its range of the company is read up to the cursor (the same order of
        work as counting the rows before it, which the page does anyway)."""
        where = list(self.selection.where)
        if cursor is None:
            return where
        columns, values = list(self.columns), self.cursor_terms(cursor)
        if lead and self.postgresql and self.company is not None:
            columns.insert(0, record_query.table(self.kind).c.company)
            values.insert(0, self.company)
        key = tuple_(*columns) if len(columns) > 1 else columns[0]
        value = tuple_(*values) if len(values) > 1 else values[0]
        after = later != self.descending
        where.append(key > value if after else key < value)
        if self.fields[self.active[0]] == "virt_exten":
            # SQLite seeks a row value on plain columns only: bound the padded extension (an
            # index expression) too, so the page starts at the cursor instead of scanning to it.
            head, bound = self.columns[0], self.cursor_terms(cursor)[0]
            where.append(head >= bound if after else head <= bound)
        return where

    def _order(self, reverse: bool, terms: list[ColumnElement[Any]] | None = None):
        down = self.descending != reverse
        return [c.desc() if down else c.asc() for c in terms or self.columns]

    def fetch(
        self,
        limit: int,
        *,
        after: tuple[str, ...] | None = None,
        before: tuple[str, ...] | None = None,
        from_end: bool = False,
        offset: int = 0,
    ) -> list[Any]:
        """Up to `limit` rows in the list's order: from the start (skipping `offset`), after a
        cursor, before a cursor (the `limit` nearest it), or the last `limit` rows."""
        reverse = before is not None or from_end
        where = self._where(after or before, later=after is not None)
        if self.selection.branches:
            rows = self._fetch_branches(where, reverse, limit, offset)
            return rows[::-1] if reverse else rows
        # Core rows of the fields, as the branches read them: an ORM object per row was most
        # of the time of a big CSV download.
        table = record_query.table(self.kind)
        fields = [table.c[f] for f in self.kind.fields]
        query: Select[Any] = (
            select(*fields).where(*where).order_by(*self._order(reverse)).limit(limit)
        )
        if offset:
            query = query.offset(offset)
        rows = list(self.session.execute(query, self.selection.params))
        return rows[::-1] if reverse else rows

    def _fetch_branches(
        self, where: list[ColumnElement[bool]], reverse: bool, limit: int, offset: int
    ) -> list[Any]:
        """fetch over the selection's branches: each branch's first `offset + limit` rows in
        the order, then the first of their union (which drops a row two branches hold).

        A branch without rows in the view is left out. A branch of at most SORT_BRANCH rows is
        read from its own range and sorted: its order terms are written so that no index can
        provide them, or a planner that cannot tell how few rows a range holds (a dialcode,
        an ending) may walk the whole list's order index looking for them. A larger one is
        left to the planner (in the key order it is one ordered range)."""
        table = record_query.table(self.kind)
        fields = [table.c[f] for f in self.kind.fields]
        counts = self.piece_counts()
        parts = []
        for branch, rows in zip(self.selection.branches, counts, strict=True):
            if not rows:
                continue
            terms = self.columns if rows > SORT_BRANCH else _unindexed(self.columns)
            parts.append(
                select(*fields)
                .where(*where, *branch)
                .order_by(*self._order(reverse, terms))
                .limit(offset + limit)
                .subquery()
            )
        if not parts:
            return []
        both = union(*(select(*p.c) for p in parts)).subquery()
        query = (
            select(*both.c)
            .order_by(*self._order(reverse, self.order_terms(both.c)))
            .limit(limit)
            .offset(offset)
        )
        return list(self.session.execute(query, self.selection.params))

    def piece_counts(self, before: tuple[str, ...] | None = None) -> list[int]:
        """A number search's rows per disjoint piece (record_query.Selection.pieces), in the
        whole view or before a cursor: one statement of index range counts. The whole
        view's are kept: they say which branches a page must read and how (fetch)."""
        if before is None and self._piece_counts is not None:
            return self._piece_counts
        where = self._where(before, later=False, lead=False)
        counts = [
            select(func.count())
            .select_from(self.kind.model)
            .where(*where, *piece)
            .scalar_subquery()
            for piece in self.selection.pieces
        ]
        row = self.session.execute(select(*counts), self.selection.params).one()
        result = [int(n or 0) for n in row]
        if before is None:
            self._piece_counts = result
        return result

    def exists(
        self, *, after: tuple[str, ...] | None = None, before: tuple[str, ...] | None = None
    ) -> bool:
        """Whether any row follows `after`, precedes `before`, or (neither) the view has any:
        the nearest such row, read as a page would be."""
        if self.selection.branches:
            return bool(self.fetch(1, after=after, before=before))
        where = self._where(after or before, later=after is not None)
        order = self._order(reverse=before is not None)
        query = select(self.columns[0]).where(*where).order_by(*order).limit(1)
        return self.session.execute(query, self.selection.params).first() is not None

    def count(self, *, before: tuple[str, ...] | None = None) -> int:
        """Rows in the view, or before a cursor: one index range count (without ORDER BY
        and LIMIT PostgreSQL picks the company's index for the plain comparison)."""
        if self.selection.pieces:  # a number search: the sum of its disjoint pieces' counts
            return sum(self.piece_counts(before))
        where = self._where(before, later=False, lead=False)
        query = select(func.count()).select_from(self.kind.model).where(*where)
        return self.session.scalar(query, self.selection.params) or 0
