"""The bench data sets: generated on first use and kept, brought to the current schema."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent


def _postgres_database(url: str) -> None:
    """CREATE DATABASE for url's database if the server lacks it."""
    target = make_url(url)
    server = create_engine(target.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with server.connect() as conn:
        exists = conn.execute(
            text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": target.database}
        ).scalar()
        if not exists:
            conn.execute(text(f'CREATE DATABASE "{target.database}"'))
    server.dispose()


def _holds_data(url: str) -> bool:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table("companies"):
                return False
            return bool(conn.execute(text("SELECT count(*) FROM companies")).scalar())
    finally:
        engine.dispose()


def upgrade_schema(url: str) -> None:
    """Bring a kept data set to the app's schema (Alembic, `flask db upgrade`): one generated
    by older code lacks later migrations' columns and indexes. Nothing to do at the head."""
    env = {**os.environ, "DATABASE_URL": url}
    subprocess.run(
        [sys.executable, "-m", "flask", "--app", "app", "db", "upgrade"],
        cwd=ROOT,
        env=env,
        check=True,
    )


def ensure_data(url: str, ddis: int, companies: int) -> None:
    """Generate the data set into url unless it already holds one; bring a kept one to the
    current schema."""
    if url.startswith("postgresql"):
        _postgres_database(url)
    if _holds_data(url):
        upgrade_schema(url)
        _fill_audit_log(url)
        return
    print(f"generating {ddis:,} DDIs in {companies:,} companies into {label(url)}", flush=True)
    env = {**os.environ, "DATABASE_URL": url}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.generate",
            "--ddis",
            str(ddis),
            "--companies",
            str(companies),
        ],
        cwd=ROOT,
        env=env,
        check=True,
    )
    _fill_audit_log(url)


def _fill_audit_log(url: str) -> None:
    """The audit entries of the data set's history (bench/audit_log.py), when it has none yet:
    data sets generated before they were part of it get them on their next run."""
    env = {**os.environ, "DATABASE_URL": url}
    subprocess.run([sys.executable, "-m", "bench.audit_log"], cwd=ROOT, env=env, check=True)


def label(url: str) -> str:
    parsed = make_url(url)
    return f"{parsed.get_backend_name()}:{Path(parsed.database or '').name}"
