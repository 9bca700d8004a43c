"""The change path (services/changes.py) is the only writer of history intervals and daily
peaks: a scan of the application's source, so a new writer cannot bypass it unnoticed."""

from __future__ import annotations

import re
from pathlib import Path

import webapp

SOURCE = Path(webapp.__file__).parent


def _writes(model: str) -> str:
    return (
        rf"(insert|update|delete)\({model}\b|{model}\.__table__\.(insert|update|delete)"
        rf"|insert_rows\([^)]*\b{model}\b"
    )


# Statements that write a table, and the only modules that may hold them: the storage steps
# the change path calls (history/intervals.py, billing/rollups.py) and the demo seed, which invents
# a whole history at once and then rebuilds the rollup from it.
TABLE_WRITES = {
    _writes("HistoryInterval"): {"services/history/intervals.py", "cli/demo.py"},
    _writes("DailyPeak"): {"services/billing/rollups.py"},
    # The change events and the counter their ids come from: recorded and pruned only there.
    _writes("Event"): {"services/events/journal.py"},
    _writes("EventTxn"): {"services/events/journal.py"},
    _writes("EventCounter"): {"services/events/journal.py"},
}
# The storage steps, and the only modules that may call them. rollups.build and rebuild_all
# (the full rebuild from the history) are not changes and stay outside the path.
STEP_CALLS = {
    r"\bintervals\.(open_intervals|close_intervals|add_closed)\(": {"services/changes.py"},
    r"\brollups\.(record_changes|rebuild_from|lock_companies)\(": {"services/changes.py"},
    r"\bwrite_clock\(": {"services/changes.py", "database.py"},
    r"\bjournal\.record\(": {"services/changes.py"},
}


def _sources() -> dict[str, str]:
    return {
        path.relative_to(SOURCE).as_posix(): path.read_text(encoding="utf-8")
        for path in SOURCE.rglob("*.py")
    }


def _offenders(rules: dict[str, set[str]]) -> list[tuple[str, str]]:
    found = []
    for name, text in _sources().items():
        for pattern, allowed in rules.items():
            if name not in allowed and re.search(pattern, text):
                found.append((name, pattern))
    return found


def test_history_and_daily_peaks_are_written_only_by_their_storage_steps():
    assert _offenders(TABLE_WRITES) == []


def test_only_the_change_path_calls_the_storage_steps_and_reads_the_write_clock():
    assert _offenders(STEP_CALLS) == []


def test_the_scan_sees_the_writers_it_guards():
    """The patterns match the code they are meant to find (a scan that matches nothing would
    pass whatever the code does)."""
    sources = _sources()
    for rules in (TABLE_WRITES, STEP_CALLS):
        for pattern, allowed in rules.items():
            assert any(re.search(pattern, sources[name]) for name in allowed), pattern
