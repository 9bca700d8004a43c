"""Sign-in sessions end when people say so (SECURITY.md#sessions): a copy of a session
cookie is refused after signing out, after the idle limit and after the absolute limit, on the
pages and on the API (cookie + X-CSRFToken), while other sessions of the account go on.

Time is moved by setting the session row's timestamps, never by sleeping. A "replay" is a
fresh test client given nothing but the saved cookie, as an attacker who copied it would be.
"""

from __future__ import annotations

import hashlib
import itertools
from datetime import timedelta

import pytest
from flask_login.utils import encode_cookie
from sqlalchemy import event, select, update

from webapp import create_app
from webapp.config import ConfigError
from webapp.database import utcnow
from webapp.extensions import db
from webapp.models import AccountSession
from webapp.services.identity import accounts, signin

from .factories import OPERATOR, snapshot

READ = {"type": "ddi", "scope": {"company": "acme"}}
NUMBERS = itertools.count(2071234567)  # a new DDI number for each write


@pytest.fixture
def world_accounts() -> dict[str, str]:
    return {"root": "root"}


# --- helpers -------------------------------------------------------------------------------------
def cookie_of(client) -> str:
    name = client.application.config["SESSION_COOKIE_NAME"]
    cookie = client.get_cookie(name)
    assert cookie is not None, "no session cookie"
    return cookie.value


def replay(app, cookie: str):
    """A new client holding nothing but `cookie` as its session cookie."""
    client = app.test_client()
    client.set_cookie(app.config["SESSION_COOKIE_NAME"], cookie)
    return client


def row_id(client) -> str:
    """The account_sessions id of the session `client` is signed in with."""
    with client.session_transaction() as session:
        key = session["_user_id"].split(":")[2]
    return hashlib.sha256(key.encode()).hexdigest()


def row(client_or_id) -> AccountSession:
    """The session row of a signed-in client, or of a row id."""
    rid = client_or_id if isinstance(client_or_id, str) else row_id(client_or_id)
    db.session.rollback()
    found = db.session.get(AccountSession, rid, populate_existing=True)
    assert found is not None
    return found


def set_row(client, **values) -> None:
    db.session.execute(
        update(AccountSession).where(AccountSession.id == row_id(client)).values(**values)
    )
    db.session.commit()


def limits(app) -> tuple[timedelta, timedelta]:
    return (
        timedelta(minutes=app.config["SESSION_IDLE_MINUTES"]),
        timedelta(hours=app.config["SESSION_MAX_HOURS"]),
    )


def page_works(client) -> bool:
    """GET /ddis: 200 signed in; a redirect to the sign-in page when the session is refused."""
    response = client.get("/ddis")
    if response.status_code == 302:
        assert response.headers["Location"].startswith("/login")
        return False
    assert response.status_code == 200, response.status_code
    return True


def api_read(client, csrf: str):
    return client.post("/rest/ops/read/", json=READ, headers={"X-CSRFToken": csrf})


def api_works(client, csrf: str) -> bool:
    """A cookie-authenticated API read and write: 200 both, or 401 both and nothing written."""
    before = snapshot()
    read = api_read(client, csrf)
    create = client.post(
        "/rest/ops/create/",
        json={
            "type": "ddi",
            "values": {
                "dialcode": "44",
                "number": str(next(NUMBERS)),
                "virt_exten": "100",
                "company": "acme",
            },
        },
        headers={"X-CSRFToken": csrf},
    )
    if read.status_code == 401:
        assert create.status_code == 401
        for answer in (read, create):
            assert answer.json["error"]["code"] == "unauthorized"
            assert "Location" not in answer.headers
        assert snapshot() == before
        return False
    assert (read.status_code, create.status_code) == (200, 200), (read.json, create.json)
    return True


def log_out(client) -> None:
    response = client.post("/logout", data={"csrf_token": client.csrf})
    assert response.status_code == 302 and response.headers["Location"] == "/login"


# --- signing out -------------------------------------------------------------------------------
def test_a_cookie_saved_before_sign_out_is_refused_afterwards(app, world):
    """The report's case: with only a cookie saved before POST /logout, GET /ddis answered 200
    and a POST /rest/ops/create with the page's CSRF token created a DDI."""
    browser = world.factory.browser("root")
    saved, csrf, rid = cookie_of(browser), browser.csrf, row_id(browser)
    assert page_works(replay(app, saved)) and api_works(replay(app, saved), csrf)

    log_out(browser)

    assert row(rid).ended_at is not None
    assert not page_works(replay(app, saved))
    assert not api_works(replay(app, saved), csrf)
    assert not page_works(browser)  # and the browser that signed out is out, of course


