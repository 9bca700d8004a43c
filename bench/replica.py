"""Read replicas at the bench data set (`make bench BENCH_ARGS='--only replica'`, PostgreSQL).

python -m bench.replica --url URL [--quick]

The data set at URL is copied (pg_dump / pg_restore, in parallel) into a primary of the bench's
own, and a streaming replica is made from it (tests/replicas.py: initdb, pg_basebackup -R, free
local ports; the machine's PostgreSQL is only read). Both servers have the same settings, so the
comparison is of where a read goes, not of two differently tuned servers.

Rows:

- **Each routed page, replica against primary alone**: p95 (nearest rank) of N requests after a
  warm-up (N = 20; 3 with --quick), asked in process as the bench System-Admin of one app with
  DATABASE_REPLICA_URLS set (the app figure) and of one without (the reference), interleaved.
  Every request of the first is checked to have been served by the replica
  (`telephony_routed_reads_total`), so a row is never the primary's figure in disguise. The
  page budget (docs/pages.md: 150 ms p95, 300 KB) is on the app figure; the ratio is the
  routing's own cost, and has no target.
- **A mixed load**: for D seconds (20; 5 with --quick) a writer moves a DDI between two
  extensions through `/rest/ops/update/` and reads its company back (`/rest/ops/read/`, its
  own write: the primary until the replica has replayed it), while two readers, each with its
  own session, page through the report and list pages. The row is the primary's share of the
  routed reads (from `telephony_routed_reads_total`) against the 100 % it serves without a
  replica; the readers' p95 under the load is a context row against the page budget.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url

from .http import SYSADMIN, UNLIMITED, ensure_account
from .scale import BUDGET_BYTES, BUDGET_MS, in_turns, p95, signed_in_client
from .table import Result, render

READERS = ("bench-replica-reader-1", "bench-replica-reader-2")
WRITER = "bench-replica-writer"
DATABASE = "bench"  # the copy's name on the bench's own primary


def replica_scenarios(source_url: str, label: str, quick: bool = False) -> list[Result]:
    """The rows of the module doc; one row saying why when they cannot run (SQLite, or no
    PostgreSQL server binaries on the machine)."""
    from tests.replicas import binaries, start_pair

    if not source_url.startswith("postgresql"):
        return []  # replicas need PostgreSQL (docs/replicas.md); SQLite has no such rows
    folder = binaries()
    if folder is None:
        return [_note(label, "not run: PostgreSQL's server binaries (initdb) are missing")]
    started = time.perf_counter()
    pair = start_pair(folder, load=lambda pair: _copy(pair, source_url))
    ready = time.perf_counter() - started
    print(f"{label}: primary and replica of the data set ready in {ready:.0f} s", flush=True)
    try:
        primary = pair.url(pair.primary_port, DATABASE)
        replica = pair.url(pair.replica_port, DATABASE)
        with _apps(primary, replica) as (routed, alone):
            rows = _pages(label, routed, alone, runs=3 if quick else 20)
            rows += _mixed(label, routed, seconds=5 if quick else 20)
        return rows
    finally:
        pair.close()


def _copy(pair, source_url: str) -> None:
    """The data set into the pair's primary: a directory dump and restore, two jobs each,
    then fresh statistics (both apps read this one copy, so neither gains from a vacuum the
    other lacks). The source is read as its URL's user with no password on the command line
    (`backup.libpq_url`; trust, ~/.pgpass or PGPASSWORD)."""
    from webapp.cli.backup import libpq_url

    dump = pair.folder / "dump"
    source = libpq_url(make_url(source_url))
    pair.run(
        "pg_dump", "-d", source, "-Fd", "-j", "2", "-Z", "0", "-f", str(dump), timeout=3600
    )  # fmt: skip
    own = ["-h", "127.0.0.1", "-p", str(pair.primary_port), "-U", "postgres"]
    pair.run("createdb", *own, DATABASE)
    pair.run("pg_restore", *own, "-d", DATABASE, "-j", "2", str(dump), timeout=3600)
    pair.run("vacuumdb", *own, "-d", DATABASE, "--analyze-only", "-j", "2", timeout=3600)
    shutil.rmtree(dump, ignore_errors=True)  # the copy is in the primary: gigabytes freed


class _Client:
    """A test client signed in as one account (sessions of their own: one per reader)."""

    def __init__(self, app, username: str) -> None:
        self.client = signed_in_client(app, username)

    def get(self, path: str):
        response = self.client.get(path)
        assert response.status_code == 200, (path, response.status_code)
        return response


@contextmanager
def _apps(primary: str, replica: str) -> Iterator[tuple[object, object]]:
    """One app reading from the replica, one on the primary alone; the bench accounts made."""
    from webapp import create_app, freeze_startup_objects, replicas
    from webapp.access import Principal
    from webapp.extensions import db

    config = {
        "SQLALCHEMY_DATABASE_URI": primary,
        "SECRET_KEY": "bench-secret-key-not-secret",
        "LOG_LEVEL": "WARNING",  # a replica skipped or failing is still said
        "API_RATE_LIMIT": UNLIMITED,  # the writer's pace is what the run is for
    }
    routed = create_app({**config, "DATABASE_REPLICA_URLS": replica})
    alone = create_app(config)
    operator = Principal.cli("cli:bench-replica")
    with routed.app_context():
        for username in (SYSADMIN, WRITER, *READERS):
            ensure_account(operator, username, system_admin=True)
        db.session.remove()
    freeze_startup_objects()  # as each gunicorn worker does once its app is built (wsgi.py)
    try:
        yield routed, alone
    finally:
        for app in (routed, alone):
            with app.app_context():
                db.engine.dispose()
        if (chooser := replicas.of(routed)) is not None:
            chooser.dispose()


def served(database: str) -> float:
    """Requests of the routed pages `database` (primary, replica1) has served so far."""
    from prometheus_client import REGISTRY

    sample = REGISTRY.get_sample_value("telephony_routed_reads_total", {"database": database})
    return sample or 0.0


def _pages_to_ask(company: str) -> list[str]:
    return [
        "/reports/ddis",
        "/reports/users",
        f"/ddis?company={company}",
        "/admin/companies?sort=ddis&dir=desc",
        "/audit",
    ]


def _largest_company(app) -> str:
    from webapp.extensions import db

    with app.app_context():
        query = "SELECT company FROM ddis GROUP BY company ORDER BY count(*) DESC LIMIT 1"
        company = db.session.execute(text(query)).scalar_one()
        db.session.remove()
    return str(company)


def _until_replica_serves(client: _Client, path: str, timeout: float = 30) -> None:
    """A new process counts a replica as lagging until it has a sample of the primary's position
    the replica has passed (docs/replicas.md), and the sign-in just written is the account's
    own: ask until a request is the replica's."""
    deadline = time.monotonic() + timeout
    while True:
        before = served("replica1")
        client.get(path)
        if served("replica1") > before:
            return
        assert time.monotonic() < deadline, "the replica never served the bench's reads"
        time.sleep(0.5)


