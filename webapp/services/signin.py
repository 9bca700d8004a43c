"""Sign-in: passwords (their rules and hashing), checking a username and password, and the
account a session cookie names.

A session cookie carries the account's id and its session epoch (Account.get_id); raising the
epoch (a password change, disabling the account) ends every session signed in before.
"""

from __future__ import annotations

from flask import current_app
from sqlalchemy import select
from werkzeug.security import check_password_hash, generate_password_hash

from ..database import utcnow, write_transaction
from ..extensions import db
from ..models import Account
from .errors import Invalid

MIN_PASSWORD = 10
MAX_PASSWORD = 512
# Compared against when the username is unknown, so both failures take the same time.
_DUMMY_HASH = generate_password_hash("not a real password")


def check_new_password(password: object) -> str:
    """`password` if it may become an account's password; Invalid otherwise."""
    if not isinstance(password, str) or not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise Invalid(
            f"A password must be {MIN_PASSWORD} to {MAX_PASSWORD} characters.",
            {"password": f"{MIN_PASSWORD} to {MAX_PASSWORD} characters"},
        )
    return password


def hash_password(password: str) -> str:
    """What is stored of a password."""
    # scrypt by default; the test suite configures a cheap method to stay fast.
    return generate_password_hash(password, method=current_app.config["PASSWORD_HASH_METHOD"])


def authenticate_password(username: str, password: str) -> Account | None:
    """The active account with these credentials, or None; the same cost either way.

    A success stamps the account's last sign-in (`Account.last_sign_in_at`). The slow hash is
    checked outside any write; then one write transaction locks the account, checks that it is
    still active with the same password and session epoch (a disable or password change may
    have committed meanwhile), and stamps it, so a refused sign-in never leaves a stamp."""
    account = db.session.scalars(select(Account).where(Account.username == username)).first()
    if account is None:
        check_password_hash(_DUMMY_HASH, password)
        return None
    if not check_password_hash(account.password_hash, password) or not account.active:
        return None
    checked = (account.id, account.password_hash, account.session_epoch)
    with write_transaction() as session:
        locked = session.get(Account, checked[0], with_for_update=True, populate_existing=True)
        if locked is None or not locked.active:
            return None
        if (locked.id, locked.password_hash, locked.session_epoch) != checked:
            return None
        # The app's clock, not the change path's write clock: a sign-in changes no record and
        # needs no ordering against other writers, only a time to show.
        locked.last_sign_in_at = utcnow()
    return locked


def session_account(session_id: str) -> Account | None:
    """The account a session cookie names, if it is active and its epoch is current."""
    account_id, _, epoch = session_id.partition(":")
    if not (account_id.isdigit() and epoch.isdigit()):
        return None
    account = db.session.get(Account, int(account_id))
    if account is None or not account.active or account.session_epoch != int(epoch):
        return None
    return account
