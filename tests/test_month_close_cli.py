"""Month close on the command line (docs/cli.md#the-commands): `billing close`,
`billing reopen --reason`, `billing status`, and the warning of a `history import` into a closed
month."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from webapp.access import Principal
from webapp.services.billing import reports

from .factories import ACME, GLOBEX, add_history
from .test_cli import assert_one_line_error


@pytest.fixture
def history(factory):
    factory.company(ACME)
    factory.company(GLOBEX)
    add_history(
        ("ddi", ACME, "44:1", datetime(2025, 10, 1), datetime(2025, 10, 11)),
        ("user", GLOBEX, "ana", datetime(2025, 9, 1), None),
    )


def test_close_status_reopen(history, flask):
    assert flask("billing", "status").stdout == "No month is closed.\n"
    closed = flask("billing", "close", "2025-10")
    assert closed.returncode == 0, closed.stderr
    assert closed.stdout == "Closed 2025-10: version 1, figures in UTC.\n"
    status = flask("billing", "status")
    assert status.returncode == 0
    line = status.stdout.strip()
    assert re.fullmatch(
        r"2025-10  version 1  closed \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ by cli:\S+  "
        r"0 companies changed since",
        line,
    ), line
    # A backfill into the closed month: one more company changed since.
    add_history(("ddi", GLOBEX, "44:2", datetime(2025, 10, 4), datetime(2025, 10, 5)))
    assert flask("billing", "status").stdout.strip().endswith("  1 company changed since")
    reopened = flask("billing", "reopen", "2025-10", "--reason", "late CDRs")
    assert reopened.returncode == 0, reopened.stderr
    assert reopened.stdout == "Reopened 2025-10 (its close was version 1).\n"
    assert flask("billing", "status").stdout == "No month is closed.\n"
    assert flask("billing", "close", "2025-10").stdout.startswith("Closed 2025-10: version 2")


@pytest.mark.parametrize(
    "args, words",
    [
        (("billing", "close", "2025-13"), ("is not a month", "YYYY-MM")),
        (("billing", "close", "October"), ("is not a month",)),
        (("billing", "close", "1969-12"), ("1970",)),
        (("billing", "close"), ("Missing argument",)),
        (("billing", "reopen", "2025-10"), ("--reason",)),
        (("billing", "reopen", "2025-10", "--reason", " "), ("reason", "required")),
        (("billing", "reopen", "2025-10", "--reason", "x" * 501), ("500 characters",)),
        (("billing", "reopen", "2025-10", "--reason", "why"), ("is not closed",)),
    ],
)
def test_mistakes_are_one_line_and_change_nothing(history, flask, args, words):
    assert_one_line_error(flask(*args), *words)
    assert flask("billing", "status").stdout == "No month is closed.\n"


def test_the_running_month_and_a_closed_one(history, flask):
    now = datetime.now(UTC)
    assert_one_line_error(
        flask("billing", "close", f"{now.year:04d}-{now.month:02d}"), "has not ended"
    )
    assert_one_line_error(flask("billing", "close", f"{now.year + 1:04d}-01"), "future")
    flask("billing", "close", "2025-10")
    assert_one_line_error(flask("billing", "close", "2025-10"), "already closed", "version 1")


def test_history_import_into_a_closed_month_warns_naming_it(history, flask, tmp_path):
    flask("billing", "close", "2025-10")
    flask("billing", "close", "2025-08")
    closed = reports.report(
        Principal.cli(), "ddi", reports.parse_scope({"month": 10, "year": 2025})
    )
    rows = [
        "kind,company,key,start,end",
        # October only, October into November (not closed), and August.
        "ddi,globex,44:7,2025-10-03T00:00:00Z,2025-10-04T00:00:00Z",
        "ddi,globex,44:8,2025-10-30T00:00:00Z,2025-11-02T00:00:00Z",
        "user,acme,bob,2025-08-10T00:00:00Z,2025-08-11T00:00:00Z",
    ]
    path = tmp_path / "backfill.csv"
    path.write_text("\n".join(rows) + "\n")
    result = flask("history", "import", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Imported 3 intervals")
    warnings = result.stderr.strip().splitlines()
    assert [w.split(" is closed")[0] for w in warnings] == ["Warning: 2025-08", "Warning: 2025-10"]
    assert all("adjustment" in w for w in warnings)
    # Imported as usual; the closed report is unchanged.
    after = reports.report(Principal.cli(), "ddi", reports.parse_scope({"month": 10, "year": 2025}))
    assert after == closed
    # Nothing imported into a closed month: no warning.
    path.write_text(
        "kind,company,key,start,end\nddi,acme,44:5,2025-11-03T00:00:00Z,2025-11-04T00:00:00Z\n"
    )
    quiet = flask("history", "import", str(path))
    assert quiet.returncode == 0 and quiet.stderr == ""
