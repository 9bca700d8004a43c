"""DDI and phone-user pages: /ddis, /users, their forms and CSV downloads.

One set of views serves both kinds (a Screen says what differs); the services decide access
and validate, the views only translate forms and query strings.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from flask import (
    Blueprint,
    Response,
    flash,
    make_response,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_login import login_required
from flask_wtf import FlaskForm
from werkzeug.datastructures import MultiDict
from wtforms import RadioField, StringField

# The type stubs predate SelectChoice (wtforms 3.3), which tuples of choices are deprecated for.
from wtforms.fields.choices import SelectChoice  # type: ignore[attr-defined]

from .. import wording
from ..access import Principal
from ..errors import Invalid, ServiceError
from ..request_auth import replica_reads
from ..services import companies, inventory
from ..services.fields import Part, parse_part
from ..services.numbers import answers, browse
from ..services.numbers import bulk as number_bulk
from ..services.records import bulk, crud, ddis, kinds, landing, listing, record_query
from . import pickers
from .common import is_htmx, principal
from .downloads import csv_download
from .forms import FIELD_LABELS, apply_field_errors, form_error

bp = Blueprint("records", __name__)
PER_PAGE = 50
PAGE_NUMBER = re.compile(r"[0-9]{1,6}")
BLOCK_COUNT = re.compile(r"[0-9]{1,6}")
CSV_CHUNK = 5000
SEARCH_LABEL = "Number"  # the number search's field, in the filter form and its messages
EMPTY = listing.Listing(
    rows=[], total=0, start=0, has_prev=False, has_next=False, first=None, last=None
)


@dataclass(frozen=True)
class Screen:
    name: str  # ddi | user: endpoint prefix
    plural: str  # ddis | users: list endpoint and URL
    title: str
    kind: kinds.Kind
    url_keys: tuple[str, ...]  # what names one record in its URL
    search: bool = False  # whether the list has the number search (`q`)
    states: bool = False  # whether the list has the state filter (services/numbers/browse.py)

    def keys_of(self, row: dict[str, str]) -> dict[str, str]:
        return {k: row[k] for k in self.url_keys}

    @property
    def columns(self) -> tuple[tuple[str, str, str], ...]:
        """The list's columns: (field shown, its heading, the field its header sorts by). A
        DDI's dialcode and number are one column, "Number", written as pages write a number
        ("+44 2071234567"), sorted by dialcode then number (`sort=dialcode`, the key order);
        `sort=number` (the number alone) and the dialcode and number filters still work."""
        fields = ("number", *self.kind.fields[2:]) if self.kind is kinds.DDI else self.kind.fields
        labels = {"number": "Number"} if self.kind is kinds.DDI else {}
        return tuple(
            (
                f,
                labels.get(f, FIELD_LABELS[f]),
                "dialcode" if self.kind is kinds.DDI and f == "number" else f,
            )
            for f in fields
        )

    def key_of(self, row: dict[str, str]) -> str:
        """A record's key as forms post it back (the bulk form's ticks): '44:2071234567',
        'acme/ana.kim'."""
        return self.kind.key_label(kinds.Row(row))

    def label_of(self, row: dict[str, str]) -> str:
        """How pages name a record: '+44 2071234567' (wording.ddi_number), 'acme/ana.kim'."""
        if self.kind is kinds.DDI:
            return wording.ddi_number(row["dialcode"], row["number"])
        return self.key_of(row)


DDI = Screen("ddi", "ddis", "DDIs", kinds.DDI, ("dialcode", "number"), search=True, states=True)
USER = Screen("user", "users", "Phone users", kinds.PHONE_USER, ("company", "username"))


class RecordForm(FlaskForm):
    """Only the CSRF check is WTForms'; the fields are validated by the service."""

    dialcode = StringField("Dialcode")
    number = StringField("Number")
    username = StringField("Username")
    virt_exten = StringField("Extension")
    company = StringField("Company")  # a company picker: no company until one is typed
    # A DDI's number's description (docs/numbers.md): checked by the service like every field.
    description = StringField("Description")
    # A DDI create only: a block of consecutive numbers (ddis.create_block).
    count = StringField("How many", default="1")
    # Its labels name neither "number" nor "extension": those are the fields above.
    extensions = RadioField(
        "The rest of the block",
        choices=[
            SelectChoice("increment", "count up by one from the first"),
            SelectChoice("same", "all the same as the first"),
        ],
        default="increment",
    )


