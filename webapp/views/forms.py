"""What the page forms share: the confirmation form, the record fields' labels, and turning a
service's error into messages on a form."""

from __future__ import annotations

from collections.abc import Collection

from flask_wtf import FlaskForm
from wtforms import Form

from ..errors import ServiceError

# How pages name the record fields (list headings, filters); templates see it as field_labels.
FIELD_LABELS: dict[str, str] = {
    "dialcode": "Dialcode",
    "number": "Number",
    "virt_exten": "Extension",
    "company": "Company",
    "username": "Username",
    "description": "Description",
}

# The statuses a form shows beside its fields by default: what was typed is at fault (400) or
# clashes with what is stored (409). Any other (403, 404) becomes the error page.
FORM_STATUSES = (400, 409)


class ConfirmForm(FlaskForm):
    """Only the CSRF token: the POST of a confirmation page."""


def apply_field_errors(form: Form, exc: ServiceError) -> None:
    """Show a service's field messages beside the form's fields (the rest above the form)."""
    form.form_errors = []
    for name, why in exc.fields.items():
        field = getattr(form, name.rsplit(".", 1)[-1], None)
        if field is not None and hasattr(field, "errors"):
            field.errors = [*list(field.errors), why]
        else:
            form.form_errors.append(f"{name}: {why}")
    if not exc.fields:
        form.form_errors.append(exc.message)


def form_error(
    form: Form,
    exc: ServiceError,
    on_form: Collection[int] = FORM_STATUSES,
    status: int | None = None,
) -> int:
    """Put a service's complaint on `form` and return the status to render the form with: the
    error's own, or `status`. An error whose status is not in `on_form` is raised again, for
    the error page (views.errors)."""
    if exc.status not in on_form:
        raise exc
    apply_field_errors(form, exc)
    return exc.status if status is None else status
