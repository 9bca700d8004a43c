"""Outages answer honestly (docs/observe.md#outages): with the database unavailable the API
answers 503 `service_unavailable` with Retry-After, the pages show the app's own error page
with 503 (rendered without the database, so for nobody in particular), /readyz answers 503
and /healthz still 200.

Every outage here is real, none is mocked:
- an app pointed at a database that cannot be opened: PostgreSQL on a port nothing listens on,
  SQLite at a path that is a folder, not a file; a session cookie and an API token from the
  working app (same SECRET_KEY, same accounts) are sent to it, as after a failover;
- PostgreSQL going away under a serving app: its backends terminated and new connections
  refused (ALTER DATABASE … ALLOW_CONNECTIONS false), then allowed again: the app recovers
  without a restart;
- the connection pool exhausted (one connection, held), so a request times out waiting.
"""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from webapp import create_app
from webapp.errors import ERROR_CODES, RETRY_AFTER_SECONDS, is_outage
from webapp.extensions import db
from webapp.models import Company

from .conftest import BACKEND, PG_URL
from .factories import csrf_from
from .observability import other_apps

READ = {"type": "ddi", "scope": {"company": "acme"}}
CREATE = {
    "type": "ddi",
    "values": {"dialcode": "44", "number": "2071234567", "virt_exten": "100", "company": "acme"},
}
ENVELOPE_503 = {
    "result": "error",
    "error": {
        "code": "service_unavailable",
        "message": "The service is briefly unavailable; try again in a few seconds.",
    },
}


@pytest.fixture
def down_app(app, test_config, tmp_path):
    """An app like `app` whose database cannot be reached or opened."""
    if BACKEND == "postgresql":
        url = make_url(app.config["SQLALCHEMY_DATABASE_URI"]).set(port=1)
        down_url = url.render_as_string(hide_password=False)
    else:
        folder = tmp_path / "telephony.db"
        folder.mkdir()  # a folder where the database file should be
        down_url = f"sqlite:///{folder}"
    down = create_app({**test_config, "SQLALCHEMY_DATABASE_URI": down_url})
    yield down
    with down.app_context():
        db.engine.dispose()


def assert_api_503(response) -> None:
    assert response.status_code == 503, response.get_data(as_text=True)
    assert response.json == ENVELOPE_503
    assert response.headers["Retry-After"] == str(RETRY_AFTER_SECONDS)


def assert_page_503(response, username: str | None = None) -> None:
    assert response.status_code == 503, response.get_data(as_text=True)[:500]
    assert response.headers["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert response.mimetype == "text/html"
    html = response.get_data(as_text=True)
    assert "Briefly unavailable <span" in html and "(503)" in html  # the app's own page
    assert "try again in a few seconds" in html
    # Rendered for nobody: no navigation, no account name, no sign-out form.
    assert 'aria-label="Main"' not in html and "Sign out" not in html
    if username:
        assert f">{username}<" not in html
    assert "Traceback" not in html and "OperationalError" not in html


def session_of(app, world, username: str):
    """A client of `app` signed in as `username`: its cookie and CSRF token."""
    browser = world.factory.browser(username)
    cookie = browser.get_cookie(app.config["SESSION_COOKIE_NAME"]).value
    return cookie, browser.csrf


def carrying(app, cookie: str):
    client = app.test_client()
    client.set_cookie(app.config["SESSION_COOKIE_NAME"], cookie)
    return client


# --- the API -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "path,body",
    [
        ("/rest/ops/read/", READ),
        ("/rest/ops/create/", CREATE),
        ("/rest/call/readDDICount", {"year": 2026, "month": 1}),
        ("/rest/events/read", {}),
    ],
    ids=["read", "create", "report", "events"],
)
def test_the_api_answers_503_with_retry_after(app, world, down_app, path, body):
    client = down_app.test_client()
    assert_api_503(client.post(path, json=body, headers=world.root.headers))


def test_the_api_with_a_session_cookie_answers_503(app, world, down_app):
    cookie, csrf = session_of(app, world, "root")
    client = carrying(down_app, cookie)
    for path, body in (("/rest/ops/read/", READ), ("/rest/ops/create/", CREATE)):
        assert_api_503(client.post(path, json=body, headers={"X-CSRFToken": csrf}))


def test_an_outage_is_one_log_line_without_traceback(app, world, down_app, caplog):
    caplog.set_level(logging.ERROR)
    down_app.test_client().post("/rest/ops/read/", json=READ, headers=world.root.headers)
    outage = [r for r in caplog.records if "database unavailable" in r.getMessage()]
    assert len(outage) == 1
    assert outage[0].levelno == logging.ERROR and outage[0].exc_info is None
    assert "POST /rest/ops/read/" in outage[0].getMessage()


# --- the pages -----------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/ddis", "/", "/reports/ddis", "/account/tokens"])
def test_a_signed_in_page_shows_the_apps_error_page(app, world, down_app, path):
    cookie, _ = session_of(app, world, "root")
    response = carrying(down_app, cookie).get(path)
    if response.status_code == 302:  # "/" redirects to a page: follow it once
        response = carrying(down_app, cookie).get(response.headers["Location"])
    assert_page_503(response, "root")


def test_an_htmx_request_gets_the_503_too(app, world, down_app):
    cookie, _ = session_of(app, world, "root")
    response = carrying(down_app, cookie).get("/ddis", headers={"HX-Request": "true"})
    assert_page_503(response, "root")