def _form(p: Principal, screen: Screen, fields: tuple[str, ...]) -> RecordForm:
    form = RecordForm()
    form.visible_fields = fields
    return form


# Every record field but the company, checked as the API checks them (built once).
OTHER_FIELDS = Part(("dialcode", "number", "virt_exten", "username", "description"))


def _picked_company(p: Principal, form: RecordForm, fields: tuple[str, ...]) -> bool:
    """Read the form's company picker (required); False when it shows a message instead, and
    then the other `fields`' own problems too, so the form says everything at once."""
    picked = pickers.resolve(p, "records", form.company.data, required=True)
    if pickers.on_field(form.company, picked):
        return True
    others = {f: v for f, v in _values(form, fields).items() if f != "company"}
    try:
        parse_part(OTHER_FIELDS, others, "values")
    except Invalid as exc:
        apply_field_errors(form, exc)
    return False


def _values(form: RecordForm, fields: tuple[str, ...]) -> dict[str, Any]:
    return {f: (getattr(form, f).data or "").strip() for f in fields}


def _create_fields(screen: Screen) -> tuple[str, ...]:
    """What the create form has: the record's fields and its number's (a description)."""
    return screen.kind.fields + screen.kind.number_fields


# --- lists -------------------------------------------------------------------------------------
def _query(screen: Screen, args: MultiDict[str, str] | None = None) -> dict[str, Any]:
    """The list's state from the query string (or `args`): filters, sort, and where in the list
    the page is (bad values fall back: an unknown sort to the key order, a bad position to the
    first page). Positions: `after` or `before` a row (the order fields' values, repeated: see
    listing.order_fields), `last=1`, or an old-style `page` number.

    `state` (DDIs): in service, the default, or another state (checked against the account
    when the list is read); a list in another state is in dialcode and number order only and
    pages forward from `after` (services/numbers/browse.py): its sort, `before`, `last` and
    `page` are dropped."""
    args = request.args if args is None else args
    chosen = (args.get("state", "").strip() if screen.states else "") or inventory.IN_SERVICE
    numbers = chosen != inventory.IN_SERVICE
    sort = args.get("sort") if args.get("sort") in screen.kind.fields and not numbers else None
    page = args.get("page", "")
    # The number search rides with the filters, so every link of the view carries it.
    names = (*screen.kind.fields, *(("q",) if screen.search else ()))
    state: dict[str, Any] = {
        "filters": {f: args[f].strip() for f in names if args.get(f, "").strip()},
        "sort": sort,
        "descending": sort is not None and args.get("dir") == "desc",
        "after": None,
        "before": None,
        "last": False,
        # [0-9] and not str.isdigit(), which also admits superscripts that int() refuses.
        "page": int(page) if PAGE_NUMBER.fullmatch(page) and int(page) > 0 else None,
        "state": chosen[:20],
    }
    if numbers:
        state["page"] = None
    for name in ("after",) if numbers else ("after", "before"):
        if name in args:
            try:
                state[name] = listing.parse_cursor(screen.kind, sort, args.getlist(name), name)
            except Invalid:
                continue
            return state
    state["last"] = args.get("last") == "1" and not numbers
    return state


def numbers_view(state: dict[str, Any]) -> bool:
    """Whether the list state is of numbers out of service (or all), not the DDI list."""
    return state.get("state", inventory.IN_SERVICE) != inventory.IN_SERVICE


def _company_filter(p: Principal, state: dict[str, Any]) -> pickers.Picked:
    """The company filter as its picker reads it: an identifier in any case names its company
    (the filter then holds the identifier); an unknown one is the picker's message."""
    typed = state["filters"].get("company", "")
    if not typed:
        return pickers.Picked("")
    picked = pickers.resolve(p, "records", typed)
    if picked.company is not None:
        state["filters"]["company"] = picked.company
    return picked


def _read(p: Principal, screen: Screen, state: dict[str, Any], per_page: int, count=True):
    """One page of the list as the query string describes it; filters match from the start,
    as someone typing expects."""
    filters = {f: v for f, v in state["filters"].items() if f != "q"}
    return listing.page(
        p,
        screen.kind,
        filters,
        q=state["filters"].get("q"),
        sort=state["sort"],
        descending=state["descending"],
        after=state["after"],
        before=state["before"],
        last=state["last"],
        number=None if state["last"] else state["page"],
        per_page=per_page,
        count=count,
    )


