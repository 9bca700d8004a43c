"""The sign-in rows (docs/security.md), on a scratch copy of the data set:

- **A signed-in page under MFA_REQUIRED**: the p50 of GET /account/tokens for an account whose
  only second factor is a passkey (the gate's check then costs a query) with
  `MFA_REQUIRED=all`, against the same requests with `none`, measured in the same run. What
  every page of a covered account pays; target: at most 1.15x.
- **The second step**: a code of the authenticator app checked and recorded
  (factors.check_code: unseal the key, compute the codes of three steps, lock the account,
  store the step) per code, p50, against checking the password
  (signin.check_password with the production hash, scrypt), which the first step pays anyway.
  Target: at most 50 ms.

Both are lookups by key whatever the data set's size, in-process through the app (no HTTP:
the bench's HTTP rows measure that part).
"""

from __future__ import annotations

import re
import statistics
import time

import pyotp

from .imports import _copy, _drop
from .table import Result

USERNAME, PASSWORD = "bench-signin", "bench-signin-password"


def _median(times: list[float]) -> float:
    return statistics.median(times)


def _signed_in_with_a_passkey(app):
    """A test client signed in as the bench account, which then gets a passkey as its only
    second factor (signing in after that would take the passkey's ceremony)."""
    from sqlalchemy import delete, select

    from webapp.access import Principal
    from webapp.database import write_transaction
    from webapp.models import Account, Passkey
    from webapp.services.identity import accounts

    with app.app_context():
        with write_transaction() as session:
            session.execute(delete(Account).where(Account.username == USERNAME))
        accounts.create(Principal.cli("bench"), USERNAME, PASSWORD, system_admin=True)
    client = app.test_client()
    form = client.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', form)
    assert token, "no CSRF token on /login"
    answer = client.post(
        "/login", data={"csrf_token": token.group(1), "username": USERNAME, "password": PASSWORD}
    )
    assert answer.status_code == 302 and answer.headers["Location"] == "/", answer.status_code
    with app.app_context(), write_transaction() as session:
        account = session.scalars(select(Account).where(Account.username == USERNAME)).one()
        session.add(
            Passkey(account_id=account.id, credential_id="bench", public_key=b"-", name="Key")
        )
    return client


def _page_times(app, client, runs: int) -> tuple[list[float], list[float]]:
    """GET /account/tokens `runs` times under each of MFA_REQUIRED=none and =all, in turns (so
    neither gets the warmer caches): (times under none, times under all)."""
    times: dict[str, list[float]] = {"none": [], "all": []}
    for _ in range(runs):
        for setting, taken in times.items():
            app.config["MFA_REQUIRED"] = setting
            started = time.perf_counter()
            response = client.get("/account/tokens")
            taken.append(time.perf_counter() - started)
            assert response.status_code == 200, (setting, response.status_code)
    return times["none"], times["all"]


def _code_times(app, runs: int) -> tuple[list[float], list[float]]:
    """(check_code per code, check_password per password), `runs` of each."""
    from sqlalchemy import select

    from webapp.database import write_transaction
    from webapp.extensions import db
    from webapp.models import Account
    from webapp.services import sealing
    from webapp.services.identity import factors, signin

    app.config["PASSWORD_HASH_METHOD"] = "scrypt"
    codes, passwords = [], []
    secret = pyotp.random_base32()
    totp = pyotp.TOTP(secret)
    with app.app_context():
        with write_transaction() as session:
            account = session.scalars(select(Account).where(Account.username == USERNAME)).one()
            account.password_hash = signin.hash_password(PASSWORD)
            account.totp_secret = sealing.seal(secret)
        for run in range(runs):
            with write_transaction() as session:  # each run a step the account has not used
                row = session.scalars(select(Account).where(Account.username == USERNAME)).one()
                row.totp_last_step = None
            account = db.session.scalars(select(Account).where(Account.username == USERNAME)).one()
            code = totp.now()
            started = time.perf_counter()
            assert factors.check_code(account, code) == "totp", run
            codes.append(time.perf_counter() - started)
            db.session.remove()
            started = time.perf_counter()
            assert signin.check_password(USERNAME, PASSWORD) is not None
            passwords.append(time.perf_counter() - started)
            db.session.remove()
    return codes, passwords


def signin_scenarios(url: str, label: str, quick: bool = False) -> list[Result]:
    """The rows of the module's text, on a scratch copy of the data set at `url`."""
    from webapp import create_app

    copy = _copy(url, "signin")
    runs = 20 if quick else 300
    try:
        config = {"SQLALCHEMY_DATABASE_URI": copy, "SECRET_KEY": "x" * 40, "LOG_LEVEL": "WARNING"}
        app = create_app(config)
        app.config.update(RATELIMIT_ENABLED=False, PASSWORD_HASH_METHOD="pbkdf2:sha256:1000")
        client = _signed_in_with_a_passkey(app)
        _page_times(app, client, 5)  # warm-up
        none, covered = _page_times(app, client, runs)
        codes, passwords = _code_times(app, max(5, runs // 20))
        with app.app_context():
            from webapp.extensions import db

            db.engine.dispose()  # the scratch copy is dropped next: no connection may stay on it
    finally:
        _drop(copy)
    return [
        Result(
            label,
            "signed-in page under MFA_REQUIRED=all (a passkey-only account): p50",
            _median(covered),
            _median(none),
            "the same page with MFA_REQUIRED=none",
            "s",
            target=1.15,
        ),
        Result(
            label,
            "second step: an authenticator-app code checked and recorded, p50",
            _median(codes),
            _median(passwords),
            "the first step's password check (scrypt)",
            "s",
            absolute_target=0.05,
        ),
    ]
