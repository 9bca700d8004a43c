"""Sign-in accounts, their grants, passwords and API tokens."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from functools import cache

from flask import current_app
from sqlalchemy import bindparam, literal_column, null, select, union_all, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import selectinload
from werkzeug.security import check_password_hash, generate_password_hash

from ..access import Principal
from ..database import utcnow, write_transaction
from ..extensions import db
from ..models import (
    Account,
    ApiToken,
    Company,
    account_admin_companies,
    account_reporting_companies,
)
from . import audit
from .errors import Conflict, Forbidden, Invalid, NotFound
from .fields import check_format

MIN_PASSWORD = 10
MAX_PASSWORD = 512
TOKEN_PREFIX = "tad_"  # noqa: S105 - a marker, not a secret
# Recording every use would turn each API read into a write; a minute's precision is enough.
LAST_USED_PRECISION = timedelta(minutes=1)
# Compared against when the username is unknown, so both failures take the same time.
_DUMMY_HASH = generate_password_hash("not a real password")


def _hash_password(password: str) -> str:
    # scrypt by default; the test suite configures a cheap method to stay fast.
    return generate_password_hash(password, method=current_app.config["PASSWORD_HASH_METHOD"])


@dataclass(frozen=True)
class NewAccount:
    account: Account
    password: str | None  # set when the password was generated, to show it once


def _check_password(password: object) -> str:
    if not isinstance(password, str) or not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise Invalid(
            f"A password must be {MIN_PASSWORD} to {MAX_PASSWORD} characters.",
            {"password": f"{MIN_PASSWORD} to {MAX_PASSWORD} characters"},
        )
    return password


def _companies(session, ids: Iterable[str], field: str) -> list[Company]:
    wanted = sorted(set(ids))
    found = list(session.scalars(select(Company).where(Company.id.in_(wanted))))
    missing = sorted(set(wanted) - {c.id for c in found})
    if missing:
        raise Invalid(f"Company '{missing[0]}' does not exist.", {field: "unknown company"})
    return found


def grants_of(account: Account) -> dict[str, object]:
    return {
        "system_admin": account.system_admin,
        "admin_of": sorted(c.id for c in account.admin_of),
        "billing_summary": account.billing_summary,
        "reporting_for": sorted(c.id for c in account.reporting_for),
        "active": account.active,
    }


def create(
    principal: Principal,
    username: object,
    password: str | None = None,
    *,
    system_admin: bool = False,
    admin_of: Iterable[str] = (),
    billing_summary: bool = False,
    reporting_for: Iterable[str] = (),
) -> NewAccount:
    """Add an account with the given grants (System-Admin). Without a password one is generated
    and returned once; only its hash is stored. Conflict if the username is taken. Audited."""
    principal.require_system_admin("create accounts")
    if (why := check_format("username", username)) is not None:
        raise Invalid(f"Username {why}.", {"username": why})
    generated = password is None
    password = secrets.token_urlsafe(15) if generated else _check_password(password)
    with write_transaction() as session:
        account = Account(
            username=username,
            password_hash=_hash_password(password),
            system_admin=system_admin,
            billing_summary=billing_summary,
            active=True,
            session_epoch=0,
            admin_of=_companies(session, admin_of, "admin_of"),
            reporting_for=_companies(session, reporting_for, "reporting_for"),
        )
        session.add(account)
        try:
            session.flush()
        except IntegrityError as exc:
            raise Conflict(f"Account '{username}' already exists.") from exc
        audit.record(
            session,
            [
                audit.entry(
                    principal,
                    "account.create",
                    f"account {username}",
                    after={"username": username, **grants_of(account)},
                )
            ],
        )
    return NewAccount(account=account, password=password if generated else None)


def _get_for_update(session, username: str) -> Account:
    account = session.scalars(
        select(Account).where(Account.username == username).with_for_update()
    ).one_or_none()
    if account is None:
        raise NotFound(f"No account '{username}'.")
    return account


def disable(principal: Principal, username: str) -> None:
    """Stop an account at once: its sessions and tokens are refused from the next request on."""
    principal.require_system_admin("disable accounts")
    with write_transaction() as session:
        account = _get_for_update(session, username)
        before = grants_of(account)
        account.active = False
        account.session_epoch += 1
        audit.record(
            session,
            [
                audit.entry(
                    principal,
                    "account.disable",
                    f"account {username}",
                    before=before,
                    after=grants_of(account),
                )
            ],
        )


def set_password(principal: Principal, username: str, password: str) -> None:
    """Replace an account's password (System-Admin, or the account itself) and end its sessions."""
    if not (principal.system_admin or principal.username == username):
        raise Forbidden("Only a System-Admin may change another account's password.")
    password = _check_password(password)
    with write_transaction() as session:
        account = _get_for_update(session, username)
        account.password_hash = _hash_password(password)
        account.session_epoch += 1
        audit.record(session, [audit.entry(principal, "account.password", f"account {username}")])


