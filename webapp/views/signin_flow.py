"""The steps of signing in in a browser, shared by the password form, the second step (code,
recovery code or passkey) and single sign-on: who is half-way signed in, and the end of every
way in (docs/security.md#signing-in).

After a right password, an account with a second factor is *pending*: the signed session cookie
holds its id, its session epoch, the password hash's tail and the time, and nothing else is
signed in. The pending state lasts PENDING_FOR; it is refused once the account is disabled or
its password changed (the epoch or the hash differ), and it is cleared when the sign-in ends.
"""

from __future__ import annotations

import time

from flask import flash, redirect, request, session
from flask_login import login_user
from werkzeug.wrappers import Response

from ..extensions import db
from ..models import Account
from ..services.identity import signin

PENDING = "signin_pending"
PENDING_FOR = 5 * 60  # seconds from the right password to the second factor


def client() -> signin.Client:
    """The address and browser of this request, for the session list."""
    return signin.Client(
        address=request.remote_addr, browser=request.headers.get("User-Agent") or None
    )


def begin_second_step(account: Account, destination: str) -> None:
    """Remember that `account` gave its right password and goes on to its second factor."""
    session.clear()  # nothing from before the sign-in carries over
    session[PENDING] = {
        "id": account.id,
        "epoch": account.session_epoch,
        "pw": account.password_hash[-16:],
        "at": int(time.time()),
        "next": destination,
    }


def pending() -> tuple[Account, str] | None:
    """The account half-way signed in, and where it was going; None if there is none, it is
    older than PENDING_FOR, or the account was disabled or changed its password since."""
    state = session.get(PENDING)
    if not isinstance(state, dict):
        return None
    try:
        account_id, epoch, tail, at = state["id"], state["epoch"], state["pw"], state["at"]
    except KeyError:
        return None
    if not isinstance(at, int) or time.time() - at > PENDING_FOR:
        return None
    account = db.session.get(Account, account_id) if isinstance(account_id, int) else None
    if account is None or not account.active or account.session_epoch != epoch:
        return None
    if account.password_hash[-16:] != tail:
        return None
    return account, str(state.get("next") or "/")


def finish(account: Account, proof: str, destination: str) -> Response | None:
    """Sign `account` in (signin.open_session with `proof`) and go on to `destination`; None
    when the account changed meanwhile (the caller shows its form again)."""
    opened = signin.open_session(account, proof, client())
    if opened is None:
        return None
    # A fresh session at sign-in: nothing from before (a planted id, an old CSRF token, the
    # pending state) carries over into the signed-in session.
    session.clear()
    # The cookie names the account and its new sign-in session (Account.get_id).
    login_user(opened)
    flash(f"Signed in as {opened.username}.", "success")
    return redirect(destination)
