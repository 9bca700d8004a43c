"""The signed-in account's security page, /account/security (blueprint "security"): its second
factors (sections the factor views render: account/_totp.html, _passkeys.html,
_recovery_codes.html), its open sessions with Sign out for each and everywhere else, and its
password (docs/security.md).

Changing the password ends the account's other sessions and keeps this one signed in: the
other sessions' rows are ended, the session epoch (in every cookie) is left as it is.
"""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, url_for
from flask_login import current_user, login_required
from flask_wtf import FlaskForm
from sqlalchemy import select
from sqlalchemy.orm import selectinload
from wtforms import PasswordField

from ..errors import ServiceError
from ..extensions import db
from ..models import Account
from ..security import NO_STORE
from ..services.identity import accounts, sessions, signin
from ..wording import counted
from .common import principal
from .confirm import confirmation_required
from .forms import ConfirmForm, form_error

bp = Blueprint("security", __name__, url_prefix="/account")


class OwnPasswordForm(FlaskForm):
    current_password = PasswordField(
        "Current password", render_kw={"autocomplete": "current-password"}
    )
    password = PasswordField(
        "New password",
        description=f"At least {signin.MIN_PASSWORD} characters.",
        render_kw={"autocomplete": "new-password"},
    )


def _me() -> Account:
    return current_user._get_current_object()


def _page(password_form: OwnPasswordForm | None = None, status: int = 200):
    me = _me()
    # The account again with its factors loaded in one go, for the sections of the page.
    account = db.session.scalars(
        select(Account)
        .where(Account.id == me.id)
        .options(selectinload(Account.passkeys), selectinload(Account.recovery_codes))
    ).one()
    html = render_template(
        "account/security.html",
        account=account,
        sessions=sessions.open_sessions(me),
        # A prefix keeps this form's field ids apart from the other sections' forms.
        password_form=password_form or OwnPasswordForm(formdata=None, prefix="pw"),
        end_form=ConfirmForm(formdata=None),
    )
    return html, status, NO_STORE


@bp.get("/security", endpoint="page")
@login_required
def page():
    return _page()


@bp.post("/sessions/<handle>/end", endpoint="end_session")
@login_required
def end_session(handle: str):
    if not ConfirmForm().validate_on_submit():
        flash("The form expired; reload the page and try again.", "error")
        return redirect(url_for("security.page"), 303)
    try:
        sessions.end(_me(), handle)
    except ServiceError as exc:
        if exc.status not in (400, 404):
            raise
        flash(exc.message, "error")
    else:
        flash("That session is signed out; its browser must sign in again.", "success")
    return redirect(url_for("security.page", _anchor="sessions"), 303)


@bp.post("/sessions/end-others", endpoint="end_others")
@login_required
def end_others():
    if not ConfirmForm().validate_on_submit():
        flash("The form expired; reload the page and try again.", "error")
        return redirect(url_for("security.page"), 303)
    ended = sessions.end_others(_me())
    flash(
        f"Signed out everywhere else ({counted(ended, 'other session')} ended)."
        if ended
        else "There was no other session to sign out.",
        "success",
    )
    return redirect(url_for("security.page", _anchor="sessions"), 303)


@bp.post("/password", endpoint="password")
@login_required
@confirmation_required
def password():
    me = principal()
    form = OwnPasswordForm(prefix="pw")
    if not form.validate_on_submit():
        return _page(password_form=form, status=400)
    try:
        accounts.change_own_password(
            me,
            form.current_password.data or "",
            form.password.data or "",
            keep=signin.session_row_id(_me()),
        )
    except ServiceError as exc:
        return _page(password_form=form, status=form_error(form, exc))
    flash("Password changed. Your other sessions are signed out; this one goes on.", "success")
    return redirect(url_for("security.page", _anchor="password-head"), 303)
