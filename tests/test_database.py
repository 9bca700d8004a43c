"""webapp/database.py: pooled connections the database server has ended are replaced before a
request meets them, a request's read connection is never a second one, insert_rows stores
what a Core insert stores, and the SQLite files are readable by their owner alone."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import Text, cast, create_engine, select, text

from webapp import create_app
from webapp.database import read_connection, write_transaction
from webapp.extensions import db
from webapp.models import Company

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


def test_a_requests_read_connection_gives_way_to_its_session(app):
    """The read connection is the request's one connection until the Session begins: then it
    goes back to the pool, and reads take the Session's (seeing what the request wrote)."""
    pool = db.engine.pool
    db.session.remove()
    with app.test_request_context("/rest/ops/read", method="POST"):
        reader = read_connection()
        assert read_connection() is reader
        assert reader.execute(select(Company.id)).all() == []
        checked_out = pool.checkedout()
        with write_transaction() as session:
            # The Session's connection replaced the read connection: still one.
            assert pool.checkedout() == checked_out
            assert reader.closed
            session.add(Company(id="initech", name="Initech"))
            session.flush()
            assert read_connection() is session.connection()
            assert read_connection().execute(select(Company.id)).all() == [("initech",)]
        assert not session.in_transaction()
        later = read_connection()  # the Session's transaction ended: a read connection again
        assert later is not reader and not later.closed
        assert pool.checkedout() == checked_out
        assert later.execute(select(Company.id)).all() == [("initech",)]
    # The request's end returned it.
    assert later.closed
    db.session.remove()
    assert pool.checkedout() == 0


def test_read_rows_gives_what_sqlalchemy_gives(app):
    """database.read_rows runs a SELECT on the driver itself: the same values as
    Connection.execute (timestamps, booleans, the statement's own literal values, a list to
    expand), on the plain read connection and inside the Session's transaction alike."""
    from datetime import datetime

    from sqlalchemy import bindparam, literal, true

    from webapp.database import read_rows
    from webapp.models import Account, ApiToken

    with write_transaction() as session:
        session.add(Company(id="initech", name="Initech"))
        account = Account(username="peter", password_hash="x", system_admin=True)
        session.add(account)
        session.flush()
        used = datetime(2026, 3, 1, 2, 3, 4, 567)
        session.add(
            ApiToken(account=account, label="", token_hash="h" * 64, prefix="p", last_used_at=used)
        )
    statements = {
        "typed": select(
            ApiToken.last_used_at,
            Account.system_admin,
            Account.active,
            literal("x").label("lit"),
            true().label("yes"),
        )
        .join(Account, Account.id == ApiToken.account_id)
        .where(ApiToken.token_hash == bindparam("digest"), Account.username == "peter"),
        "expanding": select(Company.id).where(Company.id.in_(bindparam("ids", expanding=True))),
    }
    params = {"digest": "h" * 64, "ids": ["initech", "x"]}
    expected = {
        name: [tuple(r) for r in db.session.execute(s, params)] for name, s in statements.items()
    }
    db.session.remove()
    assert expected["typed"] == [(used, True, True, "x", True)]
    assert expected["expanding"] == [("initech",)]
    with app.test_request_context("/rest/ops/read", method="POST"):
        for name, statement in statements.items():
            assert read_rows(statement, params) == expected[name]
        with write_transaction():
            for name, statement in statements.items():
                assert read_rows(statement, params) == expected[name]
    db.session.remove()


def test_outside_a_request_reads_take_the_sessions_connection(app):
    assert read_connection() is db.session.connection()
    db.session.remove()


