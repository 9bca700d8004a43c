"""One deadline for a whole webhook POST (docs/events.md#delivery): connecting, the TLS
handshake, sending, the status line and headers, and the part of the answer that is read.

urllib3's timeouts bound each socket operation, not their sum: a receiver sending one byte
every 9 s would hold a delivery thread, and its webhook, for hours, and keep SIGTERM waiting.
So a POST runs `watching(deadline)`: its sockets are noted as they are opened or reused
(`note`, from the connection classes of delivery.py), and one watchdog thread shuts them down
once the deadline has passed. The blocked read then fails at once, and the caller sees
`Watch.expired`.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

TICK = 0.1  # seconds between the watchdog's looks: how late past its deadline a POST is cut


class Watch:
    """One POST's deadline and the sockets it uses."""

    def __init__(self, deadline: float):
        self.deadline = deadline
        self.sockets: list[socket.socket] = []
        self.expired = False

    def cut(self) -> None:
        self.expired = True
        for sock in self.sockets:
            with suppress(OSError):  # closed meanwhile: nothing left to stop
                sock.shutdown(socket.SHUT_RDWR)


class _Watchdog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: set[Watch] = set()
        self._pid: int | None = None  # the process whose thread runs (a fork has none)

    def add(self, watch: Watch) -> None:
        with self._lock:
            self._watches.add(watch)
            if self._pid != os.getpid():
                self._pid = os.getpid()
                threading.Thread(target=self._run, name="webhook-deadlines", daemon=True).start()

    def remove(self, watch: Watch) -> None:
        with self._lock:
            self._watches.discard(watch)

    def note(self, watch: Watch, sock: socket.socket) -> None:
        with self._lock:
            watch.sockets.append(sock)
            if watch.expired:  # opened after the cut: cut it too
                watch.cut()

    def forget_sockets(self, watch: Watch) -> None:
        with self._lock:  # under the lock: a cut under way finishes first
            watch.sockets.clear()

    def _run(self) -> None:
        while True:
            time.sleep(TICK)
            now = time.monotonic()
            with self._lock:  # a cut happens under it, so `forget_sockets` never races one
                for watch in self._watches:
                    if not watch.expired and watch.deadline <= now:
                        watch.cut()


_WATCHDOG = _Watchdog()
_current = threading.local()


@contextmanager
def watching(deadline: float) -> Iterator[Watch]:
    """Cut the sockets this thread's POST uses (`note`) once `deadline` (time.monotonic())
    has passed, until the block ends."""
    watch = Watch(deadline)
    _WATCHDOG.add(watch)
    _current.watch = watch
    try:
        yield watch
    finally:
        _current.watch = None
        _WATCHDOG.remove(watch)


def note(sock: socket.socket | None) -> None:
    """A socket the current thread's POST is about to use (none watched: nothing to do)."""
    watch = getattr(_current, "watch", None)
    if watch is not None and sock is not None:
        _WATCHDOG.note(watch, sock)


def release() -> None:
    """The current POST's connection goes back to its pool: another POST may use it next, so
    it is no longer this one's to cut."""
    watch = getattr(_current, "watch", None)
    if watch is not None:
        _WATCHDOG.forget_sockets(watch)
