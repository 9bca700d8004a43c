"""The DDI import at the bench data set's size (docs/import.md): a file as long as the data set
has DDIs (1,000,000 at full size), a mix of every kind of row, run through the real command
(`flask ddis import`) as a subprocess, dry run then apply, on a copy of the data set.

The file: for 80% of the stored DDIs a row (half unchanged, a quarter with a new extension,
a quarter moved to another company), then new numbers up to the size asked (the data set's
DDI count: 1,000,000 at full size, of which about 800,000 are stored now). Rows:

- apply, in rows/s, against a plain load of the same file into a table without any check
  (csv module + one executemany per 5,000 rows): the floor of reading and writing each row;
- the dry run, in rows/s, against apply: it must be the faster;
- the peak memory of the import process (its own VmHWM), against the same command printing
  its help (the app and its libraries loaded): the file is streamed, not held.

Then the report must still be exact: the rollup's peaks for the month equal the from-scratch
query's, every company and day (an assertion: a wrong number fails the bench).

On the same copy, the page's bulk action: all the DDIs of the company with the fewest at or
above 10,000 moved to a new company through POST /ddis/bulk/apply (signed in, in process),
against the same DDIs moved back by one `POST /rest/ops/update/`; target 5 s. The report is
checked again after both.
"""

from __future__ import annotations

import csv
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from .table import Result

ROOT = Path(__file__).resolve().parent.parent
HEADER = ("dialcode", "number", "virt_exten", "company")
NEW_DIALCODE = "999"  # not a dialcode the generator uses: its numbers are all new


def _copy(url: str, purpose: str = "import") -> str:
    """A scratch copy of the data set, so the import (or `purpose`) leaves the kept one as it
    was."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        source = Path(parsed.database or "")
        target = source.with_name(f"{source.stem}-{purpose}.db")
        with sqlite3.connect(source) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        for suffix in ("", "-wal", "-shm"):
            Path(f"{target}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(source, target)
        return f"sqlite:///{target}"
    name = f"{parsed.database}_{purpose}"
    server = create_engine(parsed.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with server.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        # A template must have no other session: end this process's own idle ones (the earlier
        # scenarios' pools; the app's checkout guard replaces a connection ended so).
        conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = :name AND pid <> pg_backend_pid()"
            ),
            {"name": parsed.database},
        )
        conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{parsed.database}"'))
    server.dispose()
    return parsed.set(database=name).render_as_string(hide_password=False)


def _drop(url: str) -> None:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            Path(f"{parsed.database}{suffix}").unlink(missing_ok=True)
        return
    server = create_engine(parsed.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with server.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{parsed.database}"'))
    server.dispose()


def write_file(url: str, path: Path, total: int, seed: int = 13) -> int:
    """The import file for the data set at `url`, `total` rows; returns its row count."""
    rng = random.Random(seed)
    engine = create_engine(url)
    rows = 0
    with engine.connect() as conn, path.open("w", newline="") as out:
        companies = list(conn.scalars(text("SELECT id FROM companies ORDER BY id")))
        stored = conn.execute(
            text("SELECT dialcode, number, virt_exten, company FROM ddis ORDER BY id")
        )
        writer = csv.writer(out)
        writer.writerow(HEADER)
        for dialcode, number, exten, company in stored:
            draw = rng.random()
            if draw < 0.2:
                continue
            if draw < 0.6:
                writer.writerow((dialcode, number, exten, company))
            elif draw < 0.8:
                writer.writerow((dialcode, number, str(int(exten) + 1)[:10], company))
            else:
                other = rng.choice(companies)
                if other == company:
                    other = companies[(companies.index(other) + 1) % len(companies)]
                writer.writerow((dialcode, number, exten, other))
            rows += 1
        for i in range(max(total - rows, 0)):
            new = (NEW_DIALCODE, str(7_000_000_000 + i), str(100 + i % 900), rng.choice(companies))
            writer.writerow(new)
            rows += 1
    engine.dispose()
    return rows


# Runs `flask` in the child and writes its peak resident set (VmHWM, KiB) to PEAK_FILE at exit.
# Read by the child itself: the rusage a parent gets from wait4 also counts the memory the child
# had before its exec, a copy of the parent's (the bench process, which grows as it runs).
_PEAK_WRAPPER = """
import atexit, os, sys
def _peak():
    with open("/proc/self/status") as status, open(os.environ["PEAK_FILE"], "w") as out:
        out.write(next(l.split()[1] for l in status if l.startswith("VmHWM:")))
