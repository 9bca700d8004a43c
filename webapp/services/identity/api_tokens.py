"""API tokens: made for an account and shown once, kept only as their SHA-256; listed, revoked,
and turned back into a Principal on every API request."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta
from functools import cache

from sqlalchemy import (
    BindParameter,
    CompoundSelect,
    bindparam,
    literal_column,
    null,
    select,
    union_all,
    update,
)

from ...access import Principal
from ...database import read_rows, utcnow, write_transaction
from ...errors import Invalid, NotFound
from ...extensions import db
from ...models import Account, ApiToken, account_admin_companies, account_reporting_companies
from ..history import audit
from . import accounts

TOKEN_PREFIX = "tad_"  # noqa: S105 - a marker, not a secret
# Recording every use would turn each API read into a write; a minute's precision is enough.
LAST_USED_PRECISION = timedelta(minutes=1)


def hash_token(raw: str) -> str:
    """What is stored of a token, and what it is looked up by (also the rate-limit bucket)."""
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def create(principal: Principal, username: str, label: str = "") -> str:
    """Create an API token for `username` (System-Admin, or the account itself) and return it;
    it is shown this once, and only its SHA-256 is kept. Audited."""
    principal.require_manage_account("create tokens for another account", username=username)
    if not isinstance(label, str) or len(label) > 100:
        raise Invalid(
            "A token label is at most 100 characters.", {"label": "at most 100 characters"}
        )
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with write_transaction() as session:
        account = accounts.get_for_update(session, username)
        if not account.active:
            raise Invalid(f"Account '{username}' is disabled.", {"username": "disabled"})
        token = ApiToken(account=account, label=label, token_hash=hash_token(raw), prefix=raw[:10])
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


def of_account(principal: Principal, username: str) -> list[ApiToken]:
    """An account's API tokens, newest first (System-Admin, or the account itself)."""
    principal.require_manage_account("see another account's tokens", username=username)
    query = (
        select(ApiToken)
        .join(ApiToken.account)
        .where(Account.username == username)
        .order_by(ApiToken.created_at.desc(), ApiToken.id.desc())
    )
    return list(db.session.scalars(query))


def get(principal: Principal, token_id: int) -> ApiToken:
    """One token (System-Admin, or its owner); NotFound otherwise, so ids do not leak."""
    # An id no integer column can hold is simply not found (PostgreSQL would refuse the query).
    token = db.session.get(ApiToken, token_id) if 0 < token_id < 2**31 else None
    if token is None or not principal.may_manage_account(account_id=token.account_id):
        raise NotFound("No such token.")
    return token


def revoke(principal: Principal, token_id: int) -> None:
    """Revoke a token (System-Admin, or its owner); refused from the next request on."""
    with write_transaction() as session:
        token = (
            session.get(ApiToken, token_id, with_for_update=True) if 0 < token_id < 2**31 else None
        )
        if token is None or not principal.may_manage_account(account_id=token.account_id):
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


def authenticate(raw: str, via: str = "api", digest: str | None = None) -> Principal | None:
    """The Principal of the active account owning this unrevoked token, or None. Records the use
    (to the minute). `digest`: hash_token(raw), when the caller already has it.

    One query per request, and nothing kept between requests: the token, its account and both
    grant lists in one statement (_token_query), so a revocation, a disabled account or changed
    grants count from the very next request."""
    if not raw.startswith(TOKEN_PREFIX) or len(raw) > 100:
        return None
    if digest is None:
        digest = hash_token(raw)
    # On the request's read connection, straight to the driver (database.read_rows): the
    # columns by position, as _token_query lists them.
    rows = read_rows(_token_query(), {"digest": digest})
    head = next((r for r in rows if r[0] == "token"), None)
    if head is None:  # unknown or revoked token, or disabled account
        return None
    _, _, token_id, token_hash, last_used_at, account_id, username, system_admin, billing = head
    if not hmac.compare_digest(token_hash, digest):  # pragma: no cover - defence in depth
        return None
    grants: dict[str, set[str]] = {"admin": set(), "report": set()}
    for kind, company_id, *_ in rows:
        if kind != "token":
            grants[kind].add(company_id)
    now = utcnow()
    if last_used_at is None or now - last_used_at >= LAST_USED_PRECISION:
        with write_transaction(fence=False) as session:
            session.execute(
                update(ApiToken).where(ApiToken.id == token_id).values(last_used_at=now)
            )
    return Principal(
        username=username,
        via=via,
        account_id=account_id,
        system_admin=system_admin,
        admin_of=frozenset(grants["admin"]),
        billing_summary=billing,
        reporting_for=frozenset(grants["report"]),
    )


@cache
def _token_query() -> CompoundSelect:
    """authenticate's statement: a UNION ALL of the token's row (kind 'token', with its account,
    only if unrevoked and active) and one row per grant of its account (kind 'admin' or
    'report'). Each branch is an index lookup (the token's hash, the account's key, the grant
    tables' keys), so the cost does not grow with the number of accounts or grants."""
    token, account = ApiToken.__table__, Account.__table__
    digest: BindParameter[str] = bindparam("digest")
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
