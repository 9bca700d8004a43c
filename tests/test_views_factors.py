"""The account's own second factors through its pages (webapp/views/factors.py) and the second
step of signing in (views/auth.py, /login/verify), with codes computed by pyotp from the secret
the page shows (docs/security.md#second-factors)."""

from __future__ import annotations

import re
import time

import pyotp
from bs4 import BeautifulSoup
from sqlalchemy import select

from webapp.extensions import db
from webapp.models import Account, AuditEntry, Passkey, RecoveryCode
from webapp.services import sealing
from webapp.services.identity import factors

from .factories import csrf_from

PASSWORD = "correct horse battery"


def _account(username: str) -> Account:
    db.session.rollback()
    return db.session.scalars(select(Account).where(Account.username == username)).one()


def _audits(username: str) -> list[tuple[str, str | None]]:
    db.session.rollback()
    rows = db.session.execute(
        select(AuditEntry.action, AuditEntry.detail)
        .where(AuditEntry.target == f"account {username}")
        .order_by(AuditEntry.id)
    )
    return [tuple(r) for r in rows]


def _secret_on(html: str) -> str:
    soup = BeautifulSoup(html, "html.parser")
    return soup.select_one("#totp-secret").get_text().replace(" ", "")


def _codes_on(html: str) -> list[str]:
    soup = BeautifulSoup(html, "html.parser")
    return [li.get_text(strip=True) for li in soup.select("ol.recovery-codes li")]


