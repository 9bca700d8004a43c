"""A rejected import file's problems, gathered in one pass (docs/import.md#a-rejected-file).

An import checks its whole file before it writes anything and names every problem it finds,
so a user fixes the file once: each with its line, the field named first in its reason. The
first MAX_PROBLEMS are kept, in line order, and the rest only counted ('and N more'): a file
that is wrong throughout (another export's columns, say) answers with a list one can read,
and the memory a check holds does not grow with the file.
"""

from __future__ import annotations

from ...errors import FileRejected

MAX_PROBLEMS = 100


class Problems:
    """The problems found so far; `add` them in line order (a line's own in the order found)."""

    def __init__(self) -> None:
        self.listed: list[tuple[int, str]] = []
        self.total = 0

    def __bool__(self) -> bool:
        return self.total > 0

    def add(self, line: int, why: str) -> bool:
        """Count a problem; True if it is one of those listed."""
        self.total += 1
        if len(self.listed) < MAX_PROBLEMS:
            self.listed.append((line, why))
            return True
        return False

    def add_all(self, found: list[tuple[int, str]]) -> None:
        """Add problems found out of line order (a chunk's, or a whole file's), sorted by line;
        a line's own keep the order they were found in."""
        for line, why in sorted(found, key=lambda problem: problem[0]):
            self.add(line, why)

    def error(self) -> FileRejected:
        return FileRejected(self.listed, self.total)

    def raise_any(self) -> None:
        """Raise FileRejected naming every problem added, if any was."""
        if self:
            raise self.error()
