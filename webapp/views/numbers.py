"""The number inventory's pages (System-Admin; docs/pages.md): /ddis/stock adds a block or a CSV
file to the stock after a preview; /ddis/free finds free numbers and reserves or allocates them.

The services decide everything (services/numbers/stock_previews.py, free.py, reserving.py,
allocate.py); this module reads the forms and the upload and renders what they answer.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from flask import Blueprint, flash, redirect, render_template, request, session, url_for
from flask_login import login_required
from flask_wtf import FlaskForm
from flask_wtf.file import FileField
from werkzeug.exceptions import RequestEntityTooLarge
from wtforms import StringField

from .. import wording
from ..errors import FileRejected, Invalid, ServiceError
from ..extensions import csrf
from ..request_body import allow_body
from ..services import inventory
from ..services.numbers import allocate, free, reserving, stock_previews
from . import pickers
from .common import principal
from .forms import form_error
from .imports import FORM_OVERHEAD, drain

bp = Blueprint("numbers", __name__)
# A number as the services' messages name it, by its key ('44:2071230000 exists'): the pages
# write it as every page does, "+44 2071230000" (wording.ddi_number).
KEY = re.compile(r"\b([0-9]{1,7}):([0-9]{1,15})\b")


def shown(message: str) -> str:
    """A service's message as these pages show it: every number written "+44 2071230000"."""
    return KEY.sub(lambda m: wording.ddi_number(m[1], m[2]), message)


STOCKED = "numbers.stocked"  # the session's note of the last stock, shown once by /ddis/stock


class BlockForm(FlaskForm):
    dialcode = StringField("Dialcode")
    first = StringField("First number")
    count = StringField("How many")


class FileForm(FlaskForm):
    file = FileField("CSV file")


class FindForm(FlaskForm):
    """A GET form: a search, so no CSRF token (it changes nothing)."""

    class Meta:
        csrf = False

    dialcode = StringField("Dialcode")
    prefix = StringField("Starting with")
    count = StringField("How many")


class ReserveForm(FlaskForm):
    company = StringField("Company")
    # A day the service checks (YYYY-MM-DD, today to a year ahead); a date picker in browsers.
    until = StringField("Reserved through", render_kw={"type": "date"})


class AllocateForm(FlaskForm):
    company = StringField("Company")
    virt_exten = StringField("First extension")


# --- /ddis/stock ------------------------------------------------------------------------------
def _stock_page(
    block: BlockForm | None = None,
    upload: FileForm | None = None,
    status: int = 200,
    problems: list[str] | None = None,
):
    return (
        render_template(
            "numbers/stock.html",
            block=block or BlockForm(formdata=None),
            upload=upload or FileForm(formdata=None),
            max_bytes=stock_previews.MAX_BYTES,
            problems=problems or [],
            stocked=session.pop(STOCKED, None) if status == 200 else None,
        ),
        status,
    )


def _preview_page(
    preview: stock_previews.StockPreview,
    block: BlockForm | None = None,
    message: str | None = None,
    status: int = 200,
):
    """A preview: a block's (its fields go again, hidden, with Apply) or a kept file's."""
    return (
        render_template(
            "numbers/stock_preview.html",
            preview=preview,
            block=block,
            message=shown(message) if message else None,
        ),
        status,
    )


@bp.get("/ddis/stock")
@login_required
def stock_page():
    principal().require_system_admin("stock numbers")
    return _stock_page()


def _block_fields(form: BlockForm) -> tuple[str, str, str]:
    return (form.dialcode.data or "", form.first.data or "", form.count.data or "")


@bp.post("/ddis/stock/block")
@login_required
def stock_block_preview():
    """A block's preview (nothing written), or its form again with the fields at fault."""
    p = principal()
    p.require_system_admin("stock numbers")
    form = BlockForm()
    if not form.validate():  # the CSRF token
        return _stock_page(block=form, status=400)
    try:
        preview = stock_previews.preview_block(p, *_block_fields(form))
    except Invalid as exc:
        return _stock_page(block=form, status=form_error(form, exc))
    return _preview_page(preview, form)