def _read_numbers(p: Principal, state: dict[str, Any], per_page: int) -> listing.Listing:
    """One page of the DDI list in a state other than in service: numbers in dialcode and
    number order, from the `after` cursor on (services/numbers/browse.py); not counted."""
    filters = {f: v for f, v in state["filters"].items() if f != "q"}
    found = browse.page(
        p,
        state["state"],
        filters,
        q=state["filters"].get("q"),
        after=state["after"],
        limit=per_page,
    )
    return listing.Listing(
        rows=found.rows,
        total=None,
        start=0,
        has_prev=state["after"] is not None,
        has_next=found.has_next,
        first=None,
        last=found.last,
    )


def _described(p: Principal, page: listing.Listing) -> listing.Listing:
    """The DDI list's page with each DDI's description (one query for the page)."""
    found = browse.descriptions(p, page.rows)
    rows = [{**r, "description": found.get((r["dialcode"], r["number"]), "")} for r in page.rows]
    return replace(page, rows=rows)


def _list(screen: Screen):
    return render_list(screen)


@dataclass(frozen=True)
class BulkRetry:
    """A bulk form the bulk view refused, shown again on its list: every problem at once (the
    form's own above its controls, the company's beside its picker, which alone is marked at
    fault), the rows that were ticked and the company typed, so nothing has to be done twice."""

    error: str  # the form's own problem (nothing ticked, an expired form); '' for none
    ticked: frozenset[str] = frozenset()
    to_company: str = ""
    company_error: str = ""  # the company's ("Company to move them to: required.")
    until: str = ""  # a bulk reservation's last day, as typed
    reason: str = ""  # a bulk retire's reason, as typed

    @property
    def messages(self) -> list[str]:
        """Every problem, the form's own first."""
        return [m for m in (self.error, self.company_error) if m]


def _read_shown(
    p: Principal, screen: Screen, state: dict[str, Any], picked: pickers.Picked
) -> listing.Listing:
    """The page the list shows: the DDIs (with their descriptions), or the numbers in another
    state; Invalid for a state the account may not list or a filter it refuses."""
    if screen.states:  # a state the account may not list is the form's message
        browse.check_state(p, state["state"])
    if picked.error:  # a company the picker does not know: its message and closest matches
        raise Invalid(picked.error, {"company": picked.error})
    if numbers_view(state):
        return _read_numbers(p, state, PER_PAGE)
    page = _read(p, screen, state, PER_PAGE)
    return _described(p, page) if screen.states else page


def _state_context(p: Principal, state: dict[str, Any]) -> dict[str, Any]:
    """What the list's templates need of the state filter and the number bulk actions."""
    numbers = numbers_view(state)
    actions = number_bulk.actions_for(p, state["state"]) if numbers else ()
    context: dict[str, Any] = {
        "numbers_view": numbers,
        "number_actions": actions,
        "state_choices": [(s, browse.LABELS[s]) for s in browse.choices(p)] if p.is_admin else [],
        "default_until": number_bulk.default_until() if actions else "",
    }
    if numbers:  # only the number actions' bulk form (services/numbers/bulk.py)
        context["may_bulk"] = bool(actions)
    return context


def render_list(
    screen: Screen, args: MultiDict[str, str] | None = None, retry: BulkRetry | None = None
):
    """The list page (an htmx request: its rows) in the state `args` describe (None: the query
    string); `retry` shows a refused bulk form again on it, with status 400."""
    p = principal()
    state = _query(screen, args)
    marked = _take_mark(screen)
    error, status = None, 200 if retry is None else 400
    picked = _company_filter(p, state)
    numbers = numbers_view(state)
    try:
        page = _read_shown(p, screen, state, picked)
    except Invalid as exc:  # a filter typed half-way, e.g. letters in a number
        p.require_admin()
        page, status = EMPTY, 400
        named = {SEARCH_LABEL if k == "q" else k: v for k, v in exc.fields.items()}
        error = "; ".join(f"{k}: {v}" for k, v in named.items()) or exc.message
    context = {
        "screen": screen,
        "page": page,
        "state": state,
        "error": error,
        "per_page": PER_PAGE,
        "may_create": crud.may_create_delete(p, screen.kind),
        "may_bulk": bulk.may_move(p),
        "may_bulk_delete": bulk.may_delete(p),
        **_state_context(p, state),
        "company_picked": picked,
        "search_label": SEARCH_LABEL,
        # Where the forms come back to, as the query string of their links ('' for the plain
        # list, which they fall back to anyway).
        "back_query": _back_query(screen, state),
        "marked": marked,
        "changed_note": None if numbers else _changed_note(p, screen, state, page, marked),
        "shown_url": _list_url(screen, state),
        "retry": retry,
        # The companies of the rows shown, with their names and whether their pages may be
        # opened: one query for the page (services/companies.py labels).
        "company_labels": companies.labels(
            p, (row["company"] for row in page.rows if row.get("company"))
        ),
    }
    template = "records/_rows.html" if is_htmx() else "records/list.html"
    return render_template(template, oob=is_htmx(), **context), status


