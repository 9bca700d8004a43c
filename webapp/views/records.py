"""DDI and phone-user pages: /ddis, /users, their forms and CSV downloads.

One set of views serves both kinds (a Screen says what differs); the services decide access
and validate, the views only translate forms and query strings.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from flask import (
    Blueprint,
    Response,
    flash,
    make_response,
    redirect,
    render_template,
    request,
    stream_with_context,
    url_for,
)
from flask_login import login_required
from flask_wtf import FlaskForm
from wtforms import StringField

from ..access import Principal
from ..services import ddis, listing, phone_users, record_query, records
from ..services.errors import Invalid, ServiceError
from . import pickers
from .common import is_htmx, principal
from .csv_safe import neutralise
from .forms import form_error

bp = Blueprint("records", __name__)
PER_PAGE = 50
PAGE_NUMBER = re.compile(r"[0-9]{1,6}")
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
    service: ModuleType
    kind: records.Kind
    url_keys: tuple[str, ...]  # what names one record in its URL
    search: bool = False  # whether the list has the number search (`q`)

    def keys_of(self, row: dict[str, str]) -> dict[str, str]:
        return {k: row[k] for k in self.url_keys}

    def label_of(self, row: dict[str, str]) -> str:
        """How messages name a record: '44:2071234567', 'acme/ana.kim'."""
        return self.kind.key_label(records.Row(row))


DDI = Screen("ddi", "ddis", "DDIs", ddis, ddis.KIND, ("dialcode", "number"), search=True)
USER = Screen(
    "user", "users", "Phone users", phone_users, phone_users.KIND, ("company", "username")
)


class RecordForm(FlaskForm):
    """Only the CSRF check is WTForms'; the fields are validated by the service."""

    dialcode = StringField("Dialcode")
    number = StringField("Number")
    username = StringField("Username")
    virt_exten = StringField("Extension")
    company = StringField("Company")  # a company picker: no company until one is typed


def _form(p: Principal, screen: Screen, fields: tuple[str, ...]) -> RecordForm:
    form = RecordForm()
    form.visible_fields = fields
    return form


def _picked_company(p: Principal, form: RecordForm) -> bool:
    """Read the form's company picker (required); False when it shows a message instead."""
    picked = pickers.resolve(p, "records", form.company.data, required=True)
    return pickers.on_field(form.company, picked)


def _values(form: RecordForm, fields: tuple[str, ...]) -> dict[str, Any]:
    return {f: (getattr(form, f).data or "").strip() for f in fields}


# --- lists -------------------------------------------------------------------------------------
def _query(screen: Screen) -> dict[str, Any]:
    """The list's state from the query string: filters, sort, and where in the list the page
    is (bad values fall back: an unknown sort to the key order, a bad position to the first
    page). Positions: `after` or `before` a row (the order fields' values, repeated: see
    listing.order_fields), `last=1`, or an old-style `page` number."""
    args = request.args
    sort = args.get("sort") if args.get("sort") in screen.kind.fields else None
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
    }
    for name in ("after", "before"):
        if name in args:
            try:
                state[name] = listing.parse_cursor(screen.kind, sort, args.getlist(name), name)
            except Invalid:
                continue
            return state
    state["last"] = args.get("last") == "1"
    return state


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


def _list(screen: Screen):
    p = principal()
    state = _query(screen)
    error, status = None, 200
    picked = _company_filter(p, state)
    try:
        if picked.error:  # a company the picker does not know: its message and closest matches
            raise Invalid(picked.error, {"company": picked.error})
        page = _read(p, screen, state, PER_PAGE)
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
        "may_create": records.may_create_delete(p, screen.kind),
        "company_picked": picked,
        "search_label": SEARCH_LABEL,
    }
    template = "records/_rows.html" if is_htmx() else "records/list.html"
    return render_template(template, oob=is_htmx(), **context), status


@bp.get("/ddis")
@login_required
def ddis_list():
    return _list(DDI)


@bp.get("/users")
@login_required
def users_list():
    return _list(USER)


