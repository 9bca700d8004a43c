"""The app with one more download, for tests/test_download_streams.py under a real gunicorn:
/test-rows.csv?n=N streams N rows through downloads.csv_download; fail=K raises while reading
row K; pause=S sleeps S seconds every 1,000 rows (a download that outlasts the worker timeout).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from flask import Flask, request

from webapp import create_app
from webapp.views import downloads


def rows(count: int, fail: int | None, pause: float) -> Iterator[list[str]]:
    for n in range(1, count + 1):
        if n == fail:
            raise RuntimeError(f"the row source failed at row {n}")
        if pause and n % 1000 == 0:
            time.sleep(pause)
        yield [str(n), f"row {n}"]


def create() -> Flask:
    app = create_app()

    @app.get("/test-rows.csv")
    def test_rows():
        count = request.args.get("n", 10, type=int)
        fail = request.args.get("fail", None, type=int)
        pause = request.args.get("pause", 0.0, type=float)
        return downloads.csv_download("rows.csv", ("n", "text"), rows(count, fail, pause))

    return app
