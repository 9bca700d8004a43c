"""The suite's one way to wait for something that happens in another thread or process.

A test never sleeps "long enough" for a thing to happen, nor to show that it did not: it waits
for a positive sign that it has happened (a request received, a row committed, a thread at a
barrier, a log line), and fails naming what it waited for when the sign does not come."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    timeout: float = 10,
    what: str = "the condition",
    *,
    interval: float = 0.02,
    details: Callable[[], str] | None = None,
) -> T:
    """Call `condition` every `interval` seconds until it returns something true, and return
    that. If `timeout` seconds pass first, raise AssertionError naming `what` (and, when
    given, what `details()` says then: a log's tail). An exception `condition` raises goes
    through at once: a check may know the wait is hopeless (the process exited)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            message = f"timed out after {timeout:g} s waiting for {what}"
            if details is not None:
                message += f":\n{details()}"
            raise AssertionError(message)
        time.sleep(interval)
