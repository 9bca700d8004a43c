"""`flask db backup PATH`: a consistent copy of the database, taken while the app serves
(docs/backup.md#backups).

SQLite: SQLite's online backup API (`sqlite3.Connection.backup`) copies the database in one
step, which reads it inside one read transaction: in WAL mode (the app always runs in it) that
is a snapshot of the last commit before the copy began, and it never blocks the app's writers
nor waits for them. PostgreSQL: `pg_dump --format=custom` (a snapshot too), run when it is on
PATH; otherwise the command prints the exact pg_dump command to run instead.

Either way the copy is written to a temporary file beside PATH and renamed onto PATH only once
complete (and, for SQLite, checked), so PATH never holds half a backup; an existing PATH is
kept unless --force.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import click
from flask import Flask, current_app
from flask.cli import with_appcontext
from sqlalchemy import text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import SQLAlchemyError

from ..database import SQLITE_BUSY_TIMEOUT_MS
from .common import Command, friendly

# The busy timeout of the backup's connection to the source, the app's own: in WAL mode
# starting a read waits only in rare moments (another connection recovering or resetting the
# log), never for a writer.
SOURCE_TIMEOUT_S = SQLITE_BUSY_TIMEOUT_MS / 1000


class BackupError(click.ClickException):
    """A refused or failed backup: one line on stderr, exit 1."""


def register(app: Flask) -> None:
    """Add `backup` to Flask-Migrate's `db` group (so it sits beside `db upgrade`, `db check`)."""
    group = app.cli.commands.get("db")
    if isinstance(group, click.Group):
        group.add_command(backup_command)


@click.command("backup", cls=Command)
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Replace PATH if it exists.")
@with_appcontext
@friendly
def backup_command(path: Path, force: bool) -> None:
    """Write a consistent copy of the database to PATH while the app keeps serving (SQLite: the
    online backup API; PostgreSQL: pg_dump --format=custom)."""
    url = make_url(current_app.config["SQLALCHEMY_DATABASE_URI"])
    target = _checked_target(path, force)
    if url.get_backend_name() == "sqlite":
        size, revision = backup_sqlite(_sqlite_file(url), target, force)
        how = "SQLite online backup, quick_check ok"
    elif url.get_backend_name() == "postgresql":
        size, revision = backup_postgresql(url, target, force)
        how = "pg_dump --format=custom; restore with pg_restore"
    else:
        raise BackupError(f"Backups of {url.get_backend_name()} databases are not supported.")
    click.echo(f"Wrote {target}: {_size(size)}, schema revision {revision or 'none'} ({how}).")


def backup_sqlite(source: Path, target: Path, force: bool) -> tuple[int, str | None]:
    """Copy the SQLite database `source` to `target` with the online backup API and return
    (size in bytes, schema revision).

    Guarantees: the copy is one committed state of the database (never a torn mix of two), taken
    without blocking the app's writers (WAL mode); it passed `PRAGMA quick_check` and is a
    self-contained file (rollback-journal mode, no -wal beside it); `target` is replaced only by
    a complete copy and only if `force` or it did not exist; on any failure nothing is left at
    `target` nor beside it."""
    if not source.is_file():
        raise BackupError(f"The database file {source} does not exist; nothing to back up.")
    if target.resolve() in {source, *(source.with_name(source.name + s) for s in _SIDECARS)}:
        raise BackupError(f"{target} is the database itself; give the backup another name.")
    with _temporary_beside(target) as temp:
        # mode=rw: never create an empty database where the configured one is missing.
        src = sqlite3.connect(f"file:{source}?mode=rw", uri=True, timeout=SOURCE_TIMEOUT_S)
        try:
            dst = sqlite3.connect(temp)
            try:
                # pages=-1: the whole database in one step, so one read transaction (one
                # snapshot). Copied in several steps, every commit by the app in between would
                # make SQLite restart the copy, which under steady writes might never finish.
                # Meanwhile checkpoints cannot pass the snapshot: the -wal file grows with the
                # app's writes until the first checkpoint after the copy.
                src.backup(dst, pages=-1)
                # The copy keeps the source's WAL flag; as a plain file it can be read anywhere
                # (read-only media, a file copy) with no -wal or -shm beside it.
                dst.execute("PRAGMA journal_mode=DELETE")
                problems = [row[0] for row in dst.execute("PRAGMA quick_check")]
                if problems != ["ok"]:
                    raise BackupError(
                        f"The copy failed SQLite's quick_check ({problems[0]}); nothing was "
                        f"written to {target}. Check the database with PRAGMA integrity_check."
                    )
                revision = _sqlite_revision(dst)
            finally:
                dst.close()
        except sqlite3.Error as exc:
            raise BackupError(f"SQLite could not copy {source}: {exc}.") from None
        finally:
            src.close()
        _publish(temp, target, force)
    return target.stat().st_size, revision


