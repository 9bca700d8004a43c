"""Recovery by an admin (webapp/services/identity/reset.py, docs/security.md#recovery-by-an-admin):
a System-Admin removes another account's second factors, on the accounts list's page and with
`flask accounts reset-mfa USERNAME`; nobody else may."""

from __future__ import annotations

import pyotp
import pytest
from bs4 import BeautifulSoup
from sqlalchemy import func, select

from webapp.access import Principal
from webapp.database import utcnow, write_transaction
from webapp.errors import Forbidden, Invalid, NotFound
from webapp.extensions import db
from webapp.models import Account, AccountSession, AuditEntry, Passkey, RecoveryCode
from webapp.services import sealing
from webapp.services.identity import factors, reset

from .factories import OPERATOR, snapshot


def give_factors(username: str) -> None:
    """An authenticator app, two passkeys and 10 recovery codes, made directly (adding them is
    the factor pages')."""
    with write_transaction() as session:
        account = session.scalars(select(Account).where(Account.username == username)).one()
        account.totp_secret = sealing.seal(pyotp.random_base32())
        account.totp_added_at = utcnow()
        account.totp_last_step = 1
        for n in range(2):
            session.add(
                Passkey(
                    account_id=account.id,
                    credential_id=f"{username}-key-{n}",
                    public_key=b"k",
                    name=f"Key {n}",
                )
            )
        for n in range(10):
            session.add(RecoveryCode(account_id=account.id, digest=factors.recovery_digest(str(n))))


def factors_of(username: str) -> tuple[bool, int, int]:
    db.session.rollback()
    account = db.session.scalars(select(Account).where(Account.username == username)).one()

    def count(model) -> int:
        query = select(func.count()).select_from(model).where(model.account_id == account.id)
        return db.session.scalar(query)

    return account.totp_secret is not None, count(Passkey), count(RecoveryCode)


def open_sessions(username: str) -> int:
    db.session.rollback()
    return db.session.scalar(
        select(func.count())
        .select_from(AccountSession)
        .join(Account)
        .where(Account.username == username, AccountSession.ended_at.is_(None))
    )


def audits() -> list[AuditEntry]:
    db.session.rollback()
    query = select(AuditEntry).where(AuditEntry.action == "account.mfa-reset")
    return list(db.session.scalars(query))


def test_a_system_admin_resets_another_accounts_factors(world):
    browser = world.factory.browser("cadmin")  # signed in before it had factors
    give_factors("cadmin")
    root = Principal.from_account(
        db.session.scalars(select(Account).where(Account.username == "root")).one(), "ui"
    )
    removed = reset.reset_factors(root, "cadmin")
    assert removed == "authenticator app, 2 passkeys, 10 recovery codes"
    assert factors_of("cadmin") == (False, 0, 0)
    assert browser.get("/account/tokens").status_code == 302  # its sessions ended
    assert open_sessions("cadmin") == 0
    [entry] = audits()
    assert (entry.actor, entry.target) == ("root", "account cadmin")
    assert entry.detail == f"removed: {removed}; sessions ended"


@pytest.mark.parametrize("username", ["cadmin", "summary", "reporter", "nobody"])
def test_nobody_but_a_system_admin_may_reset(world, username):
    give_factors("cadmin2")
    who = Principal.from_account(
        db.session.scalars(select(Account).where(Account.username == username)).one(), "ui"
    )
    with pytest.raises(Forbidden):
        reset.reset_factors(who, "cadmin2")
    assert factors_of("cadmin2") == (True, 2, 10)
    assert audits() == []


def test_a_company_admin_gets_403_on_the_page_and_nothing_changes(world):
    give_factors("cadmin2")
    browser = world.factory.browser("cadmin")
    before = snapshot()
    assert browser.get("/admin/accounts/cadmin2/reset-mfa").status_code == 403
    response = browser.post("/admin/accounts/cadmin2/reset-mfa", data={"csrf_token": browser.csrf})
    assert response.status_code == 403
    assert factors_of("cadmin2") == (True, 2, 10)
    assert snapshot() == before


def test_unknown_and_own_accounts_are_refused(world):
    with pytest.raises(NotFound):
        reset.reset_factors(OPERATOR, "nosuchone")
    root = Principal.from_account(
        db.session.scalars(select(Account).where(Account.username == "root")).one(), "ui"
    )
    give_factors("root")
    with pytest.raises(Invalid):
        reset.reset_factors(root, "root")
    assert factors_of("root") == (True, 2, 10)


def test_the_page_says_what_goes_and_the_button_resets(world):
    give_factors("cadmin")
    browser = world.factory.browser("root")
    listing = BeautifulSoup(browser.get("/admin/accounts").get_data(as_text=True), "html.parser")
    link = listing.find("a", href=lambda h: h and h.startswith("/admin/accounts/cadmin/reset-mfa"))
    assert link is not None
    assert listing.find("a", href=lambda h: h and "/root/reset-mfa" in h) is None  # not one's own
    page = browser.get(link["href"])
    assert page.status_code == 200
    html = BeautifulSoup(page.get_data(as_text=True), "html.parser")
    assert html.h1.get_text(strip=True) == "Reset the second factors of cadmin?"
    items = [li.get_text(strip=True) for li in html.select("main li")]
    assert items == ["authenticator app: yes", "passkeys: 2", "recovery codes: 10"]
    assert factors_of("cadmin") == (True, 2, 10)  # showing the page changes nothing

    response = browser.post(link["href"], data={"csrf_token": browser.csrf})
    assert response.status_code == 302
    assert factors_of("cadmin") == (False, 0, 0)
    flash = BeautifulSoup(
        browser.get(response.headers["Location"]).get_data(as_text=True), "html.parser"
    ).select_one("#flashes .flash")
    assert "Second factors of cadmin reset" in flash.get_text()
    assert len(audits()) == 1


def test_the_command_resets_and_an_unknown_account_is_one_line(world, flask):
    give_factors("cadmin")
    result = flask("accounts", "reset-mfa", "cadmin")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "Reset the second factors of cadmin (removed: authenticator app, 2 passkeys, "
        "10 recovery codes); its sessions ended."
    )
    assert factors_of("cadmin") == (False, 0, 0)
    [entry] = audits()
    assert entry.actor.startswith("cli:") and entry.via == "cli"

    unknown = flask("accounts", "reset-mfa", "nosuchone")
    assert unknown.returncode == 1
    assert "Traceback" not in unknown.stderr
    lines = unknown.stderr.strip().splitlines()
    assert len(lines) == 1 and "nosuchone" in lines[0], unknown.stderr
    assert len(audits()) == 1
