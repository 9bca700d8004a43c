"""The suite's own primary and streaming replica (tests/replicas.py) behave as routing reads to
a replica relies on: a commit on the primary reaches the replica by itself, the replica
refuses writes, and a replica whose replay is paused (pg_wal_replay_pause) stays behind, its
replayed WAL position short of the primary's, until it resumes."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from .replicas import binaries, pair_marks, start_pair

BIN = binaries()

pytestmark = pair_marks()


@pytest.fixture(scope="module")
def pair():
    assert BIN is not None
    started = start_pair(BIN)
    yield started
    started.close()


def until(check, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_commit_reaches_the_replica_which_refuses_writes(pair):
    primary = create_engine(pair.url(pair.primary_port), isolation_level="AUTOCOMMIT")
    replica = create_engine(pair.url(pair.replica_port), isolation_level="AUTOCOMMIT")
    try:
        with primary.connect() as conn:
            conn.execute(text("CREATE TABLE seen (n integer)"))
            conn.execute(text("INSERT INTO seen VALUES (1)"))
        with replica.connect() as conn:
            assert conn.execute(text("SELECT pg_is_in_recovery()")).scalar_one() is True

            def arrived() -> bool:
                found = conn.execute(text("SELECT to_regclass('seen') IS NOT NULL")).scalar_one()
                return (
                    bool(found)
                    and conn.execute(text("SELECT count(*) FROM seen")).scalar_one() == 1
                )

            until(arrived)
            with pytest.raises(DBAPIError, match="read-only transaction"):
                conn.execute(text("INSERT INTO seen VALUES (2)"))
    finally:
        primary.dispose()
        replica.dispose()


def test_a_paused_replica_stays_behind_until_it_resumes(pair):
    primary = create_engine(pair.url(pair.primary_port), isolation_level="AUTOCOMMIT")
    replica = create_engine(pair.url(pair.replica_port), isolation_level="AUTOCOMMIT")
    try:
        with primary.connect() as p, replica.connect() as r:
            p.execute(text("CREATE TABLE IF NOT EXISTS later (n integer)"))
            until(lambda: r.execute(text("SELECT to_regclass('later')")).scalar_one() is not None)
            r.execute(text("SELECT pg_wal_replay_pause()"))
            until(
                lambda: (
                    r.execute(text("SELECT pg_get_wal_replay_pause_state()")).scalar_one()
                    == "paused"
                )
            )
            p.execute(text("INSERT INTO later VALUES (1)"))
            # The insert position, not pg_current_wal_lsn (the write position): with
            # synchronous_commit off the commit record may not be written out yet.
            written = p.execute(text("SELECT pg_current_wal_insert_lsn()")).scalar_one()
            time.sleep(0.3)  # time enough to replay, were it not paused
            assert r.execute(text("SELECT count(*) FROM later")).scalar_one() == 0
            behind = text("SELECT pg_last_wal_replay_lsn() < CAST(:lsn AS pg_lsn)")
            assert r.execute(behind, {"lsn": written}).scalar_one() is True

            r.execute(text("SELECT pg_wal_replay_resume()"))
            until(lambda: r.execute(text("SELECT count(*) FROM later")).scalar_one() == 1)
            assert r.execute(behind, {"lsn": written}).scalar_one() is False
    finally:
        primary.dispose()
        replica.dispose()
