"""Backfill closed history intervals from a legacy system's CSV (docs/cli.md#history-import).

The whole file is checked before anything is written; the first bad row rejects the file with
its line number. Rows already recorded exactly are skipped, so importing a file twice writes
nothing new. The import holds the write lock while it checks overlaps against the recorded
history, so a live change cannot slip in between the check and the insert.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

from flask import current_app
from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from ...access import Principal
from ...database import write_transaction
from ...errors import Invalid
from ...models import Company, HistoryInterval
from ...wording import counted
from .. import changes
from ..billing import closed_figures, periods
from ..fields import Part, parse_part
from ..history import audit, intervals
from ..records.kinds import DDI

HEADER = ["kind", "company", "key", "start", "end"]
# The fields module's checks of a username and of a DDI's dialcode and number (17 digits at
# most together), for the key column.
_KEY_PARTS = {
    "user": Part(("username",), ("username",)),
    "ddi": DDI.key_part,
}


@dataclass(frozen=True)
class ImportRow(intervals.ClosedInterval):
    """One checked row of the file: a closed interval and the line it came from."""

    line: int = 0

    @property
    def identity(self) -> tuple[str, str]:
        """What may not overlap itself: a DDI is one number whatever its company; a phone
        user's username is unique only within its company."""
        return (
            (self.kind, self.key)
            if self.kind == "ddi"
            else (self.kind, f"{self.company}/{self.key}")
        )

    @property
    def record(self) -> tuple[str, str, str, datetime, datetime]:
        return (self.kind, self.company, self.key, self.start, self.end)


@dataclass(frozen=True)
class ImportResult:
    rows: int
    written: int
    closed_months: list[str]  # closed months ("YYYY-MM") the written intervals fall in

    @property
    def skipped(self) -> int:
        return self.rows - self.written


def _fail(line: int, why: str) -> Invalid:
    return Invalid(f"line {line}: {why}; nothing was imported.")


