"""The one read of DDIs and phone users: which rows of a kind a principal sees that match a
filter, and the readers built on it: `read` (the API: exact match, offset page, total), `get`
(one record, for the pages' forms) and the list pages' keyset pager (services/records/listing.py).

A `Selection` holds the authorized, filtered rows, each rule written once here:

- scope restriction: a Company-Admin sees only its companies' rows, silently (a company filter
  outside its grants matches nothing, as if the company had no rows);
- the fixed company: a company filter, or a principal's only company, is one equality, so a
  (company, order fields) index serves the rows in order (migration 0004);
- matching: every field exactly (the API, one record), or every field but the company from its
  start (the pages, as someone types), as LIKE and, where an index can seek it, as a range;
- the number search (`q`, DDIs on the pages): digits as people write them, matching the start
  of dialcode followed by number or the end of the number. It is an OR of index ranges
  (`Selection.branches`), each of which a reader runs as its own ordered index scan
  (services/records/listing.py), since no one index holds them all in the list's order.

Conditions are built once per shape (`Shape`: which fields, how matched; lru_cache) with every
value a bound parameter (`Selection.params`), so a request only binds values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    Select,
    Table,
    and_,
    bindparam,
    false,
    func,
    not_,
    or_,
    select,
    tuple_,
)

from ...access import Principal
from ...database import on_postgresql, read_rows, upper_bound
from ...errors import Invalid, NotFound
from ...extensions import db
from ...models import NumberWord
from ..fields import (
    MAX_DDI_DIGITS,
    MAX_DIALCODE,
    MAX_NUMBER,
    Bounded,
    Part,
    parse_part,
    words_of,
)
from .kinds import Kind

DEFAULT_LIMIT = 1000
MAX_LIMIT = 10_000
MAX_OFFSET = 2**31 - 1
# read's page: `limit` rows from `offset` (the OpenAPI document states the same bounds).
LIMIT = Bounded(0, MAX_LIMIT, DEFAULT_LIMIT)
OFFSET = Bounded(0, MAX_OFFSET, 0)
# Prefix filters on these fields can be an index range on any collation: values are digits.
DIGIT_FIELDS = frozenset({"dialcode", "number", "virt_exten"})
ESCAPE = "/"  # LIKE's escape character, as SQLAlchemy's autoescape uses
# The number search: what people write around digits, dropped before matching.
Q_IGNORED = str.maketrans("", "", " +-.()")
MAX_Q = 100  # characters as typed
WALK_DIGITS = 2  # ends of numbers this short are found by walking the order (_q_branches)


@dataclass(frozen=True)
class Page:
    rows: list[dict[str, str]]
    total: int


@dataclass(frozen=True)
class Shape:
    """What a selection's conditions depend on, values aside: the key of the statement caches."""

    kind: Kind
    exact: tuple[str, ...] = ()  # field = :scope_<field>
    prefix: tuple[str, ...] = ()  # field LIKE :prefix_<field> || '%'
    ranged: tuple[str, ...] = ()  # of the prefix fields: :from_<field> <= field < :to_<field>
    company: bool = False  # company = :company (the fixed company)
    restricted: bool = False  # company IN :visible
    nothing: bool = False  # a company outside the principal's grants: no row
    q: int = 0  # the number search's digit count (0: none); see _q_branches
    words: int = 0  # the description search's word count (0: none); see _q_branches


@dataclass(frozen=True)
class Selection:
    """The rows of one kind a principal sees that match a filter: `where` (cached per shape)
    bound with `params`. `company` is the fixed company, if any; `empty` says nothing can match
    (a reader may answer without asking the database)."""

    shape: Shape
    params: Mapping[str, Any] = field(compare=False)
    company: str | None = None

    @property
    def kind(self) -> Kind:
        return self.shape.kind

    @property
    def empty(self) -> bool:
        return self.shape.nothing

    @property
    def where(self) -> tuple[ColumnElement[bool], ...]:
        return _conditions(self.shape)

    @property
    def branches(self) -> tuple[tuple[ColumnElement[bool], ...], ...]:
        """With a number search, the alternatives a row must match one of, besides `where`:
        each one index range. Empty: `where` is the whole selection."""
        return _q_branches(self.shape)[0]

    @property
    def pieces(self) -> tuple[tuple[ColumnElement[bool], ...], ...]:
        """The branches made disjoint (a row matching several counts in the first), for
        counting as a sum of index range counts."""
        return _q_branches(self.shape)[1]


