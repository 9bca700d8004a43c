"""What tests/test_logging.py and tests/test_metrics.py share: another app on the test database
with some settings changed, and a real gunicorn serving the app on it, for what only a server
shows (its own log lines, several worker processes)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask import Flask

from webapp import create_app
from webapp.extensions import db
from webapp.observability import logs

from .waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
# What the tests set themselves; an outer value would change what they check.
OWN = ("PROMETHEUS_MULTIPROC_DIR", "LOG_FORMAT", "LOG_LEVEL", "METRICS_TOKEN", "METRICS_ALLOW")


@contextlib.contextmanager
def other_apps(app: Flask, test_config: dict[str, Any]) -> Iterator[Callable[..., Flask]]:
    """Make other apps on the test database with some settings changed (the `app` fixture's
    stays the one whose context is pushed, and empties the tables). The log format is
    process-wide, as in a server: the suite's comes back afterwards."""
    made: list[Flask] = []

    def make(**settings: Any) -> Flask:
        other = create_app({**test_config, **settings})
        made.append(other)
        return other

    try:
        yield make
    finally:
        for other in made:
            with other.app_context():
                db.engine.dispose()
        logs.configure(app.config["LOG_LEVEL"], app.config["LOG_FORMAT"])


@dataclass
class Gunicorn:
    base: str
    proc: subprocess.Popen
    log: Path

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(database_url: str, instance: Path, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in OWN}
    env.update(
        DATABASE_URL=database_url,
        INSTANCE_PATH=str(instance),
        SECRET_KEY="gunicorn-test-secret-key-not-secret",
    )
    env.update(settings)  # a test's own, SECRET_KEY included
    return env


@contextlib.contextmanager
def gunicorn(
    env: dict[str, str], log: Path, *args: str, config: str = "gunicorn.conf.py"
) -> Iterator[Gunicorn]:
    """gunicorn -c `config` `args` on a free loopback port, from the checkout's top directory,
    its output (stdout and stderr) in `log`; yields once /healthz answers, stops it (SIGTERM,
    as an operator would) at the end."""
    port = free_port()
    argv = [sys.executable, "-m", "gunicorn", "-c", config, "--bind", f"127.0.0.1:{port}", *args]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = Gunicorn(f"http://127.0.0.1:{port}", proc, log)

    def answers() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited at start:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(server.base + "/healthz", timeout=2):
                return True
        except (urllib.error.URLError, OSError):
            return False

    try:
        wait_until(
            answers,
            60,
            "gunicorn to answer /healthz",
            interval=0.1,
            details=lambda: log.read_text()[-3000:],
        )
        yield server
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
