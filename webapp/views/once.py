"""One-time forms: a POST that makes a secret (a webhook, an API token, a rotated signing
secret) acts once, however often the same form is sent (docs/pages.md#one-time-forms).

Those answers show the secret in the page the POST answers (it is never put in a URL, a flash
message or any cookie: the Flask session is a signed, not encrypted, cookie), so they cannot
redirect first; a browser reload of that page re-POSTs the same form. Instead each such form
carries a hidden one-time key `once`, made when the form is rendered: signed with SECRET_KEY,
naming the signed-in account, dated. The first POST that acts records the key in `form_once`
(before acting, so two POSTs at once cannot both act: the second finds the row, or waits for
it and fails on its primary key); a POST that finds its key recorded does nothing and answers
"This was already done: <what>." with a 303 to the page. The secret is in no later answer.

A key is good for as long as a session lives (SESSION_MAX_HOURS): an older one is refused (its
row may have been pruned, so it could not be told from a fresh one). A form sent without a key
(a script's POST, not a page of this app's) acts as before: a reload always sends the key.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from flask import current_app, flash, redirect, request
from flask_login import current_user
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from markupsafe import Markup
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from werkzeug.wrappers import Response

from ..database import utcnow, write_transaction
from ..errors import Conflict
from ..extensions import db
from ..models import FormOnce
from ..services.identity.signin import session_limits

FIELD = "once"
SALT = "form-once"
T = TypeVar("T")


@dataclass(frozen=True)
class Answer:
    """What to answer instead of acting: the form was already done, or its key is no good."""

    response: Response


def _signer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(current_app.secret_key or "", salt=SALT)


def field() -> Markup:
    """The hidden `once` field of a new form (a Jinja global: `{{ once_field() }}`)."""
    value = _signer().dumps([current_user.id, secrets.token_hex(16)])
    return Markup('<input type="hidden" name="{}" value="{}">').format(FIELD, value)


def _key() -> str | Answer | None:
    """The key this POST carries: None when it carries none; an Answer when it is forged,
    another account's or too old."""
    sent = request.form.get(FIELD)
    if not sent:
        return None
    life = session_limits().lifetime
    try:
        account_id, key = _signer().loads(sent, max_age=int(life.total_seconds()))
    except SignatureExpired:
        return _answer("This form is too old: nothing was done. Fill it in again.", "error")
    except (BadSignature, ValueError, TypeError):
        account_id, key = None, None
    if account_id != current_user.id or not isinstance(key, str):
        return _answer("This form was not made for you: nothing was done.", "error")
    return key


def _answer(message: str, category: str, back: str | None = None) -> Answer:
    flash(message, category)
    return Answer(redirect(back or request.path, code=303))


def _claim(key: str) -> str | None:
    """Record `key` as used by the signed-in account; None when it was free, else what was
    done with it. Keys older than a session's life are pruned on the way."""
    oldest = utcnow() - session_limits().lifetime
    try:
        with write_transaction() as session:
            session.execute(delete(FormOnce).where(FormOnce.used_at < oldest))
            done = session.scalar(select(FormOnce.what).where(FormOnce.key == key))
            if done is not None:
                return done
            session.add(FormOnce(key=key, account_id=current_user.id, what=""))
    except (IntegrityError, Conflict):
        return db.session.scalar(select(FormOnce.what).where(FormOnce.key == key)) or ""
    return None


def _record(key: str, what: str | None) -> None:
    """Say what was done with `key` (what: None: nothing was, the key is free again)."""
    with write_transaction() as session:
        row = session.get(FormOnce, key)
        if row is None:
            return
        if what is None:
            session.delete(row)
        else:
            row.what = what


def act(back: str, action: Callable[[], T], said: Callable[[T], str]) -> T | Answer:
    """Do `action` once for this form: its result, or the Answer to give instead when this
    form was already done (with what `said` said of it then, a 303 to `back`) or its key is
    no good. An action that raises (a refused form) leaves the key free for the corrected form.
    """
    key = _key()
    if isinstance(key, Answer):
        return key
    if key is None:
        return action()
    if (done := _claim(key)) is not None:
        said_then = f"This was already done: {done}." if done else "This is being done."
        return _answer(f"{said_then} Nothing was done again.", "info", back)
    try:
        result = action()
    except BaseException:
        _record(key, None)
        raise
    _record(key, said(result))
    return result
