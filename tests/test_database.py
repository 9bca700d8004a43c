"""webapp/database.py: pooled connections the database server has ended are replaced before a
request meets them, and insert_rows stores what a Core insert stores."""

from __future__ import annotations

import pytest
from sqlalchemy import Text, cast, create_engine, select, text

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


def test_insert_rows_stores_what_a_core_insert_stores(app):
    """database.insert_rows writes past SQLAlchemy's statement layer (COPY on PostgreSQL, the
    driver's executemany on SQLite); the stored text must be the Core insert's, byte for byte
    (a timestamp without its microseconds would sort wrongly as text on SQLite)."""
    from datetime import datetime

    from webapp.database import insert_rows, write_transaction
    from webapp.models import AuditEntry

    rows = [
        {
            "at": at,
            "actor": "t",
            "via": "cli",
            "action": "x",
            "target": f"t{i}",
            "company": None,
            "other_company": None,
            "before": before,
            "after": {"a": "é", "n": None},
            "detail": None,
        }
        for i, (at, before) in enumerate(
            [(datetime(2026, 3, 1), None), (datetime(2026, 3, 1, 1, 2, 3, 45), {"k": "v"})]
        )
    ]
    with write_transaction() as session:
        insert_rows(session, AuditEntry.__table__, rows)
        session.execute(
            AuditEntry.__table__.insert(), [{**r, "target": f"core{i}"} for i, r in enumerate(rows)]
        )
    # The timestamp as stored text; the JSON as read back (COPY writes a None as SQL NULL,
    # a Core insert as JSON null: both read back as None).
    stored = db.session.execute(
        select(
            AuditEntry.target,
            cast(AuditEntry.at, Text),
            AuditEntry.at,
            AuditEntry.before,
            AuditEntry.after,
        ).order_by(AuditEntry.target)
    ).all()
    fast = {s[0][1:]: tuple(s[1:]) for s in stored if s[0].startswith("t")}
    core = {s[0][4:]: tuple(s[1:]) for s in stored if s[0].startswith("core")}
    assert fast == core and len(fast) == 2
