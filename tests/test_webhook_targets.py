"""Where webhooks may go (services/events/targets.py, docs/events.md#webhook-targets): only to
public addresses, however the URL writes a private one, unless WEBHOOK_ALLOW_NETWORKS allows
it; checked at creation (service, command line, page) and again at every delivery, which
connects to the address it checked; a failure is stored as a category, never the error's
text; and a receiver's answer is read to 64 KB at most, whatever its size."""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, update

from webapp.config import parse_networks
from webapp.errors import Invalid
from webapp.extensions import db
from webapp.models import AuditEntry, Webhook
from webapp.services.events import delivery, webhooks

from .conftest import LOOPBACK
from .factories import OPERATOR
from .test_delivery import Receiver, Run, attempts, make_ddis, new_hook
from .test_webhooks_pages import post, text
from .waiting import wait_until

# The audit's examples, and the other ways to name a non-public address.
REFUSED = [
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/",
    "http://192.168.1.1/",
    "http://172.16.5.4/",
    "http://[::ffff:169.254.169.254]/",
    "http://2130706433/",
    "http://0x7f000001/",
    "http://0177.0.0.1/",
    "http://127.1/",
    "http://localhost:5077/metrics",
    "http://127.0.0.1:5432",
    "http://0.0.0.0/",
    "http://[::1]/",
    "http://[::]/",
    "http://[fe80::1]/",
    "http://[fc00::1]/",
    "http://[fd12:3456::1]/",
    "http://[fec0::1]/",
    "http://100.64.0.1/",
    "http://224.0.0.1/",
    "http://[ff02::1]/",
    "http://240.0.0.1/",
    "http://255.255.255.255/",
    "http://[2002:7f00:1::]/",  # 6to4 of 127.0.0.1
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 of 169.254.169.254
    "http://[64:ff9b:1::a00:1]/",  # the local-use NAT64 prefix (RFC 8215): 10.0.0.1 behind it
    "http://[2001::1]/",  # Teredo
    "https://192.0.2.10/",  # documentation
]
PUBLIC = "https://93.184.215.14/in"  # a public address, written as one: the tests resolve no name


def webhook_count() -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(Webhook)) or 0


def allow(app, value: str | None) -> None:
    app.config["WEBHOOK_ALLOW_NETWORKS"] = parse_networks(value) if value else None


# --- at creation -------------------------------------------------------------------------------


@pytest.mark.parametrize("url", REFUSED)
def test_a_non_public_address_is_refused_at_creation_whatever_its_spelling(world, url):
    with pytest.raises(Invalid) as refused:
        webhooks.create(OPERATOR, url)
    assert refused.value.fields == {"url": "address not allowed"}
    assert "webhooks go only to public addresses" in refused.value.message
    assert webhook_count() == 0


def test_credentials_and_unresolved_names_are_refused(world, app):
    allow(app, "0.0.0.0/0, ::/0")  # allowing every address does not allow credentials
    with pytest.raises(Invalid) as refused:
        webhooks.create(OPERATOR, "https://user:secret@93.184.215.14/in")
    assert refused.value.fields == {"url": "address not allowed"}
    assert "credentials" in refused.value.message
    with pytest.raises(Invalid) as unknown:
        webhooks.create(OPERATOR, "https://no-such-host.invalid/in")
    assert unknown.value.fields == {"url": "name not resolved"}
    assert webhook_count() == 0


def test_a_public_address_is_accepted(world):
    for url in (PUBLIC, "http://[2606:4700::1111]:8080/x", "http://[64:ff9b::5db8:d70e]/"):
        hook, _ = webhooks.create(OPERATOR, url)
        assert hook.url == url


def test_allowed_networks_may_be_targeted(world, app):
    allow(app, "127.0.0.0/8, 10.0.0.0/8, fc00::/7")
    for url in (
        "http://localhost:5077/metrics",
        "http://2130706433/",
        "http://0x7f000001/",
        "http://0177.0.0.1/",
        "http://[::ffff:127.0.0.1]/",
        "http://10.1.2.3:8080/hooks",
        "http://[fd00::5]/",
    ):
        webhooks.create(OPERATOR, url)
    # Only those networks: the rest stays refused.
    for url in ("http://192.168.1.1/", "http://169.254.169.254/", "http://[::1]/"):
        with pytest.raises(Invalid):
            webhooks.create(OPERATOR, url)
    assert webhook_count() == 7


