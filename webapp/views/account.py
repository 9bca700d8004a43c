"""The signed-in account's own page: /account/tokens (its API tokens). Its password, second
factors and sessions are on /account/security (views/security.py).

A new token is shown once, in the answer to the POST that made it, marked not to be cached;
it never goes into a flash message (the session cookie is signed, not encrypted). The form is a
one-time form (views/once.py): a reload of that answer makes no second token.
"""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, url_for
from flask_login import login_required
from flask_wtf import FlaskForm
from wtforms import StringField

from ..errors import ServiceError
from ..security import NO_STORE
from ..services.identity import api_tokens
from . import once
from .common import principal
from .confirm import confirmation_required
from .forms import ConfirmForm, form_error

bp = Blueprint("account", __name__, url_prefix="/account")


class TokenForm(FlaskForm):
    label = StringField("Label", description="What the token is for; at most 100 characters.")


def _page(token_form=None, new_token=None, status=200):
    me = principal()
    return (
        render_template(
            "account/tokens.html",
            tokens=api_tokens.of_account(me, me.username),
            token_form=token_form or TokenForm(formdata=None),
            new_token=new_token,
        ),
        status,
        NO_STORE,
    )


@bp.get("/tokens")
@login_required
def tokens():
    return _page()


@bp.post("/tokens")
@login_required
@confirmation_required
def token_create():
    me = principal()
    form = TokenForm()
    if form.validate_on_submit():
        label = (form.label.data or "").strip()
        try:
            done = once.act(
                url_for("account.tokens"),
                lambda: api_tokens.create(me, me.username, label),
                lambda _: (
                    f"a token {'labelled ' + repr(label) if label else 'with no label'} was made"
                    " (it is shown only once; if it was not copied, revoke it and make another)"
                ),
            )
        except ServiceError as exc:
            return _page(token_form=form, status=form_error(form, exc))
        if isinstance(done, once.Answer):  # a reload of the form: the token is not shown again
            return done.response
        return _page(new_token=done)
    return _page(token_form=form, status=400)


@bp.route("/tokens/<int:token_id>/revoke", methods=["GET", "POST"])
@login_required
def token_revoke(token_id: int):
    me = principal()
    token = api_tokens.get(me, token_id)
    form = ConfirmForm()
    if form.validate_on_submit():
        prefix = token.prefix
        api_tokens.revoke(me, token_id)
        flash(f"Token {prefix}… revoked; the API refuses it from now on.", "info")
        return redirect(url_for("account.tokens"))
    return render_template("account/token_revoke.html", token=token, form=form)
