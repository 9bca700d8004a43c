"""Stock from a CSV file (`flask numbers stock PATH.csv`; docs/numbers.md, "Stock"): header
`dialcode,number` or `dialcode,number,description`, up to MAX_ROWS rows.

The file (on disk, or an upload's bytes: a Source opening it afresh each time) is read twice as
a stream, never held: once to check every line (a bad one rejects
the file naming its line, and nothing is written), once to write it in chunks through
stock.write. Across the file only the keys seen are kept, as small integers, for the repeat
check.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from ...access import Principal
from ...errors import Conflict, FileRejected
from .. import fields
from ..fields import FORMATS, MAX_DDI_DIGITS
from . import stock
from .stock import Entry

HEADERS = (("dialcode", "number"), ("dialcode", "number", "description"))
MAX_ROWS = 1_000_000
MAX_PROBLEMS = 100  # problems a rejected file names; the rest are counted
BOM = "\ufeff"
# Opens the file afresh, as bytes, each time it is called: it is read more than once.
Source = Callable[[], IO[bytes]]


def bytes_source(data: bytes) -> Source:
    """A source over an upload held in memory (the /ddis/stock page's)."""
    return lambda: io.BytesIO(data)


def stock_file(principal: Principal, path: Path) -> int:
    """Stock the numbers of the CSV file at `path`; return how many.

    Guarantees: System-Admin only; the whole file is checked first (columns, formats, a
    description of at most 200 characters, a number twice, at most MAX_ROWS rows) and any
    problem raises FileRejected naming it with its line ('line 7: number 'x' must be 1 to 15
    digits'), writing nothing; then stock.write's guarantees (all or nothing, a 409 for a
    number already in the inventory, named by its line). Memory stays bounded: one chunk of
    rows at a time, and the keys seen as integers."""
    return stock_source(principal, lambda: path.open("rb"))


def stock_source(principal: Principal, source: Source) -> int:
    """stock_file's guarantees, for the file `source` opens (e.g. an upload's bytes)."""
    principal.require_system_admin("stock numbers")
    check(source)
    return stock.write(principal, lambda: entries(source))


def _lines(binary: IO[bytes]) -> Iterator[str]:
    for number, raw in enumerate(binary, 1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise FileRejected([(number, "the file is not UTF-8 text (is it a CSV?)")], 1) from None
        yield text.removeprefix(BOM) if number == 1 else text


def _rows(source: Source) -> Iterator[tuple[int, list[str] | str]]:
    """(line, cells) for each row after the header, blank lines skipped; (line, why) for a
    line the file cannot be read past, as the last item."""
    with source() as binary:
        reader = csv.reader(_lines(binary), strict=True)
        try:
            header = next(reader, None)
            wanted = " or ".join(",".join(h) for h in HEADERS)
            if header is None or tuple(h.strip().lower() for h in header) not in HEADERS:
                yield 1, f"the header must be {wanted}"
                return
            width = len(header)
            for cells in reader:
                if not any(c.strip() for c in cells):
                    continue
                if len(cells) != width:
                    yield reader.line_num, [f"expected {width} columns, found {len(cells)}"]
                    continue
                yield reader.line_num, cells
        except csv.Error as exc:
            yield reader.line_num, f"not valid CSV ({exc})"


# A row's dialcode and number as a clean file writes them, checked in one match: the common
# case. Anything else goes through the checks of each cell, which also say what is wrong.
_PLAIN = re.compile("[0-9]{1,7},[0-9]{1,15}")


def _problems(cells: list[str]) -> list[str]:
    """What is wrong with one row's cells (a row of the wrong width arrives as its one
    problem, in a one-item list that is not a row)."""
    if len(cells) == 1:
        return cells
    plain = (
        _PLAIN.fullmatch(f"{cells[0]},{cells[1]}")
        and len(cells[0]) + len(cells[1]) <= MAX_DDI_DIGITS
    )
    description = cells[2] if len(cells) == 3 else ""
    if (
        plain
        and len(description) <= stock.MAX_DESCRIPTION
        and not fields.CONTROL.search(description)
    ):
        return []
    problems = []
    for name, value in zip(("dialcode", "number"), cells, strict=False):
        pattern, why = FORMATS[name]
        if not pattern.fullmatch(value.strip()):
            shown = value if len(value) <= 40 else value[:40] + "…"
            problems.append(f"{name} {shown!r} {why}")
    if not problems and len(cells[0].strip()) + len(cells[1].strip()) > MAX_DDI_DIGITS:
        problems.append(f"dialcode and number together must be at most {MAX_DDI_DIGITS} digits")
    if len(cells) == 3 and len(cells[2]) > stock.MAX_DESCRIPTION:
        problems.append(f"description must be at most {stock.MAX_DESCRIPTION} characters")
    if len(cells) == 3 and fields.CONTROL.search(cells[2]):
        problems.append(f"description {fields.NO_CONTROLS}")
    return problems


def _code(cells: list[str]) -> int:
    """A valid row's key as one int: its digits, and the dialcode's length (44:123 is not
    441:23). A set of a million costs far less than one of strings."""
    dialcode = cells[0].strip()
    return int(dialcode + cells[1].strip()) * 8 + len(dialcode)


def check(source: Source) -> None:
    """Every line of the file checked, nothing written: FileRejected naming the problems with
    their lines (the first MAX_PROBLEMS, and how many in all), if any."""
    listed: list[tuple[int, str]] = []
    total = rows = 0
    seen: set[int] = set()
    repeats: dict[int, int] = {}  # index in `listed` -> the repeated key's code
    for line, cells in _rows(source):
        if isinstance(cells, str):
            found = [cells]
        else:
            rows += 1
            found = (
                _problems(cells)
                if rows <= MAX_ROWS
                else [f"a file holds at most {MAX_ROWS:,} rows"]
            )
            if not found:
                code = _code(cells)
                if code in seen:
                    found = [f"{cells[0].strip()}:{cells[1].strip()} repeats line ?"]
                    if len(listed) < MAX_PROBLEMS:
                        repeats[len(listed)] = code
                seen.add(code)
        for why in found:
            total += 1
            if len(listed) < MAX_PROBLEMS:
                listed.append((line, why))
        if rows > MAX_ROWS:
            break
    if rows == 0 and not total:
        listed, total = [(1, "the file has no rows after its header")], 1
    if repeats:
        _name_first_lines(source, listed, repeats)
    if total:
        raise FileRejected(listed, total)


def _name_first_lines(
    source: Source, listed: list[tuple[int, str]], repeats: dict[int, int]
) -> None:
    """The line each repeated key first appears on, in place of the '?' of its problem: one
    more read, only for a file with repeats (keeping every key's line would cost far more
    memory than the set of keys)."""
    wanted = set(repeats.values())
    first: dict[int, int] = {}
    for line, cells in _rows(source):
        if isinstance(cells, list) and len(cells) > 1 and not _problems(cells):
            code = _code(cells)
            if code in wanted and code not in first:
                first[code] = line
    for index, code in repeats.items():
        line, why = listed[index]
        listed[index] = (line, why.replace("line ?", f"line {first.get(code, '?')}"))


def entries(source: Source) -> Iterator[list[Entry]]:
    """The numbers of a file `check` passed, stock.CHUNK at a time, each labelled by its line
    ('line 7'); Conflict if the file no longer reads as it did."""
    chunk: list[Entry] = []
    for line, cells in _rows(source):
        if isinstance(cells, str) or len(cells) == 1:  # _check found none: the file changed
            raise Conflict(
                f"The file changed while it was stocked (line {line}); nothing was "
                "stocked. Try again."
            )
        description = cells[2] if len(cells) == 3 else ""
        chunk.append(Entry(f"line {line}", cells[0].strip(), cells[1].strip(), description))
        if len(chunk) == stock.CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
