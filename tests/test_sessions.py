"""An account's own sessions (webapp/services/identity/sessions.py and the Sessions section of
/account/security, webapp/views/security.py): listing them, ending one, ending every other,
and a password change that ends the other sessions and keeps this one (docs/security.md#sessions).

A "replay" is a fresh test client holding nothing but a saved session cookie, as whoever
copied it would.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import select, update

from webapp.database import utcnow
from webapp.errors import Invalid, NotFound
from webapp.extensions import db
from webapp.models import Account, AccountSession, AuditEntry
from webapp.services.identity import accounts, sessions

from .factories import OPERATOR, csrf_from

PASSWORD = "correct horse battery"
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
CHROME = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36"
)


def sign_in(app, username: str, user_agent: str = FIREFOX, address: str = "127.0.0.1"):
    """A test client signed in through /login with this User-Agent and address."""
    client = app.test_client()
    client.environ_base.update({"HTTP_USER_AGENT": user_agent, "REMOTE_ADDR": address})
    page = client.get("/login").get_data(as_text=True)
    token = BeautifulSoup(page, "html.parser").find("input", attrs={"name": "csrf_token"})["value"]
    response = client.post(
        "/login", data={"csrf_token": token, "username": username, "password": PASSWORD}
    )
    assert response.status_code == 302
    # Signing in starts a new session: its CSRF token is on any page after.
    client.csrf = csrf_from(client.get("/account/tokens").get_data(as_text=True))
    return client


def cookie_of(client) -> str:
    cookie = client.get_cookie(client.application.config["SESSION_COOKIE_NAME"])
    assert cookie is not None
    return cookie.value


def replay(app, cookie: str):
    client = app.test_client()
    client.set_cookie(app.config["SESSION_COOKIE_NAME"], cookie)
    return client


def works(client) -> bool:
    response = client.get("/account/tokens")
    assert response.status_code in (200, 302)
    return response.status_code == 200


def row_id(client) -> str:
    with client.session_transaction() as session:
        key = session["_user_id"].split(":")[2]
    return hashlib.sha256(key.encode()).hexdigest()


def account(username: str) -> Account:
    db.session.rollback()
    return db.session.scalars(select(Account).where(Account.username == username)).one()


def loaded(client, username: str) -> Account:
    """The account as the session loader gives it to a request of `client`: with its session
    key (the service's idea of "this session")."""
    found = account(username)
    with client.session_transaction() as session:
        found.session_key = session["_user_id"].split(":")[2]
    return found


def session_rows(client) -> list[dict[str, str]]:
    """The Sessions table of the security page, a dict per row by column."""
    page = BeautifulSoup(client.get("/account/security").get_data(as_text=True), "html.parser")
    table = page.find(id="sessions").table
    heads = [th.get_text(strip=True) for th in table.thead.find_all("th")]
    return [
        dict(zip(heads, (td.get_text(" ", strip=True) for td in tr.find_all("td")), strict=True))
        | {"form": tr.form["action"] if tr.form else ""}
        for tr in table.tbody.find_all("tr")
    ]


def audits(action: str) -> list[AuditEntry]:
    db.session.rollback()
    return list(
        db.session.scalars(
            select(AuditEntry).where(AuditEntry.action == action).order_by(AuditEntry.id)
        )
    )


# --- the list ----------------------------------------------------------------------------------
def test_the_page_lists_the_accounts_own_open_sessions_only(app, world):
    laptop = sign_in(app, "root", FIREFOX, "10.0.0.1")
    phone = sign_in(app, "root", CHROME, "10.0.0.2")
    sign_in(app, "cadmin", CHROME, "10.0.0.9")  # another account's
    idle = sign_in(app, "root", CHROME, "10.0.0.3")
    db.session.execute(
        update(AccountSession)
        .where(AccountSession.id == row_id(idle))
        .values(last_seen_at=utcnow() - timedelta(hours=1))
    )
    db.session.commit()

    response = laptop.get("/account/security")
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    rows = session_rows(laptop)
    # The most recently used first: the phone signed in last.
    assert [(r["Browser"], r["Address"]) for r in rows] == [
        ("Chrome on Windows", "10.0.0.2"),
        ("Firefox on Linux (this session)", "10.0.0.1"),
    ]
    mine = next(r for r in rows if "this session" in r["Browser"])
    assert mine["form"] == ""  # this one is signed out with Sign out, not from the list
    other = next(r for r in rows if "this session" not in r["Browser"])
    handle = row_id(phone)[: sessions.HANDLE]
    assert other["form"] == f"/account/sessions/{handle}/end"
    assert row_id(phone) not in response.get_data(as_text=True)  # the whole id never shown


def test_the_service_lists_open_sessions_and_marks_this_one(app, world):
    laptop = sign_in(app, "root")
    sign_in(app, "root", CHROME)
    listed = sessions.open_sessions(loaded(laptop, "root"))
    assert len(listed) == 2
    assert [s.current for s in listed].count(True) == 1
    assert {s.browser for s in listed} == {"Firefox on Linux", "Chrome on Windows"}


@pytest.mark.parametrize(
    ("agent", "short"),
    [
        (FIREFOX, "Firefox on Linux"),
        (CHROME, "Chrome on Windows"),
        (CHROME.replace("Safari/537.36", "Safari/537.36 Edg/131.0.0.0"), "Edge on Windows"),
        (
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 "
            "(KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1",
            "Safari on iOS",
        ),
        (
            "Mozilla/5.0 (Linux; Android 14) AppleWebKit/537.36 Chrome/131.0 Mobile Safari/537.36",
            "Chrome on Android",
        ),
        ("curl/8.5.0", "curl"),
        ("", "unknown browser"),
        (None, "unknown browser"),
    ],
)
def test_a_browser_is_named_shortly(agent, short):
    assert sessions.short_browser(agent) == short


# --- ending one --------------------------------------------------------------------------------
def test_signing_out_another_session_refuses_its_cookie_from_then_on(app, world):
    laptop, phone = sign_in(app, "root"), sign_in(app, "root", CHROME)
    saved = cookie_of(phone)
    handle = row_id(phone)[: sessions.HANDLE]
    response = laptop.post(f"/account/sessions/{handle}/end", data={"csrf_token": laptop.csrf})
    assert response.status_code == 303
    assert response.headers["Location"] == "/account/security#sessions"
    assert not works(phone) and not works(replay(app, saved))
    assert works(laptop)
    [entry] = audits("account.session-ended")
    assert (entry.actor, entry.target, entry.detail) == (
        "root",
        "account root",
        "ended from another session",
    )
    assert len(session_rows(laptop)) == 1


def test_another_accounts_session_cannot_be_ended(app, world):
    root = sign_in(app, "root")
    theirs = sign_in(app, "cadmin")
    handle = row_id(theirs)[: sessions.HANDLE]
    with pytest.raises(NotFound):
        sessions.end(loaded(root, "root"), handle)
    response = root.post(f"/account/sessions/{handle}/end", data={"csrf_token": root.csrf})
    assert response.status_code == 303
    assert "No such session." in root.get("/account/security").get_data(as_text=True)
    assert works(theirs)
    assert audits("account.session-ended") == []


@pytest.mark.parametrize("handle", ["", "zz", "0" * 16, "%", "a" * 64])
def test_a_handle_that_names_nothing_is_not_found(app, world, handle):
    root = sign_in(app, "root")
    with pytest.raises(NotFound):
        sessions.end(loaded(root, "root"), handle)


def test_this_session_is_signed_out_with_sign_out_not_from_the_list(app, world):
    root = sign_in(app, "root")
    with pytest.raises(Invalid):
        sessions.end(loaded(root, "root"), row_id(root)[: sessions.HANDLE])
    assert works(root)


def test_ending_needs_the_csrf_token(app, world):
    laptop, phone = sign_in(app, "root"), sign_in(app, "root", CHROME)
    handle = row_id(phone)[: sessions.HANDLE]
    response = laptop.post(f"/account/sessions/{handle}/end", data={})
    assert response.status_code == 400
    assert works(phone)


# --- everywhere else -----------------------------------------------------------------------------
def test_sign_out_everywhere_else_keeps_only_this_session(app, world):
    laptop = sign_in(app, "root")
    others = [sign_in(app, "root", CHROME), sign_in(app, "root", FIREFOX, "10.1.1.1")]
    saved = [cookie_of(c) for c in others]
    theirs = sign_in(app, "cadmin")
    response = laptop.post("/account/sessions/end-others", data={"csrf_token": laptop.csrf})
    assert response.status_code == 303
    page = laptop.get("/account/security").get_data(as_text=True)
    assert "2 other sessions ended" in page
    assert works(laptop) and works(theirs)
    assert not any(works(replay(app, cookie)) for cookie in saved)
    [entry] = audits("account.session-ended")
    assert entry.detail == "every other session ended"
    assert "Sign out everywhere else" not in page  # nothing left to sign out
    # Again: nothing to end, nothing audited.
    laptop.post("/account/sessions/end-others", data={"csrf_token": laptop.csrf})
    assert len(audits("account.session-ended")) == 1


def test_signing_out_is_audited(app, world):
    laptop = sign_in(app, "root")
    response = laptop.post("/logout", data={"csrf_token": laptop.csrf})
    assert response.status_code == 302
    [entry] = audits("account.session-ended")
    assert (entry.actor, entry.detail) == ("root", "signed out")


# --- the password -----------------------------------------------------------------------------
def test_changing_the_password_keeps_this_session_and_ends_the_others(app, world):
    laptop, phone = sign_in(app, "root"), sign_in(app, "root", CHROME)
    saved = cookie_of(phone)
    response = laptop.post(
        "/account/password",
        data={
            "csrf_token": laptop.csrf,
            "pw-current_password": PASSWORD,
            "pw-password": "a brand new password",
        },
    )
    assert response.status_code == 303
    assert works(laptop)
    assert works(replay(app, cookie_of(laptop)))  # the same cookie: the epoch did not change
    assert not works(phone) and not works(replay(app, saved))
    entries = audits("account.session-ended")
    assert [e.detail for e in entries] == ["password changed"]
    assert len(audits("account.password")) == 1
    assert len(session_rows(laptop)) == 1


def test_a_wrong_current_password_changes_nothing(app, world):
    laptop, phone = sign_in(app, "root"), sign_in(app, "root", CHROME)
    before = account("root").password_hash
    response = laptop.post(
        "/account/password",
        data={
            "csrf_token": laptop.csrf,
            "pw-current_password": "not my password",
            "pw-password": "a brand new password",
        },
    )
    assert response.status_code == 400
    page = BeautifulSoup(response.get_data(as_text=True), "html.parser")
    assert page.h1.get_text(strip=True) == "Security"
    assert page.select_one("#pw-current_password-error").get_text() == "not correct"
    assert account("root").password_hash == before
    assert works(phone)


def test_an_admin_setting_the_password_still_ends_every_session(app, world):
    laptop, phone = sign_in(app, "cadmin"), sign_in(app, "cadmin", CHROME)
    accounts.set_password(OPERATOR, "cadmin", "a brand new password")
    assert not works(laptop) and not works(phone)
    db.session.rollback()
    rows = db.session.scalars(
        select(AccountSession).where(AccountSession.id.in_([row_id(laptop), row_id(phone)]))
    )
    assert all(r.ended_at is not None for r in rows)  # ended in the list too


# --- the page ---------------------------------------------------------------------------------
def test_the_menu_links_to_the_security_page(app, world):
    page = BeautifulSoup(
        sign_in(app, "nobody").get("/account/tokens").get_data(as_text=True), "html.parser"
    )
    link = page.find("a", string="Security")
    assert link is not None and link["href"] == "/account/security"


def test_the_sections_come_in_order(app, world):
    page = BeautifulSoup(
        sign_in(app, "nobody").get("/account/security").get_data(as_text=True), "html.parser"
    )
    heads = [h.get_text(strip=True) for h in page.select("main h2")]
    assert heads[-2:] == ["Sessions", "Password"]


def test_signed_out_visitors_are_sent_to_sign_in(client):
    response = client.get("/account/security")
    assert response.status_code == 302
    assert response.headers["Location"].startswith("/login?next=")
