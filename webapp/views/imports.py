"""The DDI import page, /ddis/import: upload, preview, confirm (docs/import.md).

The services decide everything (services/imports/ddi_import.py,
services/imports/import_previews.py); this module reads the upload within its own size limit and
renders the plan.
"""

from __future__ import annotations

import re

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask_login import login_required
from flask_wtf import FlaskForm
from flask_wtf.file import FileField
from werkzeug.exceptions import RequestEntityTooLarge

from ..errors import FileRejected, ServiceError
from ..extensions import csrf
from ..request_body import allow_body
from ..services.imports import ddi_import, import_previews
from ..wording import ddi_number
from .common import principal
from .forms import ConfirmForm

bp = Blueprint("imports", __name__)
# The form's other parts (the CSRF token, the multipart boundaries) beside the file.
FORM_OVERHEAD = 64 * 1024
# A refused upload is read to its end up to this much, so the browser, still sending, gets
# the page saying why instead of a reset connection; past it the connection is just closed.
DRAIN_AT_MOST = 256 * 1024 * 1024


class UploadForm(FlaskForm):
    file = FileField("CSV file")


def drain() -> None:
    """Read the refused body to its end (up to DRAIN_AT_MOST): straight from the server's
    input, whose length the request's own (refusing) limit would not let it read."""
    raw = request.environ["wsgi.input"]
    left = min(request.content_length or DRAIN_AT_MOST, DRAIN_AT_MOST)
    while left > 0 and (chunk := raw.read(min(1 << 20, left))):
        left -= len(chunk)


# A repeated DDI as the import names it ('DDI 44:2071234567 repeats line 2'): the API and the
# command line keep that wording (docs/import.md), the page writes the number as pages do.
REPEATED_DDI = re.compile(r"\bDDI ([0-9]+):([0-9]+) repeats line\b")


def shown_problem(text: str) -> str:
    """An import problem as the page shows it: a repeated DDI written "+44 2071234567"."""
    return REPEATED_DDI.sub(lambda m: f"DDI {ddi_number(m[1], m[2])} repeats line", text)


def _upload_page(form: UploadForm, status: int = 200, problems: list[str] | None = None):
    return (
        render_template(
            "imports/upload.html",
            form=form,
            max_bytes=ddi_import.MAX_BYTES,
            problems=problems or [],
        ),
        status,
    )


# The global CSRF check would read the form under the app's 1 MiB body limit before this view
# can raise it for the upload; the form checks its own CSRF token instead (validate below).
@bp.route("/ddis/import", methods=["GET", "POST"])
@csrf.exempt
@login_required
def upload():
    p = principal()
    p.require_system_admin("import DDIs")
    if request.method == "GET":
        return _upload_page(UploadForm())
    limit = ddi_import.MAX_BYTES + FORM_OVERHEAD
    try:
        allow_body(limit)
        form = UploadForm()
    except RequestEntityTooLarge:
        drain()
        form = UploadForm(formdata=None)
        form.file.errors = [import_previews.too_large_message()]
        return _upload_page(form, 413)
    if not form.validate():  # the CSRF token
        return _upload_page(form, 400)
    upload = form.file.data
    if upload is None or not getattr(upload, "filename", ""):
        form.file.errors = ["Choose a CSV file to import."]
        return _upload_page(form, 400)
    try:
        preview = import_previews.create(p, upload.filename, upload.read())
    except ServiceError as exc:
        if exc.status not in (400, 413):
            raise
        form.file.errors = [shown_problem(exc.message)]
        # A rejected file's problems listed under the message, every one (up to the cap).
        several = isinstance(exc, FileRejected) and exc.total > 1
        problems = [shown_problem(problem) for problem in exc.problems] if several else None
        return _upload_page(form, exc.status, problems)
    return _preview_page(preview)


def _preview_page(preview: import_previews.Preview, message: str | None = None, status=200):
    plan = preview.plan
    return (
        render_template(
            "imports/preview.html",
            preview=preview,
            plan=plan,
            effect=ddi_import.billing_effect(plan),
            companies_touched=len(plan.delta),
            form=ConfirmForm(),
            message=message,
        ),
        status,
    )


@bp.get("/ddis/import/<preview_id>")
@login_required
def show(preview_id: str):
    """The preview again, as of now (what a confirmation must then match)."""
    return _preview_page(import_previews.refresh(principal(), preview_id))


@bp.post("/ddis/import/<preview_id>")
@login_required
def confirm(preview_id: str):
    p = principal()
    form = ConfirmForm()
    if not form.validate():
        refreshed = import_previews.refresh(p, preview_id)
        return _preview_page(refreshed, "The form had expired; confirm again.", 400)
    try:
        done = import_previews.confirm(p, preview_id)
    except import_previews.Changed as changed:
        return _preview_page(
            changed.preview,
            "The DDIs changed since this preview was shown, so nothing was imported. "
            "This is what the file would do now; confirm again to apply it.",
            409,
        )
    except ServiceError as exc:
        if exc.status != 409:
            raise
        refreshed = import_previews.refresh(p, preview_id)
        return _preview_page(refreshed, exc.message, 409)
    plan = done.plan
    flash(
        f"Imported {done.filename}: {plan.summary()}. Its audit entries say 'import "
        f"{plan.import_id}'.",
        "success",
    )
    return redirect(url_for("records.ddis_list"), 303)
