"""gunicorn's threaded worker, with its connections closed off its main loop.

A gthread worker proves it is alive from its main loop (one heartbeat a second); a worker whose
main loop is silent for `timeout` seconds is killed, and every answer it was streaming is cut.
gunicorn 27 closes a finished connection gracefully (RFC 9112 9.6: half-close, then read what
the client still sends until it closes, up to 2 s) and does it on that main loop. A client that
keeps its end open after a `Connection: close` answer (a connection pool, a health checker, a
proxy) holds the loop for the whole 2 s: fifteen of them in a row are 30 s, and the worker is
killed with its downloads (docs/deploy.md, Downloads). Here each request's thread closes its
own connection before it hands it back, so the main loop only counts it and no client can
stall the heartbeat; a worker whose main loop is really stuck is still killed and replaced.

Used by gunicorn.conf.py (`worker_class`) whenever there is more than one thread.
"""

from __future__ import annotations

import contextlib
from typing import Any

from gunicorn.workers.gthread import ThreadWorker  # type: ignore[import-untyped]


class StreamingThreadWorker(ThreadWorker):
    """gunicorn's gthread worker whose request threads close their own finished connections."""

    def handle(self, conn: Any) -> Any:
        result = super().handle(conn)
        # False: gunicorn 27's "close this connection" (anything else: keep it, or defer it to
        # the poller). Older gunicorns answer a tuple here and close without lingering.
        if result is False:
            # OSError: already closed (an aborted download, downloads.py), nothing to linger on.
            with contextlib.suppress(OSError):
                conn.close(graceful=True)
        return result

    def finish_request(self, conn: Any, fs: Any) -> None:
        if not fs.cancelled() and fs.exception() is None and fs.result() is False:
            self.nr_conns -= 1  # closed by its own thread (handle)
            return
        super().finish_request(conn, fs)
