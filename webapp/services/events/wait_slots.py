"""How many reads of the change events one account may have waiting at once (EVENTS_MAX_WAITING).

A read with `wait` above 0 (POST /rest/events/read, docs/events.md#limits) holds a web
worker's thread for up to 30 s. Without a bound, one token sending a few such reads at once
takes every thread of a server, and its pages and health checks wait behind them. So a
waiting read first takes one of its account's EVENTS_MAX_WAITING slots, and a read that finds
none free is refused at once (TooManyRequests: 429 with Retry-After) instead of waiting.

The slots are POSIX record locks on one file in the instance folder (`events-waiting.lock`),
one byte per slot: byte `account id * MAX_WAITING_READS + slot`. Every process that shares
the instance folder (all the workers of one gunicorn, the processes of one installation on
one host) sees the same locks, so the limit holds across them; on several hosts each host
counts its own, which is what keeps each host's workers free. The operating system frees a
process's locks when it exits, however it exits (a worker killed by gunicorn's timeout, a
crash), so a slot is never lost; nothing is stored and nothing needs cleaning up.

Record locks belong to a process, not to a thread: the kernel would grant a thread a byte its
own process already holds. So each process also keeps the slots its own threads hold
(`_held`) and only tries the others.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from flask import current_app

from ...config import MAX_WAITING_READS
from ...errors import TooManyRequests

LOCK_FILE = "events-waiting.lock"
# What a refused read's Retry-After says: a slot frees when one of the account's waiting reads
# ends, as soon as an event is committed and at the latest after its `wait` (30 s at most);
# asking again sooner costs the server one refusal, which is cheap.
RETRY_AFTER_SECONDS = 5

_mutex = threading.Lock()
_files: dict[str, int] = {}  # lock file path -> this process's descriptor, kept open
_held: set[tuple[str, int, int]] = set()  # (path, account id, slot) held by this process
_pid = os.getpid()


@contextmanager
def slot(account_id: int | None) -> Iterator[None]:
    """Hold one of the account's EVENTS_MAX_WAITING waiting-read slots for the block.

    Guarantees: at most EVENTS_MAX_WAITING blocks run at once for one account among all the
    processes and threads sharing this instance folder; one more raises TooManyRequests at
    once (nothing waits for a slot). Other accounts are not affected. The slot is freed when
    the block ends, however it ends (an answer, an exception, an outage), or when the process
    exits. A principal without an account (the command line) takes no slot."""
    if account_id is None:
        yield
        return
    limit = current_app.config["EVENTS_MAX_WAITING"]
    path = str(Path(current_app.instance_path) / LOCK_FILE)
    taken = _take(path, account_id, limit)
    if taken is None:
        raise TooManyRequests(
            f"This account already has {limit} reads of the events waiting; "
            f"try again when one has ended.",
            RETRY_AFTER_SECONDS,
        )
    try:
        yield
    finally:
        _free(path, account_id, taken)


def _take(path: str, account_id: int, limit: int) -> int | None:
    """A free slot of the account, now locked by this process and thread; None: all taken."""
    with _mutex:
        fd = _file(path)
        for number in range(limit):
            if (path, account_id, number) in _held:
                continue
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _offset(account_id, number))
            except OSError:  # another process holds it
                continue
            _held.add((path, account_id, number))
            return number
    return None


def _free(path: str, account_id: int, number: int) -> None:
    with _mutex:
        if (path, account_id, number) in _held:
            fcntl.lockf(_file(path), fcntl.LOCK_UN, 1, _offset(account_id, number))
            _held.discard((path, account_id, number))


def _offset(account_id: int, number: int) -> int:
    return account_id * MAX_WAITING_READS + number


def _file(path: str) -> int:
    """This process's descriptor of the lock file. Kept open: closing any descriptor of a file
    frees every record lock the process holds on it. A forked child holds none of its
    parent's locks, so it forgets what it inherited and opens its own."""
    global _pid
    if _pid != os.getpid():
        _pid = os.getpid()
        _files.clear()
        _held.clear()
    if path not in _files:
        _files[path] = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    return _files[path]
