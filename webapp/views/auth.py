"""Sign in and out: /login, /logout (blueprint "auth"). Who a request acts for, once signed in
or by API token, is decided in webapp/request_auth.py."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, flash, redirect, render_template, request, session, url_for
from flask_login import current_user, login_required, logout_user
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response
from wtforms import PasswordField, StringField
from wtforms.validators import InputRequired, Length

from ..extensions import login_manager
from ..models import Account
from ..security import record_sign_in_failure, sign_in_blocked
from ..services.identity import factors, signin
from ..wording import counted
from . import signin_flow
from .errors import error_page

bp = Blueprint("auth", __name__)
login_manager.login_view = "auth.login"
login_manager.login_message = "Please sign in to open that page."
login_manager.login_message_category = "info"
# One message for an unknown user and a wrong password: the form must not tell which.
BAD_CREDENTIALS = "Unknown username or wrong password."


@login_manager.unauthorized_handler
def _unauthorized():
    """Signed out: a page goes to /login; an htmx request would swap the sign-in page into
    the rows, so htmx is told to load it as a whole page instead."""
    from flask import make_response

    target = url_for("auth.login", next=request.full_path.rstrip("?"))
    if request.headers.get("HX-Request") == "true":
        current = urlsplit(request.headers.get("HX-Current-URL", ""))
        page = current.path + (f"?{current.query}" if current.query else "")
        response = make_response("", 401)
        response.headers["HX-Redirect"] = url_for("auth.login", next=safe_next(page or None))
        return response
    flash(login_manager.login_message, login_manager.login_message_category)
    return redirect(target)


class LoginForm(FlaskForm):
    username = StringField("Username", validators=[InputRequired(), Length(max=64)])
    password = PasswordField("Password", validators=[InputRequired(), Length(max=512)])


def safe_next(target: str | None) -> str:
    """`next` only to a path on this site: no scheme, no host, no '//' or backslash tricks."""
    if not target:
        return url_for("index")
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return url_for("index")
    if "\\" in target or any(ord(ch) < 32 for ch in target):
        return url_for("index")
    return target


@bp.route("/login", methods=["GET", "POST"])
def login():
    # Already signed in: the sign-in form would only sign the same person in again, so go on
    # to where it would have led (a safe `next`, else the start page `/`). Signing in as
    # someone else takes Sign out first.
    if current_user.is_authenticated:
        return redirect(safe_next(request.args.get("next")))
    form = LoginForm()
    if form.validate_on_submit():
        if sign_in_blocked(form.username.data):
            return error_page(429, "Too many failed sign-ins; wait 15 minutes and try again.")
        account = signin.check_password(form.username.data, form.password.data)
        if account is None:
            record_sign_in_failure(form.username.data)
            form.form_errors.append(BAD_CREDENTIALS)
        else:
            destination = safe_next(request.args.get("next"))
            if factors.has_second_factor(account):
                signin_flow.begin_second_step(account, destination)
                return redirect(url_for("auth.second_step"))
            done = signin_flow.finish(account, "password", destination)
            if done is not None:
                return done
            form.form_errors.append(BAD_CREDENTIALS)
    status = 200 if not form.errors and not form.form_errors else 400
    return render_template("auth/login.html", form=form), status


class CodeForm(FlaskForm):
    code = StringField(
        "Code",
        validators=[InputRequired(message="Type a code."), Length(max=64)],
        description="The 6 digits your authenticator app shows, or one of your recovery codes.",
        render_kw={"autocomplete": "one-time-code", "autocapitalize": "none"},
    )


# One message for every refused code: whether it was a wrong, used or old one is not said.
BAD_CODE = "That code is not right, or was used already. Type the app's current code."


@bp.route("/login/verify", methods=["GET", "POST"])
def second_step():
    """The second step of signing in (docs/security.md#signing-in): after the right password,
    a code of the authenticator app, a recovery code or a passkey. Wrong codes count toward
    the sign-in limits like wrong passwords."""
    state = signin_flow.pending()
    if state is None:
        flash("Sign in with your username and password first.", "info")
        return redirect(url_for("auth.login"))
    account, destination = state
    form = CodeForm()
    if form.validate_on_submit():
        if sign_in_blocked(account.username):
            return error_page(429, "Too many failed sign-ins; wait 15 minutes and try again.")
        done = _finish_with_code(account, form.code.data or "", destination)
        if done is not None:
            return done
        record_sign_in_failure(account.username)
        form.code.errors = [BAD_CODE]
    status = 200 if not form.errors else 400
    return (
        render_template(
            "auth/second_step.html", form=form, takes_codes=factors.takes_codes(account)
        ),
        status,
    )


def _finish_with_code(account: Account, code: str, destination: str) -> Response | None:
    """Signed in with `code`, or None if it is not one of the account's."""
    proof = factors.check_code(account, code)
    if proof is None:
        return None
    done = signin_flow.finish(account, proof, destination)
    if done is not None and proof == "recovery":
        left = factors.codes_left(account)
        flash(
            f"You signed in with a recovery code: {counted(left, 'recovery code')} left. "
            "Make new ones on your security page if you are running out.",
            "info" if left > 2 else "error",
        )
    return done


@bp.post("/logout")
@login_required
def logout():
    # Ended on the server first: a copy of this cookie kept anywhere is refused from now on
    # (clearing the cookie alone would only forget it in this browser).
    signin.end_session(current_user._get_current_object())
    logout_user()
    session.clear()
    flash("Signed out.", "info")
    return redirect(url_for("auth.login"))