def authenticate_password(username: str, password: str) -> Account | None:
    """The active account with these credentials, or None; the same cost either way."""
    account = db.session.scalars(select(Account).where(Account.username == username)).first()
    if account is None:
        check_password_hash(_DUMMY_HASH, password)
        return None
    if not check_password_hash(account.password_hash, password) or not account.active:
        return None
    return account


def session_account(session_id: str) -> Account | None:
    """The account a session cookie names, if it is active and its epoch is current."""
    account_id, _, epoch = session_id.partition(":")
    if not (account_id.isdigit() and epoch.isdigit()):
        return None
    account = db.session.get(Account, int(account_id))
    if account is None or not account.active or account.session_epoch != int(epoch):
        return None
    return account


def _hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def create_token(principal: Principal, username: str, label: str = "") -> str:
    """Create an API token for `username` (System-Admin, or the account itself) and return it;
    it is shown this once, and only its SHA-256 is kept. Audited."""
    if not (principal.system_admin or principal.username == username):
        raise Forbidden("Only a System-Admin may create tokens for another account.")
    if not isinstance(label, str) or len(label) > 100:
        raise Invalid(
            "A token label is at most 100 characters.", {"label": "at most 100 characters"}
        )
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with write_transaction() as session:
        account = _get_for_update(session, username)
        if not account.active:
            raise Invalid(f"Account '{username}' is disabled.", {"username": "disabled"})
        token = ApiToken(account=account, label=label, token_hash=_hash_token(raw), prefix=raw[:10])
        session.add(token)
        session.flush()
        audit.record(
            session,
            [
                audit.entry(
                    principal,
                    "token.create",
                    f"account {username}",
                    after={"token_id": token.id, "label": label, "prefix": token.prefix},
                )
            ],
        )
    return raw


def revoke_token(principal: Principal, token_id: int) -> None:
    """Revoke a token (System-Admin, or its owner); refused from the next request on."""
    with write_transaction() as session:
        token = (
            session.get(ApiToken, token_id, with_for_update=True) if 0 < token_id < 2**31 else None
        )
        if token is None or not (
            principal.system_admin or token.account_id == principal.account_id
        ):
            raise NotFound("No such token.")
        if token.revoked_at is None:
            token.revoked_at = utcnow()
            audit.record(
                session,
                [
                    audit.entry(
                        principal,
                        "token.revoke",
                        f"account {token.account.username}",
                        before={"token_id": token.id, "label": token.label},
                    )
                ],
            )


def authenticate_token(raw: str, via: str = "api") -> Principal | None:
    """The Principal of the active account owning this unrevoked token, or None. Records the use
    (to the minute).

    One query per request, and nothing kept between requests: the token, its account and both
    grant lists in one statement (_token_query), so a revocation, a disabled account or changed
    grants count from the very next request."""
    if not raw.startswith(TOKEN_PREFIX) or len(raw) > 100:
        return None
    digest = _hash_token(raw)
    # On the session's connection: a Core statement needs none of the ORM execution layer.
    rows = db.session.connection().execute(_token_query(), {"digest": digest}).all()
    head = next((r for r in rows if r.kind == "token"), None)
    if head is None:  # unknown or revoked token, or disabled account
        return None
    if not hmac.compare_digest(head.token_hash, digest):  # pragma: no cover - defence in depth
        return None
    grants: dict[str, set[str]] = {"admin": set(), "report": set()}
    for row in rows:
        if row.kind != "token":
            grants[row.kind].add(row.company_id)
    now = utcnow()
    if head.last_used_at is None or now - head.last_used_at >= LAST_USED_PRECISION:
        with write_transaction() as session:
            session.execute(update(ApiToken).where(ApiToken.id == head.id).values(last_used_at=now))
    return Principal(
        username=head.username,
        via=via,
        account_id=head.account_id,
        system_admin=head.system_admin,
        admin_of=frozenset(grants["admin"]),
        billing_summary=head.billing_summary,
        reporting_for=frozenset(grants["report"]),
    )


@cache
def _token_query():
    """authenticate_token's statement: a UNION ALL of the token's row (kind 'token', with its
    account, only if unrevoked and active) and one row per grant of its account (kind 'admin'
    or 'report'). Each branch is an index lookup (the token's hash, the account's key, the
    grant tables' keys), so the cost does not grow with the number of accounts or grants."""
    token, account = ApiToken.__table__, Account.__table__
    digest = bindparam("digest")
    head = (
        select(
            literal_column("'token'").label("kind"),
            null().label("company_id"),
            token.c.id,
            token.c.token_hash,
            token.c.last_used_at,
            account.c.id.label("account_id"),
            account.c.username,
            account.c.system_admin,
            account.c.billing_summary,
        )
        .select_from(token.join(account, account.c.id == token.c.account_id))
        .where(token.c.token_hash == digest, token.c.revoked_at.is_(None), account.c.active)
    )
    grants = [
        select(literal_column(f"'{kind}'"), table.c.company_id, *[null()] * 7)
        .select_from(table.join(token, token.c.account_id == table.c.account_id))
        .where(token.c.token_hash == digest)
        for kind, table in (
            ("admin", account_admin_companies),
            ("report", account_reporting_companies),
        )
    ]
    return union_all(head, *grants)