def table(kind: Kind) -> Table:
    return kind.model.__table__


def exact(kind: Kind, values: Mapping[str, Any]) -> list[ColumnElement[bool]]:
    """Each field equal to its value (a value or a bound parameter)."""
    columns = table(kind).c
    return [columns[f] == v for f, v in values.items()]


def select_rows(
    principal: Principal,
    kind: Kind,
    scope: Any,
    *,
    prefix: bool = False,
    part: Part | None = None,
    q: str | None = None,
) -> Selection:
    """The rows of `kind` matching `scope` (validated against `part`, by default the kind's
    scope) that the principal sees: Forbidden unless an administrator, Invalid for a bad
    scope. With `prefix` every field but the company matches from its start. `q` is the
    number or description search (DDIs only; see parse_search)."""
    principal.require_admin()
    values = parse_part(part or kind.scope_part, scope, "scope")
    digits, words = parse_search(q)
    company, visible, nothing = _restrict(principal, values.pop("company", None))
    params: dict[str, Any] = {}
    if company is not None:
        params["company"] = company
    if visible is not None:
        params["visible"] = visible
    fields = tuple(sorted(values))
    if prefix:
        ranged = _prefix_params(values, params)
    else:
        ranged = ()
        params.update((f"scope_{f}", values[f]) for f in fields)
    q_length = 0
    if digits:
        if "number" not in kind.fields or "dialcode" not in kind.fields:
            raise Invalid("Only DDIs have a number search.", {"q": "unknown field"})
        q_length = min(len(digits), MAX_Q_DIGITS)
        nothing = nothing or len(digits) > MAX_Q_DIGITS
        _q_params(digits[:MAX_Q_DIGITS], params)
    if words:
        if not kind.numbered:
            raise Invalid("Only DDIs have a number search.", {"q": "unknown field"})
        for i, word in enumerate(words):
            params[f"w_from_{i}"], params[f"w_to_{i}"] = word, upper_bound(word)
    shape = Shape(
        kind,
        exact=() if prefix else fields,
        prefix=fields if prefix else (),
        ranged=ranged,
        company=company is not None,
        restricted=visible is not None,
        nothing=nothing,
        q=q_length,
        words=len(words),
    )
    return Selection(shape, params, company)


# The longest search that can match: a whole DDI. Longer searches match nothing.
MAX_Q_DIGITS = MAX_DDI_DIGITS


def parse_q(q: Any) -> str:
    """The number search's digits: spaces and + - . ( ) dropped, as people write numbers
    ('+44 (20) 7123-4567' is 442071234567). Anything else is Invalid; '' means no search."""
    if q is None:
        return ""
    if not isinstance(q, str) or len(q) > MAX_Q:
        raise Invalid(f"'q' must be at most {MAX_Q} characters.", {"q": "too long"})
    digits = q.translate(Q_IGNORED)
    if digits and not (digits.isascii() and digits.isdigit()):
        why = "must be digits, spaces and + - . ( ) only"
        raise Invalid(f"The number search {why}.", {"q": why})
    return digits


# A description search matches at most this many words (all of them).
MAX_Q_WORDS = 5


def parse_search(q: Any) -> tuple[str, tuple[str, ...]]:
    """The list's search `q` as (digits, words), one of them empty (docs/pages.md, "Number
    search"): a number as people write it (parse_q) searches numbers; text with a letter
    searches the descriptions' words, its own words (fields.words_of, at most MAX_Q_WORDS)
    each matching the start of a word of the description. Anything else is Invalid, as in
    parse_q; '' or None is no search."""
    if isinstance(q, str) and len(q) <= MAX_Q and any(ch.isalpha() for ch in q):
        words = tuple(words_of(q))
        if len(words) > MAX_Q_WORDS:
            why = f"must be at most {MAX_Q_WORDS} words"
            raise Invalid(f"The search {why}.", {"q": why})
        return "", words
    return parse_q(q), ()


def _q_splits(length: int) -> list[int]:
    """The dialcode lengths k a search of `length` digits can be split at: dialcode = the first
    k digits, the number starting with the rest (which must fit a number)."""
    return [k for k in range(1, min(MAX_DIALCODE, length) + 1) if length - k <= MAX_NUMBER]


