"""Downloads under gunicorn as docs/deploy.md runs it (gunicorn.conf.py): a stream that outlasts
the worker timeout completes, even while clients hold the worker's closing connections open;
a stream cut short (its rows fail, its worker dies) is an error to the client, over HTTP/1.1
(no last chunk, or a reset) and HTTP/1.0 (a reset, as the body's end is the connection's)."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from .observability import gunicorn, server_env

pytestmark = [
    pytest.mark.slow,  # a real gunicorn
    pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux's /proc"),
]

APP = "tests.download_app:create()"


@pytest.fixture
def env(migrated, test_config, tmp_path) -> dict[str, str]:
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    return server_env(
        migrated,
        tmp_path / "instance",
        SECRET_KEY=test_config["SECRET_KEY"],
        PROMETHEUS_MULTIPROC_DIR=str(metrics),
        WEB_CONCURRENCY="1",  # every connection of the test on the one worker
    )


def port_of(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


def expected(count: int) -> bytes:
    return b"n,text\r\n" + b"".join(b"%d,row %d\r\n" % (n, n) for n in range(1, count + 1))


def raw_get(port: int, path: str, version: str) -> tuple[bytes, BaseException | None]:
    """What a client reading to the connection's end gets, and how the end came."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(f"GET {path} {version}\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    got = b""
    try:
        while data := sock.recv(65536):
            got += data
    except OSError as error:
        return got, error
    finally:
        sock.close()
    return got, None


def hold_closed_connections(port: int, count: int) -> list[socket.socket]:
    """Clients that ask with `Connection: close`, read the answer and keep their end open:
    gunicorn lingers on each for 2 s when closing it."""
    held = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        held.append(sock)
    for sock in held:
        sock.recv(65536)
    return held


def test_a_download_longer_than_the_timeout_completes(env, tmp_path):
    """Timeout 2 s; a 6 s download while six clients hold closing connections (12 s of
    lingering that gunicorn's own gthread worker spends on its main loop, killing the worker)."""
    log = tmp_path / "gunicorn.log"
    with gunicorn(env, log, "--timeout", "2", APP) as server:
        port = port_of(server.base)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", "/test-rows.csv?n=30000&pause=0.2")
        answer = conn.getresponse()
        held = hold_closed_connections(port, 6)
        body = answer.read()
        for sock in held:
            sock.close()
        # Kept alive after a complete download: the connection still serves the next request.
        conn.request("GET", "/test-rows.csv?n=3")
        again = conn.getresponse().read()
        conn.close()
    assert answer.status == 200 and answer.getheader("Transfer-Encoding") == "chunked"
    assert body == expected(30000)
    assert again == expected(3)
    assert "WORKER TIMEOUT" not in log.read_text()


def test_a_failing_download_is_an_error_to_the_client(env, tmp_path):
    log = tmp_path / "gunicorn.log"
    with gunicorn(env, log, APP) as server:
        port = port_of(server.base)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/test-rows.csv?n=20000&fail=15000")
        answer = conn.getresponse()
        assert answer.status == 200
        with pytest.raises((http.client.IncompleteRead, ConnectionResetError)):
            answer.read()
        conn.close()
        # HTTP/1.0: no chunks, the body ends with the connection; it must end in a reset.
        got, error = raw_get(port, "/test-rows.csv?n=20000&fail=15000", "HTTP/1.0")
        assert isinstance(error, ConnectionResetError), (error, got[-200:])
        assert b"Transfer-Encoding" not in got.split(b"\r\n\r\n", 1)[0]
        # The worker serves on, and a complete download over HTTP/1.0 ends in order.
        got, error = raw_get(port, "/test-rows.csv?n=2000", "HTTP/1.0")
        assert error is None and got.split(b"\r\n\r\n", 1)[1] == expected(2000)
    assert "the row source failed at row 15000" in log.read_text()


def test_a_download_cut_by_the_death_of_its_worker_is_an_error(env, tmp_path):
    log = tmp_path / "gunicorn.log"
    with gunicorn(env, log, APP) as server:
        port = port_of(server.base)
        for version in ("HTTP/1.1", "HTTP/1.0"):
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            request = f"GET /test-rows.csv?n=100000&pause=0.5 {version}\r\nHost: x\r\n\r\n"
            sock.sendall(request.encode())
            got = sock.recv(65536)
            assert got.startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")), got[:100]
            pid = server.proc.pid
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            for pid in map(int, children):
                os.kill(pid, signal.SIGKILL)
            ended = None
            try:
                while data := sock.recv(65536):
                    got += data
            except OSError as error:
                ended = error
            sock.close()
            if version == "HTTP/1.0":
                assert isinstance(ended, ConnectionResetError), (ended, got[-100:])
            else:  # reset, or an end without the last chunk
                cut = not got.endswith(b"\r\n0\r\n\r\n")
                assert isinstance(ended, ConnectionResetError) or cut
            time.sleep(1)  # the master starts a new worker
            _wait_serving(server.base)


def _wait_serving(base: str) -> None:
    from .waiting import wait_until

    def answers() -> bool:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port_of(base), timeout=2)
            conn.request("GET", "/healthz")
            return conn.getresponse().status == 200
        except OSError:
            return False

    wait_until(answers, 30, "a new worker to serve")
