"""The bench code runs: generate a small provider into a fresh SQLite file, then time the report
against the hand-written reference (which also checks both give the same numbers)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_smoke(tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'bench.db'}",
        "INSTANCE_PATH": str(tmp_path),
        "SECRET_KEY": "bench",
    }
    generate = subprocess.run(
        [sys.executable, "-m", "bench.generate", "--ddis", "3000", "--companies", "40"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert generate.returncode == 0, generate.stderr[-2000:]
    assert "history intervals" in generate.stderr
    plan = subprocess.run(
        [sys.executable, "-m", "bench.report_plan", "--repeat", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert plan.returncode == 0, plan.stdout[-2000:] + plan.stderr[-2000:]
    assert "identical numbers: True" in plan.stdout