@bp.get("/ddis")
@login_required
@replica_reads
def ddis_list():
    return _list(DDI)


@bp.get("/users")
@login_required
@replica_reads
def users_list():
    return _list(USER)


def _csv(screen: Screen) -> Response:
    p = principal()
    # The whole filtered view in its order, from the start, whatever page the link was on.
    state = {**_query(screen), "after": None, "before": None, "last": False, "page": None}
    if screen.states:
        browse.check_state(p, state["state"])
    if numbers_view(state):
        return _numbers_csv(p, screen, state)
    # Read the first chunk before streaming, so a refusal is an ordinary error page.
    first = _read(p, screen, state, CSV_CHUNK, count=False)

    def rows() -> Iterator[list[str]]:
        chunk = first
        while True:
            yield from ([row[f] for f in screen.kind.fields] for row in chunk.rows)
            if not chunk.has_next:
                return
            # Keyset: each chunk starts after the last row of the one before, one index
            # range each, so a million rows cost no more per chunk at the end than at the start.
            chunk = _read(p, screen, {**state, "after": chunk.last}, CSV_CHUNK, count=False)

    return csv_download(f"{screen.plural}.csv", screen.kind.fields, rows())


def _numbers_csv(p: Principal, screen: Screen, state: dict[str, Any]) -> Response:
    """The DDI list in another state as CSV: every number of the view, in key order, with
    the fields /rest/numbers/read answers (docs/numbers.md, "Read")."""
    first = _read_numbers(p, state, CSV_CHUNK)

    def rows() -> Iterator[list[str]]:
        chunk = first
        while True:
            yield from ([row[f] for f in answers.FIELDS] for row in chunk.rows)
            if not chunk.has_next:
                return
            chunk = _read_numbers(p, {**state, "after": chunk.last}, CSV_CHUNK)

    return csv_download(f"{screen.plural}-{state['state']}.csv", answers.FIELDS, rows())


@bp.get("/ddis.csv")
@login_required
@replica_reads
def ddis_csv():
    return _csv(DDI)


@bp.get("/users.csv")
@login_required
@replica_reads
def users_csv():
    return _csv(USER)


# --- coming back to the list ------------------------------------------------------------------
# A form carries the list state it was opened from (filters, sort, position) as `back`, the
# list's own address; after a save the list reopens there with the record marked. `back` is
# rebuilt from its parsed state, never echoed: anything but this list's address with the list's
# own parameters (its position and sort, its fields' filters and, where it has it, the number
# search `q`) is ignored (no open redirect).
BACK_PARAMS = frozenset({"sort", "dir", "after", "before", "last", "page"})
MAX_BACK = 2000
MARK = "changed_record"  # session key: the record the list marks once, after a save


def _state_args(state: dict[str, Any]) -> dict[str, Any]:
    """The query parameters that reopen the list in `state`."""
    args: dict[str, Any] = dict(state["filters"])
    if numbers_view(state):
        args["state"] = state["state"]
    if state["sort"]:
        args.update(sort=state["sort"], dir="desc" if state["descending"] else "asc")
    if state["after"] is not None:
        args["after"] = list(state["after"])
    elif state["before"] is not None:
        args["before"] = list(state["before"])
    elif state["last"]:
        args["last"] = 1
    elif state["page"]:
        args["page"] = state["page"]
    return args


def _list_url(screen: Screen, state: dict[str, Any] | None = None) -> str:
    """The list's address in `state` (None: its first page, unfiltered)."""
    return url_for(f"records.{screen.plural}_list", **(_state_args(state) if state else {}))


