"""The number inventory's rows (docs/numbers.md): `flask numbers stock` of a large file, and
allocating 100 numbers by prefix from a million available, on a scratch copy of the data set.

- **Stock**: a file of `rows` new numbers (dialcode 998, which the generator never uses)
  stocked by `flask numbers stock PATH` as a subprocess, in rows a second, against a plain
  load of the same file into a bare table (no checks) in the same run. Target: at least
  20,000 rows/s.
- **Allocate**: with those numbers available, 100 at a time by a prefix put in service for
  the largest company, through the service as the API calls it; its p95 over the runs
  against a batch create of 100 new DDIs into the same company (the nearest existing write)
  measured in the same run. Target: at most 100 ms.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from .imports import _copy, _drop, _measured, _plain_load
from .table import Result

DIALCODE = "998"
FIRST = 2_000_000_000  # ten-digit numbers: 2000000000, 2000000001, …


def _write_stock_file(path: Path, rows: int) -> None:
    with path.open("w") as f:
        f.write("dialcode,number\n")
        for i in range(rows):
            f.write(f"{DIALCODE},{FIRST + i}\n")


def p95(times: list[float]) -> float:
    ordered = sorted(times)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


def _allocations(url: str, runs: int) -> tuple[float, float, float]:
    """(allocate p95, create p95, allocate median), in seconds."""
    from sqlalchemy import func, select

    from webapp import create_app
    from webapp.access import Principal
    from webapp.extensions import db
    from webapp.models import Ddi
    from webapp.services.numbers import allocate
    from webapp.services.records import crud
    from webapp.services.records.kinds import DDI

    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "x" * 40})
    operator = Principal.cli("bench-numbers")
    with app.app_context():
        company = db.session.scalar(
            select(Ddi.company).group_by(Ddi.company).order_by(func.count().desc()).limit(1)
        )
        db.session.remove()
        took, reference = [], []
        for run in range(runs):
            # A prefix of a thousand numbers each run: the range moves, as a stock is used up.
            prefix = str(FIRST + run * 1000)[:7]
            body = {
                "scope": {"dialcode": DIALCODE, "prefix": prefix, "count": 100},
                "values": {"company": company, "virt_exten": "5000"},
            }
            started = time.perf_counter()
            allocate.allocate(operator, body)
            took.append(time.perf_counter() - started)
            db.session.remove()
            rows = [
                {
                    "dialcode": "997",
                    "number": f"{run:04d}{i:04d}",
                    "virt_exten": "6000",
                    "company": company,
                }
                for i in range(100)
            ]
            started = time.perf_counter()
            crud.create(operator, DDI, rows)
            reference.append(time.perf_counter() - started)
            db.session.remove()
        db.engine.dispose()  # the scratch copy is dropped next: no session may stay on it
    return p95(took), p95(reference), statistics.median(took)


def number_scenarios(url: str, label: str, rows: int = 1_000_000, runs: int = 20) -> list[Result]:
    """Stock a file of `rows` numbers, then allocate from them; see the module's text."""
    copy = _copy(url, "numbers")
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "stock.csv"
            _write_stock_file(path, rows)
            stock_s, _, out = _measured(copy, "numbers", "stock", str(path))
            assert out.strip() == f"stocked {rows}", out
            reference_s = _plain_load(copy, path, ("dialcode", "number"))
        allocate_p95, create_p95, allocate_p50 = _allocations(copy, runs)
    finally:
        _drop(copy)
    return [
        Result(
            label,
            f"numbers stock, {rows:,} rows (flask numbers stock)",
            rows / stock_s,
            rows / reference_s,
            "plain load of the rows, no checks",
            "rows/s",
            higher_is_better=True,
            absolute_target=20_000,
        ),
        Result(
            label,
            f"allocate 100 numbers by prefix from {rows:,} available: p95; "
            f"p50 {allocate_p50 * 1000:.1f} ms",
            allocate_p95,
            create_p95,
            "a batch create of 100 new DDIs, p95",
            "s",
            absolute_target=0.1,
        ),
    ]
