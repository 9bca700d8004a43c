"""Bulk actions from the DDI and phone-user lists: the list's bulk form posts here, this page
states how many records the action will change, and its Confirm applies it
(services/records/bulk.py decides everything)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask_login import login_required
from werkzeug.datastructures import MultiDict

from ..errors import ServiceError
from ..services.records import bulk
from . import pickers
from .common import principal
from .forms import ConfirmForm
from .records import DDI, USER, Screen

bp = Blueprint("bulk", __name__)
SCREENS = {"ddis": DDI, "users": USER}
VERBS = {"move": "Move", "delete": "Delete"}


def _back(screen: Screen, target: bulk.Target) -> str:
    """The list the action came from, with its filters."""
    filters: dict[str, Any] = {f: v for f, v in target.filters.items() if v}
    return url_for(f"records.{screen.plural}_list", **filters)


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
    p, target, action, company, error = _read(screen)
    form = ConfirmForm()
    if not form.validate():
        return _page(
            screen, target, action, company, form, error="The form had expired.", status=400
        )
    if error:
        return _page(screen, target, action, company, form, error=error, status=400)
    try:
        preview = bulk.preview(p, screen.kind, target, action, company)
    except ServiceError as exc:
        if exc.status != 400:
            raise
        return _page(screen, target, action, company, form, error=exc.message, status=400)
    return _page(screen, target, action, company, form, preview=preview)


def _apply(screen: Screen):
    p, target, action, company, error = _read(screen)
    form = ConfirmForm()
    expected = request.form.get("expected", "")  # the confirmed preview's fingerprint
    if not form.validate() or error or not expected:
        return _page(
            screen, target, action, company, form, error=error or "Confirm again.", status=400
        )
    try:
        changed = bulk.apply(p, screen.kind, target, action, expected, company)
    except bulk.Changed as exc:
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
        return _page(screen, target, action, company, form, error=exc.message, status=exc.status)
    label = screen.kind.label + ("" if changed == 1 else "s")
    done = (
        f"Moved {changed:,} {label} to {company}."
        if action == "move"
        else f"Deleted {changed:,} {label}."
    )
    flash(done, "success")
    return redirect(_back(screen, target), 303)


@bp.post("/<any(ddis, users):plural>/bulk")
@login_required
def confirm(plural: str):
    return _confirm(SCREENS[plural])


@bp.post("/<any(ddis, users):plural>/bulk/apply")
@login_required
def apply(plural: str):
    return _apply(SCREENS[plural])