atexit.register(_peak)
from flask.cli import main
sys.argv = ["flask", *sys.argv[1:]]
main()
"""


def _measured(url: str, *args: str) -> tuple[float, float, str]:
    """`flask --app app ARGS` against `url`: (seconds, peak resident MB, stdout)."""
    with tempfile.TemporaryDirectory() as folder:
        peak = Path(folder) / "peak"
        env = {**os.environ, "DATABASE_URL": url, "PEAK_FILE": str(peak)}
        started = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-c", _PEAK_WRAPPER, "--app", "app", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - started
        assert run.returncode == 0, f"flask {' '.join(args)} failed: {run.stderr[-2000:]}"
        return seconds, int(peak.read_text()) / 1024, run.stdout


def _plain_load(url: str, path: Path, columns: tuple[str, ...] = HEADER) -> float:
    """Seconds to read the file and insert every row into a bare table (no checks)."""
    engine = create_engine(url)
    started = time.perf_counter()
    with engine.begin() as conn:
        kinds = ", ".join(f"{c} VARCHAR(200)" for c in columns)
        conn.execute(text(f"CREATE TABLE import_reference ({kinds})"))
        names = ", ".join(f":{c}" for c in columns)
        insert = text(f"INSERT INTO import_reference VALUES ({names})")  # noqa: S608
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            batch = []
            for row in reader:
                batch.append(row)
                if len(batch) == 5000:
                    conn.execute(insert, batch)
                    batch = []
            if batch:
                conn.execute(insert, batch)
    seconds = time.perf_counter() - started
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE import_reference"))
    engine.dispose()
    return seconds


def check_report_exact(url: str) -> None:
    """The rollup the import kept gives the from-scratch query's peaks this month."""
    from webapp import create_app
    from webapp.extensions import db
    from webapp.services.billing import periods, reports, rollups

    app = create_app({"SQLALCHEMY_DATABASE_URI": url})
    with app.app_context():
        tz = periods.zone(app.config["REPORT_TIMEZONE"])
        today = periods.today_in(tz)
        period = periods.resolve(today.month, today.year, tz, today)
        kept = rollups.peak_lists(db.session, "ddi", period, None)
        scratch = reports.scratch_peaks("ddi", period, None)
        from_rollup = {(c, i): p for c, values in kept.items() for i, p in enumerate(values) if p}
        assert from_rollup == scratch, "after the import, the rollup disagrees with the history"
        db.session.remove()
        db.engine.dispose()


def bulk_move(url: str) -> tuple[int, float, float]:
    """The page's bulk move of all of a company's DDIs (the company with the fewest at or
    above 10,000) to a new company, then the same DDIs moved back with one API update:
    (DDIs, seconds through the page, seconds through the API)."""
    import re

    from sqlalchemy import func, select

    from webapp import create_app
    from webapp.access import Principal
    from webapp.extensions import db
    from webapp.models import Ddi
    from webapp.services import companies
    from webapp.services.identity import api_tokens

    from .list_page import ensure_account, sign_in

    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "bench-secret-key-not-secret"})
    with app.app_context():
        sizes = select(Ddi.company, func.count().label("n")).group_by(Ddi.company).subquery()
        # 10,000 DDIs, or the largest company of a smaller data set (the smoke run's).
        wanted = min(10_000, db.session.scalar(select(func.max(sizes.c.n))) or 0)
        company, count = db.session.execute(
            select(sizes.c.company, sizes.c.n)
            .where(sizes.c.n >= wanted)
            .order_by(sizes.c.n, sizes.c.company)
            .limit(1)
        ).one()
        db.session.rollback()
        operator = Principal.cli("bench")
        companies.create(operator, "bench-bulk-target", "Bulk move target")
        ensure_account("bench-bulk", system_admin=True)
        token = api_tokens.create(operator, "bench-bulk", "bench")
        db.session.remove()
    # The requests run outside that context, each in its own as in production (a context
    # kept around them would carry one request's CSRF token into the next).
    client = sign_in(app, "bench-bulk")
    page = client.get(f"/ddis?company={company}").get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    form = {
        "csrf_token": csrf,
        "scope": "all",
        "f_company": company,
        "action": "move",
        "to_company": "bench-bulk-target",
    }
    # The confirmation page (untimed) carries the fingerprint of the records confirmed.
    confirm = client.post("/ddis/bulk", data=form).get_data(as_text=True)
    form["expected"] = re.search(r'name="expected" value="([0-9a-f]+)"', confirm).group(1)
    started = time.perf_counter()
    moved = client.post("/ddis/bulk/apply", data=form)
    page_s = time.perf_counter() - started
    assert moved.status_code == 303, moved.get_data(as_text=True)[-500:]
    body = {
        "type": "ddi",
        "scope": {"company": "bench-bulk-target"},
        "values": {"company": company},
    }
    started = time.perf_counter()
    back = client.post("/rest/ops/update/", json=body, headers={"Authorization": f"Bearer {token}"})
    api_s = time.perf_counter() - started
    assert back.get_json()["numrows"] == count, back.get_data(as_text=True)[:300]
    with app.app_context():
        db.engine.dispose()
    return count, page_s, api_s