def _next_code(secret: str, account: Account) -> str:
    """A code of a step after the last one the account used (waiting out the step if need be:
    a code is accepted once)."""
    totp = pyotp.TOTP(secret)
    last = account.totp_last_step or 0
    step = int(time.time() // 30)
    if step <= last:  # the current step was used: the next one is within the drift
        step = last + 1
    return totp.at(step * 30)


def enrol(browser) -> tuple[str, list[str]]:
    """Set up an authenticator app through the page: (its secret, the recovery codes shown)."""
    page = browser.get("/account/security/totp")
    secret = _secret_on(page.get_data(as_text=True))
    answer = browser.post(
        "/account/security/totp",
        data={"csrf_token": browser.csrf, "code": pyotp.TOTP(secret).now()},
    )
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return secret, _codes_on(answer.get_data(as_text=True))


def second_step(client, code: str):
    """POST a code on the second-step page, with that page's CSRF token."""
    token = csrf_from(client.get("/login/verify").get_data(as_text=True))
    return client.post("/login/verify", data={"csrf_token": token, "code": code})


def test_enrolment_page_shows_the_qr_code_and_the_secret_and_stores_nothing(factory):
    factory.account("alice")
    browser = factory.browser("alice")
    page = browser.get("/account/security/totp")
    assert page.status_code == 200
    assert page.headers["Cache-Control"] == "no-store"
    soup = BeautifulSoup(page.get_data(as_text=True), "html.parser")
    svg = soup.select_one(".qr-box svg")
    assert svg is not None and svg["role"] == "img" and svg.find("path") is not None
    # Drawn in the page: no image to fetch, no inline script (the CSP stays as it is).
    assert svg.find("image") is None and "data:" not in str(svg)
    assert all(script.get("src") for script in soup.find_all("script"))
    shown = soup.select_one("#totp-secret").get_text()
    assert re.fullmatch(r"([A-Z2-7]{4} )*[A-Z2-7]{1,4}", shown)
    secret = shown.replace(" ", "")
    assert len(secret) == 32
    # A reload shows the same secret (it waits in the session for its code).
    assert _secret_on(browser.get("/account/security/totp").get_data(as_text=True)) == secret
    assert _account("alice").totp_secret is None
    # The provisioning address behind the QR code names the issuer and the account.
    uri = factors.provisioning_uri(_account("alice"), secret)
    assert uri.startswith("otpauth://totp/Telephony%20admin:alice?secret=" + secret)


def test_a_wrong_code_stores_nothing_and_says_so(factory):
    factory.account("alice")
    browser = factory.browser("alice")
    secret = _secret_on(browser.get("/account/security/totp").get_data(as_text=True))
    wrong = f"{(int(pyotp.TOTP(secret).now()) + 1) % 1_000_000:06d}"
    for code in (wrong, "", "12345a"):
        answer = browser.post(
            "/account/security/totp", data={"csrf_token": browser.csrf, "code": code}
        )
        assert answer.status_code == 400
        soup = BeautifulSoup(answer.get_data(as_text=True), "html.parser")
        assert soup.select_one("#code-error") is not None
        assert _secret_on(answer.get_data(as_text=True)) == secret  # the same one, still
    account = _account("alice")
    assert account.totp_secret is None and account.totp_added_at is None
    assert db.session.scalars(select(RecoveryCode)).all() == []
    assert not [a for a, _ in _audits("alice") if a.startswith("account.factor")]


def test_a_right_code_stores_the_sealed_secret_and_shows_ten_codes_once(factory):
    factory.account("alice")
    browser = factory.browser("alice")
    secret, codes = enrol(browser)
    account = _account("alice")
    assert sealing.unseal(account.totp_secret) == secret
    assert secret not in account.totp_secret  # sealed, not as it is
    assert account.totp_added_at is not None
    assert int(time.time() // 30) - account.totp_last_step in (0, 1)
    assert len(codes) == 10 and len(set(codes)) == 10
    assert all(re.fullmatch(r"[a-z2-7]{5}-[a-z2-7]{5}", c) for c in codes)
    stored = db.session.scalars(select(RecoveryCode.digest)).all()
    assert sorted(stored) == sorted(factors.recovery_digest(c) for c in codes)
    assert ("account.factor-added", "authenticator app") in _audits("alice")
    assert ("account.factor-added", "recovery codes generated") in _audits("alice")
    # The page now says the app is set up; the codes are not on it any more.
    page = browser.get("/account/security/totp").get_data(as_text=True)
    assert "Set up since" in page and codes[0] not in page
    # A second enrolment is refused: replacing an app is removing it first.
    again = browser.post("/account/security/totp", data={"csrf_token": browser.csrf, "code": "1"})
    assert again.status_code == 302
    assert sealing.unseal(_account("alice").totp_secret) == secret


def test_the_code_used_to_enrol_does_not_sign_in(factory):
    factory.account("alice")
    secret, _ = enrol(factory.browser("alice"))
    used = _account("alice").totp_last_step
    answer = second_step(factory.browser("alice"), pyotp.TOTP(secret).at(used * 30))
    assert answer.status_code == 400
    assert _account("alice").totp_last_step == used


def test_two_step_sign_in_and_no_session_before_the_second_step(factory):
    factory.account("alice")
    secret, _ = enrol(factory.browser("alice"))
    pending = factory.browser("alice")  # the password step only
    # Not signed in yet: a page sends it to /login, the API refuses the cookie.
    tokens = pending.get("/account/tokens")
    assert tokens.status_code == 302 and "/login" in tokens.headers["Location"]
    page = pending.get("/login/verify")
    assert page.status_code == 200
    soup = BeautifulSoup(page.get_data(as_text=True), "html.parser")
    assert soup.find("label", string="Code") is not None
    assert soup.find("a", string=re.compile("back to sign in")) is not None
    answer = second_step(pending, _next_code(secret, _account("alice")))
    assert answer.status_code == 302
    assert pending.get("/account/tokens").status_code == 200
    assert ("account.sign-in", "signed in with password and authenticator app from 127.0.0.1") in (
        _audits("alice")
    )
    # The pending state is gone: the second step without a password again goes to /login.
    again = pending.get("/login/verify")
    assert again.status_code == 302


def test_second_step_without_a_password_goes_to_login(client):
    answer = client.get("/login/verify")
    assert answer.status_code == 302 and answer.headers["Location"].endswith("/login")
    page = client.get("/login").get_data(as_text=True)
    assert "Sign in with your username and password first." in page


def test_a_wrong_code_is_a_400_counted_and_audited_and_the_eleventh_is_429(factory):
    factory.account("alice")
    secret, _ = enrol(factory.browser("alice"))
    pending = factory.browser("alice")
    wrong = f"{(int(pyotp.TOTP(secret).now()) + 500_000) % 1_000_000:06d}"
    for _ in range(10):
        answer = second_step(pending, wrong)
        assert answer.status_code == 400
        assert "That code is not right" in answer.get_data(as_text=True)
    assert [a for a, _ in _audits("alice")].count("account.second-factor-failed") == 10
    # The limit (SIGN_IN_LIMIT, 10 per 15 minutes) is used up: even the right code is refused.
    blocked = second_step(pending, _next_code(secret, _account("alice")))
    assert blocked.status_code == 429
    assert pending.get("/account/tokens").status_code == 302


def test_a_recovery_code_signs_in_once_and_says_how_many_are_left(factory):
    factory.account("alice")
    _, codes = enrol(factory.browser("alice"))
    pending = factory.browser("alice")
    answer = second_step(pending, codes[3].upper().replace("-", " "))
    assert answer.status_code == 302
    page = pending.get("/account/tokens").get_data(as_text=True)
    assert "9 recovery codes left" in page
    assert ("account.recovery-code-used", "9 recovery codes left") in _audits("alice")
    again = factory.browser("alice")
    assert second_step(again, codes[3]).status_code == 400


def test_regenerating_voids_the_old_codes_and_shows_new_ones_once(factory):
    factory.account("alice")
    browser = factory.browser("alice")
    secret, old = enrol(browser)
    signed_in = factory.browser("alice")
    second_step(signed_in, _next_code(secret, _account("alice")))
    page = signed_in.get("/account/security/totp").get_data(as_text=True)
    assert "10 of 10 recovery codes left" in page
    form = BeautifulSoup(page, "html.parser").select_one("#recovery-codes form")
    once_key = form.find("input", attrs={"name": "once"})["value"]
    data = {"csrf_token": csrf_from(page), "once": once_key}
    answer = signed_in.post("/account/security/recovery-codes", data=data)
    assert answer.status_code == 200 and answer.headers["Cache-Control"] == "no-store"
    new = _codes_on(answer.get_data(as_text=True))
    assert len(new) == 10 and not set(new) & set(old)
    # A reload of that answer makes and shows nothing new.
    reload = signed_in.post("/account/security/recovery-codes", data=data)
    assert reload.status_code == 303
    assert db.session.scalars(select(RecoveryCode.digest)).all() != []
    assert sorted(db.session.scalars(select(RecoveryCode.digest)).all()) == sorted(
        factors.recovery_digest(c) for c in new
    )
    assert ("account.factor-added", "recovery codes regenerated") in _audits("alice")
    assert second_step(factory.browser("alice"), old[0]).status_code == 400
    assert second_step(factory.browser("alice"), new[0]).status_code == 302


def test_regenerating_without_a_factor_is_refused(factory):
    factory.account("alice")
    browser = factory.browser("alice")
    answer = browser.post("/account/security/recovery-codes", data={"csrf_token": browser.csrf})
    assert answer.status_code == 302
    assert db.session.scalars(select(RecoveryCode)).all() == []


def test_removing_the_app_signs_in_with_the_password_alone_and_drops_the_codes(factory):
    factory.account("alice")
    secret, _ = enrol(factory.browser("alice"))
    signed_in = factory.browser("alice")
    second_step(signed_in, _next_code(secret, _account("alice")))
    page = signed_in.get("/account/security/totp").get_data(as_text=True)
    answer = signed_in.post("/account/security/totp/remove", data={"csrf_token": csrf_from(page)})
    assert answer.status_code == 302
    account = _account("alice")
    assert account.totp_secret is None and account.totp_added_at is None
    assert db.session.scalars(select(RecoveryCode)).all() == []
    assert ("account.factor-removed", "authenticator app") in _audits("alice")
    # Signing in again takes the password alone (Factory.browser's CSRF page is then reached).
    assert factory.browser("alice").get("/account/tokens").status_code == 200


def test_the_second_step_offers_the_code_field_only_with_an_app_or_codes(factory):
    """An account whose only factor is a passkey and whose recovery codes are all used has
    nothing to type: the page offers its passkeys alone."""
    factory.account("alice")
    account_id = _account("alice").id
    db.session.add(
        Passkey(account_id=account_id, credential_id="x", public_key=b"k", sign_count=0, name="K")
    )
    db.session.commit()
    page = factory.browser("alice").get("/login/verify").get_data(as_text=True)
    assert 'name="code"' not in page and "back to sign in" in page
    db.session.add(RecoveryCode(account_id=account_id, digest=factors.recovery_digest("a")))
    db.session.commit()
    page = factory.browser("alice").get("/login/verify").get_data(as_text=True)
    assert 'name="code"' in page


def test_factor_changes_are_only_ever_the_signed_in_accounts_own(factory):
    factory.account("alice")
    factory.account("bob")
    secret, _ = enrol(factory.browser("alice"))
    bob = factory.browser("bob")
    page = bob.get("/account/security/totp")
    assert _secret_on(page.get_data(as_text=True)) != secret  # bob's own new secret
    bob.post("/account/security/totp/remove", data={"csrf_token": bob.csrf})
    assert sealing.unseal(_account("alice").totp_secret) == secret


def test_the_pages_have_exactly_one_h1(factory):
    """The second step, the recovery codes shown once and the page of an app set up (the
    enrolment page is in tests/pages.py)."""

    def h1s(html: str) -> list[str]:
        soup = BeautifulSoup(html, "html.parser")
        return [h.get_text(" ", strip=True) for h in soup.find_all("h1")]

    factory.account("alice")
    browser = factory.browser("alice")
    page = browser.get("/account/security/totp")
    secret = _secret_on(page.get_data(as_text=True))
    answer = browser.post(
        "/account/security/totp",
        data={"csrf_token": browser.csrf, "code": pyotp.TOTP(secret).now()},
    )
    assert h1s(answer.get_data(as_text=True)) == ["Authenticator app added"]
    assert h1s(browser.get("/account/security/totp").get_data(as_text=True)) == [
        "Authenticator app"
    ]
    pending = factory.browser("alice")
    assert h1s(pending.get("/login/verify").get_data(as_text=True)) == ["Second step"]
    assert h1s(second_step(pending, "000000x").get_data(as_text=True)) == ["Second step"]
