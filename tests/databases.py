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
    try:
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
