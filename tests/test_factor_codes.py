"""Checking a typed second-factor code (services/identity/factors.check_code): authenticator-app
codes computed independently with pyotp, accepted once, within one step of drift; recovery
codes single use; every refusal audited (docs/security.md#second-factors)."""

from __future__ import annotations

import time

import pyotp
from sqlalchemy import select

from webapp.database import write_transaction
from webapp.extensions import db
from webapp.models import Account, AuditEntry, RecoveryCode
from webapp.services import sealing
from webapp.services.identity import factors


def _with_totp(app, factory, username: str = "alice") -> tuple[Account, str]:
    factory.account(username)
    secret = pyotp.random_base32()
    with write_transaction() as session:
        row = session.scalars(select(Account).where(Account.username == username)).one()
        row.totp_secret = sealing.seal(secret)
    account = db.session.scalars(select(Account).where(Account.username == username)).one()
    return account, secret


def _actions(username: str) -> list[str]:
    return list(
        db.session.scalars(
            select(AuditEntry.action)
            .where(AuditEntry.target == f"account {username}")
            .order_by(AuditEntry.id)
        )
    )


def test_a_code_is_accepted_once_and_no_older_one_after_it(app, factory):
    account, secret = _with_totp(app, factory)
    totp = pyotp.TOTP(secret)
    now = time.time()
    previous = totp.at(now - 30)
    current = totp.now()
    assert factors.has_second_factor(account)
    assert factors.check_code(account, current[:3] + " " + current[3:]) == "totp"
    db.session.refresh(account)
    assert factors.check_code(account, current) is None  # the same code again
    if previous != current:
        assert factors.check_code(account, previous) is None  # an older step after a newer one
    assert _actions("alice")[-1] == "account.second-factor-failed"


def test_one_step_of_drift_either_way_and_no_more(app, factory):
    _, secret = _with_totp(app, factory)
    now = time.time()
    totp = pyotp.TOTP(secret)
    current = int(now // 30)
    for offset in (-1, 0, 1):
        assert factors.totp_step(secret, totp.at(now + 30 * offset), now) == current + offset
    for offset in (-3, -2, 2, 3):
        code = totp.at(now + 30 * offset)
        if all(code != totp.at(now + 30 * near) for near in (-1, 0, 1)):
            assert factors.totp_step(secret, code, now) is None
    assert factors.totp_step(secret, "12345", now) is None
    assert factors.totp_step(secret, "abcdef", now) is None


def test_a_recovery_code_is_used_once(app, factory):
    account, _ = _with_totp(app, factory)
    with write_transaction() as session:
        session.add(
            RecoveryCode(account_id=account.id, digest=factors.recovery_digest("ab12-cd34e"))
        )
    assert factors.check_code(account, "AB12CD34E") == "recovery"
    assert factors.check_code(account, "ab12-cd34e") is None
    assert _actions("alice")[-2:] == ["account.recovery-code-used", "account.second-factor-failed"]


def test_without_a_factor_nothing_is_accepted(app, factory):
    factory.account("bob")
    bob = db.session.scalars(select(Account).where(Account.username == "bob")).one()
    assert not factors.has_second_factor(bob)
    assert factors.check_code(bob, "123456") is None
    assert factors.check_code(bob, "") is None