def _timestamp(value: str, line: int, column: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise _fail(line, f"{column} {value!r} is not an ISO 8601 timestamp") from None
    if moment.tzinfo is None:
        raise _fail(line, f"{column} {value!r} has no UTC offset or Z")
    return moment.astimezone(UTC).replace(tzinfo=None)


def _key_ok(kind: str, key: str) -> bool:
    if kind == "user":
        fields = {"username": key}
    else:
        dialcode, sep, number = key.partition(":")
        if sep != ":":
            return False
        fields = {"dialcode": dialcode, "number": number}
    try:
        parse_part(_KEY_PARTS[kind], fields, "key")
    except Invalid:
        return False
    return True


def parse(content: str, companies: set[str], now: datetime) -> list[ImportRow]:
    """Every row of the file, checked on its own and against the file's other rows."""
    rows = list(_rows(content, companies, now))
    _check_within_file(rows)
    return rows


def _rows(content: str, companies: set[str], now: datetime) -> Iterator[ImportRow]:
    """The file's rows after its header, each checked on its own; blank lines skipped."""
    reader = csv.reader(io.StringIO(content, newline=""))
    header = next(reader, None)
    if header is None or [h.strip() for h in header] != HEADER:
        raise _fail(1, f"the header must be {','.join(HEADER)}")
    for record in reader:
        if record and any(cell.strip() for cell in record):
            yield _row(record, reader.line_num, companies, now)


def _row(record: list[str], line: int, companies: set[str], now: datetime) -> ImportRow:
    if len(record) != len(HEADER):
        raise _fail(line, f"expected {len(HEADER)} columns, found {len(record)}")
    kind, company, key, start_text, end_text = (cell.strip() for cell in record)
    if kind not in ("ddi", "user"):
        raise _fail(line, f"kind must be ddi or user, not {kind!r}")
    if company not in companies:
        raise _fail(line, f"company {company!r} does not exist")
    if not _key_ok(kind, key):
        expected = "dialcode:number" if kind == "ddi" else "a username"
        raise _fail(line, f"key {key!r} is not {expected}")
    start = _timestamp(start_text, line, "start")
    end = _timestamp(end_text, line, "end")
    if end <= start:
        raise _fail(line, "end must be later than start")
    if end > now:
        raise _fail(line, "end is in the future")
    return ImportRow(kind=kind, company=company, key=key, start=start, end=end, line=line)


def _check_within_file(rows: list[ImportRow]) -> None:
    """No row repeats or overlaps another of the same DDI or phone user."""
    by_identity: dict[tuple[str, str], list[ImportRow]] = defaultdict(list)
    for row in rows:
        by_identity[row.identity].append(row)
    for group in by_identity.values():
        group.sort(key=lambda r: (r.start, r.line))
        for a, b in pairwise(group):
            if a.record == b.record:
                raise _fail(b.line, f"repeats line {a.line}")
            if b.start < a.end:
                raise _fail(b.line, f"overlaps line {a.line} for the same {_what(b)}")


def _what(row: ImportRow) -> str:
    return "DDI" if row.kind == "ddi" else "phone user"


def _recorded(
    session: Session, rows: list[ImportRow]
) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    """The recorded intervals of every identity the file names."""
    wanted = sorted({(r.kind, r.key) for r in rows})
    found: dict[tuple[str, str], list[tuple[Any, ...]]] = defaultdict(list)
    h = HistoryInterval
    for chunk in intervals.chunks(wanted):
        query = select(h.kind, h.company, h.key, h.start_at, h.end_at).where(
            tuple_(h.kind, h.key).in_(chunk)
        )
        for kind, company, key, start, end in session.execute(query):
            identity = (kind, key) if kind == "ddi" else (kind, f"{company}/{key}")
            found[identity].append((kind, company, key, start, end))
    return found


def _new_rows(
    session: Session,
    rows: list[ImportRow],
    progress: Callable[[Iterable[ImportRow]], Iterable[ImportRow]],
) -> list[ImportRow]:
    """The rows not recorded exactly already; Invalid for one overlapping the recorded
    history of the same DDI or phone user."""
    recorded = _recorded(session, rows)
    new = []
    for row in progress(rows):
        existing = recorded.get(row.identity, [])
        if row.record in existing:
            continue
        for _kind, company, key, start, end in existing:
            if start < row.end and (end is None or end > row.start):
                raise _fail(
                    row.line,
                    f"overlaps the recorded history of {_what(row)} {key} "
                    f"in {company} from {start:%Y-%m-%d %H:%M:%S} UTC",
                )
        new.append(row)
    return new


def import_csv(
    principal: Principal,
    content: str,
    source: str = "CSV",
    progress: Callable[[Iterable[ImportRow]], Iterable[ImportRow]] = lambda rows: rows,
) -> ImportResult:
    """Check the whole file, then write its new intervals in one transaction; return counts.

    Guarantees: any bad row (format, unknown company, end not after start, end in the future,
    overlap within the file or with the recorded history of the same DDI or phone user) raises
    Invalid naming its line, and nothing is written. Rows recorded exactly already are skipped.
    One audit entry records the import. A closed month the new intervals fall in keeps its
    stored figures: the result names it, for a warning (docs/month-close.md).
    """
    principal.require_system_admin("import history")
    counts: list[int] = []
    touched: list[str] = []

    def check(now: datetime) -> changes.Change:
        companies = set(session.scalars(select(Company.id)))
        rows = parse(content, companies, now)
        new = _new_rows(session, rows, progress)
        counts[:] = [len(rows), len(new)]
        tz = periods.zone(current_app.config["REPORT_TIMEZONE"])
        spans = [(row.start, row.end) for row in new]
        touched[:] = closed_figures.closed_months_touched(session, spans, tz)
        read = counted(len(rows), "row")
        detail = f"{read}, {len(new)} written, {len(rows) - len(new)} already recorded"
        return changes.Change(
            closed=new,
            audit=[audit.AuditData("history.import", f"history {source}", detail=detail)],
        )

    with write_transaction() as session:
        # The whole history table is locked before the check: live writers wait until the
        # import commits, so no interval appears between the overlap check and the insert.
        changes.write(session, principal, None, changes.Lock(history=True), check)
    return ImportResult(rows=counts[0], written=counts[1], closed_months=touched)