def _back_state(screen: Screen) -> dict[str, Any] | None:
    """The list state the request came from: its `back` (form field, else query string) or,
    for htmx, the address shown in the browser (HX-Current-URL: the list after filtering in
    place); the first that is this list's local address with only the list's parameters."""
    current = request.headers.get("HX-Current-URL", "") if is_htmx() else ""
    here = urlsplit(current)
    candidates = (
        request.form.get("back", ""),
        urlunsplit(("", "", here.path, here.query, "")) if here.netloc == request.host else "",
        request.args.get("back", ""),
    )
    for raw in candidates:
        if (state := _parse_back(screen, raw)) is not None:
            return state
    return None


def _parse_back(screen: Screen, raw: str) -> dict[str, Any] | None:
    if not raw or len(raw) > MAX_BACK or not raw.isprintable() or "\\" in raw:
        return None
    parts = urlsplit(raw)
    if parts.scheme or parts.netloc or parts.fragment or parts.path != _list_url(screen):
        return None
    try:
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        return None
    allowed = BACK_PARAMS | set(screen.kind.fields) | ({"q"} if screen.search else set())
    allowed |= {"state"} if screen.states else set()
    if any(k not in allowed for k, _ in pairs):
        return None
    return _query(screen, MultiDict(pairs))


def back_args(screen: Screen, raw: str | None) -> MultiDict[str, str] | None:
    """The query parameters of the list address `raw` (a form's `back`), rebuilt from its
    parsed state; None unless it is this list's own address (see _parse_back)."""
    state = _parse_back(screen, raw or "")
    if state is None:
        return None
    url = _list_url(screen, state)
    return MultiDict(parse_qsl(urlsplit(url).query, keep_blank_values=True))


def list_url(screen: Screen, args: MultiDict[str, str] | None = None) -> str:
    """The list's address with the query parameters `args` (None: its first page)."""
    return _list_url(screen, _query(screen, args) if args is not None else None)


def _back_query(screen: Screen, state: dict[str, Any]) -> str:
    """'?back=<the list's address in state>' for the record links, '' for the plain list."""
    here = _list_url(screen, state)
    return "" if here == _list_url(screen) else "?" + urlencode({"back": here})


def _mark(screen: Screen, keys: dict[str, str]) -> None:
    session[MARK] = {"list": screen.plural, "keys": keys}


def _take_mark(screen: Screen) -> dict[str, str] | None:
    """The record to mark on this list, once: the next list page shown no longer marks it."""
    # Only a session holding a mark is changed (and so sent back as a cookie).
    mark = session.pop(MARK) if MARK in session else None
    if not isinstance(mark, dict) or mark.get("list") != screen.plural:
        return None
    keys = mark.get("keys")
    return keys if isinstance(keys, dict) else None


def _positioned(state: dict[str, Any], located: landing.Located) -> dict[str, Any]:
    """`state` moved to the page that starts with the located record."""
    return {**state, "after": located.after, "before": None, "last": False, "page": None}


def _changed_note(
    p: Principal,
    screen: Screen,
    state: dict[str, Any],
    page: listing.Listing,
    marked: dict[str, str] | None,
) -> dict[str, str | None] | None:
    """What the list says when the record just saved is not among its rows: it no longer
    matches the filters, or it is elsewhere in the order (with a link to it)."""
    if not marked or any(screen.keys_of(row) == marked for row in page.rows):
        return None
    label = f"{screen.kind.label} {screen.label_of(marked)}"
    try:
        located = landing.locate(
            p,
            screen.kind,
            marked,
            state["filters"],
            sort=state["sort"],
            descending=state["descending"],
        )
    except (KeyError, ServiceError):  # a mark that names no record of this list
        located = None
    if located is None:
        return {"text": f"{label} is no longer in this list.", "href": None}
    if not located.matches:
        return {"text": f"{label} no longer matches these filters.", "href": None}
    href = _list_url(screen, _positioned(state, located))
    return {"text": f"{label} is elsewhere in this order.", "href": href}