def test_signing_out_leaves_the_accounts_other_sessions_open(app, world):
    laptop = world.factory.browser("root")
    phone = world.factory.browser("root")
    assert row_id(laptop) != row_id(phone)

    log_out(laptop)

    assert page_works(phone) and api_works(phone, phone.csrf)
    assert row(phone).ended_at is None
    assert not page_works(laptop)


def test_a_new_sign_in_after_signing_out_works(app, world):
    browser = world.factory.browser("root")
    log_out(browser)
    again = world.factory.browser("root")
    assert page_works(again) and api_works(again, again.csrf)


def test_sign_out_of_an_ended_session_is_just_the_sign_in_page(app, world):
    browser = world.factory.browser("root")
    saved = cookie_of(browser)
    log_out(browser)
    stale = replay(app, saved)
    # login_required answers first: the old cookie is nobody, sent to sign in.
    response = stale.post("/logout", data={"csrf_token": browser.csrf})
    assert response.status_code == 302 and response.headers["Location"].startswith("/login")


# --- the idle and absolute limits ----------------------------------------------------------------
def test_a_session_idle_past_the_limit_is_refused(app, world):
    browser = world.factory.browser("root")
    saved, csrf = cookie_of(browser), browser.csrf
    idle, _ = limits(app)

    set_row(browser, last_seen_at=utcnow() - idle + timedelta(seconds=30))
    assert page_works(replay(app, saved))  # within the limit (and this use counts)

    set_row(browser, last_seen_at=utcnow() - idle - timedelta(seconds=1))
    assert not page_works(replay(app, saved))
    assert not api_works(replay(app, saved), csrf)
    assert not page_works(browser)


def test_a_session_past_the_absolute_limit_is_refused_however_busy(app, world):
    browser = world.factory.browser("root")
    saved, csrf = cookie_of(browser), browser.csrf
    _, lifetime = limits(app)

    set_row(browser, created_at=utcnow() - lifetime + timedelta(seconds=30))
    assert page_works(replay(app, saved))

    # Used a moment ago, but signed in longer ago than the limit.
    set_row(browser, created_at=utcnow() - lifetime - timedelta(seconds=1), last_seen_at=utcnow())
    assert not page_works(replay(app, saved))
    assert not api_works(replay(app, saved), csrf)


def test_use_keeps_a_session_open_past_the_idle_limit_since_sign_in(app, world):
    """Idle counts from the last request, not from sign-in: a session used every few minutes
    outlives SESSION_IDLE_MINUTES (up to SESSION_MAX_HOURS)."""
    browser = world.factory.browser("root")
    idle, _ = limits(app)
    start = utcnow() - 3 * idle
    set_row(browser, created_at=start, last_seen_at=utcnow() - idle + timedelta(minutes=2))

    assert page_works(browser)  # due for a touch: last seen is more than a minute old

    seen = row(browser).last_seen_at
    assert utcnow() - seen < timedelta(seconds=5)
    set_row(browser, last_seen_at=seen - idle + timedelta(minutes=2))
    assert page_works(browser)


def test_last_seen_is_written_at_most_once_a_minute(app, world):
    browser = world.factory.browser("root")
    recent = utcnow() - timedelta(seconds=30)
    set_row(browser, last_seen_at=recent)
    for _ in range(3):
        assert page_works(browser)
        api_read(browser, browser.csrf)
    assert row(browser).last_seen_at == recent  # no write within the minute

    stale = utcnow() - signin.TOUCH_EVERY - timedelta(seconds=1)
    set_row(browser, last_seen_at=stale)
    assert page_works(browser)
    assert row(browser).last_seen_at > stale + signin.TOUCH_EVERY


def count_statements(app):
    statements: list[str] = []

    def record(_conn, _cursor, statement, *_args):
        statements.append(statement.split()[0].upper())

    event.listen(db.engine, "before_cursor_execute", record)
    return statements, lambda: event.remove(db.engine, "before_cursor_execute", record)


