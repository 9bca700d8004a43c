"""Schemathesis against the live app (a real server on loopback), once per role's token, with
every check on: not_a_server_error, ignored_auth, negative_data_rejection (a request the
document says is invalid answered 2xx fails), positive_data_acceptance (a request the document
says is valid answered 400 fails), response schema conformance, status code conformance and
the rest. Bounded in examples (SCHEMATHESIS_MAX_EXAMPLES, default 15 per operation on SQLite, 5 on
PostgreSQL: tests/databases.py's `examples`) and time.

Phases: the examples (the document's own), fuzzing (random requests, valid and not) and, with
the System-Admin's token, coverage: Schemathesis's deterministic walk over every boundary of
the document (each bound just inside and just outside, each required member missing, each
wrong type), positive and negative. Validation does not depend on the role, and a
System-Admin reaches every operation's validation, so one walk covers it; the other roles
fuzz what their grants change (403s, filtered reads).

tests/schemathesis_hooks.py repairs valid requests only where the API's rules go beyond what
a document can state (a company that must exist, a CSV body, a query string's year without a
month); the document states everything else, so a disagreement is a failure here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .databases import examples
from .factories import ROLES

pytestmark = pytest.mark.slow  # a fuzzer against a live server

ROOT = Path(__file__).resolve().parent.parent
ST = Path(sys.executable).parent / "st"
# One account per kind of grant, from the shared role table.
FUZZ_ROLES = ("root", "cadmin", "summary", "reporter", "nobody")
# The coverage walk runs once (module docstring).
PHASES = {"root": "examples,coverage,fuzzing"}


@pytest.mark.parametrize("role", FUZZ_ROLES)
def test_schemathesis_finds_nothing(app, factory, live_server, role):
    # A declared dev dependency: missing means a broken install, which must fail, not skip.
    assert ST.exists(), "schemathesis is not installed: pip install -e '.[dev]'"
    # The fuzzer sends hundreds of requests a minute from one token: lift the API limit here
    # (its own tests cover it).
    app.config["API_RATE_LIMIT"] = "1000000 per minute"
    for company in ("acme", "globex"):
        factory.company(company)
    caller = factory.account(f"st-{role}", **ROLES[role])
    factory.ddi("44", "2071234567", "acme")
    factory.user("ana.kim", "acme")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks",
        "ST_COMPANIES": "acme,globex",
    }
    result = subprocess.run(
        [
            str(ST),
            "run",
            f"{live_server}/rest/openapi.json",
            "--header",
            f"Authorization: Bearer {caller.token}",
            "--checks",
            "all",
            "--phases",
            PHASES.get(role, "examples,fuzzing"),
            "--max-examples",
            # The SQLite pass explores; the PostgreSQL pass repeats a third of it to cover that
            # dialect's SQL (databases.examples; the root's coverage walk is whole in both).
            os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", str(examples(15))),
            "--seed",
            "20261122",
            "--request-timeout",
            "30",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    # The failures section names each failing request and how to replay it.
    start = result.stdout.find("FAILURES")
    report = result.stdout[start:] if start >= 0 else result.stdout[-6000:]
    assert result.returncode == 0, report[:12000] + result.stderr[-2000:]
