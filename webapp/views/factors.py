"""The signed-in account's own second factors, apart from passkeys (views/passkeys.py): setting
up and removing an authenticator app, and its recovery codes (docs/security.md#second-factors).

Blueprint "factors" under /account/security, beside the security page itself (endpoint
`security.page`), which shows the sections templates/account/_totp.html and
_recovery_codes.html. Every action is the signed-in account's on itself: no route names
another account.

Enrolment keeps the new secret in the signed session cookie, sealed (services/sealing.py), until
a correct code stores it; nothing is in the database before. Recovery codes are shown once, in
the answer to the POST that made them (never in a flash or a URL), marked not to be cached.
"""

from __future__ import annotations

from flask import (
    Blueprint,
    current_app,
    flash,
    redirect,
    render_template,
    session,
    url_for,
)
from flask.typing import ResponseReturnValue
from flask_login import current_user, login_required
from flask_wtf import FlaskForm
from markupsafe import Markup
from wtforms import StringField
from wtforms.validators import InputRequired, Length

from ..errors import ServiceError
from ..models import Account
from ..security import NO_STORE
from ..services import sealing
from ..services.identity import factors
from . import once
from .confirm import confirmation_required
from .forms import ConfirmForm, form_error

bp = Blueprint("factors", __name__, url_prefix="/account/security")

ENROLLING = "totp_enrolment"  # session key: {"id": account id, "secret": the sealed secret}


class EnrolForm(FlaskForm):
    code = StringField(
        "Code from the app",
        validators=[InputRequired(message="Type the 6 digits the app shows."), Length(max=20)],
        description="The 6 digits the app shows now for this account.",
        render_kw={"autocomplete": "one-time-code", "inputmode": "numeric"},
    )


def security_page() -> str:
    """The account's security page (`security.page`); this blueprint's authenticator-app page
    where that page is not part of the app."""
    if "security.page" in current_app.view_functions:
        return url_for("security.page")
    return url_for("factors.totp")


def _me() -> Account:
    return current_user._get_current_object()


def _pending_secret(account: Account) -> str:
    """The secret being enrolled in this session, a new one if there is none (or it was
    another account's, or no key opens it any more)."""
    state = session.get(ENROLLING)
    if isinstance(state, dict) and state.get("id") == account.id:
        try:
            return sealing.unseal(str(state.get("secret")))
        except sealing.Unreadable:
            pass
    secret = factors.new_totp_secret()
    session[ENROLLING] = {"id": account.id, "secret": sealing.seal(secret)}
    return secret


def qr_svg(uri: str) -> Markup:
    """The QR code of `uri` as inline SVG made here (no image request, nothing from elsewhere),
    dark on white whatever the page's colours, named for screen readers."""
    import segno

    svg = segno.make(uri, error="m").svg_inline(
        scale=5, dark="#000", light="#fff", svgclass="qr", omitsize=False
    )
    label = 'role="img" aria-label="QR code for the authenticator app"'
    return Markup(svg.replace("<svg ", f"<svg {label} ", 1))  # noqa: S704  (segno's own SVG)


def grouped(secret: str) -> str:
    """The secret in groups of four, for reading it out or typing it into an app."""
    return " ".join(secret[i : i + 4] for i in range(0, len(secret), 4))


def _enrol_page(account: Account, form: EnrolForm, status: int = 200) -> ResponseReturnValue:
    secret = _pending_secret(account)
    return (
        render_template(
            "account/totp_setup.html",
            form=form,
            qr=qr_svg(factors.provisioning_uri(account, secret)),
            secret=grouped(secret),
            issuer=factors.ISSUER,
            back=security_page(),
        ),
        status,
        NO_STORE,
    )


def _codes_page(codes: list[str], heading: str) -> ResponseReturnValue:
    return (
        render_template(
            "account/recovery_codes.html", codes=codes, heading=heading, back=security_page()
        ),
        200,
        NO_STORE,
    )


@bp.get("/totp")
@login_required
@confirmation_required
def totp():
    account = _me()
    if account.totp_secret is not None:
        return render_template("account/totp_set.html", account=account, back=security_page())
    return _enrol_page(account, EnrolForm(formdata=None))


@bp.post("/totp")
@login_required
@confirmation_required
def totp_add():
    account = _me()
    if account.totp_secret is not None:
        flash("An authenticator app is set up already: remove it first to add another.", "info")
        return redirect(url_for("factors.totp"))
    form = EnrolForm()
    if not form.validate_on_submit():
        return _enrol_page(account, form, 400)
    try:
        codes = factors.add_totp(account, _pending_secret(account), form.code.data or "")
    except ServiceError as exc:
        return _enrol_page(account, form, form_error(form, exc))
    session.pop(ENROLLING, None)
    if codes:
        return _codes_page(codes, "Authenticator app added")
    flash("Authenticator app added: signing in now asks for its code.", "success")
    return redirect(security_page())


@bp.post("/totp/remove")
@login_required
@confirmation_required
def totp_remove():
    form = ConfirmForm()
    if form.validate_on_submit() and factors.remove_totp(_me()):
        flash("Authenticator app removed: signing in no longer asks for its codes.", "info")
    return redirect(security_page())


@bp.post("/recovery-codes")
@login_required
@confirmation_required
def recovery_regenerate():
    form = ConfirmForm()
    if not form.validate_on_submit():
        return redirect(security_page())
    account = _me()
    try:
        done = once.act(
            security_page(),
            lambda: factors.regenerate_codes(account),
            lambda _: (
                "new recovery codes were made (they are shown only once; make new ones "
                "again if they were not kept)"
            ),
        )
    except ServiceError as exc:
        flash(exc.message, "error")
        return redirect(security_page())
    if isinstance(done, once.Answer):
        return done.response
    return _codes_page(done, "New recovery codes")
