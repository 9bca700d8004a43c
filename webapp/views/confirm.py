"""Confirmation before sensitive actions (docs/security.md#confirmation): the page
/account/confirm (blueprint "confirm") and the decorator `confirmation_required` that sends a
session not confirmed within signin.CONFIRM_FOR there first.

A form posted from a stale session is not kept: the browser is sent to confirm, then back to
the page the form was on, and the form is submitted again (the flash says so). Keeping it
would mean holding its fields (a password, a token's label) in the session cookie, which is
signed, not encrypted.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    current_app,
    flash,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import current_user, login_required
from flask_wtf import FlaskForm
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response
from wtforms import PasswordField, StringField
from wtforms.validators import Length

from ..models import Account
from ..security import NO_STORE, record_sign_in_failure, sign_in_blocked
from ..services.identity import factors, oidc, signin
from .auth import safe_next
from .errors import error_page

bp = Blueprint("confirm", __name__, url_prefix="/account")
WRONG = "Wrong password or code."
RESUBMIT = "Confirm it is you, then submit the form again: it was not saved."


class ConfirmIdentityForm(FlaskForm):
    password = PasswordField(
        "Password", validators=[Length(max=512)], render_kw={"autocomplete": "current-password"}
    )
    code = StringField(
        "Code",
        validators=[Length(max=64)],
        description="From your authenticator app, or one of your recovery codes.",
        render_kw={"autocomplete": "one-time-code", "spellcheck": "false"},
    )


def _me() -> Account:
    return current_user._get_current_object()


def _sso_url(destination: str) -> str | None:
    """Where an account signed in by single sign-on confirms: back at its identity provider
    (views/sso.py), when that is configured; None otherwise (the password form then)."""
    if _me().session_via != "oidc" or not oidc.configured():
        return None
    return url_for("sso.start", confirm=1, next=destination)


@bp.route("/confirm", methods=["GET", "POST"], endpoint="page")
@login_required
def page():
    account = _me()
    destination = safe_next(request.values.get("next"))
    form = ConfirmIdentityForm()
    status = 200
    if form.validate_on_submit():
        if sign_in_blocked(account.username):
            return error_page(429, "Too many failed attempts; wait 15 minutes and try again.")
        proof = _check(account, form)
        if proof is not None:
            signin.confirm_session(account, proof)
            return redirect(destination)
        record_sign_in_failure(account.username)
        form.form_errors.append(WRONG)
        status = 400
    elif form.is_submitted():
        status = 400
    context = {
        "form": form,
        "next": destination,
        "second_factor": factors.has_second_factor(account),
        "sso_url": _sso_url(destination),
    }
    return render_template("auth/confirm.html", **context), status, NO_STORE


def _check(account: Account, form: ConfirmIdentityForm) -> str | None:
    """The proof (a key of signin.PROOFS) if the password, and the code when the account has a
    second factor, are right; None otherwise. The code is checked only after a right password
    (a wrong one is not worth using up a code for)."""
    if signin.check_password(account.username, form.password.data or "") is None:
        return None
    if not factors.has_second_factor(account):
        return "password"
    return factors.check_code(account, form.code.data or "")


# --- the decorator ------------------------------------------------------------------------------


def _same_site_path(url: str | None) -> str | None:
    """The path and query of `url` if it is an address of this site, else None."""
    if not url:
        return None
    parts = urlsplit(url)
    if parts.netloc and parts.netloc != request.host:
        return None
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _form_page() -> str:
    """The page a refused POST's form was on: the Referer when it is this site's (browsers send
    it: Referrer-Policy same-origin), else this address if it is also a page (GET), else the
    start page."""
    found = _same_site_path(request.referrer)
    if found:
        return found
    try:
        current_app.url_map.bind_to_environ(request.environ).match(request.path, method="GET")
    except HTTPException:
        return url_for("index")
    return request.path


def ask_confirmation() -> Response:
    """The answer to a request that needs a fresh confirmation: to /account/confirm, coming
    back to this page (a GET) or to the form's page (a POST, with a flash saying to submit it
    again). htmx gets a 200 with HX-Redirect, which it follows as a whole-page load."""
    if request.headers.get("HX-Request") == "true":
        back = _same_site_path(request.headers.get("HX-Current-URL")) or _form_page()
        response = make_response("", 200)
        response.headers["HX-Redirect"] = url_for("confirm.page", next=safe_next(back))
        return response
    if request.method in ("GET", "HEAD"):
        return redirect(url_for("confirm.page", next=request.full_path.rstrip("?")))
    flash(RESUBMIT, "info")
    return redirect(url_for("confirm.page", next=safe_next(_form_page())), 303)


def confirmation_required(
    view: Callable[..., Any] | None = None, *, methods: tuple[str, ...] = ("GET", "POST")
) -> Any:
    """Let a view run only for a session confirmed within signin.CONFIRM_FOR (signing in
    counts); any other request of `methods` is sent to confirm first (ask_confirmation).
    Apply it below @login_required: `@confirmation_required` guards the page and its form
    (a page that only exists for the action), `@confirmation_required(methods=("POST",))` only
    the form's POST (a page that also lists things)."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            method = "GET" if request.method == "HEAD" else request.method
            if method in methods and _stale():
                return ask_confirmation()
            return func(*args, **kwargs)

        return wrapper

    return decorate if view is None else decorate(view)


def _stale() -> bool:
    return bool(current_user.is_authenticated) and not signin.confirmation_fresh(_me())
