"""CSV downloads: cells a spreadsheet would not run as formulas (CSV formula injection)."""

from __future__ import annotations

# What a spreadsheet reads as the start of a formula in a cell.
CSV_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def neutralise(cell: str) -> str:
    """A cell a spreadsheet would run as a formula gets a leading single quote."""
    return "'" + cell if cell.startswith(CSV_TRIGGERS) else cell
