"""The audit log: /audit, filtered and paged by query parameters (every view is a link), and
/audit.csv, the same filtered view as a download.

The filter form is a GET form: it changes nothing, so it carries no CSRF token (a token in a
shareable URL would leak it); htmx requests send the token in their X-CSRFToken header anyway.
With htmx the answer is only the rows partial.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from flask import Blueprint, render_template, request, url_for
from flask_login import login_required
from wtforms import Form, SelectField, StringField

# The type stubs predate SelectChoice (wtforms 3.3), which tuples of choices are deprecated for.
from wtforms.fields.choices import SelectChoice  # type: ignore[attr-defined]

from ..access import Principal
from ..errors import Invalid, ServiceError
from ..request_auth import replica_reads
from ..services import companies
from ..services.history import actions, audit, audit_export, audit_query
from ..services.identity import accounts
from . import downloads, pickers
from .audit_values import changes, changes_text
from .common import is_htmx, page_args, principal
from .forms import form_error

bp = Blueprint("audit", __name__)

PER_PAGE = 50
FILTERS = ("actor", "action", "target", "company", "date_from", "date_to")
# The forms the target filter takes (audit_query.targets reads them), shown under the field.
TARGET_FORMS = (
    ("A number as written or stored", "+44 20 7123 4567, 44:2071234567"),
    ("a phone user", "acme/ana.kim"),
    ("an account", "bob"),
    ("a company", "acme"),
    ("or a target as the log shows it", "ddi 44:2071234567, webhook 3, month 2026-10"),
)

# The action filter's choices: readable names, by name; each value the code the log stores.
ACTION_CHOICES = [SelectChoice("", "Any action")] + [
    SelectChoice(code, name)
    for code, name in sorted(actions.NAMES.items(), key=lambda item: item[1].lower())
]


class FilterForm(Form):
    # A picker of accounts (views/pickers.py suggest_actors); any text is still an exact match.
    actor = StringField("Actor", description="Exact username.")
    action = SelectField(
        "Action",
        choices=ACTION_CHOICES,
        validate_choice=False,  # the service says what is no action
    )
    target = StringField(
        "Target",
        description="One record, matched exactly in any case (not a part of a number).",
    )
    company = StringField("Company")  # a company picker (views/pickers.py)
    date_from = StringField("From", render_kw={"type": "date", "placeholder": "yyyy-mm-dd"})
    date_to = StringField("To", render_kw={"type": "date", "placeholder": "yyyy-mm-dd"})


DDI_TARGET = re.compile(r"^ddi ([0-9]+):([0-9]+)$")
"""A DDI as the log names it ('ddi 44:2071234567'): its dialcode and number."""
USER_TARGET = re.compile(r"^user ([^/]+)/(.+)$")
"""A phone user as the log names it ('user acme/ana.kim'): its company and username."""


def _target_page(target: str) -> str:
    """The page of an entry's target: a DDI's or a phone user's own page, else the log
    filtered by the target ('' for none)."""
    if ddi := DDI_TARGET.match(target):
        return url_for("ddi_page.show", dialcode=ddi[1], number=ddi[2])
    if user := USER_TARGET.match(target):
        return url_for("user_page.user", company=user[1], username=user[2])
    return url_for("audit.index", target=target) if target else ""


def row_links(e: audit.Shown) -> dict[str, str] | None:
    """Where an entry's actor and target link to ({'actor': ..., 'target': ...}): the log
    filtered by the actor, and a DDI's or phone user's own page or else the log filtered by
    the target. None
    for an entry with a side hidden from the reader (access.redact): it links nothing, so
    nothing about the other company is reached from it."""
    if e.seen.company_hidden or e.seen.other_hidden:
        return None
    return {"actor": url_for("audit.index", actor=e.actor), "target": _target_page(e.target)}


def _shown_action(form: FilterForm) -> None:
    """An action code the mapping does not name (an older or newer version's, in an address)
    still filters: offer it as it is, so the choice shows what the rows are filtered by."""
    code = (form.action.data or "").strip()
    if code and code not in actions.NAMES:
        form.action.choices = [*ACTION_CHOICES, SelectChoice(code, code)]


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


@bp.get("/audit")
@login_required
@replica_reads
def index():
    me = principal()
    form = FilterForm(request.args)
    _shown_action(form)
    status = 200
    try:
        _company_filter(me, form)
        filters = {name: (getattr(form, name).data or "").strip() for name in FILTERS}
        result = audit.search(me, **filters, **_position(), per_page=PER_PAGE)
    except ServiceError as exc:
        status = form_error(form, exc, on_form=(400,))
        result = audit_query.AuditPage[audit.Shown]([], 0, False, False, False)
    args = page_args(request.args, FILTERS)
    rows = result.rows

    def link(**position: Any) -> str:
        return url_for("audit.index", **args, **position)

    context = {
        "form": form,
        "result": result,
        "rows": rows,
        "args": args,
        "changes": changes,
        # What the rows link to, each asked once for the page: the companies' names and pages
        # (a hidden side of a move is None here, so it is neither named nor linked) and, for a
        # System-Admin, which actors are accounts.
        "company_labels": companies.labels(
            me, [c for e in rows for c in (e.company, e.other_company)]
        ),
        "accounts": accounts.existing(me, (e.actor for e in rows)),
        "row_links": row_links,
        "target_forms": TARGET_FORMS,
        "newest_url": link() if result.has_newer else None,
        "newer_url": link(before=rows[0].id) if result.has_newer and rows else None,
        "older_url": link(after=rows[-1].id) if result.has_older and rows else None,
        "oldest_url": link(last=1) if result.has_older else None,
    }
    partial = _partial_only()
    template = "audit/_rows.html" if partial else "audit/index.html"
    response = render_template(template, partial=partial, **context)
    # The same address answers a page or a partial: caches must keep them apart.
    return response, status, {"Vary": "HX-Request"}


def _position() -> dict[str, Any]:
    """The page's position as the query gives it: `after` or `before` an entry id (Older,
    Newer), `last` (the oldest entries), `page=N` (old addresses); the service refuses more
    than one. Invalid for a page that is not a number."""
    position: dict[str, Any] = {
        n: request.args[n] for n in ("after", "before") if request.args.get(n)
    }
    if request.args.get("last"):
        position["oldest"] = True
    if request.args.get("page"):
        number = request.args.get("page", type=int)
        if number is None:
            raise Invalid("'page' must be a number.", {"page": "must be a number"})
        position["page"] = number
    return position


CSV_COLUMNS = ("at", "actor", "via", "action", "target", "company", "changes", "detail")


@bp.get("/audit.csv")
@login_required
@replica_reads
def csv_download():
    """Every entry of the filtered view (the same parameters and access as /audit), newest
    first, streamed as it is read; a refusal or a bad filter is an ordinary error page."""
    me = principal()
    form = FilterForm(request.args)
    _company_filter(me, form)  # the same company picker as the page
    filters = {name: (getattr(form, name).data or "").strip() for name in FILTERS}
    entries = audit_export.export_rows(me, **filters)  # checks access and filters first
    return downloads.csv_download("audit.csv", CSV_COLUMNS, _csv_rows(entries))


def _csv_rows(entries: Iterable[audit_export.Exported]) -> Iterator[tuple[str, ...]]:
    """Each entry's cells: its instant, the texts as the page shows them, `changes_text`.
    Entry by entry, through every step at once: whole chunks step by step were slower (each
    step's list of two thousand rows no longer in the processor's cache for the next)."""
    for at, actor, via, action, target, company, before, after, detail in entries:
        yield (at, actor, via, action, target, company, changes_text(before, after), detail or "")
