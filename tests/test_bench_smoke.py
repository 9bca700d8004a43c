"""The bench code runs (`make bench-smoke`): generate three small providers (1x, 2x, 4x) into
fresh SQLite files, run the report, month close and growth scenarios (which first check that the
app, its from-scratch query and the hand-written reference give the same numbers, and that a
closed month answers the open month's), the import, the number inventory's (stock, allocate)
and the change-event scenarios (whose
deliveries, through a real `flask events deliver` and a receiver on 127.0.0.1, must all
arrive, in id order) and print the table;
then the EXPLAIN/timing tool. The HTTP and page scenarios have their own smoke tests
(test_bench_http)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Builds data sets and runs every scenario, on SQLite files of its own (BENCH_DATABASE_URL and
# DATABASE_URL unset), so once per `make test`.
pytestmark = [pytest.mark.slow, pytest.mark.database_independent]

ROOT = Path(__file__).resolve().parent.parent


def test_bench_smoke(tmp_path):
    env = {
        **os.environ,
        "INSTANCE_PATH": str(tmp_path),
        "SECRET_KEY": "bench-secret-key-not-secret",
    }
    env.pop("BENCH_DATABASE_URL", None)
    env.pop("DATABASE_URL", None)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.run",
            "--quick",
            "--skip-http",
            "--skip-pages",
            "--dir",
            str(tmp_path),
            "--ddis",
            "10000",
            "--companies",
            "120",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    table = [line for line in run.stdout.splitlines() if line.startswith("| sqlite")]
    assert len(table) == 34, run.stdout
    assert any("DDI import, 10,000 rows: apply" in line for line in table)
    assert any("numbers stock, 10,000 rows (flask numbers stock)" in line for line in table)
    assert any("allocate 100 numbers by prefix from 10,000 available" in line for line in table)
    assert any("API call, rollup" in line for line in table)
    assert any("growth: report ddi at 4x" in line for line in table)
    assert sum("rollup rebuild (flask history rollup)" in line for line in table) == 3
    assert any("set-based, into an empty rollup" in line for line in table)
    assert any("month close, 120 companies" in line for line in table)
    assert any("closed month's report, all companies" in line for line in table)
    assert any("readAdjustments, all companies" in line for line in table)
    assert any("changes since a close, late batch into 12 companies" in line for line in table)
    assert sum("events read, Company-Admin" in line for line in table) == 2
    assert any("events read, System-Admin, 1,000 events" in line for line in table)
    batch = "batch create with events, 1,000 DDIs a request (4 requests each way"
    assert any(batch in line for line in table)
    assert any("one worker delivers 300 events" in line for line in table)
    assert any("commit to delivery p95, worker running" in line for line in table)
    assert any("20 webhooks, one answering in 2 s: the other 19" in line for line in table)
    assert any("request id, access line, metrics" in line for line in table)
    assert sum("/audit.csv whole" in line for line in table) == 2  # rows/s, peak memory
    assert sum("/ddis.csv whole" in line for line in table) == 2
    assert "events of the history:" in run.stdout  # the data set got its event table
    assert "history intervals" in run.stderr  # the generator reported what it made

    plan = subprocess.run(
        [sys.executable, "-m", "bench.report_plan", "--repeat", "1"],
        cwd=ROOT,
        env={**env, "DATABASE_URL": f"sqlite:///{tmp_path / 'bench.db'}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert plan.returncode == 0, plan.stdout[-2000:] + plan.stderr[-2000:]
    assert "identical numbers: True" in plan.stdout


def test_bench_scale_smoke(tmp_path):
    """`--scale` (the 100,000-company rows) runs: a small scaled set beside a small full one,
    its page rows against the full set's and its month close, labelled by data set."""
    env = {
        **os.environ,
        "INSTANCE_PATH": str(tmp_path),
        "SECRET_KEY": "bench-secret-key-not-secret",
    }
    env.pop("BENCH_DATABASE_URL", None)
    env.pop("DATABASE_URL", None)
    sizes = ["--ddis", "4000", "--companies", "60", "--scale-ddis", "4000"]
    flags = ["--quick", "--scale", "--only", "report", "--dir", str(tmp_path)]
    run = subprocess.run(
        [sys.executable, "-m", "bench.run", *flags, *sizes, "--scale-companies", "600"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    scaled = [line for line in run.stdout.splitlines() if line.startswith("| sqlite 600 ")]
    assert any("600 companies, one page of them: /reports/ddis " in x for x in scaled)
    assert any("/admin/companies?sort=ddis&dir=desc" in line for line in scaled)
    assert any("/companies/suggest?for=records&q=c0" in line for line in scaled)
    assert any("month close, 600 companies" in line for line in scaled)
