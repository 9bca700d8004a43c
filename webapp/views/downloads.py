"""CSV downloads: one way to stream a file of rows, with no cell a spreadsheet would run.

Every download of the pages (lists, reports, a report day, the audit log) is a `csv_download`:
streamed as its rows are read, so a million rows never sit in memory, and every cell passed
through `neutralise` (CSV formula injection), so no download can forget it.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence

from flask import Response, stream_with_context

# What a spreadsheet reads as the start of a formula in a cell.
CSV_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
FLUSH_ROWS = 500  # rows written between two chunks of the response


def neutralise(cell: str) -> str:
    """A cell a spreadsheet would run as a formula gets a leading single quote."""
    return "'" + cell if cell.startswith(CSV_TRIGGERS) else cell


def csv_download(filename: str, header: Sequence[str], rows: Iterable[Sequence[str]]) -> Response:
    """`filename` as an attachment: the header, then each row with every cell neutralised,
    sent every FLUSH_ROWS rows. `rows` is read while the response streams (in the request's
    context): a caller that must refuse with an error page reads what decides it first."""

    def lines() -> Iterator[str]:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(header)
        for n, row in enumerate(rows, 1):
            writer.writerow([neutralise(cell) for cell in row])
            if n % FLUSH_ROWS == 0:
                yield _drain(out)
        yield _drain(out)

    response = Response(stream_with_context(lines()), mimetype="text/csv")
    response.headers["Content-Disposition"] = f"attachment; filename={filename}"
    return response


def _drain(out: io.StringIO) -> str:
    text = out.getvalue()
    out.seek(0)
    out.truncate()
    return text
