"""The big downloads (issue 30, "every download completes"): the whole audit log as /audit.csv
and every DDI as /ddis.csv, as a System-Admin, through gunicorn with the production settings
(gunicorn.conf.py: threaded workers, the 30 s worker timeout), 2 workers.

Per download two rows:
- rows/s, against a reference measured in the same run: the same table read by a plain
  SELECT and written by a csv.writer loop in this process (no access rules, no redaction, no
  HTTP), and the goal of 100,000 rows/s itself;
- the serving worker's memory: how far its peak resident size (VmHWM, reset first) rose over
  what it held before, against the size of the file (what a download held in memory would
  take), after a warm-up of the same download finding no row. Constant memory is a rise
  within a fixed budget (MEMORY_BUDGET_MB) whatever the size: at full size, far below the
  file's (a small set's file may be smaller than the chunks read).

Each download must end complete (the last chunk, as many lines as rows): a cut one stops the
bench. The reference's rows are read with the same chunk size as the app's.
"""

from __future__ import annotations

import csv
import http.client
import io
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from .http import SYSADMIN, Server, _free_port, app_env, ensure_account, running, sign_in
from .table import Result

GOAL_ROWS_PER_S = 100_000.0
# The most a download may raise its worker's peak memory, whatever the file's size: constant
# memory is a bound that does not grow with the rows (the chunks read and written at once).
MEMORY_BUDGET_MB = 50.0
# The tables and columns of each download, for the reference (the CSV's own columns).
# A filter of each that finds no row: the warm-up's (imports, caches, pools, on both workers).
EMPTY = {"/audit.csv": "date_from=9999-12-30", "/ddis.csv": "dialcode=0000000"}
DOWNLOADS = {
    "/audit.csv": (
        "audit_log",
        "at, actor, via, action, target, company, before, after, detail",
        "at DESC, id DESC",
    ),
    "/ddis.csv": ("ddis", "*", "dialcode, number"),
}


def _prepare(database_url: str) -> None:
    from webapp import create_app
    from webapp.access import Principal

    app = create_app(
        {"SQLALCHEMY_DATABASE_URI": database_url, "SECRET_KEY": "bench-secret-key-not-secret"}
    )
    with app.app_context():
        ensure_account(Principal.cli("cli:bench"), SYSADMIN, system_admin=True)


def _workers(master: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{master}/task/{master}/children").read_text().split()]


def _memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process, in bytes."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    values = dict(line.split(":", 1) for line in status if line.startswith(("VmRSS", "VmHWM")))
    return {k: int(v.split()[0]) * 1024 for k, v in values.items()}


def _download(server: Server, cookie: str, path: str) -> tuple[int, int, float]:
    """Lines and bytes of one download and its seconds; a cut one raises (IncompleteRead)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
    started = time.perf_counter()
    conn.request("GET", path, headers={"Cookie": cookie})
    answer = conn.getresponse()
    if answer.status != 200:
        raise RuntimeError(f"{path}: {answer.status}")
    lines = size = 0
    while block := answer.read(1 << 16):
        lines += block.count(b"\n")
        size += len(block)
    seconds = time.perf_counter() - started
    conn.close()
    return lines, size, seconds


def _reference(database_url: str, table: str, columns: str, order: str) -> tuple[int, float]:
    """Rows and seconds of a plain SELECT of the table written by csv.writer."""
    engine = create_engine(database_url)
    started = time.perf_counter()
    rows = 0
    with engine.connect() as conn:
        # Constants of this module only.
        query = text(f"SELECT {columns} FROM {table} ORDER BY {order}")  # noqa: S608
        result = conn.execution_options(stream_results=True, yield_per=5000).execute(query)
        out = io.StringIO()
        writer = csv.writer(out)
        for part in result.partitions():
            writer.writerows(part)
            rows += len(part)
            out.seek(0)
            out.truncate()
    engine.dispose()
    return rows, time.perf_counter() - started


def download_scenarios(database_url: str, label: str, quick: bool = False) -> list[Result]:
    """Four rows per database: each download's rows/s and its worker's peak memory."""
    _prepare(database_url)
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="bench-downloads-") as tmp:
        log_dir = Path(tmp)
        env = {**app_env(database_url, log_dir), "WEB_CONCURRENCY": "2"}
        env.pop("GUNICORN_THREADS", None)
        env.pop("GUNICORN_CMD_ARGS", None)
        port = _free_port()
        # The production settings: gunicorn.conf.py as docs/deploy.md runs it.
        argv = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py"]
        argv += ["--bind", f"127.0.0.1:{port}", "--log-level", "warning"]
        server = Server("app", argv, env, port, log_dir)
        with running([server]):
            assert server.proc is not None
            cookie = sign_in(server.base, SYSADMIN)
            for path, spec in DOWNLOADS.items():
                results += _measure(database_url, label, server, cookie, path, *spec)
            if "WORKER TIMEOUT" in server.log.read_text():
                raise RuntimeError(f"a worker timed out:\n{server.log.read_text()[-3000:]}")
    return results


def _measure(
    database_url: str,
    label: str,
    server: Server,
    cookie: str,
    path: str,
    table: str,
    columns: str,
    order: str,
) -> list[Result]:
    assert server.proc is not None
    workers = _workers(server.proc.pid)
    # The reference first: it reads the same table whole, so both figures are of a table in
    # the operating system's cache (measured after the data set's generation, the app's
    # download read SQLite's file from disk: 39,000 rows/s against 129,000 warm).
    ref_rows, ref_seconds = _reference(database_url, table, columns, order)
    with ThreadPoolExecutor(4) as pool:  # on both workers, most likely
        list(pool.map(lambda _: _download(server, cookie, f"{path}?{EMPTY[path]}"), range(4)))
    for pid in workers:
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak (VmHWM) back to now
    before = {pid: _memory(pid)["VmRSS"] for pid in workers}
    lines, size, seconds = _download(server, cookie, path)
    rise = max(_memory(pid)["VmHWM"] - before[pid] for pid in workers)
    rows = lines - 1  # the header
    name = f"{path} whole, {rows:,} rows, gunicorn.conf.py"
    print(f"  {path}: {rows / seconds:,.0f} rows/s, peak rise {rise / 1e6:.1f} MB", flush=True)
    return [
        Result(
            label,
            f"{name}: rows/s",
            rows / seconds,
            ref_rows / ref_seconds,
            f"SELECT + csv.writer of {table}",
            "rows/s",
            higher_is_better=True,
            absolute_target=GOAL_ROWS_PER_S,
        ),
        Result(
            label,
            f"{name}: worker peak memory rise",
            rise / 1e6,
            size / 1e6,
            "the file's size",
            "MB",
            absolute_target=MEMORY_BUDGET_MB,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    import argparse

    from . import use_bench_database
    from .table import render

    parser = argparse.ArgumentParser(description="The download rows of make bench.")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    url = use_bench_database()
    label = make_url(url).get_backend_name()
    print(render(download_scenarios(url, label, quick=args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
