"""The API with a browser session cookie instead of a Bearer token (docs/api.md#credentials).

A session cookie is accepted, and then every POST must carry the CSRF token in X-CSRFToken; a
Bearer token needs none. Disabling an account or changing its password ends its sessions at once.

The tests write the session cookie themselves: flask-login keeps the `get_id()` of the account
signed in by `signin.open_session` ("<id>:<session_epoch>:<session key>") under "_user_id",
flask-wtf keeps the raw CSRF token under "csrf_token" and expects it back signed (what
`generate_csrf` would hand a page). Sessions ending (sign-out, idle and absolute limits) are
tests/test_signin.py.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

import pytest
from itsdangerous import URLSafeTimedSerializer
from sqlalchemy import select, update

from webapp.access import Principal
from webapp.database import utcnow
from webapp.extensions import db
from webapp.models import Account, ApiToken
from webapp.services.identity import accounts, api_tokens, signin

from .factories import OPERATOR, Caller, World, snapshot

NEW_USER = {"username": "newbie", "virt_exten": "300", "company": "acme"}
CREATE = {"type": "user", "values": NEW_USER}
READ = {"type": "user", "scope": {"company": "acme"}}


@pytest.fixture
def world_companies() -> dict[str, str]:
    return {"acme": "Acme", "globex": "Globex"}


@pytest.fixture
def world_accounts() -> dict[str, str]:
    return {"boss": "cadmin"}  # Company-Admin of acme


@pytest.fixture
def world(world: World) -> Caller:
    """The shared world with a phone user in each company; answers boss's Caller."""
    world.factory.user("alice", "acme")
    world.factory.user("carol", "globex")
    return world.boss


def account(username: str) -> Account:
    db.session.rollback()
    return db.session.scalars(select(Account).where(Account.username == username)).one()


def sign_csrf(app, raw: str, secret: str | None = None) -> str:
    """The signed form of a raw CSRF token, as flask_wtf.csrf.generate_csrf makes it."""
    key = secret or app.config["SECRET_KEY"]
    return URLSafeTimedSerializer(key, salt="wtf-csrf-token").dumps(raw)


def signed_in_id(username: str, password: str = "correct horse battery") -> str:
    """The session cookie's user id of a new sign-in session of `username`."""
    db.session.rollback()
    checked = signin.check_password(username, password)
    acct = signin.open_session(checked, "password", signin.Client(None, None)) if checked else None
    assert acct is not None
    return acct.get_id()


def sign_in(client, app, username: str, *, user_id: str | None = None) -> str:
    """Give `client` a session cookie for `username`; answer the X-CSRFToken value to send."""
    raw = secrets.token_hex(20)
    with client.session_transaction() as s:
        s["_user_id"] = user_id if user_id is not None else signed_in_id(username)
        s["_fresh"] = True
        s["csrf_token"] = raw
    return sign_csrf(app, raw)


def post(client, op: str, body, csrf: str | None = None, **headers):
    if csrf is not None:
        headers["X-CSRFToken"] = csrf
    return client.post(f"/rest/ops/{op}/", json=body, headers=headers)


def assert_error(response, status: int, code: str) -> None:
    assert response.status_code == status, (response.status_code, response.get_data(as_text=True))
    assert response.json["result"] == "error"
    assert response.json["error"]["code"] == code
    assert "Location" not in response.headers  # never a redirect to a sign-in page


def users() -> list[tuple[str, str, str]]:
    return snapshot()["users"]


# --- a session with its CSRF token works -------------------------------------------------------
def test_session_with_csrf_header_may_write(app, client, world):
    token = sign_in(client, app, "boss")
    before = snapshot()

    r = post(client, "create", CREATE, csrf=token)

    assert r.status_code == 200, r.json
    assert r.json == {"result": "success", "numrows": 1}
    assert users() == sorted([*before["users"], ("acme", "newbie", "300")])


def test_session_with_csrf_header_acts_with_the_accounts_grants(app, client, world):
    token = sign_in(client, app, "boss")

    r = post(client, "read", {"type": "user"}, csrf=token)
    assert r.status_code == 200, r.json
    assert r.json["values"] == [{"username": "alice", "virt_exten": "200", "company": "acme"}]

    before = snapshot()
    body = {**CREATE, "values": {**NEW_USER, "company": "globex"}}
    assert_error(post(client, "create", body, csrf=token), 403, "forbidden")
    assert snapshot() == before


