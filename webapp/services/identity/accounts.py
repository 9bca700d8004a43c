"""Administration of sign-in accounts: creating them, their grants, disabling them, their
passwords; and the guard that keeps one active System-Admin.

Signing in is services/identity/signin.py, API tokens services/identity/api_tokens.py."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import ColumnElement, func, or_, select, true
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload
from werkzeug.security import check_password_hash

from ...access import Principal
from ...database import write_transaction
from ...errors import Conflict, Forbidden, Invalid, NotFound
from ...extensions import db
from ...models import Account, Company, account_admin_companies
from .. import paging
from ..fields import check_format
from ..history import audit
from . import sessions, signin


@dataclass(frozen=True)
class NewAccount:
    account: Account
    password: str | None  # set when the password was generated, to show it once


def _companies(session: Session, ids: Iterable[str], field: str) -> list[Company]:
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
    with write_transaction() as session:
        return add(
            session,
            principal,
            username,
            password,
            system_admin=system_admin,
            admin_of=admin_of,
            billing_summary=billing_summary,
            reporting_for=reporting_for,
        )


def add(
    session: Session,
    principal: Principal,
    username: object,
    password: str | None = None,
    *,
    system_admin: bool = False,
    admin_of: Iterable[str] = (),
    billing_summary: bool = False,
    reporting_for: Iterable[str] = (),
) -> NewAccount:
    """`create` inside the caller's transaction (`session`), for a caller that adds accounts
    with other writes, all or nothing (the demo data): the account and its audit entry are
    written when the caller commits, and nothing of it if the caller rolls back. The same
    checks as `create`, each raising before anything is added."""
    principal.require_system_admin("create accounts")
    if (why := check_format("username", username)) is not None:
        raise Invalid(f"Username {why}.", {"username": why})
    generated = password is None
    password = secrets.token_urlsafe(15) if generated else signin.check_new_password(password)
    account = Account(
        username=username,
        password_hash=signin.hash_password(password),
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


def get_for_update(session: Session, username: str) -> Account:
    """The account named `username`, locked for the caller's transaction; NotFound if none."""
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
        account = get_for_update(session, username)
        before = grants_of(account)
        account.active = False
        account.session_epoch += 1
        sessions.end_all_but(session, account.id, None)  # ended in its list too
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


def enable(principal: Principal, username: str) -> None:
    """Let a disabled account sign in again (System-Admin). Its old sessions stay ended (the
    epoch raised by `disable` is kept); its API tokens that were not revoked work again.
    Invalid if the account is already active. Audited."""
    principal.require_system_admin("enable accounts")
    with write_transaction() as session:
        account = get_for_update(session, username)
        if account.active:
            raise Invalid(f"Account '{username}' is already active.", {"username": "active"})
        before = grants_of(account)
        account.active = True
        audit.record(
            session,
            [
                audit.entry(
                    principal,
                    "account.enable",
                    f"account {username}",
                    before=before,
                    after=grants_of(account),
                )
            ],
        )


def set_password(
    principal: Principal, username: str, password: str, *, keep: str | None = None
) -> None:
    """Replace an account's password (System-Admin, or the account itself) and end its sessions:
    all of them (the session epoch is raised, so a half-done sign-in ends too), or with `keep`
    (the stored id of the session the account itself changes it from) every other one, the
    epoch left as it is so that session's cookie stays good. One transaction, audited."""
    principal.require_manage_account("change another account's password", username=username)
    password = signin.check_new_password(password)
    with write_transaction() as session:
        account = get_for_update(session, username)
        account.password_hash = signin.hash_password(password)
        if keep is None:
            account.session_epoch += 1
        ended = sessions.end_all_but(session, account.id, keep)
        entries = [audit.entry(principal, "account.password", f"account {username}")]
        if keep is not None and ended:
            entries.append(signin.own_entry(account, "account.session-ended", "password changed"))
        audit.record(session, entries)


def list_all(principal: Principal) -> list[Account]:
    """Every account with its grants, by username (System-Admin); three queries, not N+1."""
    principal.require_system_admin("manage accounts")
    query = (
        select(Account)
        .options(selectinload(Account.admin_of), selectinload(Account.reporting_for))
        .order_by(Account.username)
    )
    return list(db.session.scalars(query))