# --- administration of accounts (the pages under /admin/accounts and /account/tokens) ---------


def list_all(principal: Principal) -> list[Account]:
    """Every account with its grants, by username (System-Admin); three queries, not N+1."""
    principal.require_system_admin("manage accounts")
    query = (
        select(Account)
        .options(selectinload(Account.admin_of), selectinload(Account.reporting_for))
        .order_by(Account.username)
    )
    return list(db.session.scalars(query))


def get(principal: Principal, username: str) -> Account:
    """One account with its grants (System-Admin); NotFound if there is none."""
    principal.require_system_admin("manage accounts")
    account = db.session.scalars(
        select(Account)
        .where(Account.username == username)
        .options(selectinload(Account.admin_of), selectinload(Account.reporting_for))
    ).one_or_none()
    if account is None:
        raise NotFound(f"No account '{username}'.")
    return account


def set_grants(
    principal: Principal,
    username: str,
    *,
    system_admin: bool,
    admin_of: Iterable[str],
    billing_summary: bool,
    reporting_for: Iterable[str],
) -> None:
    """Replace an account's grants (System-Admin). Audited with before and after.

    Refuses to take System-Admin from the caller's own account, and from the last active
    System-Admin: someone must always be able to manage accounts from the pages."""
    principal.require_system_admin("change grants")
    system_admin, billing_summary = bool(system_admin), bool(billing_summary)
    with write_transaction() as session:
        # Lock every active System-Admin first, so two concurrent demotions cannot both pass
        # the last-one check; then the account itself.
        active_admins = set(
            session.scalars(
                select(Account.username)
                .where(Account.system_admin, Account.active)
                .with_for_update()
            )
        )
        account = _get_for_update(session, username)
        if account.system_admin and not system_admin:
            if username == principal.username:
                raise Invalid(
                    "You cannot remove System-Admin from your own account; "
                    "another System-Admin must do it.",
                    {"system_admin": "cannot be removed from your own account"},
                )
            if account.active and active_admins <= {username}:
                raise Invalid(
                    f"'{username}' is the last active System-Admin; "
                    "grant System-Admin to another account first.",
                    {"system_admin": "the last active System-Admin keeps this grant"},
                )
        before = grants_of(account)
        account.system_admin = system_admin
        account.billing_summary = billing_summary
        account.admin_of = _companies(session, admin_of, "admin_of")
        account.reporting_for = _companies(session, reporting_for, "reporting_for")
        after = grants_of(account)
        if after != before:
            audit.record(
                session,
                [
                    audit.entry(
                        principal,
                        "account.grants",
                        f"account {username}",
                        before=before,
                        after=after,
                    )
                ],
            )


def disable_other(principal: Principal, username: str) -> None:
    """`disable` for an account other than the caller's own (a System-Admin locking itself out
    from the pages is always a mistake; the command line can still do it)."""
    if username == principal.username:
        raise Invalid("You cannot disable your own account.", {"username": "your own account"})
    disable(principal, username)


def generate_password() -> str:
    """A random password of 20 URL-safe characters, as `create` makes."""
    return secrets.token_urlsafe(15)


def reset_password(principal: Principal, username: str, password: str | None = None) -> str | None:
    """`set_password` with the given password, or a generated one (returned, to show once)."""
    generated = not password
    if generated:
        password = generate_password()
    set_password(principal, username, password)
    return password if generated else None


def change_own_password(principal: Principal, current: str, new: str) -> None:
    """The signed-in account changes its own password; its current one is required. Ends its
    sessions (set_password)."""
    account = db.session.get(Account, principal.account_id) if principal.account_id else None
    if account is None or account.username != principal.username:
        raise Forbidden("Only a signed-in account may change its own password.")
    if not isinstance(current, str) or not check_password_hash(account.password_hash, current):
        raise Invalid("The current password is not correct.", {"current_password": "not correct"})
    set_password(principal, principal.username, new)


def tokens_of(principal: Principal, username: str) -> list[ApiToken]:
    """An account's API tokens, newest first (System-Admin, or the account itself)."""
    if not (principal.system_admin or principal.username == username):
        raise Forbidden("Only a System-Admin may see another account's tokens.")
    query = (
        select(ApiToken)
        .join(ApiToken.account)
        .where(Account.username == username)
        .order_by(ApiToken.created_at.desc(), ApiToken.id.desc())
    )
    return list(db.session.scalars(query))


def get_token(principal: Principal, token_id: int) -> ApiToken:
    """One token (System-Admin, or its owner); NotFound otherwise, so ids do not leak."""
    # An id no integer column can hold is simply not found (PostgreSQL would refuse the query).
    token = db.session.get(ApiToken, token_id) if 0 < token_id < 2**31 else None
    if token is None or not (principal.system_admin or token.account_id == principal.account_id):
        raise NotFound("No such token.")
    return token
