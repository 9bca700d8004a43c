"""The audit log: /audit, filtered and paged by query parameters (every view is a link).

The filter form is a GET form: it changes nothing, so it carries no CSRF token (a token in a
shareable URL would leak it); htmx requests send the token in their X-CSRFToken header anyway.
With htmx the answer is only the rows partial.
"""

from __future__ import annotations

from flask import Blueprint, render_template, request
from flask_login import login_required
from wtforms import Form, StringField

from ..access import Principal
from ..services import audit
from ..services.errors import Invalid, ServiceError
from . import pickers
from .common import is_htmx, page_args, principal
from .forms import form_error

bp = Blueprint("audit", __name__, url_prefix="/audit")

PER_PAGE = 50
FILTERS = ("actor", "target", "company", "date_from", "date_to")


class FilterForm(Form):
    actor = StringField("Actor", description="Exact username.")
    target = StringField("Target contains")
    company = StringField("Company")  # a company picker (views/pickers.py)
    date_from = StringField("From", render_kw={"type": "date", "placeholder": "yyyy-mm-dd"})
    date_to = StringField("To", render_kw={"type": "date", "placeholder": "yyyy-mm-dd"})


def _partial_only() -> bool:
    # htmx restoring history asks with HX-Request too, and then needs the whole page.
    return is_htmx() and request.headers.get("HX-History-Restore-Request") != "true"


def _company_filter(me: Principal, form: FilterForm) -> None:
    """Read the company filter's picker: an identifier in any case names its company; Invalid
    for one the picker does not know (its closest matches go on the field)."""
    typed = (form.company.data or "").strip()
    if not typed:
        return
    picked = pickers.resolve(me, "audit", typed)
    if not pickers.on_field(form.company, picked, message=False):  # form_error says it
        raise Invalid(f"Company: {picked.error}.", {"company": picked.error or ""})


@bp.get("")
@login_required
def index():
    me = principal()
    form = FilterForm(request.args)
    page = request.args.get("page", 1, type=int)
    status = 200
    try:
        _company_filter(me, form)
        filters = {name: (getattr(form, name).data or "").strip() for name in FILTERS}
        rows, total = audit.search(me, **filters, page=page, per_page=PER_PAGE)
    except ServiceError as exc:
        status = form_error(form, exc, on_form=(400,))
        rows, total = [], 0
    context = {
        "form": form,
        "rows": rows,
        "total": total,
        "page": page,
        "pages": max(1, -(-total // PER_PAGE)),
        "args": page_args(request.args, FILTERS),
    }
    partial = _partial_only()
    template = "audit/_rows.html" if partial else "audit/index.html"
    response = render_template(template, partial=partial, **context)
    # The same address answers a page or a partial: caches must keep them apart.
    return response, status, {"Vary": "HX-Request"}
