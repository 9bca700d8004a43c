"""Single sign-on's two addresses (blueprint "sso", docs/security.md#single-sign-on):
GET /login/sso sends the browser to the identity provider, GET /login/sso/callback takes its
answer back and signs the account in (signin_flow.finish with proof "oidc").

Between the two, the session cookie (signed, so the browser cannot change it) holds each
sign-in under way by its state: the nonce, the PKCE verifier, where to go afterwards and, for
a confirmation, the account asking. The callback takes the entry out before anything else,
so a state is good for one answer: a replayed or unknown one gets a 400 page.

`GET /login/sso?confirm=1&next=…` is the confirmation before a sensitive action for a session
signed in with single sign-on (views/confirm.py sends such sessions here): the provider is
asked to sign the person in again, and the session is confirmed if it vouches for the same
account.
"""

from __future__ import annotations

import time
from typing import Any

from flask import Blueprint, abort, flash, redirect, render_template, request, session, url_for
from flask_login import current_user
from werkzeug.wrappers import Response

from ..services.identity import oidc
from . import signin_flow
from .auth import safe_next

bp = Blueprint("sso", __name__)

FLOWS = "sso_flows"
FLOW_FOR = 10 * 60  # seconds from leaving for the provider to coming back
MAX_FLOWS = 3  # sign-ins under way at once per browser (tabs); the cookie stays small


def _callback_uri() -> str:
    return url_for("sso.callback", _external=True)


def _problem(problem: oidc.SignOnProblem) -> tuple[str, int]:
    title = "Single sign-on refused" if problem.status == 403 else "Single sign-on failed"
    page = render_template("auth/sso_problem.html", title=title, message=problem.message)
    return page, problem.status


def _remember(state: str, flow: dict[str, Any]) -> None:
    """Keep `flow` under `state` in the session, dropping expired and the oldest entries."""
    now = int(time.time())
    flows = {
        key: value
        for key, value in (session.get(FLOWS) or {}).items()
        if isinstance(value, dict) and now - int(value.get("at", 0)) <= FLOW_FOR
    }
    flows[state] = {**flow, "at": now}
    newest = sorted(flows.items(), key=lambda item: int(item[1].get("at", 0)))[-MAX_FLOWS:]
    session[FLOWS] = dict(newest)


def _take(state: str | None) -> dict[str, Any] | None:
    """The sign-in under way with `state`, taken out of the session (so it serves once); None
    for a missing, unknown, used or expired state."""
    flows = dict(session.get(FLOWS) or {})
    flow = flows.pop(state, None) if state else None
    session[FLOWS] = flows
    if not isinstance(flow, dict) or time.time() - int(flow.get("at", 0)) > FLOW_FOR:
        return None
    return flow


@bp.get("/login/sso")
def start() -> Response | tuple[str, int]:
    """Send the browser to the provider to sign in, or (confirm=1) to sign in again."""
    if not oidc.configured():
        abort(404)
    destination = safe_next(request.args.get("next"))
    confirm = request.args.get("confirm") == "1"
    if confirm and not current_user.is_authenticated:
        return redirect(url_for("auth.login", next=destination))
    if confirm and current_user.session_via != "oidc":
        problem = oidc.Rejected("This session was not signed in with single sign-on.")
        return _problem(problem)
    if not confirm and current_user.is_authenticated:
        return redirect(destination)
    try:
        begun = oidc.begin(_callback_uri(), again=confirm)
    except oidc.SignOnProblem as problem:
        return _problem(problem)
    flow = {"nonce": begun.nonce, "verifier": begun.verifier, "next": destination}
    if confirm:
        flow["account"] = current_user.id
    _remember(begun.state, flow)
    return redirect(begun.url)


@bp.get("/login/sso/callback")
def callback() -> Response | tuple[str, int]:
    """The provider's answer: check it, then sign in (or confirm the session)."""
    if not oidc.configured():
        abort(404)
    flow = _take(request.args.get("state"))
    try:
        # An error answer signs no one in, so it is shown whatever its state (some providers
        # leave the state out of it).
        if error := request.args.get("error"):
            raise oidc.provider_error(error, request.args.get("error_description"))
        if flow is None:
            raise oidc.Rejected(
                "This sign-in answer is unknown, expired or was already used; start again."
            )
        return _answer(flow)
    except oidc.SignOnProblem as problem:
        return _problem(problem)


def _answer(flow: dict[str, Any]) -> Response:
    code = request.args.get("code")
    if not code:
        raise oidc.Rejected("The identity provider's answer holds no code; start again.")
    claims = oidc.identify(code, _callback_uri(), str(flow["nonce"]), str(flow["verifier"]))
    if "account" in flow:
        return _confirmed(flow, claims)
    account = oidc.account_for(claims)
    done = signin_flow.finish(account, "oidc", str(flow["next"]))
    if done is None:  # disabled or changed between the look-up and the sign-in
        raise oidc.Refused("The account changed while signing in; start again.")
    return done


def _confirmed(flow: dict[str, Any], claims: dict[str, Any]) -> Response:
    """A confirmation's answer: the same account must still be signed in here."""
    if not current_user.is_authenticated or current_user.id != flow["account"]:
        raise oidc.Refused("The session that asked for this confirmation is no longer signed in.")
    oidc.confirm(current_user._get_current_object(), claims, int(flow["at"]))
    flash("Confirmed.", "success")
    return redirect(str(flow["next"]))
