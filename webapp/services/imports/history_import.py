"""Backfill closed history intervals from a legacy system's CSV (docs/cli.md#history-import).

The whole file is checked before anything is written; a file with bad rows is rejected naming
every problem with its line (the first 100, problems.py), found in one pass. Rows already
recorded exactly are skipped, so importing a file twice writes nothing new. The import holds
the write lock while it checks overlaps against the recorded history, so a live change cannot
slip in between the check and the insert.
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
from .problems import Problems

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


def _timestamp(value: str, column: str, problems: list[str]) -> datetime | None:
    """The timestamp in UTC; None, with the reason added to `problems`, if it is not one."""
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        problems.append(f"{column} {value!r} is not an ISO 8601 timestamp")
        return None
    if moment.tzinfo is None:
        problems.append(f"{column} {value!r} has no UTC offset or Z")
        return None
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


def parse(
    content: str, companies: set[str], now: datetime, faults: list[tuple[int, str]]
) -> list[ImportRow]:
    """Every good row of the file; the problems of the others, each row checked on its own
    and against the file's other rows, added to `faults` as (line, why)."""
    rows = list(_rows(content, companies, now, faults))
    _check_within_file(rows, faults)
    return rows


def _rows(
    content: str, companies: set[str], now: datetime, faults: list[tuple[int, str]]
) -> Iterator[ImportRow]:
    """The file's good rows after its header, each checked on its own; blank lines skipped;
    the problems of the others added to `faults`."""
    reader = csv.reader(io.StringIO(content, newline=""))
    try:
        header = next(reader, None)
        if header is None or [h.strip() for h in header] != HEADER:
            faults.append((1, f"the header must be {','.join(HEADER)}"))
            return
        for record in reader:
            if record and any(cell.strip() for cell in record):
                problems: list[str] = []
                row = _row(record, reader.line_num, companies, now, problems)
                faults.extend((reader.line_num, why) for why in problems)
                if row is not None:
                    yield row
    except csv.Error as exc:  # the file cannot be read on past this line
        faults.append((reader.line_num or 1, f"not valid CSV ({exc})"))


def _row(
    record: list[str], line: int, companies: set[str], now: datetime, problems: list[str]
) -> ImportRow | None:
    """The row, or None with every reason it is not good added to `problems`."""
    if len(record) != len(HEADER):
        problems.append(f"expected {len(HEADER)} columns, found {len(record)}")
        return None
    kind, company, key, start_text, end_text = (cell.strip() for cell in record)
    if kind not in ("ddi", "user"):
        problems.append(f"kind must be ddi or user, not {kind!r}")
    if company not in companies:
        problems.append(f"company {company!r} does not exist")
    if kind in ("ddi", "user") and not _key_ok(kind, key):
        expected = "dialcode:number" if kind == "ddi" else "a username"
        problems.append(f"key {key!r} is not {expected}")
    start = _timestamp(start_text, "start", problems)
    end = _timestamp(end_text, "end", problems)
    if start is not None and end is not None and end <= start:
        problems.append("end must be later than start")
    if end is not None and end > now:
        problems.append("end is in the future")
    if problems or start is None or end is None:
        return None
    return ImportRow(kind=kind, company=company, key=key, start=start, end=end, line=line)


def _check_within_file(rows: list[ImportRow], faults: list[tuple[int, str]]) -> None:
    """No row repeats or overlaps another of the same DDI or phone user: each one that does is
    named, with the earlier line it repeats or overlaps."""
    by_identity: dict[tuple[str, str], list[ImportRow]] = defaultdict(list)
    for row in rows:
        by_identity[row.identity].append(row)
    for group in by_identity.values():
        # Equal rows side by side; `reach` is the row ending last so far, which any later
        # row starting before its end overlaps (an adjacent pair alone would miss a short
        # row between a long one and a third).
        group.sort(key=lambda r: (r.start, r.end, r.line))
        reach = group[0]
        for previous, row in pairwise(group):
            if previous.record == row.record:
                faults.append((row.line, f"repeats line {previous.line}"))
            elif row.start < reach.end:
                faults.append((row.line, f"overlaps line {reach.line} for the same {_what(row)}"))
            if row.end > reach.end:
                reach = row


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
    faults: list[tuple[int, str]],
) -> list[ImportRow]:
    """The rows not recorded exactly already; one overlapping the recorded history of the
    same DDI or phone user is added to `faults`."""
    recorded = _recorded(session, rows)
    new = []
    for row in progress(rows):
        existing = recorded.get(row.identity, [])
        if row.record in existing:
            continue
        for _kind, company, key, start, end in existing:
            if start < row.end and (end is None or end > row.start):
                faults.append(
                    (
                        row.line,
                        f"overlaps the recorded history of {_what(row)} {key} "
                        f"in {company} from {start:%Y-%m-%d %H:%M:%S} UTC",
                    )
                )
                break  # the row is named once, with the first recorded interval it overlaps
        new.append(row)
    return new


def import_csv(
    principal: Principal,
    content: str,
    source: str = "CSV",
    progress: Callable[[Iterable[ImportRow]], Iterable[ImportRow]] = lambda rows: rows,
) -> ImportResult:
    """Check the whole file, then write its new intervals in one transaction; return counts.

    Guarantees: a file with bad rows (format, unknown company, end not after start, end in the
    future, overlap within the file or with the recorded history of the same DDI or phone user)
    raises FileRejected naming every problem with its line, up to problems.MAX_PROBLEMS of them,
    in line order, all found in one pass; nothing is written. Rows recorded exactly already are
    skipped.
    One audit entry records the import. A closed month the new intervals fall in keeps its
    stored figures: the result names it, for a warning (docs/month-close.md).
    """
    principal.require_system_admin("import history")
    counts: list[int] = []
    touched: list[str] = []

    def check(now: datetime) -> changes.Change:
        companies = set(session.scalars(select(Company.id)))
        faults: list[tuple[int, str]] = []
        rows = parse(content, companies, now, faults)
        new = _new_rows(session, rows, progress, faults)
        found = Problems()
        found.add_all(faults)
        found.raise_any()  # rolls the transaction back: nothing written
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
