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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise

from sqlalchemy import insert, select, text, tuple_

from ..access import Principal
from ..database import write_clock, write_transaction
from ..models import Company, HistoryInterval
from . import audit, periods, rollups
from .errors import Invalid
from .fields import FORMATS

HEADER = ["kind", "company", "key", "start", "end"]
CHUNK = 400


@dataclass(frozen=True)
class Row:
    line: int
    kind: str
    company: str
    key: str
    start: datetime  # naive UTC
    end: datetime

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
        return FORMATS["username"][0].fullmatch(key) is not None
    dialcode, sep, number = key.partition(":")
    return (
        sep == ":"
        and FORMATS["dialcode"][0].fullmatch(dialcode) is not None
        and FORMATS["number"][0].fullmatch(number) is not None
        and len(dialcode) + len(number) <= 17
    )


def parse(content: str, companies: set[str], now: datetime) -> list[Row]:
    """Every row of the file, checked on its own and against the file's other rows."""
    reader = csv.reader(io.StringIO(content, newline=""))
    header = next(reader, None)
    if header is None or [h.strip() for h in header] != HEADER:
        raise _fail(1, f"the header must be {','.join(HEADER)}")
    rows: list[Row] = []
    for record in reader:
        line = reader.line_num
        if not record or all(not cell.strip() for cell in record):
            continue
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
        rows.append(Row(line, kind, company, key, start, end))
    by_identity: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in rows:
        by_identity[row.identity].append(row)
    for group in by_identity.values():
        group.sort(key=lambda r: (r.start, r.line))
        for a, b in pairwise(group):
            if a.record == b.record:
                raise _fail(b.line, f"repeats line {a.line}")
            if b.start < a.end:
                raise _fail(b.line, f"overlaps line {a.line} for the same {_what(b)}")
    return rows


def _what(row: Row) -> str:
    return "DDI" if row.kind == "ddi" else "phone user"


def _recorded(session, rows: list[Row]) -> dict[tuple[str, str], list[tuple]]:
    """The recorded intervals of every identity the file names."""
    wanted = sorted({(r.kind, r.key) for r in rows})
    found: dict[tuple[str, str], list[tuple]] = defaultdict(list)
    h = HistoryInterval
    for i in range(0, len(wanted), CHUNK):
        query = select(h.kind, h.company, h.key, h.start_at, h.end_at).where(
            tuple_(h.kind, h.key).in_(wanted[i : i + CHUNK])
        )
        for kind, company, key, start, end in session.execute(query):
            identity = (kind, key) if kind == "ddi" else (kind, f"{company}/{key}")
            found[identity].append((kind, company, key, start, end))
    return found


def _rebuild_rollups(session, new: list[Row]) -> None:
    """Recompute the daily rollup of each company the new intervals touch, from the day of its
    earliest new start on (the history before it is unchanged)."""
    for kind in rollups.KINDS:
        zone_name = rollups.built_zone(session, kind)
        if zone_name is None:
            continue
        tz = periods.zone(zone_name)
        first: dict[str, datetime] = {}
        for r in new:
            if r.kind == kind and (r.company not in first or r.start < first[r.company]):
                first[r.company] = r.start
        if first:
            starts = {c: periods.today_in(tz, at) for c, at in first.items()}
            rollups.rebuild(session, kind, starts, tz)


def import_csv(
    principal: Principal,
    content: str,
    source: str = "CSV",
    progress: Callable[[Iterable[Row]], Iterable[Row]] = lambda rows: rows,
) -> ImportResult:
    """Check the whole file, then write its new intervals in one transaction; return counts.

    Guarantees: any bad row (format, unknown company, end not after start, end in the future,
    overlap within the file or with the recorded history of the same DDI or phone user) raises
    Invalid naming its line, and nothing is written. Rows recorded exactly already are skipped.
    One audit entry records the import.
    """
    principal.require_system_admin("import history")
    with write_transaction() as session:
        if session.get_bind().dialect.name == "postgresql":
            # Live writers wait until the import commits: no interval appears between the
            # overlap check and the insert.
            session.execute(text("LOCK TABLE history_intervals IN SHARE ROW EXCLUSIVE MODE"))
        companies = set(session.scalars(select(Company.id)))
        rows = parse(content, companies, write_clock(session))
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
        if new:
            session.execute(
                insert(HistoryInterval),
                [
                    {
                        "kind": r.kind,
                        "company": r.company,
                        "key": r.key,
                        "start_at": r.start,
                        "end_at": r.end,
                        "source": "import",
                    }
                    for r in new
                ],
            )
            _rebuild_rollups(session, new)
        audit.record(
            session,
            [
                audit.entry(
                    principal,
                    "history.import",
                    f"history {source}",
                    detail=(
                        f"{len(rows)} rows, {len(new)} written,"
                        f" {len(rows) - len(new)} already recorded"
                    ),
                )
            ],
        )
    return ImportResult(rows=len(rows), written=len(new))
