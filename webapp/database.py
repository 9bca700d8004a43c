"""Engine tuning and the write-transaction helper shared by every service.

SQLite: WAL lets readers proceed while one writer writes, and the busy timeout makes a second
writer wait instead of failing. A write transaction is opened with BEGIN IMMEDIATE because a
deferred transaction that first reads and then writes cannot wait for the lock (SQLite answers
"database is locked" at once to avoid a deadlock). PostgreSQL needs none of this; services lock
the rows they change with SELECT ... FOR UPDATE, which SQLite simply omits.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import select
import stat
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import lru_cache
from operator import itemgetter
from pathlib import Path
from typing import Any

from flask import has_request_context, request
from sqlalchemy import (
    JSON,
    ColumnElement,
    CompoundSelect,
    Select,
    String,
    Table,
    any_,
    bindparam,
    cast,
    event,
    func,
    text,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Compiled, Connection, Dialect, Engine
from sqlalchemy.exc import DBAPIError, DisconnectionError, IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.sql.selectable import TableValuedAlias
from sqlalchemy.types import TypeEngine

from .config import ConfigError
from .errors import Conflict
from .extensions import READ_ENGINE_KEY, db

log = logging.getLogger(__name__)
SQLITE_BUSY_TIMEOUT_MS = 15_000
# PostgreSQL deadlock and serialization failures: another transaction won; nothing was written.
RETRYABLE_SQLSTATES = {"40P01", "40001", "55P03"}  # 55P03: a lock_timeout ran out


def make_private(path: Path | str) -> None:
    """Take the group's and others' permissions off `path` if it has any (0755 becomes 0700,
    0644 becomes 0600); never adds one, so a mode an operator made tighter stays. A path that
    is missing, or that this user may not change (another owner's), is left as it is: the
    app does not refuse to start over a folder an operator set up."""
    with contextlib.suppress(FileNotFoundError, PermissionError):
        mode = stat.S_IMODE(os.stat(path).st_mode)
        if mode & 0o077:
            os.chmod(path, mode & ~0o077)


def sqlite_file(engine: Engine) -> str | None:
    """The SQLite database file's path; None for PostgreSQL, in memory or a `file:` URI."""
    path = engine.url.database
    if engine.dialect.name != "sqlite" or not path or path == ":memory:":
        return None
    return None if path.startswith("file:") else path


def private_sqlite_files(engine: Engine) -> None:
    """SQLite: the database file and its `-wal` and `-shm`, if there, made readable by this
    user alone (they hold password, token and webhook secret hashes), with make_private. A
    new file is created 0600 by configure_engine's connect hook."""
    if path := sqlite_file(engine):
        for name in (path, f"{path}-wal", f"{path}-shm", f"{path}-journal"):
            make_private(name)


def _create_private(path: str) -> None:
    """Create the SQLite file `path`, empty (an empty database to SQLite), with mode 0600 if
    it is missing: SQLite's own default is 0644, and it gives the `-wal` and `-shm` it creates
    later the main file's mode."""
    # There already; or its folder is missing or closed, which SQLite then reports.
    with contextlib.suppress(FileExistsError, FileNotFoundError, PermissionError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def check_database_exists(engine: Engine) -> None:
    """PostgreSQL: ConfigError when the database DATABASE_URL names does not exist, with the
    command that creates it (instead of a traceback from the first query or `db upgrade`).
    Any other connection failure is left alone: the server may come up after the app, and
    /readyz reports it meanwhile. The connection opened stays in the pool for the first
    request. SQLite creates its file on first use: nothing to check."""
    if engine.dialect.name != "postgresql":
        return
    try:
        with engine.connect():
            pass
    except DBAPIError as exc:
        # invalid_catalog_name; a refused connection carries no SQLSTATE, only the server's
        # message (its English text: the server sends it before any session settings apply).
        missing = getattr(exc.orig, "sqlstate", None) == "3D000" or (
            f'database "{engine.url.database}" does not exist' in str(exc.orig)
        )
        if not missing:
            return
        url = engine.url
        # As a role allowed to create databases (the app's own usually is not), owned by the
        # app's role so that it may create the schema.
        options = [f"-h {url.host}" if url.host else "", f"-p {url.port}" if url.port else ""]
        options.append(f"-O {url.username}" if url.username else "")
        command = " ".join(["createdb", *[o for o in options if o], str(url.database)])
        raise ConfigError(
            f"DATABASE_URL: database {url.database!r} does not exist; create it with "
            f"`{command}` as a role allowed to create databases (e.g. add -U postgres)"
        ) from None


def configure_engine(engine: Engine) -> None:
    """Install the SQLite pragmas and transaction handling, or PostgreSQL's liveness check."""
    if engine.dialect.name == "postgresql":
        event.listen(engine, "checkout", _refuse_dead_connection)
        return
    if engine.dialect.name != "sqlite":
        return

    if path := sqlite_file(engine):

        @event.listens_for(engine, "do_connect")
        def _before_connect(_dialect, _record, _args, _kwargs):
            # On each new connection, as SQLite would create the file then and not before:
            # a command that never opens the database (a backup of a missing one) finds none.
            _create_private(path)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):  # pragma: no cover - exercised on connect
        # Let SQLAlchemy's "begin" event issue BEGIN itself instead of pysqlite's guesswork.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection):
        if connection.get_execution_options().get("write_lock", False):
            # Through SQLAlchemy, so "database is locked" arrives as the DBAPIError that
            # write_transaction turns into a Conflict.
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            # A deferred BEGIN takes no lock and cannot fail that way: straight to the driver,
            # sparing every read request a statement's whole execution path in SQLAlchemy.
            connection.connection.driver_connection.execute("BEGIN").close()


def _refuse_dead_connection(dbapi_connection, _record, _proxy) -> None:
    """Pool checkout on PostgreSQL: hand out no connection the server has already ended.

    An idle connection has nothing to read. When the server restarts, fails over or ends the
    backend (pg_terminate_backend, idle timeouts), it sends its FATAL notice and closes the
    socket, which then polls readable: such a connection is refused here and the pool opens a
    fresh one (DisconnectionError is SQLAlchemy's documented signal for that), so no request
    meets it. This costs one poll(2) and no round trip, unlike pool_pre_ping's SELECT 1 on every
    checkout (a fifth of the API read's time in measurements). What it cannot see (a host that
    vanished without closing the socket) still fails one request per worker, after which
    SQLAlchemy invalidates the whole pool; pool_recycle (config.engine_options) bounds the age.
    """
    if dbapi_connection.closed or dbapi_connection.broken:
        raise DisconnectionError("connection closed")
    if select.select([dbapi_connection.fileno()], [], [], 0)[0]:
        raise DisconnectionError("the server ended the connection")


# SQLite's page cache for one bulk write (a number stock, a month close): a million-row change
# touches pages of every index of several tables at random, and the default 2 MB cache would
# read them from disk again and again. Put back afterwards.
BULK_CACHE_KIB = 192 * 1024
# A DDI import's: it changes the rows of more tables, each with more indexes (nine on the
# audit log, eight on the DDIs), and 320 MB made it 7% faster than 192 at the bench data set;
# within the import's 512 MB (the rest of its peak is about 170 MB: the app, the file's keys,
# a chunk).
IMPORT_CACHE_KIB = 320 * 1024


@contextmanager
def bulk_cache(session: Session, kib: int = BULK_CACHE_KIB) -> Iterator[None]:
    """A larger SQLite page cache (`kib` KiB) on the session's connection for the block (no-op
    on PostgreSQL, whose shared buffers the server sizes)."""
    if session.get_bind().dialect.name != "sqlite":
        yield
        return
    previous = session.scalar(text("PRAGMA cache_size"))
    session.execute(text(f"PRAGMA cache_size=-{int(kib)}"))
    try:
        yield
    finally:
        session.execute(text(f"PRAGMA cache_size={int(previous)}"))


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, and back as it was after: for work
    that builds millions of small objects and no cycles (a month close at provider scale),
    during which the collector's full passes walk all of them again and again (1.5 to 2 s of
    a 100,000-company close, bench/README.md). Reference counting still frees what the block
    drops; the switch is the process's, so a thread beside it runs without passes meanwhile."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def driver_rows(connection: Connection, statement: Any) -> list[Any]:
    """A statement's rows as the driver returns them (its cursor's list of tuples), without a
    Row object each or SQLAlchemy's result processing: for columns whose driver values are what
    the caller wants (strings, integers), read by the hundred thousand (a close's month rows,
    an audit download's chunks), where Row objects cost more than the work on them."""
    result = connection.execute(statement)
    rows = list(result.cursor.fetchall())  # a list already: list() only copies the pointers
    result.close()
    return rows


