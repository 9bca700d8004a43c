"""Counts as an operator reads them: "1 interval", "2 intervals", "0 companies"."""

from __future__ import annotations


def counted(count: int, singular: str, plural: str | None = None, *, grouped: bool = False) -> str:
    """`count` and the noun that agrees with it: `singular` for exactly one, else `plural`
    (default: `singular` + "s"; give it for "company", "companies"). `grouped` writes the
    count with thousands separators (1,234), as the pages do; the command line prints plain
    digits, which a script reads back."""
    number = f"{count:,}" if grouped else str(count)
    return f"{number} {singular if count == 1 else (plural or singular + 's')}"