@dataclass(frozen=True)
class AccountPage:
    """One page of the accounts list: `number` is 1-based and within 1..pages."""

    rows: list[Account]
    total: int
    number: int
    pages: int


def search(
    principal: Principal, q: object = "", page: object = 1, per_page: int = 50
) -> AccountPage:
    """The accounts whose username contains `q` (case-insensitive), by username, one page of
    `per_page` with their grants (System-Admin). A page past the end answers the last one.
    Four queries whatever the number of accounts: the count, the page, its two grant lists."""
    principal.require_system_admin("manage accounts")
    text = paging.search_text(q)
    number = paging.page_number(page)
    matches = Account.username.icontains(text, autoescape=True) if text else true()
    total = db.session.scalar(select(func.count()).select_from(Account).where(matches)) or 0
    number, pages = paging.clamp(number, total, per_page)
    query = (
        select(Account)
        .where(matches)
        .options(selectinload(Account.admin_of), selectinload(Account.reporting_for))
        .order_by(Account.username)
        .offset((number - 1) * per_page)
        .limit(per_page)
    )
    return AccountPage(list(db.session.scalars(query)), total, number, pages)


def existing(principal: Principal, usernames: Iterable[str]) -> frozenset[str]:
    """Those of `usernames` that are accounts, for a System-Admin (whose pages they have: the
    audit log links an actor to its account); empty for anyone else, without a query. One
    query, however many names: a page of the audit log asks once."""
    names = sorted(set(usernames))
    if not principal.system_admin or not names:
        return frozenset()
    query = select(Account.username).where(Account.username.in_(names))
    return frozenset(db.session.scalars(query))


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
        account = get_for_update(session, username)
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
    new = password or generate_password()
    set_password(principal, username, new)
    return None if password else new


def change_own_password(
    principal: Principal, current: str, new: str, keep: str | None = None
) -> None:
    """The signed-in account changes its own password; its current one is required. Ends its
    other sessions and keeps `keep` (the stored id of the session it changes it from,
    signin.session_row_id) signed in; without `keep`, every session (set_password)."""
    account = db.session.get(Account, principal.account_id) if principal.account_id else None
    if account is None or account.username != principal.username:
        raise Forbidden("Only a signed-in account may change its own password.")
    if not isinstance(current, str) or not check_password_hash(account.password_hash, current):
        raise Invalid("The current password is not correct.", {"current_password": "not correct"})
    set_password(principal, principal.username, new, keep=keep)


# --- the audit log's actor suggestions ---------------------------------------------------------
ACTOR_SUGGESTIONS = 20  # at most this many as someone types
MAX_TYPED_ACTOR = 64  # usernames are at most 64 characters


def suggest_actors(principal: Principal, text: object, limit: int = ACTOR_SUGGESTIONS) -> list[str]:
    """At most `limit` usernames for the audit log's actor filter whose username contains
    `text` (case-insensitive; prefix matches first, each by username; empty text: the first
    usernames). Only accounts the reader may know of: a System-Admin every account; a
    Company-Admin itself and the Company-Admins of its own companies, never an account only
    of companies it cannot see (nor a System-Admin). Forbidden for anyone who may not read the
    log (access.Principal.require_audit)."""
    principal.require_audit()
    typed = text.strip().lower()[:MAX_TYPED_ACTOR] if isinstance(text, str) else ""
    scope = principal.auditable_companies()
    visible: ColumnElement[bool] = true()
    if scope is not None:
        granted = select(account_admin_companies.c.account_id).where(
            account_admin_companies.c.company_id.in_(sorted(scope))
        )
        visible = or_(Account.id.in_(granted), Account.username == principal.username)
    starts = Account.username.startswith(typed, autoescape=True)
    found = list(
        db.session.scalars(
            select(Account.username).where(visible, starts).order_by(Account.username).limit(limit)
        )
    )
    if typed and len(found) < limit:  # then those containing it elsewhere
        contains = Account.username.contains(typed, autoescape=True)
        query = (
            select(Account.username)
            .where(visible, contains, ~starts)
            .order_by(Account.username)
            .limit(limit - len(found))
        )
        found += db.session.scalars(query)
    return found
