"""A PostgreSQL primary and a streaming replica of the suite's own, for the read-replica tests.

`initdb` makes the primary in a temporary folder on a free local port (WAL for replication,
trust authentication on 127.0.0.1 only), `pg_basebackup -R` copies it into a replica that
streams from it, on another free port: a second or two, and nothing of the machine's own
PostgreSQL is touched. Both stop (immediately: the data is thrown away) and their folder goes
when the `Pair` is closed.

PostgreSQL refuses to run its server as root; as root (CI) the binaries run as the `postgres`
user (`runuser`), which then owns the folder. Without the binaries (pg_config or Debian's
/usr/lib/postgresql/N/bin) `binaries()` is None and the tests that need a pair skip, saying so.
`make bench`'s replica rows (bench/replica.py) start their pair here too, loaded with the bench
data set before the replica is copied from it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .observability import free_port

SETTINGS = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{sockets}'
wal_level = replica
max_wal_senders = 4
hot_standby = on
fsync = off
synchronous_commit = off
full_page_writes = off
"""


def binaries() -> Path | None:
    """The folder of PostgreSQL's server binaries (initdb, pg_ctl, pg_basebackup), if any."""
    found = shutil.which("pg_config")
    if found:
        done = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False)
        folder = Path(done.stdout.strip())
        if (folder / "initdb").exists():
            return folder
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    return Path(debian[0]).parent if debian else None


def pair_marks() -> list[Any]:
    """The marks of a test module that starts a pair of its own: it runs once per `make test`
    (whatever TEST_DATABASE_URL), and skips, saying how to enable it, without the binaries."""
    import pytest  # the bench imports this module too, and runs without pytest's marks

    return [
        pytest.mark.database_independent,
        pytest.mark.skipif(
            binaries() is None,
            reason="PostgreSQL's server binaries (initdb, pg_basebackup) are not installed: "
            "apt-get install postgresql (or put pg_config on PATH) to run the replica tests",
        ),
    ]


@dataclass
class Pair:
    """A running primary and its streaming replica; `url(port, database)` names a database."""

    folder: Path
    bin: Path
    primary_port: int
    replica_port: int

    def url(self, port: int, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{port}/{database}"

    @property
    def primary(self) -> Path:
        return self.folder / "primary"

    @property
    def replica(self) -> Path:
        return self.folder / "replica"

    def run(self, tool: str, *args: str, timeout: float = 120) -> str:
        """One of the binaries, as the user that owns the folder; its output, or an
        AssertionError with it."""
        command = [str(self.bin / tool), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        assert done.returncode == 0, f"{tool} failed: {done.stdout}{done.stderr}"
        return done.stdout

    def start(self, data: Path) -> None:
        self.run(
            "pg_ctl", "-D", str(data), "-l", str(data.parent / f"{data.name}.log"), "-w", "start"
        )

    def stop(self, data: Path) -> None:
        self.run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")

    def close(self) -> None:
        for data in (self.replica, self.primary):
            if (data / "postmaster.pid").exists():
                self.stop(data)
        shutil.rmtree(self.folder, ignore_errors=True)


def start_pair(bin: Path, load: Callable[[Pair], None] | None = None) -> Pair:
    """A new primary and a replica streaming from it, both accepting connections. `load`, if
    given, fills the primary before the replica is copied from it (bench/replica.py's data
    set), so the replica starts with the data instead of replaying its every write."""
    folder = Path(tempfile.mkdtemp(prefix="telephony-replica-"))
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(folder, owner.pw_uid, owner.pw_gid)
    pair = Pair(folder, bin, free_port(), free_port())
    try:
        pair.run(
            "initdb", "-D", str(pair.primary), "-U", "postgres", "--auth=trust", "-E", "UTF8",
            "--no-sync",
        )  # fmt: skip
        settings = SETTINGS.format(port=pair.primary_port, sockets=folder)
        _append(pair.primary / "postgresql.conf", settings)
        _append(pair.primary / "pg_hba.conf", "host replication postgres 127.0.0.1/32 trust\n")
        pair.start(pair.primary)
        if load is not None:
            load(pair)
        pair.run(
            "pg_basebackup", "-h", "127.0.0.1", "-p", str(pair.primary_port), "-U", "postgres",
            "-D", str(pair.replica), "-R", "-X", "stream", "--no-sync", "--checkpoint=fast",
            timeout=1800,
        )  # fmt: skip
        _append(pair.replica / "postgresql.conf", f"port = {pair.replica_port}\n")
        pair.start(pair.replica)
        _wait_streaming(pair)
    except BaseException:
        pair.close()
        raise
    return pair


def _append(path: Path, text: str) -> None:
    """Add settings to a file the server's user owns (the later line of a setting wins)."""
    with path.open("a") as out:
        out.write(text)


def _wait_streaming(pair: Pair, timeout: float = 30) -> None:
    """Until the primary lists the replica among its WAL senders' clients."""
    from sqlalchemy import create_engine, text

    engine = create_engine(pair.url(pair.primary_port))
    try:
        deadline = time.monotonic() + timeout
        while True:
            with engine.connect() as conn:
                query = text("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
                if conn.execute(query).scalar_one():
                    return
            assert time.monotonic() < deadline, "the replica never started streaming"
            time.sleep(0.05)
    finally:
        engine.dispose()
