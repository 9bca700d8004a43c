"""The health probes (docs/observe.md#health-checks): /healthz says the process answers and
asks nothing else; /readyz says the database and, when configured, the rate-limit store answer.
Both are unauthenticated, set no cookie and stay cheap. With the database down: see
tests/test_outages.py.

The Redis cases use the real server on 127.0.0.1:6379, and a port nothing listens on.
"""

from __future__ import annotations

import time

import pytest
from sqlalchemy import event

from webapp import create_app
from webapp.extensions import db

REDIS = "redis://127.0.0.1:6379"
NO_REDIS = "redis://127.0.0.1:1"  # nothing listens there: connection refused


@pytest.fixture
def statements(app):
    """The SQL statements run while the test runs (their first word)."""
    seen: list[str] = []

    def record(_conn, _cursor, statement, *_args):
        seen.append(statement.split()[0].upper())

    event.listen(db.engine, "before_cursor_execute", record)
    yield seen
    event.remove(db.engine, "before_cursor_execute", record)


def assert_no_cookie(response) -> None:
    assert "Set-Cookie" not in response.headers


def test_healthz_answers_ok_and_asks_nothing(client, world, statements):
    signed_in = world.browser("root")
    statements.clear()
    for who in (client, signed_in):
        response = who.get("/healthz")
        assert response.status_code == 200
        assert response.json == {"status": "ok"}
        assert_no_cookie(response)
    # Not even the account a session cookie names: liveness must not depend on the database.
    assert statements == []


def test_readyz_asks_the_database_once(client, world, statements):
    signed_in = world.browser("root")
    for who in (client, signed_in):
        statements.clear()
        response = who.get("/readyz")
        assert response.status_code == 200
        # memory:// counts in the process: no store to ask, so no check named for it.
        assert response.json == {"status": "ok", "checks": {"database": "ok", "schema": "ok"}}
        assert_no_cookie(response)
        assert statements == ["SELECT"]  # the schema revision; the cookie's account is not loaded


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_probes_need_no_credentials_and_ignore_bad_ones(client, world, path):
    assert client.head(path).status_code == 200
    response = client.get(path, headers={"Authorization": "Bearer not-a-token"})
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"


def app_with_storage(test_config, uri: str):
    return create_app({**test_config, "RATELIMIT_STORAGE_URI": uri})


def test_readyz_asks_a_configured_redis(migrated, test_config):
    client = app_with_storage(test_config, REDIS).test_client()
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json == {
        "status": "ok",
        "checks": {"database": "ok", "schema": "ok", "rate_limit_storage": "ok"},
    }


def test_readyz_is_503_naming_an_unreachable_redis(migrated, test_config, caplog):
    client = app_with_storage(test_config, NO_REDIS).test_client()
    start = time.monotonic()
    response = client.get("/readyz")
    assert time.monotonic() - start < 2
    assert response.status_code == 503
    assert response.json == {
        "status": "unavailable",
        "checks": {"database": "ok", "schema": "ok", "rate_limit_storage": "failed"},
    }
    assert "rate-limit store does not answer" in caplog.text
    # Liveness is not readiness: the process itself is fine, restarting it would not help.
    assert client.get("/healthz").status_code == 200


def test_readyz_is_503_until_the_schema_is_the_codes(app, test_config, tmp_path, caplog):
    """A database that answers without the schema this code needs (never migrated, or behind
    the code after an upgrade) cannot serve: ready only once `db upgrade` has run."""
    import logging

    from sqlalchemy import text

    from webapp.extensions import db
    from webapp.rest.meta import code_revision

    empty = create_app({**test_config, "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'e.db'}"})
    with caplog.at_level(logging.ERROR):
        response = empty.test_client().get("/readyz")
    assert response.status_code == 503
    assert response.json["checks"] == {"database": "ok", "schema": "failed"}
    assert any("schema is at nothing" in r.getMessage() for r in caplog.records)
    with empty.app_context():
        db.session.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32))"))
        db.session.execute(text("INSERT INTO alembic_version VALUES ('0013')"))
        db.session.commit()
        response = empty.test_client().get("/readyz")
        assert response.json["checks"]["schema"] == "failed"  # behind the code
        head = code_revision(app.extensions["migrate"].directory)
        db.session.execute(text("UPDATE alembic_version SET version_num = :h"), {"h": head})
        db.session.commit()
        assert empty.test_client().get("/readyz").status_code == 200
        db.session.remove()
        db.engine.dispose()
