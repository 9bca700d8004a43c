"""Bulk actions from the DDI and phone-user lists: the list's bulk form posts here, this page
states how many records the action will change, and its Confirm applies it
(services/records/bulk.py decides everything).

The list's bulk form carries `back`, the list as it was shown (filters, number search, sort,
position; views/records.py checks it like a record form's): Cancel, the result and a refused
form all come back there. A refusal (nothing ticked, an unknown company, an expired form) is
the list itself, every problem on its bulk form at once, the ticks and the company typed kept;
an htmx POST is told (HX-Replace-Url) to show the list's address, and static/app.js puts it in
the address bar after a plain POST, so a reload shows the list rather than posting again. A GET
of /ddis/bulk or /users/bulk (a reload anyway, a bookmark) is a redirect to the list (its
`back` if given)."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request
from flask_login import login_required
from werkzeug.datastructures import MultiDict

from ..errors import ServiceError
from ..services import inventory
from ..services.numbers import bulk as number_bulk
from ..services.records import bulk
from . import pickers, records
from .common import is_htmx, principal
from .forms import ConfirmForm
from .records import DDI, USER, Screen

bp = Blueprint("bulk", __name__)
SCREENS = {"ddis": DDI, "users": USER}
VERBS = {
    "move": "Move",
    "delete": "Delete",
    "reserve": "Reserve",
    "release": "Release",
    "retire": "Retire",
}
NumberTarget = number_bulk.Target


def _back_args(screen: Screen, target: bulk.Target | NumberTarget) -> MultiDict[str, str]:
    """The list the action came from: its `back` address, else its filters (and state)."""
    args = records.back_args(screen, request.form.get("back"))
    if args is None:
        args = MultiDict([(f, v) for f, v in target.filters.items() if v])
        if isinstance(target, NumberTarget):
            args["state"] = target.state
    return args


def _back(screen: Screen, target: bulk.Target | NumberTarget) -> str:
    return records.list_url(screen, _back_args(screen, target))


def _refused(
    screen: Screen, target: bulk.Target | NumberTarget, error: str, company_error: str = ""
):
    """The list the form came from, again, saying why the bulk form was refused: `error` the
    form's own problem, `company_error` the company's (each '' for none)."""
    retry = records.BulkRetry(
        error=error,
        ticked=frozenset(target.keys or ()),
        to_company=request.form.get("to_company", "").strip(),
        company_error=company_error,
        until=request.form.get("until", "").strip()[:20],
        reason=request.form.get("reason", "")[:600],
    )
    args = _back_args(screen, target)
    html, status = records.render_list(screen, args, retry)
    # An htmx submission keeps the list's address shown, not the form's action (/ddis/bulk).
    headers = {"HX-Replace-Url": records.list_url(screen, args)} if is_htmx() else {}
    return html, status, headers


def _company_refused(screen: Screen, target: bulk.Target, company_error: str):
    """The company's problem, beside the target's if it has one too: both shown at once."""
    return _refused(screen, target, bulk.unticked(screen.kind, target) or "", company_error)


def _page(screen, target, action, company, form, preview=None, error=None, status=200):
    return (
        render_template(
            "bulk/confirm.html",
            screen=screen,
            target=target,
            action=action,
            verb=VERBS.get(action, "Change"),
            company=company,
            preview=preview,
            error=error,
            form=form,
            back=_back(screen, target),
        ),
        status,
    )


def _target(screen: Screen, form: MultiDict[str, str]) -> bulk.Target:
    """The Target the bulk form describes: scope 'all' with the list's filters (its f_<name>
    fields), or the keys ticked."""
    if form.get("scope") == "all":
        allowed = [f for f in bulk.FILTERS if f in screen.kind.fields or f == "q"]
        return bulk.Target(filters={f: form.get(f"f_{f}", "").strip() for f in allowed})
    return bulk.Target(keys=tuple(form.getlist("key")))


def _read(screen: Screen):
    """The bulk form's target, action and new company (the picker resolved: an unknown one is
    an error message)."""
    p = principal()
    target = _target(screen, request.form)
    action = request.form.get("action", "")
    company, error = None, None
    if action == "move":
        picked = pickers.resolve(p, "records", request.form.get("to_company"), required=True)
        company = picked.company
        if picked.error:
            error = f"Company to move them to: {picked.error}."
    return p, target, action, company, error


def _confirm(screen: Screen):
    if screen.states and request.form.get("action") in number_bulk.ACTIONS:
        return _numbers(screen, apply=False)
    p, target, action, company, error = _read(screen)
    form = ConfirmForm()
    if not form.validate():
        return _refused(screen, target, "The form had expired; try again.")
    if error:
        return _company_refused(screen, target, error)
    try:
        preview = bulk.preview(p, screen.kind, target, action, company)
    except ServiceError as exc:
        if exc.status != 400:
            raise
        return _refused(screen, target, exc.message)
    return _page(screen, target, action, company, form, preview=preview)


def _apply(screen: Screen):
    if screen.states and request.form.get("action") in number_bulk.ACTIONS:
        return _numbers(screen, apply=True)
    p, target, action, company, error = _read(screen)
    form = ConfirmForm()
    expected = request.form.get("expected", "")  # the confirmed preview's fingerprint
    if not form.validate() or not expected:
        return _refused(screen, target, "The form had expired; try again.")
    if error:
        return _company_refused(screen, target, error)
    try:
        changed = bulk.apply(p, screen.kind, target, action, expected, company)
    except bulk.Changed as exc:  # the confirmation again, with the new count
        return _page(
            screen,
            target,
            action,
            company,
            form,
            preview=exc.preview,
            error=exc.message,
            status=409,
        )
    except ServiceError as exc:
        if exc.status not in (400, 409):
            raise
        return _refused(screen, target, exc.message)
    label = screen.kind.label + ("" if changed == 1 else "s")
    done = (
        f"Moved {changed:,} {label} to {company}."
        if action == "move"
        else f"Deleted {changed:,} {label}."
    )
    flash(done, "success")
    return redirect(_back(screen, target), 303)


# --- numbers out of service: reserve, release, retire ------------------------------------------
def _number_target(screen: Screen, form: MultiDict[str, str]) -> NumberTarget:
    """The Target the number bulk form describes: the list's state, and scope 'all' with the
    list's filters, or the keys ticked."""
    state = form.get("f_state", "").strip() or inventory.IN_SERVICE
    if form.get("scope") == "all":
        names = ("dialcode", "number", "company", "virt_exten", "q")
        return NumberTarget(state, filters={f: form.get(f"f_{f}", "").strip() for f in names})
    return NumberTarget(state, keys=tuple(form.getlist("key")))