def test_the_same_session_token_serves_several_requests(app, client, world):
    token = sign_in(client, app, "boss")
    for op, body in [("read", READ), ("create", CREATE), ("read", READ)]:
        r = post(client, op, body, csrf=token)
        assert r.status_code == 200, (op, r.json)
    assert ("acme", "newbie", "300") in users()


# --- without a valid CSRF token it is refused --------------------------------------------------
def _bad_tokens(app) -> dict[str, str | None]:
    return {
        "missing": None,
        "empty": "",
        "garbage": "not-a-token",
        "raw-unsigned": "0" * 40,
        "other-raw-token": sign_csrf(app, secrets.token_hex(20)),
        "other-secret": sign_csrf(app, "x", secret="some-other-secret-key"),
    }


BAD = ["missing", "empty", "garbage", "raw-unsigned", "other-raw-token", "other-secret"]


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize(
    "op,body",
    [
        ("create", CREATE),
        ("update", {"type": "user", "scope": {"company": "acme"}, "values": {"virt_exten": "9"}}),
        ("delete", {"type": "user", "scope": {"company": "acme"}}),
        ("read", READ),
    ],
    ids=["create", "update", "delete", "read"],
)
def test_session_post_without_valid_csrf_is_403(app, client, world, op, body, bad):
    sign_in(client, app, "boss")
    before = snapshot()

    r = post(client, op, body, csrf=_bad_tokens(app)[bad])

    assert_error(r, 403, "forbidden")
    assert "values" not in r.json  # a refused read does not answer rows either
    assert snapshot() == before


def test_csrf_header_without_a_csrf_token_in_the_session_is_403(app, client, world):
    with client.session_transaction() as s:
        s["_user_id"] = signed_in_id("boss")
        s["_fresh"] = True
    before = snapshot()

    r = post(client, "create", CREATE, csrf=sign_csrf(app, "anything"))

    assert_error(r, 403, "forbidden")
    assert snapshot() == before


def test_csrf_token_of_another_session_is_403(app, client, world):
    other_client = app.test_client()
    other_token = sign_in(other_client, app, "boss")
    sign_in(client, app, "boss")
    before = snapshot()

    assert_error(post(client, "create", CREATE, csrf=other_token), 403, "forbidden")
    assert snapshot() == before


# --- Bearer tokens need no CSRF header ----------------------------------------------------------
def test_bearer_token_needs_no_csrf_header(client, world):
    before = snapshot()
    r = post(client, "create", CREATE, **world.headers)
    assert r.status_code == 200, r.json
    assert users() == sorted([*before["users"], ("acme", "newbie", "300")])


def test_bearer_token_needs_no_csrf_header_even_beside_a_session_cookie(app, client, world):
    sign_in(client, app, "boss")
    r = post(client, "create", CREATE, **world.headers)
    assert r.status_code == 200, r.json
    assert ("acme", "newbie", "300") in users()


def test_no_credentials_is_401(client, world):
    before = snapshot()
    assert_error(post(client, "create", CREATE), 401, "unauthorized")
    assert_error(post(client, "create", CREATE, csrf="whatever"), 401, "unauthorized")
    assert snapshot() == before


# --- sessions end at once on disable and password change ---------------------------------------
END_SESSION = {
    "disable": lambda username: accounts.disable(OPERATOR, username),
    "set_password": lambda username: accounts.set_password(
        OPERATOR, username, "a brand new password"
    ),
    "own_password": lambda username: accounts.set_password(
        accounts_principal(username), username, "a brand new password"
    ),
}


def accounts_principal(username: str) -> Principal:
    return Principal.from_account(account(username), via="ui")


@pytest.mark.parametrize("how", sorted(END_SESSION))
@pytest.mark.parametrize("op,body", [("create", CREATE), ("read", READ)], ids=["create", "read"])
def test_old_session_is_refused_on_the_very_next_request(app, client, world, how, op, body):
    token = sign_in(client, app, "boss")
    assert post(client, "read", READ, csrf=token).status_code == 200  # the session works

    END_SESSION[how]("boss")
    before = snapshot()

    r = post(client, op, body, csrf=token)

    assert_error(r, 401, "unauthorized")
    assert snapshot() == before


