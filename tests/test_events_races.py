"""Reading the change events while writers commit: never a gap, never a repeat
(services/events/journal.py gives ids in commit order). Meant for PostgreSQL, where writers commit
concurrently; on SQLite, whose writers take turns, the same tests run and must hold as well, except
the one that needs two transactions recording at once."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import event, select, text
from sqlalchemy.orm import Session

from webapp.extensions import db
from webapp.models import EventCounter, EventTxn
from webapp.services.events import feed
from webapp.services.records import crud, kinds

from .factories import OPERATOR
from .test_races import post_json as post
from .waiting import wait_until

POSTGRES_ONLY = "SQLite lets one writer at a time record: two transactions never record at once"


# --- many writers, one reader -----------------------------------------------------------------


WRITERS = 8
ROUNDS = 6


@dataclass
class Writer:
    """One client making changes one request at a time, noting the events each must record."""

    base: str
    token: str
    n: int
    expected: list[tuple[str, str]] = field(default_factory=list)  # (type, number) in order
    changes: int = 0  # rows changed by the requests that succeeded
    refused: int = 0  # requests answered 409 (nothing written)
    unexpected: list[tuple[int, dict[str, Any]]] = field(default_factory=list)

    def call(self, op: str, body: dict[str, Any], events: list[tuple[str, str]]) -> None:
        status, answer = post(self.base, self.token, f"/rest/ops/{op}/", {"type": "ddi", **body})
        if status == 200:
            assert answer["numrows"] == len(events), (op, body, answer)
            self.changes += answer["numrows"]
            self.expected += events
        elif status == 409:  # a duplicate (on purpose), or a concurrent change got in the way
            self.refused += 1
        else:
            self.unexpected.append((status, answer))

    def run(self) -> None:
        for r in range(ROUNDS):
            numbers = [f"2090{self.n}{r:03d}{k}" for k in range(3)]
            rows = [
                {"dialcode": "44", "number": n, "virt_exten": "100", "company": "acme"}
                for n in numbers
            ]
            self.call("create", {"values": rows}, [("ddi.created", n) for n in numbers])
            if r:  # a new number and last round's first one: a 409, nothing of it written
                fresh = {**rows[0], "number": f"2090{self.n}{r:03d}9"}
                taken = {**rows[0], "number": f"2090{self.n}{r - 1:03d}0"}
                before = self.refused
                self.call("create", {"values": [fresh, taken]}, [])
                assert self.refused == before + 1, "the duplicate batch was not refused"
            one, two, three = numbers
            self.call(
                "update",
                {"scope": {"company": "acme", "number": one}, "values": {"company": "globex"}},
                [("ddi.updated", one)],
            )
            self.call(
                "update",
                {"scope": {"company": "acme", "number": two}, "values": {"virt_exten": "7"}},
                [("ddi.updated", two)],
            )
            self.call(
                "delete",
                {"scope": {"company": "acme", "number": three}},
                [("ddi.deleted", three)],
            )

    def safe_run(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # pragma: no cover - reported by the test
            self.unexpected.append((0, {"exception": repr(exc)}))


@dataclass
class Reader:
    """Follows the feed: POST /rest/events/read after the last id seen, waiting a little."""

    base: str
    token: str
    scope: dict[str, Any] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    events: list[dict[str, Any]] = field(default_factory=list)
    reads: int = 0
    failures: list[Any] = field(default_factory=list)

    def run(self) -> None:
        last = 0
        try:
            while True:
                stopping = self.stop.is_set()  # before the read: a last read after the writers
                status, answer = post(
                    self.base,
                    self.token,
                    "/rest/events/read",
                    {"after": last, "limit": 37, "wait": 0.3, "scope": self.scope},
                )
                self.reads += 1
                if status != 200:
                    self.failures.append((status, answer))
                    return
                self.events += answer["values"]
                last = answer["last"]
                if stopping and not answer["values"]:
                    return
        except BaseException as exc:  # pragma: no cover - reported by the test
            self.failures.append(repr(exc))


@pytest.mark.slow
def test_readers_following_last_see_every_event_once_while_writers_commit(world, live_server):
    writers = [Writer(live_server, world.root.token, n) for n in range(WRITERS)]
    everything = Reader(live_server, world.root.token)
    globex = Reader(live_server, world.root.token, {"company": ["globex"]})
    readers = [threading.Thread(target=r.run) for r in (everything, globex)]
    threads = [threading.Thread(target=w.safe_run) for w in writers]
    for t in readers + threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    everything.stop.set()
    globex.stop.set()
    for t in readers:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads + readers)

    assert [u for w in writers for u in w.unexpected] == []
    assert not everything.failures and not globex.failures
    committed = sum(w.changes for w in writers)
    assert sum(w.refused for w in writers) == WRITERS * (ROUNDS - 1)  # the duplicates only
    ids = [e["id"] for e in everything.events]
    assert ids == list(range(1, committed + 1))  # each once, in order, no gap
    db.session.rollback()
    assert db.session.scalar(select(EventCounter.last_id)) == committed
    assert everything.reads > WRITERS  # it read while they wrote, not once at the end

    # Each writer's events are there, in the order it made its changes.
    by_writer: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for e in everything.events:
        by_writer[e["key"]["number"][4]].append((e["type"], e["key"]["number"]))
    for w in writers:
        assert by_writer[str(w.n)] == w.expected
    assert Counter(e["type"] for e in everything.events) == {
        "ddi.created": WRITERS * ROUNDS * 3,
        "ddi.updated": WRITERS * ROUNDS * 2,
        "ddi.deleted": WRITERS * ROUNDS,
    }

    # The globex reader, reading at its own pace, saw exactly the moves into globex.
    into_globex = [e for e in everything.events if e["company"] == "globex"]
    assert globex.events == into_globex
    assert len(into_globex) == WRITERS * ROUNDS


# --- one transaction held open at its commit --------------------------------------------------


@dataclass
class Gate:
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    last_id: int | None = None  # the counter as the transaction stamped it (after the stamp)


class Pauses:
    """Hold a named thread's transaction in its before_commit: `before` the event ids are
    stamped (events._stamp), or `after` it, which is just before COMMIT."""

    def __init__(self) -> None:
        self.gates: dict[tuple[str, str], Gate] = {}

    def hold(self, thread: str, where: str) -> Gate:
        gate = self.gates[(thread, where)] = Gate()
        return gate

    def before(self, session: Session) -> None:
        gate = self.gates.get((threading.current_thread().name, "before"))
        if gate is not None:
            assert "events.pending" in session.info, "ran after the stamp"
            self._wait(gate)

    def after(self, session: Session) -> None:
        gate = self.gates.get((threading.current_thread().name, "after"))
        if gate is not None:
            assert "events.pending" not in session.info, "ran before the stamp"
            gate.last_id = session.scalar(select(EventCounter.last_id))
            self._wait(gate)

    @staticmethod
    def _wait(gate: Gate) -> None:
        gate.reached.set()
        assert gate.release.wait(30), "never released"


@pytest.fixture
def pauses() -> Iterator[Pauses]:
    p = Pauses()
    event.listen(Session, "before_commit", p.before, insert=True)  # ahead of events._stamp
    event.listen(Session, "before_commit", p.after)  # behind it
    try:
        yield p
    finally:
        for gate in p.gates.values():
            gate.release.set()
        event.remove(Session, "before_commit", p.before)
        event.remove(Session, "before_commit", p.after)


def _renumber_in_thread(app, name: str, company: str, errors: list) -> threading.Thread:
    """In a thread of its own: give every DDI of `company` extension 2 (one transaction). An
    extension change starts and ends no history interval, so the change takes no lock of the
    rollup's (shared by every company): two of them meet only at the event counter."""

    def renumber() -> None:
        try:
            with app.app_context():
                crud.update(OPERATOR, kinds.DDI, {"company": company}, {"virt_exten": "2"})
                db.session.remove()
        except BaseException as exc:  # pragma: no cover - reported by the test
            errors.append(exc)

    thread = threading.Thread(target=renumber, name=name)
    thread.start()
    return thread