def _number_choice(p, action: str) -> tuple[number_bulk.Choice, str, str]:
    """The action with what it takes, read from the form: (choice, the form's problem, the
    company's problem), '' for none."""
    form = request.form
    company, company_error, error = None, "", ""
    until = None
    if action == "reserve":
        picked = pickers.resolve(p, "records", form.get("to_company"), required=True)
        company = picked.company
        if picked.error:
            company_error = f"Company to reserve them for: {picked.error}."
        try:
            until = number_bulk.parse_until(form.get("until", ""))
        except ServiceError as exc:
            error = exc.message
    reason = form.get("reason") if action == "retire" and form.get("reason") else None
    return number_bulk.Choice(action, company, until, reason), error, company_error


def _numbers(screen: Screen, apply: bool):
    """The number actions' confirmation page (apply False) or their change (apply True): a
    refusal is the list again with its message, nothing changed."""
    p = principal()
    target = _number_target(screen, request.form)
    action = request.form.get("action", "")
    choice, error, company_error = _number_choice(p, action)
    form = ConfirmForm()
    expected = request.form.get("expected", "")
    if not form.validate() or (apply and not expected):
        return _refused(screen, target, "The form had expired; try again.")
    if error or company_error:
        return _refused(screen, target, error, company_error)
    try:
        if not apply:
            preview = number_bulk.preview(p, target, choice)
            return _number_page(screen, target, choice, form, preview)
        changed = number_bulk.apply(p, target, choice, expected)
    except number_bulk.Changed as exc:  # the confirmation again, with the new count
        return _number_page(screen, target, choice, form, exc.preview, exc.message, 409)
    except ServiceError as exc:
        if exc.status not in (400, 404, 409):
            raise
        return _refused(screen, target, _number_message(exc))
    label = "number" if changed == 1 else "numbers"
    done = {
        "reserve": f"Reserved {changed:,} {label} for {choice.company}.",
        "release": f"Released {changed:,} {label} to the stock.",
        "retire": f"Retired {changed:,} {label}.",
    }[action]
    flash(done, "success")
    return redirect(_back(screen, target), 303)


# The form's fields as the bulk bar labels them, for the service's messages about them.
NUMBER_FIELDS = {"until": "Held until", "reason": "Why they are retired while aging"}


def _number_message(exc: ServiceError) -> str:
    """The refusal as the form words it: a field's problem by the field's label ("Held until:
    at most 365 days ahead."), else the service's sentence."""
    named = [f"{NUMBER_FIELDS[k]}: {v}." for k, v in exc.fields.items() if k in NUMBER_FIELDS]
    return " ".join(named) or exc.message


def _number_page(screen, target, choice, form, preview, error=None, status=200):
    return (
        render_template(
            "bulk/confirm_numbers.html",
            screen=screen,
            target=target,
            choice=choice,
            verb=VERBS[choice.action],
            preview=preview,
            error=error,
            form=form,
            back=_back(screen, target),
        ),
        status,
    )


@bp.get("/<any(ddis, users):plural>/bulk")
@login_required
def to_list(plural: str):
    """A GET of the bulk form's address (a reload of a refused form, a bookmark): the list, as
    `back` names it when given (checked as a form's `back`), else the plain list."""
    screen = SCREENS[plural]
    return redirect(records.list_url(screen, records.back_args(screen, request.args.get("back"))))


@bp.post("/<any(ddis, users):plural>/bulk")
@login_required
def confirm(plural: str):
    return _confirm(SCREENS[plural])


@bp.post("/<any(ddis, users):plural>/bulk/apply")
@login_required
def apply(plural: str):
    return _apply(SCREENS[plural])
