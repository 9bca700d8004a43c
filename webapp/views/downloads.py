"""CSV downloads: one way to stream a file of rows, with no cell a spreadsheet would run.

Every download of the pages (lists, reports, a report day, the audit log) is a `csv_download`:
streamed as its rows are read, so a million rows never sit in memory, and every cell passed
through `neutralise` (CSV formula injection), so no download can forget it.

A download cut short must never look complete (docs/deploy.md, Downloads). Under gunicorn the
connection of a stream is set to close with a reset (SO_LINGER 0) until its last row is
written: a failure while reading rows closes it at once, and so does the death of the worker
(the kernel resets what a killed process leaves open). The client sees the connection reset,
or a chunked body without its last chunk, never a clean end, whether it speaks HTTP/1.1 or
HTTP/1.0 (a proxy's default upstream protocol, where only the connection's end marks the
body's).
"""

from __future__ import annotations

import csv
import io
import socket
import struct
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

from flask import Response, request, stream_with_context

# What a spreadsheet reads as the start of a formula in a cell.
CSV_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
TRIGGERS = frozenset(CSV_TRIGGERS)  # the same, as a set of first characters
FLUSH_ROWS = 1000  # rows written between two chunks of the response


def neutralise(cell: str) -> str:
    """A cell a spreadsheet would run as a formula gets a leading single quote."""
    return "'" + cell if cell.startswith(CSV_TRIGGERS) else cell


def csv_download(filename: str, header: Sequence[str], rows: Iterable[Sequence[str]]) -> Response:
    """`filename` as an attachment: the header, then each row with every cell neutralised,
    sent every FLUSH_ROWS rows. `rows` is read while the response streams (in the request's
    context): a caller that must refuse with an error page reads what decides it first."""

    def lines() -> Iterator[str]:
        connection = _abort_on_close(request.environ)
        finished = False
        try:
            out = io.StringIO()
            writer = csv.writer(out)
            writer.writerow(header)
            yield _drain(out)
            source = iter(rows)
            while batch := list(islice(source, FLUSH_ROWS)):
                text = _plain_text(batch)
                if text is None:
                    # neutralise, inline: a call per cell was a fifth of a big download's time.
                    writer.writerows(
                        [("'" + cell) if cell[:1] in TRIGGERS else cell for cell in row]
                        for row in batch
                    )
                    text = _drain(out)
                yield text
            finished = True
        finally:
            # Any other way out (an error reading rows, the server closing the stream because
            # the client went away) is no complete file.
            _end(connection, finished)

    response = Response(stream_with_context(lines()), mimetype="text/csv")
    response.headers["Content-Disposition"] = f"attachment; filename={filename}"
    return response


# What neutralise quotes, after what starts a cell in a text whose every comma is between
# two cells: a comma, or the LF of the row before (the text's start is checked apart). CR,
# the last trigger, is checked by its count (a CR after a comma may end a row whose last
# cell is empty). Substring searches: a regular expression with these alternatives tried
# every position, a sixth of a big download's time.
_CELL_STARTS = tuple(
    start + trigger for start in (",", "\n") for trigger in CSV_TRIGGERS if trigger != "\r"
)


def _plain_text(batch: Sequence[Sequence[str]]) -> str | None:
    """The CSV text of `batch` when no cell of it needs quoting or neutralising: what
    csv.writer writes for it then, each row's cells joined by commas and ended by CRLF.
    None when a cell does (the caller writes it the long way).

    A chunk's text is checked as a whole, by counts and substring searches: its commas are exactly
    those between cells (so no cell holds one), it holds no quote, its CRs and LFs are only
    the rows' ends, and no cell starts with a trigger. Most chunks pass, and then a row costs
    one join: csv.writer and a check per cell were half of a big download's time. A row of
    one cell is left to csv.writer (it quotes an empty one)."""
    rows = len(batch)
    if min(map(len, batch)) < 2:
        return None
    text = "\r\n".join([",".join(row) for row in batch]) + "\r\n"
    if (
        text.count(",") != sum(map(len, batch)) - rows
        or '"' in text
        or text.count("\n") != rows
        or text.count("\r") != rows
        or text.startswith(CSV_TRIGGERS)
        or any(start in text for start in _CELL_STARTS)
    ):
        return None
    return text


def _drain(out: io.StringIO) -> str:
    text = out.getvalue()
    out.seek(0)
    out.truncate()
    return text


RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends a reset, not an end
ORDERLY = struct.pack("ii", 0, 0)  # the default: close() ends the connection in order


def _abort_on_close(environ: dict[str, Any]) -> socket.socket | None:
    """The request's connection, set to be reset when closed (gunicorn names it in the WSGI
    environ; another server: None, and its own way of ending a failed stream)."""
    sock = environ.get("gunicorn.socket")
    if not isinstance(sock, socket.socket):
        return None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)
    except OSError:  # closed already: the client left
        return None
    return sock


def _end(sock: socket.socket | None, finished: bool) -> None:
    """A finished stream's connection closes in order again (gunicorn then sends the last
    chunk, and may keep it for the next request); an unfinished one is reset now, before
    gunicorn could end it in order."""
    if sock is None:
        return
    try:
        if finished:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, ORDERLY)
        else:
            sock.close()
    except OSError:
        pass  # closed already
