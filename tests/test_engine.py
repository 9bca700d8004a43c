"""Pooled connections the database server has ended are replaced before a request meets them."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from webapp import create_app
from webapp.extensions import db

from .conftest import BACKEND


@pytest.mark.skipif(BACKEND != "postgresql", reason="a server-side disconnect needs PostgreSQL")
def test_a_connection_the_server_ended_is_replaced_at_checkout(migrated, test_config):
    app = create_app(dict(test_config))
    with app.app_context():
        engine = db.engine
        with engine.connect() as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
        # The connection is back in the pool, idle; the server ends it (as a restart would).
        other = create_engine(migrated, isolation_level="AUTOCOMMIT")
        with other.connect() as conn:
            # Waits (up to 5 s) until the backend has exited, so its socket is closed.
            ended = conn.execute(text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": pid})
            assert ended.scalar()
        other.dispose()
        assert engine.pool.checkedin() == 1
        with engine.connect() as conn:  # no error: the dead one was refused at checkout
            assert conn.execute(text("SELECT pg_backend_pid()")).scalar() != pid
        engine.dispose()
