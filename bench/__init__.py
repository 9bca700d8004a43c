"""Benchmarks: a data generator and runners that print ratios against in-run references."""

import os


def use_bench_database() -> str:
    """DATABASE_URL for every bench command: the one given, else bench.db in this folder."""
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{os.path.abspath('bench.db')}")
    os.environ.setdefault("SECRET_KEY", "bench-secret-key-not-secret")
    return os.environ["DATABASE_URL"]
