"""Worlds built once per test process and restored as rows after that.

Building a world through the services (companies, accounts with tokens, a module's records)
costs tens of milliseconds a test, most of a typical test's time. `kept` builds it the first
time, through the services as before, then keeps every table's rows and the World's callers;
a later test asking for the same world in the same state of the database gets those rows
written back in one pass instead. The rows are the ones the services wrote (ids, hashed
tokens, audit entries, events and the event counter included), so the test sees the same
database, apart from the instants of when they were written.

A world is restored only when nothing could tell it from a build:
- the same fixture, with the same arguments other than the World it builds on, and the
  same configuration (every setting's repr);
- on the same database state: the app fixture's emptied database, or a world restored or
  built just before (a module's world builds on the shared one), with no statement but reads
  since (`_count_writes`, on every engine of the process) and the same row count in every
  table (what a write the engine does not see, such as psycopg's COPY, would change);
- a World, with no signed-in browser client (a session's age is part of what it is).
Anything else builds as before, and the database state becomes unknown until the next test.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from flask import current_app
from sqlalchemy import Connection, Engine, Table, event, func, literal, select, union_all

from webapp.extensions import db

from .factories import Factory, World


@dataclass(frozen=True)
class _Kept:
    rows: list[tuple[Table, list[dict[str, Any]]]]  # every table's rows, in dependency order
    callers: dict[str, Any]
    method: str | None  # the fixture answers this method of the World, not the World

    @property
    def counts(self) -> tuple[int, ...]:
        """Each table's row count, metadata order."""
        return tuple(len(rows) for _, rows in self.rows)


_cache: dict[Hashable, _Kept] = {}
_state: Hashable | None = None  # what the database holds now: a key, or None (unknown)
_counts: tuple[int, ...] | None = None  # its row counts, when known
_writes = 0  # statements other than reads since the state was set

_READS = ("SELECT", "PRAGMA", "SHOW", "SAVEPOINT", "RELEASE", "ROLLBACK", "BEGIN", "COMMIT")


@event.listens_for(Engine, "before_cursor_execute")
def _count_writes(_conn, _cursor, statement, _parameters, _context, _executemany) -> None:
    global _writes
    if not statement.lstrip()[:9].upper().startswith(_READS):
        _writes += 1


def mark(state: Hashable | None, counts: tuple[int, ...] | None = None) -> None:
    """The database now holds `state` (None: unknown), with these row counts if known."""
    global _state, _counts, _writes
    _state, _counts, _writes = state, counts, 0


def mark_emptied(rows: dict[str, int]) -> None:
    """The database was just emptied (conftest.empty_all_tables), leaving only `rows`
    ({table name: count}):
    a state of its own for each configuration it was emptied under."""
    counts = tuple(rows.get(t.name, 0) for t in db.metadata.sorted_tables)
    mark(("emptied", _config_key()), counts)


def _row_counts() -> tuple[int, ...]:
    tables = db.metadata.sorted_tables
    query = union_all(
        *(
            select(literal(i).label("i"), func.count().label("n")).select_from(t)
            for i, t in enumerate(tables)
        )
    )
    found = {i: n for i, n in db.session.execute(query).all()}
    return tuple(int(found[i]) for i in range(len(tables)))


def _config_key() -> str:
    return repr(sorted(current_app.config.items(), key=lambda item: item[0]))


def kept(build: Callable[..., Any]) -> Callable[..., Any]:
    """A world fixture's function, built once per state and then restored (module doc). The
    fixture's arguments are as pytest gives them; a World among them is the one built on."""

    @functools.wraps(build)
    def fixture(*args: Any, **kwargs: Any) -> Any:
        given = [v for v in (*args, *kwargs.values()) if isinstance(v, World)]
        # The World and Factory given are this test's (objects of their own each time).
        others = {k: repr(v) for k, v in kwargs.items() if not isinstance(v, World | Factory)}
        key = (build.__module__, build.__qualname__, repr(sorted(others.items())))
        key = (*key, _state, _config_key())
        db.session.rollback()  # what the session holds is read afresh
        if _state is not None and _writes == 0 and key in _cache and _counts is not None:
            kept_ = _cache[key]
            if _row_counts() == _counts:
                world = given[0] if given else World(kwargs["factory"])
                _restore(kept_)
                world.callers = dict(kept_.callers)
                mark(key, kept_.counts)
                return getattr(world, kept_.method) if kept_.method else world
        unchanged = _state is not None and _writes == 0
        result = build(*args, **kwargs)
        db.session.rollback()
        # A World, or one of its methods (a fixture answering world.caller).
        world, method = result, None
        if not isinstance(result, World):
            world, method = getattr(result, "__self__", None), getattr(result, "__name__", None)
        if unchanged and isinstance(world, World) and not world._browsers:
            _cache[key] = kept_ = _Kept(_read_all(), dict(world.callers), method)
            mark(key, kept_.counts)
        else:
            mark(None)
        return result

    return fixture


def delete_rows(conn: Connection, tables: Sequence[Table]) -> None:
    """Delete every row of `tables` (in dependency order: deleted last first). On PostgreSQL in
    one round trip instead of one each (psycopg sends statements without parameters as one
    query): every test starts with this."""
    deletes = [table.delete() for table in reversed(tables)]
    if not deletes:
        return
    if conn.dialect.name == "postgresql":
        statements = [str(d.compile(dialect=conn.dialect)) for d in deletes]
        conn.exec_driver_sql(";\n".join([*skip_key_checks(conn), *statements]))
    else:
        for delete in deletes:
            conn.execute(delete)


_SUPERUSER: dict[str, bool] = {}


def skip_key_checks(conn: Connection) -> list[str]:
    """On PostgreSQL, the statement that turns off the foreign-key checks until the
    transaction ends, when the test database's role may (a superuser's, as CI's): emptying or
    refilling every table checks each row deleted or inserted against every table referring to
    it or referred to (a query each), most of the 25 ms each test spent emptying its
    database. The rows go or come all together, so there is nothing to check."""
    url = str(conn.engine.url)
    if url not in _SUPERUSER:
        _SUPERUSER[url] = bool(
            conn.exec_driver_sql(
                "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
            ).scalar()
        )
    return ["SET LOCAL session_replication_role = replica"] if _SUPERUSER[url] else []


def _read_all() -> list[tuple[Table, list[dict[str, Any]]]]:
    connection = db.session.connection()
    found = []
    for table in db.metadata.sorted_tables:
        found.append((table, [dict(r) for r in connection.execute(select(table)).mappings()]))
    db.session.rollback()
    return found


def _restore(kept_: _Kept) -> None:
    """Every table's rows replaced by the kept ones, through the session's own connection (as
    the services wrote them: a second connection would be one more in the pool, which a test
    of the planner's statistics, loaded per connection, would notice)."""
    session = db.session()
    session.rollback()  # its read of the counts would still see the old rows
    conn = session.connection()
    # Only the tables holding rows now (_counts, checked just before): a few, not forty.
    delete_rows(conn, [t for (t, _), n in zip(kept_.rows, _counts or (), strict=True) if n])
    if conn.dialect.name == "postgresql":
        for statement in skip_key_checks(conn):  # the kept rows were checked when written
            conn.exec_driver_sql(statement)
    for table, rows in kept_.rows:
        if rows:
            conn.execute(table.insert(), rows)
    session.commit()