def one_of(session: Session, column: Any, values: list[Any]) -> ColumnElement[bool]:
    """`column IN values`, as PostgreSQL best runs it many times over: `= ANY(array)`, one
    statement text whatever the number of values, so psycopg and the server prepare it once
    (a list of parameters is a new statement for each length). SQLite takes the list."""
    if session.get_bind().dialect.name == "postgresql":
        return column == any_(bindparam(None, values, type_=postgresql.ARRAY(column.type)))
    return column.in_(values)


def unnest_rows(columns: Mapping[str, tuple[TypeEngine[Any], list[Any]]]) -> TableValuedAlias:
    """PostgreSQL: lists of values (each named, with its column type; all the same length) as
    one derived table, `unnest(:a, :b) AS v(a, b)`, for a set-based UPDATE ... FROM it. An
    executemany sends a statement per row, and the server's cost of a statement is several
    times that of the row it changes (an import's hundreds of thousands of rows)."""
    # Text without its length: a cast to varchar(n) cuts a longer value where the column
    # itself refuses it.
    kinds = [String() if isinstance(t, String) else t for t, _ in columns.values()]
    arrays = [
        cast(bindparam(None, values, type_=postgresql.ARRAY(t)), postgresql.ARRAY(t))
        for t, (_, values) in zip(kinds, columns.values(), strict=True)
    ]
    return func.unnest(*arrays).table_valued(*columns).render_derived(name="v")