def _pages(label: str, routed, alone, runs: int) -> list[Result]:
    company = _largest_company(alone)
    clients = {"replica": _Client(routed, SYSADMIN), "primary": _Client(alone, SYSADMIN)}
    _until_replica_serves(clients["replica"], "/reports/ddis")
    results = []
    for path in _pages_to_ask(company):
        on_replica = served("replica1")
        times, size = in_turns(clients, path, runs, weighed="replica")
        by_replica = served("replica1") - on_replica
        assert by_replica == 1 + runs, f"{path}: the replica served {by_replica} of {1 + runs}"
        results.append(
            Result(
                label,
                f"read replica: {path.replace(company, '<largest>')}",
                times["replica"],
                times["primary"],
                "same page, primary alone",
                "ms",
                absolute_target=BUDGET_MS,
                size=size,
                size_budget=BUDGET_BYTES,
            )
        )
    return results


def _mixed(label: str, routed, seconds: float) -> list[Result]:
    """The mixed load of the module doc: the primary's share of the routed reads."""
    from webapp.access import Principal
    from webapp.extensions import db
    from webapp.services.identity import api_tokens

    with routed.app_context():
        token = api_tokens.create(Principal.cli("cli:bench-replica"), WRITER, "bench-replica")
        row = db.session.execute(
            text("SELECT company, dialcode, number, virt_exten FROM ddis ORDER BY id LIMIT 1")
        ).one()
        db.session.remove()
    company, dialcode, number, extension = (str(value) for value in row)
    readers = [_Client(routed, username) for username in READERS]
    for reader in readers:
        _until_replica_serves(reader, "/reports/ddis")
    stop = threading.Event()
    reader_times: list[float] = []
    writes = itertools.count()
    failures: list[BaseException] = []

    def writer() -> None:
        client = routed.test_client()
        headers = {"Authorization": f"Bearer {token}"}
        scope = {"company": company, "dialcode": dialcode, "number": number}
        for step in itertools.count():
            if stop.is_set():
                return
            values = {"virt_exten": extension if step % 2 else f"{extension}9"}
            body = {"type": "ddi", "scope": scope, "values": values}
            done = client.post("/rest/ops/update/", json=body, headers=headers)
            assert done.status_code == 200, done.get_data(as_text=True)
            next(writes)
            body = {"type": "ddi", "scope": {"company": company}, "limit": 50}
            read = client.post("/rest/ops/read/", json=body, headers=headers)
            assert read.status_code == 200, read.get_data(as_text=True)

    def reader(client: _Client, paths: list[str]) -> None:
        for path in itertools.cycle(paths):
            if stop.is_set():
                return
            t = time.perf_counter()
            client.get(path)
            reader_times.append(time.perf_counter() - t)

    paths = ["/reports/ddis", f"/ddis?company={company}", "/reports/users", "/admin/companies"]
    jobs: list[Callable[[], None]] = [writer] + [
        (lambda client=client: reader(client, paths)) for client in readers
    ]
    threads = [threading.Thread(target=_catching(job, failures)) for job in jobs]
    before = {name: served(name) for name in ("primary", "replica1")}
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    counts = {name: served(name) - count for name, count in before.items()}
    total = sum(counts.values())
    share = 100 * counts.get("primary", 0) / total
    written = next(writes)
    # The writer's read-backs follow its own writes: the primary's until the replica has
    # replayed them, so they are most of the primary's share; the readers' are the rest.
    what = (
        f"mixed load {seconds:.0f} s, 1 writer ({written / seconds:.0f} writes/s, each read back: "
        f"{written} of the reads) + 2 readers: primary's share of {total:.0f} routed reads"
    )
    return [
        Result(label, what, share, 100.0, "primary alone serves all", "%"),
        Result(
            label,
            "mixed load: the readers' pages, p95 under the load",
            p95(reader_times) * 1000,
            None,
            "-",
            "ms",
            absolute_target=BUDGET_MS,
        ),
    ]


def _catching(job: Callable[[], None], failures: list[BaseException]) -> Callable[[], None]:
    def run() -> None:
        try:
            job()
        except BaseException as exc:  # handed to the main thread, raised there
            failures.append(exc)

    return run


def _note(label: str, why: str) -> Result:
    return Result(label, "read replica rows", 0.0, None, "-", "ms", note=why)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the PostgreSQL bench data set to copy")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("SECRET_KEY", "bench-secret-key-not-secret")
    os.environ.setdefault(
        "INSTANCE_PATH", str(Path(__file__).resolve().parent.parent / "instance-bench")
    )
    print(render(replica_scenarios(args.url, "postgresql", args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