def test_loopback_is_refused_by_default(world, app):
    assert app.config.get("WEBHOOK_ALLOW_NETWORKS") is None  # the tests' default, as production
    with pytest.raises(Invalid):
        webhooks.create(OPERATOR, "http://127.0.0.1:9/hook")


@pytest.mark.parametrize(
    "url", ["http://169.254.169.254/latest/meta-data/", "http://0x7f000001/", "http://[::1]:5432/"]
)
def test_the_command_refuses_with_one_line_and_writes_nothing(world, flask, url):
    result = flask("webhooks", "create", url)
    assert result.returncode == 1, result.stdout
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("Error: The URL's host ") and "(url: address not allowed)" in line
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert webhook_count() == 0


def test_the_command_accepts_an_allowed_network(world, app, flask):
    allow(app, "127.0.0.0/8")  # the `flask` fixture passes it on as WEBHOOK_ALLOW_NETWORKS
    result = flask("webhooks", "create", "http://localhost:9/hook")
    assert result.returncode == 0, result.stderr
    assert webhook_count() == 1


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://localhost/"])
def test_the_page_shows_the_refusal_beside_the_url(world, url):
    browser = world.browser("root")
    response = post(browser, "/admin/webhooks", {"url": url})
    assert response.status_code == 400
    assert "webhooks go only to public addresses" in text(response, "#url-error")
    assert webhook_count() == 0
    db.session.rollback()
    created = select(func.count()).where(AuditEntry.action == "webhook.create")
    assert db.session.scalar(created) == 0


# --- at delivery -------------------------------------------------------------------------------


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()
    assert not r.errors, r.errors


def worker_run(**sender: Any) -> Run:
    """A worker made now: its Sender takes WEBHOOK_ALLOW_NETWORKS as it is now."""
    return Run(delivery.Worker(db.engine, sender=delivery.Sender(**sender)))


def test_delivery_checks_again_and_refuses_once_the_network_is_no_longer_allowed(
    world, app, receiver
):
    allow(app, "127.0.0.0/8")
    hook_id, _ = new_hook(receiver.url("/h"))
    allow(app, None)
    run = worker_run()
    try:
        make_ddis("2079000001")
        run.drain()
    finally:
        run.worker.locks.close()
    [attempt] = attempts(hook_id)
    assert (attempt.status, attempt.error, attempt.outcome) == (
        None,
        "address not allowed",
        "retry",
    )
    assert receiver.seen() == []  # no connection reached it


def test_delivery_connects_to_the_checked_address_with_the_urls_host(world, app, receiver):
    allow(app, "127.0.0.0/8")
    hook_id, _ = new_hook(f"http://localhost:{receiver.port}/h")
    run = worker_run()
    try:
        make_ddis("2079000002", "2079000003")
        run.drain()
    finally:
        run.worker.locks.close()
    assert [a.outcome for a in attempts(hook_id)] == ["delivered", "delivered"]
    assert {r.headers["host"] for r in receiver.seen()} == {f"localhost:{receiver.port}"}
    # The POSTs went to 127.0.0.1 (the only address `localhost` resolves to here), over one
    # kept-alive connection: both events through one pool.
    assert len(run.worker.sender._pools) == 1
    [(scheme, host, address, port)] = run.worker.sender._pools
    assert (scheme, host, address, port) == ("http", "localhost", "127.0.0.1", receiver.port)