@bp.post("/ddis/stock/block/apply")
@login_required
def stock_block_apply():
    p = principal()
    p.require_system_admin("stock numbers")
    form = BlockForm()
    fields = _block_fields(form)
    if not form.validate():
        preview = stock_previews.preview_block(p, *fields)
        return _preview_page(
            preview, form, message="The form had expired; apply again.", status=400
        )
    try:
        done = stock_previews.apply_block(p, *fields)
    except Invalid as exc:  # the hidden fields were edited: the form says what is wrong
        return _stock_page(block=form, status=form_error(form, exc))
    except ServiceError as exc:
        if exc.status != 409:
            raise
        # A number reached the inventory meanwhile: the preview as of now, and why.
        return _preview_page(
            stock_previews.preview_block(p, *fields), form, message=exc.message, status=409
        )
    return _stocked(done)


def _stocked(done: stock_previews.StockPreview):
    """After a stock: back to /ddis/stock, which says so once, with a link to the numbers."""
    where: dict[str, Any] = {"state": inventory.AVAILABLE}
    if done.dialcode is not None:
        where["dialcode"] = done.dialcode
        if done.prefix:
            where["number"] = done.prefix
    session[STOCKED] = {
        "message": f"Stocked {wording.counted(done.count, 'number', grouped=True)}.",
        "link": url_for("records.ddis_list", **where),
    }
    return redirect(url_for("numbers.stock_page"), 303)


# The global CSRF check would read the form under the app's 1 MiB body limit before this view
# can raise it for the upload; the form checks its own CSRF token instead (validate below).
@bp.post("/ddis/stock/file")
@csrf.exempt
@login_required
def stock_file_preview():
    p = principal()
    p.require_system_admin("stock numbers")
    try:
        allow_body(stock_previews.MAX_BYTES + FORM_OVERHEAD)
        form = FileForm()
    except RequestEntityTooLarge:
        drain()
        form = FileForm(formdata=None)
        form.file.errors = [stock_previews.too_large_message()]
        return _stock_page(upload=form, status=413)
    if not form.validate():  # the CSRF token
        return _stock_page(upload=form, status=400)
    upload = form.file.data
    if upload is None or not getattr(upload, "filename", ""):
        form.file.errors = ["Choose a CSV file to stock."]
        return _stock_page(upload=form, status=400)
    try:
        preview = stock_previews.preview_file(p, upload.filename, upload.read())
    except ServiceError as exc:
        if exc.status not in (400, 413):
            raise
        form.file.errors = [shown(exc.message)]
        several = isinstance(exc, FileRejected) and exc.total > 1
        problems = [shown(problem) for problem in exc.problems] if several else None
        return _stock_page(upload=form, status=exc.status, problems=problems)
    return redirect(url_for("numbers.stock_file_show", preview_id=preview.id), 303)


@bp.get("/ddis/stock/file/<preview_id>")
@login_required
def stock_file_show(preview_id: str):
    """A kept file's preview, as of now."""
    return _preview_page(stock_previews.show_file(principal(), preview_id))


@bp.post("/ddis/stock/file/<preview_id>")
@login_required
def stock_file_apply(preview_id: str):
    p = principal()
    if not FlaskForm().validate():
        preview = stock_previews.show_file(p, preview_id)
        return _preview_page(preview, message="The form had expired; apply again.", status=400)
    try:
        done = stock_previews.apply_file(p, preview_id)
    except ServiceError as exc:
        if exc.status != 409:
            raise
        preview = stock_previews.show_file(p, preview_id)
        return _preview_page(preview, message=exc.message, status=409)
    return _stocked(done)


# --- /ddis/free -------------------------------------------------------------------------------
def _free_page(
    find: FindForm,
    found: free.Free | None = None,
    reserve: ReserveForm | None = None,
    alloc: AllocateForm | None = None,
    status: int = 200,
):
    if reserve is None:
        reserve = ReserveForm(formdata=None)
        reserve.until.data = (
            inventory.today() + timedelta(days=reserving.DEFAULT_DAYS)
        ).isoformat()
    return (
        render_template(
            "numbers/free.html",
            find=find,
            found=found,
            reserve=reserve,
            alloc=alloc or AllocateForm(formdata=None),
            shown=free.SHOWN,
            at_most=free.AT_MOST,
            max_days=reserving.MAX_DAYS,
            # A reserve or allocate form that was refused is shown even when too few are free.
            sent=status != 200,
        ),
        status,
    )


def _search(find: FindForm) -> free.Search:
    return free.parse(find.dialcode.data or "", find.prefix.data or "", find.count.data or "")


