"""A small reverse proxy for tests: one real HTTP hop in front of the app, doing what nginx's
usual `proxy_set_header` lines do (append the peer's address to X-Forwarded-For, set
X-Forwarded-Proto, -Host and -Port), so the app sees what it sees behind a real proxy."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from .conftest import serving

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection"}


@contextmanager
def forwarding_proxy(
    upstream: str, *, proto: str = "http", host: str | None = None
) -> Iterator[str]:
    """Serve a proxy to `upstream` on a free loopback port; yields its base URL. It tells the
    app the original scheme was `proto` and the host `host` (default: the Host the client
    sent), as a TLS-terminating proxy would."""
    target = urlsplit(upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # keep the test output clean
            pass

        def _forward(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            peer = self.client_address[0]
            previous = self.headers.get("X-Forwarded-For")
            headers["X-Forwarded-For"] = f"{previous}, {peer}" if previous else peer
            headers["X-Forwarded-Proto"] = proto
            headers["X-Forwarded-Host"] = host or self.headers.get("Host", "")
            headers["X-Forwarded-Port"] = "443" if proto == "https" else "80"
            connection = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
            try:
                connection.request(self.command, self.path, body=body, headers=headers)
                answer = connection.getresponse()
                content = answer.read()
            finally:
                connection.close()
            self.send_response(answer.status)
            for key, value in answer.getheaders():
                if key.lower() not in HOP_BY_HOP and key.lower() != "content-length":
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = do_HEAD = _forward

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as base:
        yield base


class Browser:
    """A minimal cookie-keeping HTTP client that connects FROM a chosen loopback address
    (127.0.0.2, 127.0.0.3, …: all of 127/8 is local on Linux), so the proxy sees distinct
    clients, each with its own real peer address."""

    def __init__(self, base: str, source: str):
        self.base = urlsplit(base)
        self.source = source
        self.cookies: dict[str, str] = {}

    def request(
        self, method: str, path: str, form: dict[str, str] | None = None, **headers: str
    ) -> tuple[int, dict[str, str], str]:
        from urllib.parse import urlencode

        connection = http.client.HTTPConnection(
            self.base.hostname, self.base.port, timeout=30, source_address=(self.source, 0)
        )
        sent = {k.replace("_", "-"): v for k, v in headers.items()}
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = None
        if form is not None:
            body = urlencode(form)
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            connection.request(method, path, body=body, headers=sent)
            answer = connection.getresponse()
            text = answer.read().decode()
        finally:
            connection.close()
        for key, value in answer.getheaders():
            if key.lower() == "set-cookie":
                name, _, rest = value.partition("=")
                self.cookies[name] = rest.partition(";")[0]
        return answer.status, dict(answer.getheaders()), text
