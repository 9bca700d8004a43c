"""views.forms.form_error without HTTP: which service errors a form shows, and how."""

from __future__ import annotations

import pytest
from wtforms import Form, StringField

from webapp.errors import Conflict, Forbidden, Invalid, NotFound, ServiceError
from webapp.views.forms import form_error


class NameForm(Form):
    name = StringField("Name")


def test_field_messages_go_beside_their_fields_and_the_rest_above() -> None:
    form = NameForm()
    exc = Invalid("Bad.", {"values.name": "too long", "other": "unknown field"})
    assert form_error(form, exc) == 400
    assert form.name.errors == ["too long"]
    assert form.form_errors == ["other: unknown field"]


def test_an_error_without_fields_shows_its_message_above_the_form() -> None:
    form = NameForm()
    assert form_error(form, Conflict("Already there.")) == 409
    assert form.form_errors == ["Already there."]
    assert not form.name.errors


@pytest.mark.parametrize("exc", [Forbidden("No."), NotFound("Gone.")])
def test_by_default_403_and_404_are_raised_again_for_the_error_page(exc: ServiceError) -> None:
    with pytest.raises(type(exc)):
        form_error(NameForm(), exc)


def test_a_view_says_which_statuses_its_form_shows_and_with_what_status() -> None:
    form = NameForm()
    assert form_error(form, NotFound("No such company."), on_form=(400, 404), status=400) == 400
    assert form.form_errors == ["No such company."]
    with pytest.raises(Conflict):
        form_error(NameForm(), Conflict("Taken."), on_form=(400,))