def test_signing_in_during_an_outage_shows_the_error_page(app, world, down_app):
    client = down_app.test_client()
    page = client.get("/login")  # the form itself needs no database
    assert page.status_code == 200
    response = client.post(
        "/login",
        data={
            "csrf_token": csrf_from(page.get_data(as_text=True)),
            "username": "root",
            "password": "correct horse battery",
        },
    )
    assert_page_503(response)


# --- the probes ----------------------------------------------------------------------------------
def test_readyz_is_503_and_healthz_200_while_the_database_is_down(app, world, down_app):
    cookie, _ = session_of(app, world, "root")
    for client in (down_app.test_client(), carrying(down_app, cookie)):
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json == {
            "status": "unavailable",
            "checks": {"database": "failed", "schema": "failed"},
        }
        live = client.get("/healthz")
        assert live.status_code == 200 and live.json == {"status": "ok"}


# --- PostgreSQL going away under a serving app, and coming back ----------------------------------
@pytest.mark.skipif(BACKEND != "postgresql", reason="a server outage needs a server")
def test_a_postgres_outage_while_serving_then_recovery(app, world):
    browser = world.browser("root")
    token = world.root.headers
    client = app.test_client()

    def answers() -> tuple[int, int, int, int]:
        return (
            browser.get("/ddis").status_code,
            client.post("/rest/ops/read/", json=READ, headers=token).status_code,
            browser.post(
                "/rest/ops/read/", json=READ, headers={"X-CSRFToken": browser.csrf}
            ).status_code,
            client.get("/readyz").status_code,
        )

    assert answers() == (200, 200, 200, 200)  # the pool now holds live connections
    db.session.remove()
    name = make_url(app.config["SQLALCHEMY_DATABASE_URI"]).database
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = :name AND pid <> pg_backend_pid()"
                ),
                {"name": name},
            )
        assert answers() == (503, 503, 503, 503)
        assert_page_503(browser.get("/ddis"), "root")
        assert_api_503(client.post("/rest/ops/read/", json=READ, headers=token))
        assert client.get("/healthz").status_code == 200
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
        admin.dispose()
    # Back without a restart: dead connections were dropped, new ones opened.
    assert answers() == (200, 200, 200, 200)


# --- a pool with no free connection --------------------------------------------------------------
def test_a_request_that_waits_out_the_pool_timeout_is_503(app, world, test_config):
    options = {"pool_size": 1, "max_overflow": 0, "pool_timeout": 0.2}
    busy = create_app({**test_config, "SQLALCHEMY_ENGINE_OPTIONS": options})
    try:
        with busy.app_context():
            held = db.engine.connect()  # the pool's only connection, taken
            held.execute(text("SELECT 1"))
        try:
            client = busy.test_client()
            assert_api_503(client.post("/rest/ops/read/", json=READ, headers=world.root.headers))
            assert client.get("/readyz").status_code == 503
        finally:
            held.close()
        assert (
            client.post("/rest/ops/read/", json=READ, headers=world.root.headers).status_code == 200
        )
    finally:
        with busy.app_context():
            db.engine.dispose()


# --- what counts as an outage --------------------------------------------------------------------
def test_only_unavailability_counts_as_an_outage(app, world, down_app):
    """The errors of real failures: a database that cannot be reached is an outage (503); a
    statement the database refuses is a fault (500), never told to retry."""
    with down_app.app_context():
        with pytest.raises(SQLAlchemyError) as unreachable:
            db.session.execute(text("SELECT 1"))
        db.session.rollback()
    assert is_outage(unreachable.value)

    db.session.rollback()
    with pytest.raises(IntegrityError) as duplicate:
        db.session.add(Company(id="acme", name="again"))
        db.session.flush()
    db.session.rollback()
    assert not is_outage(duplicate.value)
    assert ERROR_CODES[503] == "service_unavailable"


@pytest.fixture
def store_down_app(app, test_config):
    """An app whose rate-limit store (Redis) cannot be reached: nothing listens on port 1."""
    with other_apps(app, test_config) as make:
        yield make(RATELIMIT_STORAGE_URI="redis://127.0.0.1:1")


def test_an_unreachable_rate_limit_store_is_an_outage_not_a_500(factory, store_down_app, caplog):
    """Every API call and every sign-in consults the rate-limit store: without it they answer
    503 with Retry-After (pages: the app's own 503 page), /readyz names it, and nothing is
    written."""
    factory.company("acme")
    root = factory.account("root", system_admin=True)
    client = store_down_app.test_client()
    bearer = {"Authorization": f"Bearer {root.token}"}
    with caplog.at_level(logging.ERROR):
        assert_api_503(client.post("/rest/ops/read", json=READ, headers=bearer))
        assert_api_503(client.post("/rest/ops/create", json=CREATE, headers=bearer))
    assert any("rate-limit store unavailable" in r.getMessage() for r in caplog.records)
    assert not any(r.exc_info for r in caplog.records)
    token = csrf_from(client.get("/login").get_data(as_text=True))
    form = {"csrf_token": token, "username": "root", "password": "correct horse battery"}
    assert_page_503(client.post("/login", data=form))
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert client.get("/healthz").status_code == 200
    # Nothing was written. (Asked of the database: the limiter is one object per process,
    # and the down app's init_app pointed it at the unreachable store for every app here.)
    assert db.session.scalar(text("SELECT count(*) FROM ddis")) == 0
