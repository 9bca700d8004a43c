"""What running as a service costs a request: the request id, the access line and
the metrics every request now goes through, and the server-side session check of a page.

python -m bench.service [--quick]   (on DATABASE_URL, default bench.db)

In process, through Flask's test client, so the figure is the app's own CPU per request and
not the network's or gunicorn's: the 100-row API read of the HTTP scenario (Bearer token), with
metrics on (METRICS_TOKEN set, as a scraped production server runs) and the access line written
(to /dev/null: formatting it is the cost, not the terminal), against the same app with those
hooks taken off. The two run in alternating rounds so machine drift hits both alike; each
figure is the median of the rounds' CPU time per call.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Callable

from .table import Result

CALLS = 200
ROUNDS = 15
QUICK_CALLS, QUICK_ROUNDS = 20, 3
TARGET = 1.15  # the hooks may cost at most 15% of a read's CPU


def _apps(database_url: str) -> tuple[object, object]:
    from webapp import create_app
    from webapp.observability import Stamped

    config = {
        "SQLALCHEMY_DATABASE_URI": database_url,
        "SECRET_KEY": "bench-secret-key-not-secret",
        "API_RATE_LIMIT": "1000000000 per minute",
        "METRICS_TOKEN": "bench-metrics-token-not-secret",
        "LOG_LEVEL": "INFO",
    }
    full = create_app(dict(config))
    bare = create_app(dict(config))
    # The same app without the observability hooks: its WSGI stamp and its after_request.
    bare.after_request_funcs[None] = [
        f for f in bare.after_request_funcs[None] if getattr(f, "__name__", "") != "finish_request"
    ]
    wsgi = bare.wsgi_app
    while isinstance(wsgi, Stamped):
        wsgi = wsgi.wsgi_app
    bare.wsgi_app = wsgi  # type: ignore[method-assign]
    return full, bare


def _per_call_ms(call: Callable[[], None], calls: int) -> float:
    started = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - started) * 1000 / calls


def service_scenarios(database_url: str, label: str, quick: bool = False) -> list[Result]:
    """One row: the API read's CPU per call with the service hooks against without them."""
    from .http import READ_LIMIT, _prepare, _revoke

    calls, rounds = (QUICK_CALLS, QUICK_ROUNDS) if quick else (CALLS, ROUNDS)
    setup = _prepare(database_url)
    try:
        full, bare = _apps(database_url)
        body = {"type": "ddi", "scope": {"company": setup.read_company}, "limit": READ_LIMIT}
        headers = {"Authorization": f"Bearer {setup.admin_token}"}

        def reader(app) -> Callable[[], None]:
            client = app.test_client()  # type: ignore[attr-defined]

            def read() -> None:
                answer = client.post("/rest/ops/read", json=body, headers=headers)
                if answer.status_code != 200:
                    raise RuntimeError(f"API read answered {answer.status_code}")

            return read

        read_full, read_bare = reader(full), reader(bare)
        if (
            "X-Request-ID"
            not in full.test_client()
            .post(  # type: ignore[attr-defined]
                "/rest/ops/read", json=body, headers=headers
            )
            .headers
        ):
            raise RuntimeError("The full app did not run its hooks; the comparison is void.")
        figures: dict[str, list[float]] = {"full": [], "bare": []}
        # The app's log handler writes to the process's stderr: the access lines are formatted
        # and written, to /dev/null instead of the terminal.
        with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
            for read in (read_full, read_bare):  # warm-up: caches, pools, compiled statements
                _per_call_ms(read, calls // 2)
            for _ in range(rounds):
                figures["full"].append(_per_call_ms(read_full, calls))
                figures["bare"].append(_per_call_ms(read_bare, calls))
    finally:
        _revoke(database_url, setup.token_ids)
    return [
        Result(
            label,
            f"API read CPU per call, {READ_LIMIT} rows: request id, access line, metrics",
            statistics.median(figures["full"]),
            statistics.median(figures["bare"]),
            "same app without them",
            "ms",
            target=TARGET,
        )
    ]


def main(argv: list[str] | None = None) -> int:
    from sqlalchemy.engine import make_url

    from . import use_bench_database
    from .table import render

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few calls, for a smoke test")
    args = parser.parse_args(argv)
    url = use_bench_database()
    label = make_url(url).get_backend_name()
    print(render(service_scenarios(url, label, quick=args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
