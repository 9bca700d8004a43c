"""The HTTP bench runs: a tiny provider in a fresh SQLite file, real gunicorn servers, wrk and
Datasette, one short run of every scenario. Figures are not judged here, only produced."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.http import datasette_installed, http_scenarios

pytestmark = pytest.mark.slow  # starts real servers and wrk

ROOT = Path(__file__).resolve().parent.parent
# CI sets it: there a missing tool is a broken machine, not a reason to skip.
REQUIRED = os.environ.get("REQUIRE_BENCH_TOOLS") == "1"


def _missing_tools() -> list[str]:
    missing = []
    if shutil.which("wrk") is None:
        missing.append("wrk (apt-get install wrk)")
    if not datasette_installed():
        missing.append("datasette (.venv/bin/pip install -e '.[bench]')")
    return missing


@pytest.mark.slow
def test_http_scenarios_quick(tmp_path, monkeypatch):
    if missing := _missing_tools():
        message = "HTTP bench needs " + " and ".join(missing)
        if REQUIRED:
            pytest.fail(message + " (REQUIRE_BENCH_TOOLS=1)")
        pytest.skip(message)
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    env = {**os.environ, "DATABASE_URL": url, "INSTANCE_PATH": str(tmp_path), "SECRET_KEY": "b"}
    generate = subprocess.run(
        [sys.executable, "-m", "bench.generate", "--ddis", "3000", "--companies", "20"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert generate.returncode == 0, generate.stderr[-2000:]
    monkeypatch.setenv("INSTANCE_PATH", str(tmp_path))

    results = http_scenarios(url, quick=True)

    references = {r.reference_name for r in results}
    assert {"bare Flask", "Datasette", "bare Flask executemany"} <= references
    assert any(r.scenario.startswith("list last page") for r in results)
    for r in results:
        assert r.app > 0 and r.reference is not None and r.reference > 0, r
        assert r.verdict, r  # every HTTP row is judged against some target