def _csv(screen: Screen) -> Response:
    p = principal()
    # The whole filtered view in its order, from the start, whatever page the link was on.
    state = {**_query(screen), "after": None, "before": None, "last": False, "page": None}
    # Read the first chunk before streaming, so a refusal is an ordinary error page.
    first = _read(p, screen, state, CSV_CHUNK, count=False)

    def rows() -> Iterator[str]:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(screen.kind.fields)
        chunk = first
        while True:
            for row in chunk.rows:
                writer.writerow([neutralise(row[f]) for f in screen.kind.fields])
            yield out.getvalue()
            out.seek(0)
            out.truncate()
            if not chunk.has_next:
                return
            # Keyset: each chunk starts after the last row of the one before, one index
            # range each, so a million rows cost no more per chunk at the end than at the start.
            chunk = _read(p, screen, {**state, "after": chunk.last}, CSV_CHUNK, count=False)

    response = Response(stream_with_context(rows()), mimetype="text/csv")
    response.headers["Content-Disposition"] = f"attachment; filename={screen.plural}.csv"
    return response


@bp.get("/ddis.csv")
@login_required
def ddis_csv():
    return _csv(DDI)


@bp.get("/users.csv")
@login_required
def users_csv():
    return _csv(USER)


# --- one record --------------------------------------------------------------------------------
def _find(p: Principal, screen: Screen, keys: dict[str, str]) -> dict[str, str]:
    """The visible record named by the URL; a malformed or invisible one is simply not found."""
    return record_query.get(p, screen.kind, keys)


def _done(screen: Screen, message: str):
    flash(message, "success")
    target = url_for(f"records.{screen.plural}_list")
    if is_htmx():  # the form sat in a panel of the list: reload the list with the message
        response = make_response("", 200)
        response.headers["HX-Redirect"] = target
        return response
    return redirect(target)


def _render_form(screen: Screen, form: RecordForm, action: str, record=None, status=200):
    template = "records/_form.html" if is_htmx() else "records/form.html"
    return render_template(template, screen=screen, form=form, action=action, record=record), status


def _create(screen: Screen):
    p = principal()
    records.require_create_delete(p, screen.kind, "create")
    form = _form(p, screen, screen.kind.fields)
    if request.method == "POST" and form.validate_on_submit():
        if not _picked_company(p, form):
            return _render_form(screen, form, "create", status=400)
        values = _values(form, screen.kind.fields)
        try:
            screen.service.create(p, values)
        except ServiceError as exc:
            status = form_error(form, exc, on_form=(400, 404, 409), status=400)
            return _render_form(screen, form, "create", status=status)
        return _done(screen, f"Created {screen.kind.label} {screen.label_of(values)}.")
    return _render_form(screen, form, "create", status=400 if request.method == "POST" else 200)


def _change(screen: Screen, keys: dict[str, str], action: str):
    """Edit (update) or link: set virt_exten and company of one record."""
    p = principal()
    record = _find(p, screen, keys)
    form = _form(p, screen, ("virt_exten", "company"))
    if request.method == "GET":
        form.virt_exten.data = record["virt_exten"]
        form.company.data = record["company"]
    elif form.validate_on_submit():
        if not _picked_company(p, form):
            return _render_form(screen, form, action, record, status=400)
        values = _values(form, ("virt_exten", "company"))
        try:
            if action == "link":
                ddis.link(p, {k: record[k] for k in ("dialcode", "number")}, values)
                changed = 1
            else:
                scope = {**screen.keys_of(record), "company": record["company"]}
                changed = screen.service.update(p, scope, values)
        except ServiceError as exc:
            status = form_error(form, exc, on_form=(400, 409), status=400)
            return _render_form(screen, form, action, record, status=status)
        verb = "Linked" if action == "link" else ("Saved" if changed else "No changes to")
        return _done(screen, f"{verb} {screen.kind.label} {screen.label_of(record)}.")
    else:
        return _render_form(screen, form, action, record, status=400)
    return _render_form(screen, form, action, record)


def _delete(screen: Screen, keys: dict[str, str]):
    p = principal()
    record = _find(p, screen, keys)
    records.require_create_delete(p, screen.kind, "delete")
    form = FlaskForm()
    if request.method == "POST" and form.validate_on_submit():
        screen.service.delete(p, {**screen.keys_of(record), "company": record["company"]})
        return _done(screen, f"Deleted {screen.kind.label} {screen.label_of(record)}.")
    template = "records/_delete.html" if is_htmx() else "records/delete.html"
    status = 400 if request.method == "POST" else 200
    return render_template(template, screen=screen, form=form, record=record), status


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