def _show_created(p: Principal, screen: Screen, message: str, keys: dict[str, str]):
    """After a create: the list the form came from, from the new record on, marked; without
    its filters if they would hide it."""
    state = _back_state(screen) or _query(screen, MultiDict())
    where = {"sort": state["sort"], "descending": state["descending"]}
    note = None
    located = landing.locate(p, screen.kind, keys, state["filters"], **where)
    if located is not None and not located.matches and state["filters"]:
        note = "The filters were cleared to show it."
        state = {**state, "filters": {}}
        located = landing.locate(p, screen.kind, keys, {}, **where)
    if located is not None and located.matches:
        state = _positioned(state, located)
        keys = screen.keys_of(located.record)
    _mark(screen, keys)
    return _done(screen, message, state, note)


# --- one record --------------------------------------------------------------------------------
def _find(p: Principal, screen: Screen, keys: dict[str, str]) -> dict[str, str]:
    """The visible record named by the URL; a malformed or invisible one is simply not found."""
    return record_query.get(p, screen.kind, keys)


def _page_of(screen: Screen, record: dict[str, str]) -> str:
    """The record's own page: a DDI's /ddis/<dialcode>/<number>, a phone user's
    /users/<company>/<username>."""
    if screen is DDI:
        return url_for("ddi_page.show", dialcode=record["dialcode"], number=record["number"])
    return url_for("user_page.user", company=record["company"], username=record["username"])


def _own_page(
    screen: Screen, record: dict[str, str], saved: dict[str, str] | None = None
) -> str | None:
    """The record's own page when the form was opened from it, its `back` being exactly that
    address: the save, Cancel and a delete come back there rather than to the list. Anything
    else is not followed (see _parse_back). `saved`: the record as saved, whose page it is
    now (a phone user moved to another company has its page there); None after a phone
    user's delete, whose page is gone: the list, then (a deleted DDI keeps its page)."""
    page = _page_of(screen, record)
    raw = request.form.get("back") or request.args.get("back", "")
    if raw != page:
        return None
    return _page_of(screen, saved) if saved is not None else page


def _done(
    screen: Screen,
    message: str,
    state: dict[str, Any] | None = None,
    note: str | None = None,
    page: str | None = None,
):
    """After a save: the record's own page when the form came from it (`page`), else the list
    as the form's `back` state describes it (else its first page), with a message naming the
    record."""
    flash(message, "success")
    if note:
        flash(note, "info")
    target = page or _list_url(screen, state)
    if is_htmx():  # the form sat in a panel of the list: reload the list with the message
        response = make_response("", 200)
        response.headers["HX-Redirect"] = target
        return response
    return redirect(target)


def _render_form(screen: Screen, form: RecordForm, action: str, record=None, status=200):
    template = "records/_form.html" if is_htmx() else "records/form.html"
    own = _own_page(screen, record) if record is not None else None
    back = own or _list_url(screen, _back_state(screen))
    context = {"screen": screen, "form": form, "action": action, "record": record, "back": back}
    return render_template(template, **context), status


def _create(screen: Screen):
    p = principal()
    crud.require_create_delete(p, screen.kind, "create")
    fields = _create_fields(screen)
    form = _form(p, screen, fields)
    if request.method == "POST" and form.validate_on_submit():
        if not _picked_company(p, form, fields):
            return _render_form(screen, form, "create", status=400)
        values = _values(form, fields)
        if values.get("description") == "":
            # Left empty: a number known to the inventory keeps the description it has.
            del values["description"]
        try:
            count = _block_count(form) if screen is DDI else 1
            if count > 1:
                same = form.extensions.data == "same"
                block = ddis.create_block(p, values, count, same_extension=same)
                message = (
                    f"Created {block.count:,} DDIs, {screen.label_of(block.first)} to "
                    f"{screen.label_of(block.last)}."
                )
            else:
                crud.create(p, screen.kind, values)
                message = f"Created {screen.kind.label} {screen.label_of(values)}."
        except ServiceError as exc:
            status = form_error(form, exc, on_form=(400, 404, 409), status=400)
            return _render_form(screen, form, "create", status=status)
        return _show_created(p, screen, message, screen.keys_of(values))
    return _render_form(screen, form, "create", status=400 if request.method == "POST" else 200)


def _block_count(form: RecordForm) -> int:
    """The create form's 'How many' (empty: one); Invalid unless a whole number."""
    text = (form.count.data or "").strip() or "1"
    if not BLOCK_COUNT.fullmatch(text):
        why = f"must be a whole number from 1 to {ddis.MAX_BLOCK:,}"
        raise Invalid(f"How many: {why}.", {"count": why})
    return int(text)