@bp.get("/ddis/free")
@login_required
def free_page():
    """The search form; with a search, how many numbers are free and the lowest of them."""
    p = principal()
    p.require_system_admin("find free numbers")
    find = FindForm(request.args)
    if not any(request.args.get(f) for f in ("dialcode", "prefix", "count")):
        find.count.data = find.count.data or "1"
        return _free_page(find)
    try:
        found = free.find_free(p, _search(find))
    except Invalid as exc:
        return _free_page(find, status=form_error(find, exc))
    return _free_page(find, found)


EXPIRED = "The form had expired; send it again."


def _action(p, form: ReserveForm | AllocateForm):
    """Read a reserve or allocate form: the search it carries (hidden fields) found again, and
    the company its picker names. Returns (search form, what is free, whether the form may go
    on); when it may not, the messages are on the forms. Invalid for a hidden search that was
    edited (the caller puts it on the search form)."""
    fresh = form.validate()  # the CSRF token (WTForms clears every field's errors here)
    if not fresh:
        form.form_errors = [EXPIRED]
    find = FindForm(request.form)
    found = free.find_free(p, _search(find))
    picked = pickers.resolve(p, "records", form.company.data, required=True)
    return find, found, pickers.on_field(form.company, picked) and fresh


def _scope(search: free.Search) -> dict[str, Any]:
    return {"dialcode": search.dialcode, "prefix": search.prefix, "count": search.count}


def _act(form: ReserveForm | AllocateForm, which: str, take, done):
    """A reserve or allocate form sent: the numbers taken by `take(search, company)` and the
    search page again with `done(taken, company)` as its message; or the page re-rendered with
    the messages (nothing taken)."""
    p = principal()
    p.require_system_admin(f"{which} numbers")
    forms = {"reserve" if which == "reserve" else "alloc": form}
    try:
        find, found, ok = _action(p, form)
    except Invalid as exc:  # the hidden search was edited: the search form says what is wrong
        find = FindForm(request.form)
        return _free_page(find, status=form_error(find, exc), **forms)
    if not ok:
        return _free_page(find, found, status=400, **forms)
    company = form.company.data
    try:
        taken = take(p, found.search, company)
    except ServiceError as exc:
        status = form_error(form, exc)
        if exc.code == "not_enough_numbers":  # its message says how many there are
            form.form_errors = [exc.message]
        form.form_errors = [shown(e) for e in form.form_errors]
        # The search as of now: what is free after whatever took numbers meanwhile.
        return _free_page(find, free.find_free(p, found.search), status=status, **forms)
    flash(done(taken, company), "success")
    return redirect(url_for("numbers.free_page", **_args(found.search)), 303)


@bp.post("/ddis/free/reserve")
@login_required
def free_reserve():
    form = ReserveForm()

    def take(p, search: free.Search, company: str) -> list[dict[str, Any]]:
        values = {"company": company}
        until = (form.until.data or "").strip()
        if until:  # none: the service's default, DEFAULT_DAYS ahead
            values["until"] = until
        return reserving.reserve(p, {"scope": _scope(search), "values": values})

    def done(taken: list[dict[str, Any]], company: str) -> str:
        until = taken[-1]["reserved_until"] if taken else ""
        return f"Reserved {_named(taken)} for {company} through {until}."

    return _act(form, "reserve", take, done)


@bp.post("/ddis/free/allocate")
@login_required
def free_allocate():
    form = AllocateForm()
    first = (form.virt_exten.data or "").strip()

    def take(p, search: free.Search, company: str) -> list[dict[str, Any]]:
        values = {"company": company, "virt_exten": first}
        return allocate.allocate(p, {"scope": _scope(search), "values": values})

    def done(taken: list[dict[str, Any]], company: str) -> str:
        return f"Allocated {_named(taken)} to {company}, extensions from {first}."

    return _act(form, "allocate", take, done)


def _named(taken: list[dict[str, Any]]) -> str:
    """'3 numbers (+44 2071230000 to +44 2071230002)', as a message names what was taken."""
    many = wording.counted(len(taken), "number", grouped=True)
    if not taken:
        return many
    first = wording.ddi_number(taken[0]["dialcode"], taken[0]["number"])
    if len(taken) == 1:
        return f"{many} ({first})"
    last = wording.ddi_number(taken[-1]["dialcode"], taken[-1]["number"])
    return f"{many} ({first} to {last})"


def _args(search: free.Search) -> dict[str, Any]:
    return {"dialcode": search.dialcode, "prefix": search.prefix, "count": str(search.count)}
