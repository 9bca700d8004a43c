"""Databases of a test's own on the TEST_DATABASE_URL PostgreSQL server."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url


@contextlib.contextmanager
def postgres_database(server_url: str, prefix: str) -> Iterator[str]:
    """A new, empty database on the server of `server_url` (named `prefix`, the process and a
    random part), as a URL; dropped on the way out whatever happened."""
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
    server = make_url(server_url)
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
        # A test database is dropped after the run, so it need not survive the server
        # crashing: commits return without waiting for their WAL to reach the disk (a flush
        # each, tens of thousands a run), as SQLite's synchronous=NORMAL in conftest.py.
        conn.execute(text(f'ALTER DATABASE "{name}" SET synchronous_commit = off'))
    try:
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def examples(count: int) -> int:
    """Hypothesis examples for a property test over random histories: `count` on SQLite, a third
    of it (at least 5) on PostgreSQL. The SQLite pass of `make test` explores the property; the
    PostgreSQL pass repeats it to cover that dialect's SQL, where an example costs three to ten
    times as much (a server round trip per statement): the whole count there cost the pass
    minutes for little that the SQLite pass does not already explore."""
    if os.environ.get("TEST_DATABASE_URL", "").strip():
        return max(5, count // 3)
    return count