def _visible(after: int) -> list[tuple[int, str]]:
    """What a reader sees now: (id, number) of every committed event after `after`."""
    db.session.rollback()
    rows = feed.select_rows(after, 1000, None)
    db.session.rollback()
    return [(r.id, feed.shape(r)["key"]["number"]) for r in rows]


def _waiting_on_a_lock(statement: str) -> int:
    """PostgreSQL: how many backends of the test database wait for a lock in a statement
    starting with `statement`."""
    with db.engine.connect() as conn:
        return conn.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND query LIKE :q"
            ),
            {"q": statement + "%"},
        ).scalar()


@pytest.fixture
def write_lockers() -> Iterator[set[str]]:
    """SQLite: the names of the threads that have sent BEGIN IMMEDIATE during the test, that
    is asked for the write lock (which the thread holding it keeps until it commits)."""
    names: set[str] = set()

    def note(_conn, _cursor, statement, *_args) -> None:
        if statement == "BEGIN IMMEDIATE":
            names.add(threading.current_thread().name)

    event.listen(db.engine, "before_cursor_execute", note)
    try:
        yield names
    finally:
        event.remove(db.engine, "before_cursor_execute", note)


@pytest.mark.slow
@pytest.mark.parametrize("t2_records_first", [False, True], ids=["t1-first", "t2-records-first"])
def test_ids_follow_commit_order_and_a_reader_sees_no_later_commit_first(
    app, world, pauses, write_lockers, t2_records_first
):
    """T1 records events and is held just before COMMIT (its ids stamped); T2 records too and
    must wait for T1 (on PostgreSQL at the counter's row lock, on SQLite at the write lock);
    a reader sees neither. T1 commits: the reader sees T1's events only, then T2's once it
    commits, with ids all above T1's. With `t2_records_first`, T2 recorded its events before
    T1 began: ids still follow the commits, not the recording."""
    postgres = db.engine.dialect.name == "postgresql"
    if t2_records_first and not postgres:
        pytest.skip(POSTGRES_ONLY)
    t1_numbers = [f"2091000{k:03d}" for k in range(3)]
    t2_numbers = [f"2092000{k:03d}" for k in range(2)]
    for numbers, company in ((t1_numbers, "acme"), (t2_numbers, "globex")):
        crud.create(
            OPERATOR,
            kinds.DDI,
            [
                {"dialcode": "44", "number": n, "virt_exten": "1", "company": company}
                for n in numbers
            ],
        )
    base = 5  # the creates' events
    errors: list[BaseException] = []
    t1_after = pauses.hold("T1", "after")
    t2_after = pauses.hold("T2", "after")
    threads = []
    if t2_records_first:
        t2_before = pauses.hold("T2", "before")
        threads.append(_renumber_in_thread(app, "T2", "globex", errors))
        assert t2_before.reached.wait(10), errors
    threads.append(_renumber_in_thread(app, "T1", "acme", errors))
    assert t1_after.reached.wait(10), errors
    assert t1_after.last_id == base + 3
    if t2_records_first:
        t2_before.release.set()
    else:
        threads.append(_renumber_in_thread(app, "T2", "globex", errors))
    try:
        if postgres:  # T2 has recorded its events and waits for the counter T1 holds
            wait_until(
                lambda: _waiting_on_a_lock("UPDATE event_counter"),
                10,
                "T2 waiting for the event counter's row lock",
            )
        else:  # T2 waits for the write lock, which T1 holds until it commits
            wait_until(lambda: "T2" in write_lockers, 10, "T2 asking for the write lock")
        assert not t2_after.reached.is_set(), "T2 stamped its ids while T1 held the counter"
        assert _visible(base) == []  # neither has committed

        t1_after.release.set()  # T1 commits
        assert t2_after.reached.wait(10), errors  # T2 got the counter: stamped, not committed
        assert t2_after.last_id == base + 5
        t1_seen = _visible(base)
        assert t1_seen == list(zip([6, 7, 8], t1_numbers, strict=True))
        assert _visible(base + 3) == []

        t2_after.release.set()  # T2 commits
        for t in threads:
            t.join(timeout=10)
        assert not errors, errors
        assert _visible(base) == t1_seen + list(zip([9, 10], t2_numbers, strict=True))
        assert [i for i, _ in _visible(base + 3)] == [9, 10]
    finally:
        for gate in pauses.gates.values():
            gate.release.set()
        for t in threads:
            t.join(timeout=30)

    # Recorded in one order, numbered in the commit order.
    txns = db.session.execute(
        select(EventTxn.id, EventTxn.first_id, EventTxn.last_id)
        .where(EventTxn.first_id > base)
        .order_by(EventTxn.first_id)
    ).all()
    assert [(t.first_id, t.last_id) for t in txns] == [(6, 8), (9, 10)]
    if t2_records_first:
        assert txns[1].id < txns[0].id  # T2's events were written before T1's