def test_session_of_an_account_whose_epoch_changed_is_refused(app, client, world):
    token = sign_in(client, app, "boss")
    assert post(client, "read", READ, csrf=token).status_code == 200
    acct = account("boss")
    db.session.execute(
        update(Account).where(Account.id == acct.id).values(session_epoch=Account.session_epoch + 1)
    )
    db.session.commit()
    before = snapshot()

    assert_error(post(client, "create", CREATE, csrf=token), 401, "unauthorized")
    assert snapshot() == before


@pytest.mark.parametrize(
    "user_id",
    [
        *["{id}:{stale}", "{id}:{future}", "{id}", "{missing}:0", "boss", "", ":", "{id}:-1"],
        *["{id}:x", "{id}:1", "{id}:1:", "{id}:1:{key}:", "{id}:1:x{key}"],
        # A valid session key with anything else wrong: the key alone is not enough.
        *["{id}:{stale}:{key}", "{id}:{future}:{key}", "{missing}:1:{key}", "{other}:0:{key}"],
        *["{id}:-1:{key}", "{id}:{huge}:{key}", "{huge}:1:{key}"],
    ],
)
def test_session_naming_no_current_account_and_epoch_is_refused(
    app, client, factory, world, user_id
):
    factory.account("other")  # epoch 0, the epoch in "{other}:0:{key}"
    acct = account("boss")
    accounts.set_password(OPERATOR, "boss", "a brand new password")  # epoch 0 -> 1
    key = signed_in_id("boss", "a brand new password").split(":")[2]  # an open session
    value = user_id.format(
        id=acct.id,
        stale=0,
        future=7,
        missing=acct.id + 1000,
        other=account("other").id,
        key=key,
        huge=2**40,
    )
    token = sign_in(client, app, "boss", user_id=value)
    before = snapshot()

    assert_error(post(client, "create", CREATE, csrf=token), 401, "unauthorized")
    assert snapshot() == before


def test_new_session_after_password_change_works(app, client, world):
    accounts.set_password(OPERATOR, "boss", "a brand new password")
    new_session = signed_in_id("boss", "a brand new password")
    token = sign_in(client, app, "boss", user_id=new_session)  # carries the new epoch
    assert post(client, "create", CREATE, csrf=token).status_code == 200


# --- tokens ----------------------------------------------------------------------------------
def test_token_of_a_disabled_account_is_401(client, world):
    assert post(client, "read", READ, **world.headers).status_code == 200
    accounts.disable(OPERATOR, "boss")
    before = snapshot()

    assert_error(post(client, "read", READ, **world.headers), 401, "unauthorized")
    assert_error(post(client, "create", CREATE, **world.headers), 401, "unauthorized")
    assert snapshot() == before


def test_revoked_token_is_401(client, world):
    assert post(client, "read", READ, **world.headers).status_code == 200
    db.session.rollback()
    token_id = db.session.scalars(select(ApiToken.id)).one()
    api_tokens.revoke(OPERATOR, token_id)
    assert_error(post(client, "read", READ, **world.headers), 401, "unauthorized")


@pytest.mark.parametrize(
    "header",
    ["Bearer tad_not-a-real-token", "Bearer ", "Bearer", "Basic Ym9zczpwdw==", "tad_x"],
)
def test_invalid_bearer_is_401_even_with_a_valid_session(app, client, world, header):
    """A wrong Authorization header is not rescued by the cookie beside it."""
    token = sign_in(client, app, "boss")
    before = snapshot()
    r = post(client, "create", CREATE, csrf=token, Authorization=header)
    assert_error(r, 401, "unauthorized")
    assert snapshot() == before


def test_token_last_used_at_is_recorded(client, world):
    db.session.rollback()
    assert db.session.scalars(select(ApiToken.last_used_at)).one() is None
    start = utcnow()

    assert post(client, "read", READ, **world.headers).status_code == 200

    db.session.rollback()
    used = db.session.scalars(select(ApiToken.last_used_at)).one()
    assert used is not None
    assert start - timedelta(seconds=1) <= used <= utcnow() + timedelta(seconds=1)


def test_failed_token_use_records_nothing(client, world):
    accounts.disable(OPERATOR, "boss")
    assert_error(post(client, "read", READ, **world.headers), 401, "unauthorized")
    db.session.rollback()
    assert db.session.scalars(select(ApiToken.last_used_at)).one() is None