def _q_params(digits: str, params: dict[str, Any]) -> None:
    """Bind the number search's values (names as _q_branches uses them)."""
    n = len(digits)
    for k in _q_splits(n):
        params[f"q_dialcode_{k}"] = digits[:k]
        if k < n:
            params[f"q_from_{k}"], params[f"q_to_{k}"] = digits[k:], upper_bound(digits[k:])
    if n < MAX_DIALCODE:
        params["q_dialcode"], params["q_dialcode_to"] = digits, upper_bound(digits)
    if n <= MAX_NUMBER:
        backwards = digits[::-1]
        params["q_reversed"], params["q_reversed_to"] = backwards, upper_bound(backwards)


@lru_cache(maxsize=64)
def _q_branches(shape: Shape) -> tuple[tuple[tuple[ColumnElement[bool], ...], ...], ...]:
    """(branches, pieces) of the number search with shape.q digits D (see Selection):

    - for each split k: dialcode = D[:k] and the number starts with D[k:] (a range of the
      unique (dialcode, number) index, or of (company, dialcode, number));
    - with fewer than 7 digits, a longer dialcode starting with D (any number);
    - the number ends with D: its reversed digits start with D reversed (ix_ddis_number_reversed,
      or the company's).

    The dialcode branches are disjoint (each a different dialcode); the last piece is the
    end-of-number branch without the rows the others hold.

    A description search (shape.words) is one branch: for each word, the number is among
    those with a word in its range of number_words' key (word >= :w AND word < the next
    string after every one starting with w), so the descriptions themselves are never read."""
    c = table(shape.kind).c
    if shape.words:
        w = NumberWord.__table__.c
        having = tuple(
            tuple_(c.dialcode, c.number).in_(
                select(w.dialcode, w.number).where(
                    w.word >= bindparam(f"w_from_{i}"), w.word < bindparam(f"w_to_{i}")
                )
            )
            for i in range(shape.words)
        )
        return (having,), (having,)
    n = shape.q
    if not n:
        return (), ()
    start: list[tuple[ColumnElement[bool], ...]] = []
    for k in _q_splits(n):
        dialcode = c.dialcode == bindparam(f"q_dialcode_{k}")
        if k < n:
            start.append(
                (dialcode, c.number >= bindparam(f"q_from_{k}"), c.number < bindparam(f"q_to_{k}"))
            )
        else:
            start.append((dialcode,))
    if n < MAX_DIALCODE:
        start.append(
            (c.dialcode > bindparam("q_dialcode"), c.dialcode < bindparam("q_dialcode_to"))
        )
    if n > MAX_NUMBER:
        return tuple(start), tuple(start)
    end = (
        c.number_reversed >= bindparam("q_reversed"),
        c.number_reversed < bindparam("q_reversed_to"),
    )
    # A number ending in one or two given digits is one in 10 or 100: reading them from the
    # reversed index and sorting would be most of the table, while walking the list's own
    # order past the others finds a page within a few thousand rows. The same rows, written so
    # no index can seek them, so the planner walks the order.
    walk = (func.substr(c.number_reversed, 1, n) == bindparam("q_reversed"),)
    others = not_(or_(*(and_(*b) for b in start)))
    return (*start, walk if n <= WALK_DIGITS else end), (*start, (*end, others))


def _restrict(
    principal: Principal, company: str | None
) -> tuple[str | None, list[str] | None, bool]:
    """The scope restriction: (the fixed company, the companies to restrict to, whether nothing
    can match). A company filter, or a principal's only company, fixes the company; a filter
    outside the principal's grants matches nothing (silently: as if it had no rows)."""
    visible = principal.pickable_companies()
    if visible is None:
        return company, None, False
    if company is not None:
        return company, None, company not in visible
    if len(visible) == 1:
        return next(iter(visible)), None, False
    return None, sorted(visible), False


def _prefix_params(values: dict[str, str], params: dict[str, Any]) -> tuple[str, ...]:
    """Bind prefix matches of `values` into `params`; return the fields also matched as a
    range. The range is the same rows as the LIKE, which an index can seek (SQLite's LIKE is
    case-insensitive and cannot; PostgreSQL's only with a C collation): exact for digits on
    any collation, and for every value under SQLite's binary one."""
    postgresql = bool(values) and on_postgresql()
    ranged = []
    for f in sorted(values):
        value = values[f]
        escaped = value.replace(ESCAPE, ESCAPE * 2).replace("%", ESCAPE + "%")
        params[f"prefix_{f}"] = escaped.replace("_", ESCAPE + "_")
        if f in DIGIT_FIELDS or not postgresql:
            ranged.append(f)
            params[f"from_{f}"], params[f"to_{f}"] = value, upper_bound(value)
    return tuple(ranged)


