"""What every page view shares: the acting principal, htmx detection, field errors."""

from __future__ import annotations

from collections.abc import Mapping

from flask import request
from flask_login import current_user
from flask_wtf import FlaskForm

from ..access import Principal
from ..services.errors import ServiceError


def principal() -> Principal:
    """The signed-in account as the services' Principal (pages are login_required)."""
    return Principal.from_account(current_user, via="ui")


def is_htmx() -> bool:
    """htmx asks for a fragment; a plain request (no JavaScript) gets the whole page, and so
    does htmx restoring a page from history (it replaces the whole body)."""
    return (
        request.headers.get("HX-Request") == "true"
        and request.headers.get("HX-History-Restore-Request") != "true"
    )


def apply_field_errors(form: FlaskForm, exc: ServiceError) -> None:
    """Show a service's field messages beside the form's fields (the rest above the form)."""
    form.form_errors = []  # type: ignore[attr-defined]
    for name, why in exc.fields.items():
        field = getattr(form, name.rsplit(".", 1)[-1], None)
        if field is not None and hasattr(field, "errors"):
            field.errors = [*list(field.errors), why]
        else:
            form.form_errors.append(f"{name}: {why}")
    if not exc.fields:
        form.form_errors.append(exc.message)


def page_args(args: Mapping[str, str], allowed: tuple[str, ...]) -> dict[str, str]:
    """The non-empty query parameters among `allowed`, e.g. to rebuild links."""
    return {k: args[k] for k in allowed if args.get(k)}