def backup_postgresql(url: URL, target: Path, force: bool) -> tuple[int, str | None]:
    """Dump the PostgreSQL database of `url` to `target` with `pg_dump --format=custom` (one
    snapshot, taken while the app serves) and return (size in bytes, schema revision).

    Guarantees: `target` is replaced only by a dump pg_dump finished without error, and only if
    `force` or it did not exist; the password (if the URL has one) goes to pg_dump through
    PGPASSWORD, never on its command line. Without pg_dump on PATH, refuses with the exact
    command to run instead."""
    conninfo = libpq_url(url)
    if shutil.which("pg_dump") is None:
        instead = shlex.join(pg_dump_command(target, conninfo))
        raise BackupError(
            f"pg_dump is not on PATH; install PostgreSQL's client tools, or back up with: {instead}"
        )
    revision = _postgresql_revision()
    env = dict(os.environ)
    if url.password is not None:
        env["PGPASSWORD"] = str(url.password)
    with _temporary_beside(target) as temp:
        # --no-password: fail at once rather than wait for a password no one will type (cron).
        command = [*pg_dump_command(temp, conninfo), "--no-password"]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            why = lines[-1] if lines else f"exit status {done.returncode}"
            raise BackupError(f"pg_dump failed; nothing was written to {target}: {why}")
        _publish(temp, target, force)
    return target.stat().st_size, revision


def pg_dump_command(target: Path, conninfo: str) -> list[str]:
    """The documented backup command (docs/backup.md#postgresql-backups)."""
    return ["pg_dump", "--format=custom", "--file", str(target), conninfo]


def libpq_url(url: URL) -> str:
    """The database URL as libpq (pg_dump, psql, pg_restore) takes it: the plain `postgresql`
    scheme instead of SQLAlchemy's `postgresql+psycopg`, and no password."""
    plain = URL.create(
        "postgresql",
        username=url.username,
        host=url.host,
        port=url.port,
        database=url.database,
        query=url.query,
    )
    return plain.render_as_string(hide_password=False)


_SIDECARS = ("-wal", "-shm", "-journal")


def _sqlite_file(url: URL) -> Path:
    if not url.database or url.database == ":memory:" or url.database.startswith("file:"):
        raise BackupError(f"{url.render_as_string()} is not a SQLite database file to back up.")
    return Path(url.database).resolve()


def _sqlite_revision(connection: sqlite3.Connection) -> str | None:
    try:
        row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.OperationalError:  # no schema: a backup of an empty database
        return None
    return row[0] if row else None


def _postgresql_revision() -> str | None:
    from ..extensions import db

    try:
        with db.engine.connect() as conn:
            return conn.scalar(text("SELECT version_num FROM alembic_version"))
    except SQLAlchemyError as exc:
        cause = str(getattr(exc, "orig", None) or exc).strip()
        if "alembic_version" in cause and "does not exist" in cause:
            return None
        raise


def _checked_target(path: Path, force: bool) -> Path:
    """Refuse, before any work, what would fail or overwrite at the end."""
    target = path.expanduser().absolute()
    if target.is_dir():
        raise BackupError(f"{target} is a directory; give the backup file's name.")
    if target.exists() and not force:
        raise BackupError(f"{target} already exists; pass --force to replace it.")
    parent = target.parent
    if not parent.is_dir():
        why = "not a directory" if parent.exists() else "no such directory"
        raise BackupError(f"{parent}: {why}.")
    return target


@contextlib.contextmanager
def _temporary_beside(target: Path) -> Iterator[Path]:
    """A new empty file (mode 0600: a backup holds password hashes and webhook secrets) in
    target's directory, so the final rename stays on one filesystem and is atomic; removed on
    the way out unless it was renamed onto target."""
    try:
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise BackupError(f"Cannot write in {target.parent}: {exc.strerror or exc}.") from None
    os.close(fd)
    temp = Path(name)
    try:
        yield temp
    finally:
        temp.unlink(missing_ok=True)


def _publish(temp: Path, target: Path, force: bool) -> None:
    """Move the finished copy onto target: durably, atomically, never over a file that
    appeared meanwhile unless `force`."""
    with open(temp, "rb") as handle:
        os.fsync(handle.fileno())
    try:
        if force:
            os.replace(temp, target)
        else:
            # A hard link fails if target exists, where a rename would replace it silently.
            os.link(temp, target)
    except FileExistsError:
        raise BackupError(f"{target} already exists; pass --force to replace it.") from None
    except OSError as exc:
        if force:
            raise BackupError(f"Cannot write {target}: {exc.strerror or exc}.") from None
        try:  # a filesystem without hard links: the check made at the start has to do
            os.replace(temp, target)
        except OSError as again:
            raise BackupError(f"Cannot write {target}: {again.strerror or again}.") from None
    directory = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the new name survives a crash too
    finally:
        os.close(directory)


def _size(n: int) -> str:
    if n < 1024 * 1024:
        return f"{n:,} bytes"
    return f"{n / (1024 * 1024):,.1f} MiB ({n:,} bytes)"
