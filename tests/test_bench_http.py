"""The HTTP bench runs: a tiny provider in a fresh SQLite file, real gunicorn servers, wrk and
Datasette, one short run of every scenario; and the page scenario, on SQLite and (with
TEST_DATABASE_URL) PostgreSQL. Figures are not judged here, only produced."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from bench.http import COMPANY_ADMIN, datasette_installed, http_scenarios
from bench.pages import BUDGET_BYTES, BUDGET_MS, page_scenarios

from .databases import postgres_database

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


def _generate(url: str, tmp_path: Path) -> None:
    """A tiny provider (3,000 DDIs in 20 companies) into url, by the bench's own generator, and
    its audit log (an entry per change of the history), as bench.run adds it: once only."""
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "INSTANCE_PATH": str(tmp_path),
        "SECRET_KEY": "bench-secret-key-not-secret",
    }

    def bench_module(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stderr

    bench_module("bench.generate", "--ddis", "3000", "--companies", "20")
    assert "audit log:" in bench_module("bench.audit_log")
    assert "already filled" in bench_module("bench.audit_log")


@pytest.mark.slow
@pytest.mark.database_independent  # on a SQLite file of its own
def test_http_scenarios_quick(tmp_path, monkeypatch):
    if missing := _missing_tools():
        message = "HTTP bench needs " + " and ".join(missing)
        if REQUIRED:
            pytest.fail(message + " (REQUIRE_BENCH_TOOLS=1)")
        pytest.skip(message)
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    _generate(url, tmp_path)
    monkeypatch.setenv("INSTANCE_PATH", str(tmp_path))

    results = http_scenarios(url, quick=True)

    references = {r.reference_name for r in results}
    assert {"bare Flask", "Datasette", "bare Flask executemany"} <= references
    assert any(r.scenario.startswith("list last page") for r in results)
    for r in results:
        assert r.app > 0 and r.reference is not None and r.reference > 0, r
        assert r.verdict, r  # every HTTP row is judged against some target


@pytest.fixture(params=["sqlite", "postgresql"])
def bench_url(request, tmp_path) -> Iterator[str]:
    """An empty database of the test's own: a SQLite file, or (with TEST_DATABASE_URL) a
    PostgreSQL database on that server, dropped afterwards."""
    server_url = os.environ.get("TEST_DATABASE_URL", "").strip()
    if request.param == "sqlite":
        if server_url:  # the PostgreSQL pass of make test: the SQLite pass ran this one
            pytest.skip("run in the SQLite pass of make test")
        yield f"sqlite:///{tmp_path / 'bench.db'}"
        return
    if not server_url:
        pytest.skip("TEST_DATABASE_URL is not set")
    with postgres_database(server_url, "telephony_bench_pages") as url:
        yield url


@pytest.mark.slow
def test_page_scenarios_quick(bench_url, tmp_path, monkeypatch):
    """Every page opens as each role (200, or 404 for a page not built yet), and each gives a
    row judged against the 150 ms / 300 KB budget."""
    _generate(bench_url, tmp_path)
    monkeypatch.setenv("INSTANCE_PATH", str(tmp_path))

    results = page_scenarios(bench_url, quick=True)

    backend = make_url(bench_url).get_backend_name()
    names = [r.scenario for r in results]
    for expected in ("page /ddis as System-Admin", "page /audit as System-Admin"):
        assert any(n.startswith(expected + ":") for n in names), names
    assert any(n.startswith("page /reports/ddis/day?company=") for n in names), names
    assert any("/reports/ddis/day?company=" in n and "&changes=2&page=300" in n for n in names)
    assert any(n.startswith(f"page /admin/accounts/{COMPANY_ADMIN}/grants as") for n in names)
    assert any(n.startswith("page /admin/webhooks/") for n in names), names
    assert sum(n.startswith("page /search?q=") for n in names) == 6, names
    admin_rows = [r for r in results if " as Company-Admin of " in r.scenario]
    assert len(admin_rows) == 22  # bench/pages.py, company_admin
    # The lifecycle's pages, on the stock the run adds (as many numbers as the DDIs).
    assert any(
        n.startswith("page /ddis?state=available&dialcode=44&number=20710 as") for n in names
    )
    assert any(n.startswith("page /ddis/free?") for n in names), names
    assert any(n.startswith("page /audit?target=%2B44+") for n in names), names
    assert not any("/reports/" in r.scenario or "/admin/" in r.scenario for r in admin_rows)
    for r in results:
        assert r.database == backend
        assert r.reference == BUDGET_MS and r.reference_name == "page budget", r
        if r.note:
            assert r.note == "not built (404)", r
            continue
        assert r.app > 0 and r.size is not None and r.size > 0, r
        assert r.size_budget == BUDGET_BYTES
        assert r.verdict.endswith("(<= 150 ms, <= 300 KB)"), r
    # Only the company page and the picker suggestions may be missing (an app older than them
    # has neither); every other page answered and was measured.
    company = admin_rows[0].scenario.split(" as Company-Admin of ")[1].split(":")[0]
    not_built = {r.scenario.split(" as ")[0].removeprefix("page ") for r in results if r.note}
    assert not_built <= {f"/companies/{company}", "/companies/suggest?for=records&q=c0"}, not_built