def insert_rows(session: Session, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert `rows` (dicts with the same keys, columns of `table`) in the session's
    transaction: insert_values' way."""
    if not rows:
        return
    columns = list(rows[0])
    # itemgetter of one name answers the value, of several a tuple: always a tuple here.
    get: Any = itemgetter(*columns) if len(columns) > 1 else lambda row: (row[columns[0]],)
    insert_values(session, table, columns, [get(row) for row in rows])


def insert_values(
    session: Session, table: Table, columns: list[str], rows: Iterable[tuple[Any, ...]]
) -> None:
    """Insert `rows` (each a tuple of the values of `columns`, columns of `table`) in the
    session's transaction. On PostgreSQL through COPY: for the change path's large writes (an
    import's hundreds of thousands of history intervals and audit entries) an executemany
    spends most of its time building statements in Python. Elsewhere (SQLite) an executemany,
    which costs no round trips there.

    `rows` may be an iterator that works out each row as it is taken (a month close's
    figures): on PostgreSQL each is sent as it comes, and the server stores the rows already
    sent while the next are worked out. It must not use the session's connection meanwhile
    (the COPY holds it)."""
    dialect = session.get_bind().dialect
    if isinstance(rows, list) and not rows:
        return
    if dialect.name != "postgresql":
        rows = rows if isinstance(rows, list) else list(rows)
        if not rows:
            return
        # The driver's executemany with each column's own bind processor (the stored form is
        # what a Core insert writes): a Core insert of dicts spends more time preparing each
        # row's parameters than SQLite spends writing it (a third of a 1,000-row batch create).
        quote = dialect.identifier_preparer.quote
        # The dialect's own type (SQLite's DATETIME writes microseconds always, so stored
        # timestamps compare as text); the generic type's processor would be none.
        processors = [
            table.c[c].type.dialect_impl(dialect).bind_processor(dialect) for c in columns
        ]
        # Names from the table's metadata, quoted; the values are parameters.
        names = f"{quote(table.name)} ({', '.join(quote(c) for c in columns)})"
        statement = f"INSERT INTO {names} VALUES ({', '.join('?' for _ in columns)})"  # noqa: S608
        session.connection().exec_driver_sql(statement, _stored_rows(rows, processors))
        return
    # JSON columns are written as their text; every other value as psycopg adapts it.
    as_json = [i for i, c in enumerate(columns) if isinstance(table.c[c].type, JSON)]
    driver = session.connection().connection.driver_connection
    assert driver is not None
    statement = f"COPY {table.name} ({', '.join(columns)}) FROM STDIN"
    import psycopg  # the PostgreSQL driver: only this path runs with it

    try:
        with driver.cursor() as cursor, cursor.copy(statement) as copy:
            for row in rows:
                if as_json:
                    values = list(row)
                    for i in as_json:
                        if values[i] is not None:
                            values[i] = json.dumps(values[i])
                    copy.write_row(values)
                else:
                    copy.write_row(row)
    except psycopg.errors.IntegrityError as exc:
        # The driver's own error, as SQLAlchemy would have wrapped it for an INSERT: callers
        # catch IntegrityError (a key taken meanwhile) whichever way the rows went in.
        raise IntegrityError(statement, None, exc) from exc


def _stored_rows(rows: list[tuple[Any, ...]], processors: list[Any]) -> list[tuple[Any, ...]]:
    """Each row's values as their processors store them. A value object met again (the
    instant every row of a change shares, the same `after` of a stocked number) is processed
    once: its stored form is taken from the first (a million-row stock spent a third of its
    time encoding the same JSON and timestamp again)."""
    converted: list[tuple[int, Any, dict[int, tuple[Any, Any]]]] = [
        (i, p, {}) for i, p in enumerate(processors) if p is not None
    ]
    if not converted:
        return rows
    stored = []
    for row in rows:
        values = list(row)
        for i, process, seen in converted:
            value = values[i]
            # Keyed by identity (dicts are not hashable); the object is checked too, since
            # rows hold every value for the call, an id is never reused for another object.
            hit = seen.get(id(value))
            if hit is None or hit[0] is not value:
                hit = seen[id(value)] = (value, process(value))
            values[i] = hit[1]
        stored.append(tuple(values))
    return stored


def utcnow() -> datetime:
    """Now, as the naive UTC datetime every timestamp column stores."""
    return datetime.now(UTC).replace(tzinfo=None)


def write_clock(session: Session) -> datetime:
    """The instant a write happens, read once its locks are held (so a transaction that waited
    for another one is stamped after it). On PostgreSQL it is the database's clock, which every
    host serving the app shares; on SQLite, which one host serves, the process clock."""
    if session.get_bind().dialect.name == "postgresql":
        return session.scalar(text("SELECT clock_timestamp() AT TIME ZONE 'UTC'"))
    return utcnow()


def _lost_race(exc: DBAPIError) -> bool:
    sqlstate = getattr(exc.orig, "sqlstate", None)
    return sqlstate in RETRYABLE_SQLSTATES or "database is locked" in str(exc.orig)


@contextmanager
def write_transaction(snapshot: bool = False, fence: bool = True) -> Iterator[Session]:
    """One all-or-nothing write: commits on success, rolls everything back on any exception.

    Any read transaction still open (loading the signed-in account, say) is ended first, so the
    write starts on a fresh snapshot and, on SQLite, holds the write lock from its first statement.
    `snapshot`: every read of the transaction sees the database as of its first statement (on
    PostgreSQL REPEATABLE READ; on SQLite the write lock already keeps every other writer out).
    `fence`: whether the request's caller must read this write back: with replicas, the
    transaction adds one to its account's count of writes (`read_fences`), and its reads then
    wait for a replica that shows it (docs/replicas.md). False for bookkeeping nobody reads
    back at once (when a token was last used).
    """
    session = db.session()  # the request's Session behind the scoped proxy
    if session.in_transaction():
        session.commit()
    # A write, and every read after it in the request, on the primary (docs/replicas.md).
    reads_to_primary()
    options: dict[str, Any] = {"write_lock": True}
    if snapshot and session.get_bind().dialect.name == "postgresql":
        options["isolation_level"] = "REPEATABLE READ"
    session.connection(execution_options=options)
    writer = request.environ.get(WRITER_KEY) if fence and has_request_context() else None
    try:
        yield session
        if writer is not None and not snapshot:
            # Last, so the row's lock is held only while committing (the account's writes
            # running at once wait for each other's commit here, never for more).
            session.execute(COUNT_WRITE, {"account": writer})
        session.commit()
    except DBAPIError as exc:
        session.rollback()
        if _lost_race(exc):
            raise Conflict(
                "A concurrent change got in the way; nothing was written. Try again."
            ) from exc
        raise
    except BaseException:
        session.rollback()
        raise
    if writer is not None and snapshot:
        _count_write_after(session, writer)


def _count_write_after(session: Session, writer: int) -> None:
    """A snapshot transaction's write counted after its commit, in a transaction of its own:
    inside it, a write of the same account committed meanwhile would fail it (REPEATABLE
    READ). What it wrote is committed whatever happens here; a failure leaves the account's
    next reads free to meet a replica that lacks it, so it is logged."""
    try:
        session.execute(COUNT_WRITE, {"account": writer})
        session.commit()
    except DBAPIError as exc:
        session.rollback()
        log.error("the write of account %s was not counted for read replicas: %s", writer, exc)


def on_postgresql() -> bool:
    """Whether the session's database is PostgreSQL (some queries take a faster form there)."""
    return db.session.get_bind().dialect.name == "postgresql"


def upper_bound(prefix: str) -> str:
    """The least string after every string starting with `prefix`: its last character's
    successor (fields are ASCII, so there is one). `prefix <= x < upper_bound(prefix)` is a
    prefix match an index range can serve on any collation."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


# --- Where a request reads ---------------------------------------------------------------------
# A request whose route may be served by a replica (request_auth.replica_reads) has its reads
# routed to one: the ORM Session's statements (extensions.RoutedSession) and the read
# connection below. Kept in the WSGI environ, which lives exactly as long as the request (`g`
# as long as the app context, which a test client shares between requests).
# The account whose writes the request's write transactions count (read_fences), set by
# request_auth when the app has replicas.
WRITER_KEY = "telephony.writer"
COUNT_WRITE = text(
    "INSERT INTO read_fences (account_id, writes) VALUES (:account, 1) "
    "ON CONFLICT (account_id) DO UPDATE SET writes = read_fences.writes + 1"
)


def route_reads(engine: Engine) -> None:
    """Send the request's reads to `engine` (a replica) from now on, until it writes."""
    request.environ[READ_ENGINE_KEY] = engine


def reads_to_primary() -> None:
    """The request's statements from now on go to the primary (DATABASE_URL's database)."""
    if has_request_context():
        request.environ.pop(READ_ENGINE_KEY, None)


def routed_engine() -> Engine | None:
    """The replica the request's reads go to, or None (the primary)."""
    return request.environ.get(READ_ENGINE_KEY) if has_request_context() else None


# --- The request's read connection -----------------------------------------------------------
# One per database the request reads from (the primary's, a replica's), in the environ.
READ_CONNECTION_KEY = "telephony.read_connection"
REPLICA_CONNECTION_KEY = "telephony.read_connection.replica"


def read_connection() -> Connection:
    """A connection for a request's Core reads (the API token check, the API's read), rolled
    back and returned to the pool when the request ends (`end_read_connection`).

    A plain engine connection, not the ORM Session's: beginning, then closing, a Session's
    transaction around each request cost more than the token check's and the read's
    statements (issue 30). On PostgreSQL it autocommits: each statement sees the latest
    committed data on its own (the token check no older than the read), as a read needs no
    transaction around it. It is never one connection more: once the request's Session begins
    a transaction (a write, an ORM read), this one is closed first (`_session_begins`), and
    from then on the Session's connection is the one returned, so a read sees what the
    request wrote. Results must be fetched before the Session is used (`.all()`, `.first()`).
    Outside a request: the Session's connection."""
    session_registry = db.session.registry
    if has_request_context() and not (
        session_registry.has() and session_registry().in_transaction()
    ):
        environ = request.environ
        replica = environ.get(READ_ENGINE_KEY)
        key = READ_CONNECTION_KEY if replica is None else REPLICA_CONNECTION_KEY
        connection: Connection | None = environ.get(key)
        if connection is None:
            connection = (replica or db.engine).connect()
            if connection.dialect.name == "postgresql":
                # Each statement its own transaction: no BEGIN and ROLLBACK round trips
                # around reads that change nothing (SQLite's are calls within the process;
                # and its driver must stay in the mode configure_engine sets).
                connection = connection.execution_options(isolation_level="AUTOCOMMIT")
            environ[key] = connection
        return connection
    return db.session.connection()


def read_rows(statement: Select[Any] | CompoundSelect, params: Mapping[str, Any]) -> list[Any]:
    """The rows of a Core SELECT on the request's read connection (`read_connection`), as
    tuples by column position.

    On the plain read connection the statement goes straight to the driver: compiled once for
    the dialect (`_driver_plan`), its parameters put in the driver's form, the driver's rows
    converted by the columns' own result processors (SQLite's timestamps and booleans), so
    the values are those Connection.execute gives. Its execution path (cache key, execution
    context, Row objects, and on SQLite a BEGIN and ROLLBACK around the request's reads) cost
    more than an API read's two statements (issue 30). Without a transaction around them, the
    token check and the read each see what was committed when they ran, as on PostgreSQL
    already. A statement the plan cannot take (a list of values to expand), the Session's
    connection, and a driver error (retried once through SQLAlchemy, which then raises it as
    its DBAPIError, and notices a dropped connection) take SQLAlchemy's own path."""
    connection = read_connection()
    plan = None if connection.in_transaction() else _driver_plan(statement, connection.dialect)
    if plan is None:
        return [tuple(row) for row in connection.execute(statement, params)]
    driver: Any = connection.connection.driver_connection
    try:
        cursor = driver.cursor()
        try:
            cursor.execute(plan.sql, plan.parameters(params))
            rows = cursor.fetchall()
        finally:
            cursor.close()
    except connection.dialect.loaded_dbapi.Error:
        return [tuple(row) for row in connection.execute(statement, params)]
    return plan.convert(rows)


class _DriverPlan:
    """A SELECT compiled for one dialect: its SQL text, how to make the driver's parameters
    from the statement's, and how to convert the driver's rows (module `read_rows`)."""

    def __init__(self, compiled: Compiled, dialect: Dialect) -> None:
        self.compiled = compiled
        self.sql = compiled.string
        binds = compiled.binds  # type: ignore[attr-defined]
        self.bind_processors = {
            name: process
            for name, bind in binds.items()
            if (process := bind.type.dialect_impl(dialect).bind_processor(dialect)) is not None
        }
        self.positions: list[str] | None = compiled.positiontup  # type: ignore[attr-defined]
        statement: Any = compiled.statement
        processors = [
            column.type.dialect_impl(dialect).result_processor(dialect, None)
            for column in statement.selected_columns
        ]
        self.result_processors = [(i, p) for i, p in enumerate(processors) if p is not None]

    def parameters(self, params: Mapping[str, Any]) -> Any:
        """The driver's parameters: a sequence in placeholder order (qmark, SQLite), else a
        dict by name (pyformat, psycopg); the statement's own values included."""
        values: Any = self.compiled.construct_params(dict(params))
        for name, process in self.bind_processors.items():
            values[name] = process(values[name])
        if self.positions is not None:
            return [values[name] for name in self.positions]
        return values

    def convert(self, rows: list[Any]) -> list[Any]:
        if not self.result_processors:
            return rows
        converted = []
        for row in rows:
            values = list(row)
            for i, process in self.result_processors:
                values[i] = process(values[i])
            converted.append(tuple(values))
        return converted


@lru_cache(maxsize=256)
def _driver_plan(statement: Select[Any] | CompoundSelect, dialect: Dialect) -> _DriverPlan | None:
    """The statement's _DriverPlan, made once per statement object (the callers' statements are
    built once and kept); None when a parameter needs SQLAlchemy at execution time (an
    expanding IN list, a value rendered into the text)."""
    compiled = statement.compile(dialect=dialect)
    binds: Any = compiled.binds
    if any(b.expanding or b.literal_execute for b in binds.values()):
        return None
    return _DriverPlan(compiled, dialect)


def end_read_connection(_exc: BaseException | None = None) -> None:
    """The request's read connections, if it opened any: rolled back and back to their pools
    (create_app runs this at the end of every request)."""
    for key in (READ_CONNECTION_KEY, REPLICA_CONNECTION_KEY):
        connection = request.environ.pop(key, None)
        if connection is not None:
            connection.close()


@event.listens_for(Session, "after_transaction_create")
def _session_begins(_session: Session, transaction: Any) -> None:
    # A request's Session begins a transaction: the read connection goes back first, so a
    # request never holds two connections (and on SQLite never reads beside its own write).
    if transaction.parent is None and has_request_context():
        end_read_connection()