def test_insert_rows_stores_what_a_core_insert_stores(app):
    """database.insert_rows writes past SQLAlchemy's statement layer (COPY on PostgreSQL, the
    driver's executemany on SQLite); the stored text must be the Core insert's, byte for byte
    (a timestamp without its microseconds would sort wrongly as text on SQLite). A value
    object several rows share (one instant, one `after`) is stored for each as for the first."""
    from datetime import datetime

    from webapp.database import insert_rows, write_transaction
    from webapp.models import AuditEntry

    first, shared = datetime(2026, 3, 1), {"a": "é", "n": None}
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
            "after": after,
            "detail": None,
        }
        for i, (at, before, after) in enumerate(
            [
                (first, None, shared),
                (datetime(2026, 3, 1, 1, 2, 3, 45), {"k": "v"}, {"a": "é", "n": None}),
                (first, shared, shared),
                (datetime(2026, 3, 1), {"k": "v"}, {"other": 1}),
            ]
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
    assert fast == core and len(fast) == 4


def test_insert_values_takes_rows_worked_out_as_they_are_sent(app):
    """A month close hands insert_values an iterator whose rows are worked out as they are
    taken (COPY on PostgreSQL sends each as it comes): every row is stored, in the caller's
    transaction, and an iterator that yields nothing stores nothing."""
    from datetime import datetime

    from webapp.database import insert_values

    taken: list[str] = []
    columns = ["id", "name", "created_at"]

    def rows(ids):
        for company in ids:
            taken.append(company)
            yield company, company.title(), datetime(2026, 3, 1)

    with write_transaction() as session:
        insert_values(session, Company.__table__, columns, rows(["a1", "b2", "c3"]))
        insert_values(session, Company.__table__, columns, rows([]))
        insert_values(session, Company.__table__, columns, [])
    assert taken == ["a1", "b2", "c3"]
    stored = db.session.execute(select(Company.id, Company.name).order_by(Company.id)).all()
    assert stored == [("a1", "A1"), ("b2", "B2"), ("c3", "C3")]


@pytest.mark.database_independent
def test_collector_paused_leaves_the_collector_as_it_found_it():
    """The month close pauses Python's cyclic collector for its million rows: on again after
    the block, an exception too, and left off when it was off before."""
    import gc

    from webapp.database import collector_paused

    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError), collector_paused():
        1 / 0  # noqa: B018
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def _modes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mode & 0o777 for p in folder.iterdir()}


def test_a_new_instance_folder_and_sqlite_database_are_private(tmp_path, monkeypatch):
    """They hold password, token and webhook secret hashes: the folder 0700, the database
    file 0600 and so the -wal and -shm SQLite gives its mode, whatever the umask."""
    folder = tmp_path / "instance"
    monkeypatch.setenv("INSTANCE_PATH", str(folder))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    old = os.umask(0o022)  # the usual one, under which SQLite alone would make them 0644
    try:
        app = create_app({"SECRET_KEY": "x" * 32})
        with app.app_context():
            with write_transaction() as session:  # SQLite opens its -wal and -shm
                session.execute(text("CREATE TABLE t (x INTEGER)"))
                session.execute(text("INSERT INTO t VALUES (1)"))
            with db.engine.connect():  # while one is open, the -wal and -shm stay
                modes = _modes(folder)
            db.engine.dispose()
    finally:
        os.umask(old)
    assert folder.stat().st_mode & 0o777 == 0o700
    assert modes == {"telephony.db": 0o600, "telephony.db-wal": 0o600, "telephony.db-shm": 0o600}


def test_existing_sqlite_files_are_tightened_never_loosened(tmp_path, monkeypatch):
    """Files and a folder made before (git makes `instance/` 0755, SQLite its files 0644) lose
    the group's and others' access at start; a file an operator made tighter keeps its mode."""
    folder = tmp_path / "instance"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    database = folder / "telephony.db"
    old = os.umask(0o022)
    try:
        with sqlite3.connect(database) as conn:  # SQLite's own default modes: 0644
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE t (x INTEGER)")
            keep = sqlite3.connect(database)  # the -wal and -shm stay while one is open
            keep.execute("SELECT * FROM t").fetchall()
    finally:
        os.umask(old)
    assert _modes(folder)["telephony.db-wal"] == 0o644
    database.chmod(0o640)
    (folder / "telephony.db-shm").chmod(0o400)  # tighter than the app makes it: kept
    try:
        monkeypatch.setenv("INSTANCE_PATH", str(folder))
        monkeypatch.delenv("DATABASE_URL", raising=False)
        create_app({"SECRET_KEY": "x" * 32})
        assert folder.stat().st_mode & 0o777 == 0o700
        assert _modes(folder) == {
            "telephony.db": 0o600,
            "telephony.db-wal": 0o600,
            "telephony.db-shm": 0o400,
        }
    finally:
        keep.close()


def test_a_missing_sqlite_file_is_not_created_until_the_database_is_opened(tmp_path, monkeypatch):
    """The app creates the file (0600) where SQLite would, on the first connection: starting
    alone, or a command that never opens it (`flask db backup` of a missing one), makes none."""
    monkeypatch.setenv("INSTANCE_PATH", str(tmp_path))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    create_app({"SECRET_KEY": "x" * 32})
    assert not (tmp_path / "telephony.db").exists()