class _Silent(BaseHTTPRequestHandler):
    """Takes the request and closes the connection without a word."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def served(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_failures_are_stored_as_categories_never_as_error_text(world, app, receiver):
    allow(app, "127.0.0.0/8")
    sender = delivery.Sender(timeout=0.5)
    event = {"id": 1, "type": "ddi.created"}
    secret = webhooks.new_secret()

    receiver.script = lambda _request: 503  # an answer: its status, no category
    answer = sender.send(receiver.url("/h"), [secret], event)
    assert (answer.status, answer.error, answer.delivered) == (503, None, False)
    receiver.script = lambda _request: (200, 2.0)  # slower than the sender's 0.5 s
    assert sender.send(receiver.url("/slow"), [secret], event).error == "timeout"
    # TLS spoken to a plain HTTP server.
    assert sender.send(f"https://127.0.0.1:{receiver.port}/h", [secret], event).error == "TLS error"
    with served(_Silent) as port:  # PostgreSQL's port, as the audit saw it: RemoteDisconnected
        assert (
            sender.send(f"http://127.0.0.1:{port}/", [secret], event).error == "connection failed"
        )
    receiver.down()
    assert sender.send(receiver.url("/h"), [secret], event).error == "connection refused"
    for url, category in (
        ("http://169.254.169.254/latest/meta-data/", "address not allowed"),
        ("http://user:pw@127.0.0.1:9/", "address not allowed"),
        ("http://no-such-host.invalid/", "name not resolved"),
    ):
        answer = sender.send(url, [secret], event)
        assert (answer.status, answer.error) == (None, category), url


def test_the_page_and_the_command_show_the_categories(world, app, receiver, flask):
    allow(app, "127.0.0.0/8")
    hook_id, _ = new_hook(receiver.url("/h"))
    receiver.down()
    run = worker_run()
    try:
        make_ddis("2079000004")
        run.drain()
    finally:
        run.worker.locks.close()
    page = world.browser("root").get(f"/admin/webhooks/{hook_id}")
    assert "connection refused" in text(page, "#attempts tbody tr")
    listed = flask("webhooks", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip().endswith("last answer: connection refused"), listed.stdout
    db.session.execute(update(Webhook).values(head_attempts=0, next_attempt_at=None))
    db.session.commit()
    receiver.up()
    receiver.script = lambda _request: 503
    run = worker_run()
    try:
        run.drain()
    finally:
        run.worker.locks.close()
    assert "HTTP 503" in text(world.browser("root").get(f"/admin/webhooks/{hook_id}"), "#attempts")
    assert flask("webhooks", "list").stdout.strip().endswith("last answer: HTTP 503")


# --- TLS: the name is verified on the pinned address ------------------------------------------


def _certificate(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for `name` (its own CA), made by the openssl command."""
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", f"/CN={name}", "-addext", f"subjectAltName=DNS:{name}",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hosts: list[str] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).hosts.append(self.headers["Host"])
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.skipif(not Path("/usr/bin/openssl").exists(), reason="needs the openssl command")
def test_https_verifies_the_urls_name_on_the_checked_address(app, tmp_path):
    cert, key = _certificate(tmp_path, "localhost")
    other, _ = _certificate(tmp_path, "other.example")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    port = server.server_address[1]
    loopback = parse_networks("127.0.0.0/8")
    event = {"id": 7}
    try:
        trusted = delivery.Sender(allow=loopback, ca_certs=str(cert))
        answer = trusted.send(f"https://localhost:{port}/h", [webhooks.new_secret()], event)
        assert (answer.status, answer.error) == (204, None)
        assert _Ok.hosts == [f"localhost:{port}"]
        # The same server by its address: the certificate does not name 127.0.0.1.
        by_address = trusted.send(f"https://127.0.0.1:{port}/h", [webhooks.new_secret()], event)
        assert by_address.error == "TLS error"
        # A CA that did not sign it.
        stranger = delivery.Sender(allow=loopback, ca_certs=str(other))
        refused = stranger.send(f"https://localhost:{port}/h", [webhooks.new_secret()], event)
        assert refused.error == "TLS error"
    finally:
        server.shutdown()
        server.server_close()


# --- a bounded answer --------------------------------------------------------------------------

HUGE = 600 * 1024 * 1024