@lru_cache(maxsize=512)
def _conditions(shape: Shape) -> tuple[ColumnElement[bool], ...]:
    """The shape's conditions, values left as bound parameters (see Shape)."""
    columns = table(shape.kind).c
    where: list[ColumnElement[bool]] = []
    for f in shape.prefix:
        where.append(columns[f].startswith(bindparam(f"prefix_{f}"), escape=ESCAPE))
        if f in shape.ranged:
            where += [columns[f] >= bindparam(f"from_{f}"), columns[f] < bindparam(f"to_{f}")]
    # (In this order the statements are word for word those the plans were checked on.)
    if shape.nothing:
        where.append(false())
    if shape.company:
        where.append(columns.company == bindparam("company"))
    where += exact(shape.kind, {f: bindparam(f"scope_{f}") for f in shape.exact})
    if shape.restricted:
        where.append(columns.company.in_(bindparam("visible", expanding=True)))
    return tuple(where)


@lru_cache(maxsize=512)
def _read_statements(shape: Shape) -> tuple[Select[Any], Select[Any]]:
    """read's page and count statements for one shape of request, values left as parameters
    (the selection's, limit and offset), so a request only binds values instead of building
    and hashing a statement tree.

    The page carries the total: the count rides along as an uncorrelated scalar subquery,
    which both databases evaluate once (SQLite: a constant subquery; PostgreSQL: an InitPlan),
    so each half keeps its own index-driven plan (the count an index-only scan of the
    company's range, the page an ordered index scan stopped at `limit`); a window
    count(*) OVER () would read every match in full first. Plain columns, not ORM objects:
    the answer is dicts and nothing is changed."""
    kind = shape.kind
    columns = table(kind).c
    where = _conditions(shape)
    count = select(func.count()).select_from(table(kind)).where(*where)
    page = (
        select(*(columns[f] for f in kind.fields), count.correlate(None).scalar_subquery())
        .where(*where)
        .order_by(*(columns[f] for f in kind.order))
        .limit(bindparam("limit", type_=Integer))
        .offset(bindparam("offset", type_=Integer))
    )
    return page, count


def read(
    principal: Principal,
    kind: Kind,
    scope: Any,
    limit: Any = None,
    offset: Any = None,
) -> Page:
    """Rows matching every scope field exactly, sorted by key, restricted silently to the
    companies the principal administers; `total` counts all matches, `rows` one page (the
    API's read; the pages page by keyset through services/records/listing.py)."""
    selection = select_rows(principal, kind, scope)
    limit = LIMIT.parse(limit, "limit")
    offset = OFFSET.parse(offset, "offset")
    if selection.empty:
        return Page(rows=[], total=0)
    params = {**selection.params, "limit": limit, "offset": offset}
    page, count = _read_statements(selection.shape)
    # On the request's read connection, straight to the driver (database.read_rows): a Core
    # statement needs none of the ORM Session.
    result = read_rows(page, params)
    fields = kind.fields
    rows = [dict(zip(fields, r, strict=False)) for r in result]  # the count is left off
    if result:
        total = result[0][-1]
    elif offset or not limit:  # past the end, or no page asked for: no row carried the count
        total = read_rows(count, params)[0][0] or 0
    else:
        total = 0
    return Page(rows=rows, total=total)


@lru_cache(maxsize=64)
def _get_statement(shape: Shape) -> Select[Any]:
    columns = table(shape.kind).c
    return select(*(columns[f] for f in shape.kind.fields)).where(*_conditions(shape)).limit(1)


def get(principal: Principal, kind: Kind, key: Any) -> dict[str, str]:
    """The one record named by `key` (its order fields: a DDI's dialcode and number, a phone
    user's company and username) if the principal sees it; NotFound otherwise, malformed keys
    and other companies' records alike, so existence does not leak. Forbidden unless an
    administrator."""
    try:
        selection = select_rows(principal, kind, key, part=kind.key_part)
    except Invalid:
        raise NotFound(f"No such {kind.label}.") from None
    if not selection.empty:
        connection = db.session.connection()
        row = connection.execute(_get_statement(selection.shape), selection.params).first()
        if row is not None:
            return dict(zip(kind.fields, row, strict=True))
    raise NotFound(f"No such {kind.label}.")