def _server_settings(url: str) -> str:
    """On PostgreSQL, the server settings docs/deploy.md ("Large imports") sizes for a large
    import, as the server has them: the apply row names them, so a run at the defaults
    (shared_buffers 128MB, max_wal_size 1GB) is not read as one with room."""
    if make_url(url).get_backend_name() != "postgresql":
        return ""
    engine = create_engine(url)
    with engine.connect() as conn:
        shown = [
            f"{name} {conn.execute(text(f'SHOW {name}')).scalar_one()}"
            for name in ("shared_buffers", "max_wal_size")
        ]
    engine.dispose()
    return f" ({', '.join(shown)})"


def import_scenarios(url: str, label: str, rows: int) -> list[Result]:
    """Dry run and apply of a data-set-sized import on a scratch copy; see the module's text."""
    copy = _copy(url)
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "import.csv"
            rows = write_file(copy, path, rows)
            dry_s, dry_mb, dry_out = _measured(copy, "ddis", "import", str(path), "--dry-run")
            assert dry_out.startswith("dry run: created"), dry_out
            apply_s, apply_mb, out = _measured(copy, "ddis", "import", str(path))
            print(f"  {label}: {out.strip()} in {apply_s:.1f} s (dry run {dry_s:.1f} s)")
            _, idle_mb, _ = _measured(copy, "ddis", "--help")
            reference_s = _plain_load(copy, path)
            check_report_exact(copy)
            moved, page_s, api_s = bulk_move(copy)
            check_report_exact(copy)
    finally:
        _drop(copy)
    name = f"DDI import, {rows:,} rows"
    return [
        Result(
            label,
            f"{name}: apply{_server_settings(url)}",
            rows / apply_s,
            rows / reference_s,
            "plain load of the rows, no checks",
            "rows/s",
            higher_is_better=True,
            absolute_target=10_000,
        ),
        Result(
            label,
            f"{name}: dry run",
            rows / dry_s,
            rows / apply_s,
            "apply",
            "rows/s",
            target=1.0,
            higher_is_better=True,
        ),
        Result(
            label,
            f"{name}: peak memory",
            max(dry_mb, apply_mb),
            idle_mb,
            "the same command printing its help",
            "MB",
            absolute_target=512,
        ),
        Result(
            label,
            f"bulk move of {moved:,} DDIs (all of a company's) through the page",
            page_s,
            api_s,
            "the same DDIs moved back by one API update",
            "s",
            absolute_target=5.0,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.imports`: these rows alone, on the kept data sets (bench.db beside the
    project, and BENCH_DATABASE_URL when set), as `make bench` prints them."""
    import argparse

    from .data import ensure_data
    from .table import render

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--ddis", type=int, default=1_000_000)
    parser.add_argument("--companies", type=int, default=10_000)
    parser.add_argument("--dir", type=Path, default=ROOT, help="where bench.db lives")
    args = parser.parse_args(argv)
    os.environ.setdefault("SECRET_KEY", "bench-secret-key-not-secret")
    os.environ.setdefault("INSTANCE_PATH", str(args.dir / "instance-bench"))
    databases = [("sqlite", f"sqlite:///{args.dir / 'bench.db'}")]
    if os.environ.get("BENCH_DATABASE_URL"):
        databases.append(("postgresql", os.environ["BENCH_DATABASE_URL"]))
    results: list[Result] = []
    for label, url in databases:
        ensure_data(url, args.ddis, args.companies)
        results += import_scenarios(url, label, args.ddis)
    print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