def test_checking_a_session_is_one_query_and_a_write_at_most_once_a_minute(app, world):
    browser = world.factory.browser("root")
    with browser.session_transaction() as session:
        user_id = session["_user_id"]
    db.session.rollback()
    statements, stop = count_statements(app)
    try:
        with app.test_request_context():
            assert signin.session_account(user_id) is not None
        assert statements == ["SELECT"]  # account, epoch and session checked together

        set_row(browser, last_seen_at=utcnow() - timedelta(minutes=2))
        statements.clear()
        with app.test_request_context():
            assert signin.session_account(user_id) is not None
        assert statements == ["SELECT", "UPDATE"]
    finally:
        stop()


def test_the_limits_are_settings(app, world):
    browser = world.factory.browser("root")
    saved = cookie_of(browser)
    set_row(browser, last_seen_at=utcnow() - timedelta(minutes=6))
    assert page_works(replay(app, saved))  # the default idle limit is 30 minutes

    set_row(browser, last_seen_at=utcnow() - timedelta(minutes=6))  # that use was recorded
    app.config["SESSION_IDLE_MINUTES"] = 5
    assert not page_works(replay(app, saved))

    app.config["SESSION_IDLE_MINUTES"] = 30
    set_row(browser, last_seen_at=utcnow(), created_at=utcnow() - timedelta(hours=3))
    assert page_works(replay(app, saved))
    app.config["SESSION_MAX_HOURS"] = 2
    assert not page_works(replay(app, saved))


def test_flasks_cookie_lifetime_is_the_absolute_limit(test_config):
    """Flask refuses a session cookie signed longer ago than PERMANENT_SESSION_LIFETIME (31 days
    by default): it is the sessions' absolute limit instead."""
    assert create_app(dict(test_config)).permanent_session_lifetime == timedelta(hours=12)
    app = create_app({**test_config, "SESSION_MAX_HOURS": "3"})
    assert app.config["SESSION_MAX_HOURS"] == 3
    assert app.permanent_session_lifetime == timedelta(hours=3)


@pytest.mark.parametrize(
    "name,value",
    [
        ("SESSION_IDLE_MINUTES", "0"),
        ("SESSION_IDLE_MINUTES", "half an hour"),
        ("SESSION_MAX_HOURS", "-1"),
        ("SESSION_MAX_HOURS", "1.5"),
        ("SESSION_MAX_HOURS", "999"),
    ],
)
def test_a_bad_limit_stops_the_app_naming_the_setting(test_config, name, value):
    with pytest.raises(ConfigError) as error:
        create_app({**test_config, name: value})
    assert str(error.value).startswith(f"{name}: ")


# --- what else ends a session --------------------------------------------------------------------
def test_a_password_change_still_ends_every_session(app, world):
    laptop, phone = world.factory.browser("root"), world.factory.browser("root")
    accounts.set_password(OPERATOR, "root", "a brand new password")
    assert not page_works(laptop) and not page_works(phone)


def test_flask_login_remember_cookies_meet_the_same_checks(app, world):
    """No remember-me cookie is issued (tests/test_hostile.py). Were one used, flask-login
    would load the account from it through the same loader and the same id, so it too would
    stop working when the session ends."""
    browser = world.factory.browser("root")
    with browser.session_transaction() as session:
        user_id = session["_user_id"]
    name = app.config.get("REMEMBER_COOKIE_NAME", "remember_token")

    def remembered():
        client = app.test_client()  # no session cookie: only the remember-me one
        with app.test_request_context():
            client.set_cookie(name, encode_cookie(user_id))
        return client

    assert page_works(remembered())
    log_out(browser)
    assert not page_works(remembered())


# --- old rows are pruned at sign-in --------------------------------------------------------------
def test_sign_in_prunes_the_accounts_sessions_that_can_no_longer_be_used(app, world):
    world.add("cadmin")
    idle, lifetime = limits(app)
    ended, idled, aged, live = (world.factory.browser("root") for _ in range(4))
    other = world.factory.browser("cadmin")
    ended_id = row_id(ended)
    log_out(ended)
    assert row(ended_id).ended_at is not None
    set_row(idled, last_seen_at=utcnow() - idle - timedelta(seconds=1))
    set_row(aged, created_at=utcnow() - lifetime - timedelta(seconds=1))
    set_row(other, last_seen_at=utcnow() - idle - timedelta(seconds=1))  # another account's

    fresh = world.factory.browser("root")

    db.session.rollback()
    kept = set(db.session.scalars(select(AccountSession.id)))
    assert kept == {row_id(live), row_id(fresh), row_id(other)}
    assert page_works(live)