CHANGE_FIELDS = {"edit": ("virt_exten", "company"), "link": ("virt_exten",)}


def _change(screen: Screen, keys: dict[str, str], action: str):
    """Edit (update): the extension and company of one record, and a DDI's description. Link
    (a DDI only): point it at an extension of the company it is in, the API's link with the
    company unchanged, and its description."""
    p = principal()
    record = _find(p, screen, keys)
    fields = CHANGE_FIELDS[action] + screen.kind.number_fields
    form = _form(p, screen, fields)
    if request.method == "GET":
        form.virt_exten.data = record["virt_exten"]
        form.company.data = record["company"]
        if screen.kind.number_fields:
            form.description.data = ddis.description(record["dialcode"], record["number"])
    elif form.validate_on_submit():
        if "company" in fields and not _picked_company(p, form, fields):
            return _render_form(screen, form, action, record, status=400)
        values = {"company": record["company"], **_values(form, fields)}
        if "description" not in request.form:  # a form without the field changes none
            values.pop("description", None)
        try:
            if action == "link":
                ddis.link(p, {k: record[k] for k in ("dialcode", "number")}, values)
                changed = 1
            else:
                scope = {**screen.keys_of(record), "company": record["company"]}
                changed = crud.update(p, screen.kind, scope, values)
        except ServiceError as exc:
            status = form_error(form, exc, on_form=(400, 409), status=400)
            return _render_form(screen, form, action, record, status=status)
        verb = "Linked" if action == "link" else ("Saved" if changed else "No changes to")
        _mark(screen, screen.keys_of({**record, **values}))
        message = f"{verb} {screen.kind.label} {screen.label_of(record)}"
        if action == "link":
            message += f" to extension {values['virt_exten']}"
        saved = _own_page(screen, record, {**record, **values})
        return _done(screen, message + ".", _back_state(screen), page=saved)
    else:
        return _render_form(screen, form, action, record, status=400)
    return _render_form(screen, form, action, record)


def _delete(screen: Screen, keys: dict[str, str]):
    p = principal()
    record = _find(p, screen, keys)
    crud.require_create_delete(p, screen.kind, "delete")
    form = FlaskForm()
    if request.method == "POST" and form.validate_on_submit():
        crud.delete_rows(p, screen.kind, {**screen.keys_of(record), "company": record["company"]})
        message = f"Deleted {screen.kind.label} {screen.label_of(record)}."
        # From the DDI's own page, back to it: it says the number was deleted, with its history.
        # A phone user's page goes with the user: back to the list.
        own = _own_page(screen, record) if screen is DDI else None
        return _done(screen, message, _back_state(screen), page=own)
    template = "records/_delete.html" if is_htmx() else "records/delete.html"
    status = 400 if request.method == "POST" else 200
    back = _own_page(screen, record) or _list_url(screen, _back_state(screen))
    context = {"screen": screen, "form": form, "record": record, "back": back}
    return render_template(template, **context), status


@bp.route("/ddis/new", methods=["GET", "POST"])
@login_required
def ddi_new():
    return _create(DDI)


@bp.route("/ddis/<dialcode>/<number>/edit", methods=["GET", "POST"])
@login_required
def ddi_edit(dialcode: str, number: str):
    return _change(DDI, {"dialcode": dialcode, "number": number}, "edit")


@bp.route("/ddis/<dialcode>/<number>/link", methods=["GET", "POST"])
@login_required
def ddi_link(dialcode: str, number: str):
    return _change(DDI, {"dialcode": dialcode, "number": number}, "link")


@bp.route("/ddis/<dialcode>/<number>/delete", methods=["GET", "POST"])
@login_required
def ddi_delete(dialcode: str, number: str):
    return _delete(DDI, {"dialcode": dialcode, "number": number})


@bp.route("/users/new", methods=["GET", "POST"])
@login_required
def user_new():
    return _create(USER)


@bp.route("/users/<company>/<username>/edit", methods=["GET", "POST"])
@login_required
def user_edit(company: str, username: str):
    return _change(USER, {"company": company, "username": username}, "edit")


@bp.route("/users/<company>/<username>/delete", methods=["GET", "POST"])
@login_required
def user_delete(company: str, username: str):
    return _delete(USER, {"company": company, "username": username})