class _Huge(BaseHTTPRequestHandler):
    """Answers 200 with a 600 MB chunked body made on the fly; notes how much it sent."""

    protocol_version = "HTTP/1.1"
    sent: list[int] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        piece = b"x" * (64 * 1024)
        chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        sent = 0
        try:
            while sent < HUGE:
                self.wfile.write(chunk)
                sent += len(piece)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the worker closed the connection: what it did not want
            self.close_connection = True
        type(self).sent.append(sent)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _rss() -> int:
    """This process's resident memory now, in bytes (Linux's /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def test_a_600_mb_answer_is_read_to_64_kb_and_memory_stays_flat(world, app):
    allow(app, "127.0.0.0/8")
    with served(_Huge) as port:
        hook_id, _ = new_hook(f"http://127.0.0.1:{port}/h")
        make_ddis("2079000005")
        run = worker_run()
        baseline, peak = _rss(), [0]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], _rss())
                time.sleep(0.005)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        try:
            run.drain()
        finally:
            done.set()
            sampler.join()
            run.worker.locks.close()
        took = time.monotonic() - started
        wait_until(lambda: _Huge.sent, 10, "the receiver to stop sending")
    [attempt] = attempts(hook_id)
    assert (attempt.status, attempt.outcome, attempt.error) == (200, "delivered", None)
    assert peak[0] - baseline < 30 * 1024 * 1024, (baseline, peak[0])
    # It stopped reading: the receiver could send only what the sockets' buffers hold.
    assert _Huge.sent[-1] < 64 * 1024 * 1024, _Huge.sent
    assert took < 5, took


class _Sized(BaseHTTPRequestHandler):
    """/small answers 200 with 1 KB, /huge with 600 MB; counts the connections it accepted."""

    protocol_version = "HTTP/1.1"
    connections: list[int] = []

    def setup(self) -> None:
        super().setup()
        type(self).connections.append(1)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        size = 1024 if self.path == "/small" else HUGE
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        try:
            for _ in range(0, size, 64 * 1024):
                self.wfile.write(b"x" * min(64 * 1024, size))
        except OSError:
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_connection_is_kept_only_when_its_answer_was_read_to_the_end(app):
    """A body read to its end keeps the connection for the next POST; one left unread is
    closed (its rest would otherwise be taken for the next answer)."""
    sender = delivery.Sender(allow=parse_networks("127.0.0.0/8"))
    secret = webhooks.new_secret()
    _Sized.connections.clear()
    with served(_Sized) as port:
        base = f"http://127.0.0.1:{port}"
        for path in ("/small", "/small", "/huge"):
            assert sender.send(base + path, [secret], {"id": 1}).delivered, path
        assert len(_Sized.connections) == 1  # one kept-alive connection so far
        for path in ("/small", "/small"):
            assert sender.send(base + path, [secret], {"id": 2}).delivered, path
        assert len(_Sized.connections) == 2  # a new one after the cut, kept again


# --- one deadline for the whole POST -------------------------------------------------------------


@contextlib.contextmanager
def trickling(head: bytes, trickle: bytes) -> Iterator[int]:
    """A receiver on 127.0.0.1 that reads the request, sends `head` at once and then `trickle`
    one byte every 0.3 s, looping: each socket read of the worker gets a byte well within its
    timeout, so only a deadline on the whole POST stops it. Yields the port."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def answer(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.recv(65536)
            conn.sendall(head)
            while not stop.is_set():
                for byte in trickle:
                    conn.sendall(bytes([byte]))
                    time.sleep(0.3)

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()


def test_a_receiver_trickling_its_answer_is_cut_at_the_deadline():
    """urllib3's timeout is per read: a status line sent a byte at a time never trips it. The
    POST as a whole ends at the Sender's timeout, a "timeout"; a 2xx whose body trickles is
    delivered at the deadline, its status read."""
    sender = delivery.Sender(timeout=1.5, allow=parse_networks(LOOPBACK))
    event = {"id": 1}
    with trickling(b"", b"HTTP/1.1 200 OK\r\n") as port:
        started = time.monotonic()
        answer = sender.send(f"http://127.0.0.1:{port}/", ["whsec_" + "A" * 44], event)
        took = time.monotonic() - started
    assert (answer.status, answer.error) == (None, "timeout")
    assert 1.4 <= took <= 3.0, took
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"
    with trickling(head, b"x") as port:
        started = time.monotonic()
        answer = sender.send(f"http://127.0.0.1:{port}/", ["whsec_" + "A" * 44], event)
        took = time.monotonic() - started
    assert (answer.status, answer.error) == (200, None) and answer.delivered
    assert took <= 3.0, took
