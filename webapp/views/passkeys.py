"""Passkeys and security keys in the browser (blueprint "passkeys", docs/security.md#passkeys):
the account's own list (/account/passkeys) with Remove, and the JSON endpoints that
static/passkeys.js calls with fetch for each WebAuthn ceremony: adding a passkey, using one as
the second step of a sign-in, and using one to confirm the session before a sensitive action.

Every JSON endpoint is a POST, so CSRFProtect checks its X-CSRFToken header; each answers
{"error": ...} with a 4xx status for anything it refuses, and {"next": ...} (where to go) on
success. The challenge of each ceremony is kept in the signed session between its options and
the browser's answer, and taken out when the answer comes (services/identity/passkeys.py also
records it as used, so one challenge is good for one answer).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    flash,
    jsonify,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask.typing import ResponseReturnValue
from flask_login import current_user, login_required
from flask_wtf.csrf import CSRFError

from ..errors import Invalid
from ..models import Account
from ..security import NO_STORE, record_sign_in_failure, sign_in_blocked
from ..services.identity import passkeys
from . import signin_flow
from .auth import safe_next
from .confirm import confirmation_required
from .errors import error_page

bp = Blueprint("passkeys", __name__)

KEPT = "passkey_challenge"  # the session key of the ceremony under way
BLOCKED = "Too many failed sign-ins; wait 15 minutes and try again."
REFUSED = "That passkey was not accepted; try again or use another way."


def _party() -> passkeys.Party:
    """The relying party as this request's browser sees it: the host it asked for (behind
    trusted proxies, the one they were asked for) without the port, and the page's origin."""
    origin = f"{request.scheme}://{request.host}"
    return passkeys.Party(rp_id=urlsplit(origin).hostname or "", origin=origin)


def _error(status: int, message: str, **more: Any) -> ResponseReturnValue:
    return jsonify(error=message, **more), status


def _body() -> dict[str, Any] | None:
    """The request's JSON object; None when it is not one."""
    body = request.get_json(silent=True)
    return body if isinstance(body, dict) else None


def _options(account: Account, purpose: str) -> ResponseReturnValue:
    party = _party()
    if purpose != "register" and not account.passkeys:
        return _error(400, "You have no passkey; use another way.")
    if purpose == "register":
        options, challenge = passkeys.registration_options(account, party)
    else:
        options, challenge = passkeys.authentication_options(account, party, purpose)
    session[KEPT] = challenge.as_dict()
    return jsonify(options), 200, NO_STORE


def _answered(account: Account, purpose: str) -> passkeys.Challenge | None:
    """The challenge of the ceremony under way, taken out of the session: one answer each."""
    return passkeys.challenge_from(session.pop(KEPT, None), account, purpose)


@bp.app_context_processor
def _pending_passkey() -> dict[str, Any]:
    def passkey_pending() -> bool:
        """Whether the account half-way signed in has a passkey (templates/auth/_passkey_step)."""
        pending = signin_flow.pending()
        return pending is not None and bool(pending[0].passkeys)

    return {"passkey_pending": passkey_pending}


@bp.errorhandler(CSRFError)
def _csrf_error(exc: CSRFError) -> ResponseReturnValue:
    if request.endpoint == "passkeys.remove":
        return error_page(
            400, "The form has expired or is not valid; reload the page and try again."
        )
    return _error(400, "The page has expired; reload it and try again.")


# The account's passkeys -----------------------------------------------------------------------


@bp.get("/account/passkeys")
@login_required
def page():
    return render_template("account/passkeys.html", account=current_user), 200, NO_STORE


@bp.post("/account/passkeys/options")
@login_required
@confirmation_required
def register_options():
    """The name is checked here too (when sent), before the browser's prompt: a passkey made
    on the authenticator and then refused for its name would stay there, unused."""
    account = current_user._get_current_object()
    body = _body() or {}
    if "name" in body:
        try:
            passkeys.check_name(account, body["name"])
        except Invalid as exc:
            return _error(400, exc.message, fields=exc.fields)
    return _options(account, "register")


@bp.post("/account/passkeys")
@login_required
@confirmation_required
def register():
    account = current_user._get_current_object()
    body = _body()
    if body is None:
        return _error(400, "The request is not a JSON object.")
    challenge = _answered(account, "register")
    try:
        name = passkeys.check_name(account, body.get("name"))
        if challenge is None:
            raise Invalid("The passkey request expired; try again.")
        added = passkeys.register(account, _party(), challenge, body.get("credential"), name)
    except Invalid as exc:
        return _error(400, exc.message, fields=exc.fields)
    flash(f"Passkey '{name}' added.", "success")
    destination = safe_next(body.get("back") if isinstance(body.get("back"), str) else None)
    return jsonify(next=destination, recovery_codes=added.recovery_codes), 200, NO_STORE


@bp.post("/account/passkeys/<int:passkey_id>/remove")
@login_required
@confirmation_required
def remove(passkey_id: int):
    name = passkeys.remove(current_user._get_current_object(), passkey_id)
    flash(f"Passkey '{name}' removed.", "success")
    back = request.form.get("back") or url_for("passkeys.page")
    return redirect(safe_next(back), code=303)


# A passkey as the second step of a sign-in ---------------------------------------------------


def _pending() -> tuple[Account, str] | ResponseReturnValue:
    """The account half-way signed in and where it goes; else the JSON refusal to answer (no
    right password yet, or the account's sign-in limit used up)."""
    pending = signin_flow.pending()
    if pending is None:
        return _error(400, "Sign in with your password first.", next=url_for("auth.login"))
    if sign_in_blocked(pending[0].username):
        return _error(429, BLOCKED)
    return pending


@bp.post("/login/passkey/options")
def signin_options():
    pending = _pending()
    if not isinstance(pending, tuple) or not isinstance(pending[0], Account):
        return pending
    return _options(pending[0], "signin")


@bp.post("/login/passkey")
def signin():
    pending = _pending()
    if not isinstance(pending, tuple) or not isinstance(pending[0], Account):
        return pending
    account, destination = pending
    body = _body() or {}
    challenge = _answered(account, "signin")
    if passkeys.authenticate(account, _party(), challenge, body.get("credential")) is None:
        record_sign_in_failure(account.username)
        return _error(400, REFUSED)
    if signin_flow.finish(account, "passkey", destination) is None:
        return _error(
            400, "The account changed meanwhile; sign in again.", next=url_for("auth.login")
        )
    return jsonify(next=destination)


# A passkey to confirm the session before a sensitive action ----------------------------------


@bp.post("/account/confirm/passkey/options")
@login_required
def confirm_options():
    return _options(current_user._get_current_object(), "confirm")


@bp.post("/account/confirm/passkey")
@login_required
def confirm():
    account = current_user._get_current_object()
    if sign_in_blocked(account.username):
        return _error(429, BLOCKED)
    body = _body() or {}
    challenge = _answered(account, "confirm")
    if passkeys.authenticate(account, _party(), challenge, body.get("credential")) is None:
        record_sign_in_failure(account.username)
        return _error(400, REFUSED)
    passkeys.confirm(account)
    target = body.get("next")
    return jsonify(next=safe_next(target if isinstance(target, str) else None))
