"""DDI import: a CSV of wanted states (dialcode,number,virt_exten,company), checked whole, then
applied in one transaction through the change path (docs/import.md).

Each row is a DDI as it should be: one that does not exist is created, one whose extension or
company differs is updated (a company change is a move, with its history), one equal to the
stored state is left alone. The CLI, the API and the page all call `plan` (the dry run) and
`apply` here, so the three doors cannot disagree.

A file of a million rows is never held as objects: it is read as a stream, once to plan and
once to apply, 400 rows at a time. What is kept across the file is small: the keys seen (as
integers, for the duplicate check), the counts, the first changes of each kind, per-company
count changes and a running hash of the changes (`fingerprint`). Applying compares the hash
it computes with the plan's, so a file that changed on disk between the two reads, or a
database that changed since a page's preview, is refused instead of half-applied.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import secrets
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, NamedTuple

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ...access import Principal
from ...database import (
    IMPORT_CACHE_KIB,
    bulk_cache,
    insert_rows,
    one_of,
    unnest_rows,
    write_transaction,
)
from ...errors import Conflict, Forbidden
from ...extensions import db
from ...models import Company, Ddi
from ...observability.metrics import IMPORT_SECONDS, timed
from .. import changes, inventory
from ..fields import FORMATS, MAX_DDI_DIGITS
from ..history import intervals
from ..history.audit import AuditData
from ..records import kinds
from .problems import Problems

HEADER = ("dialcode", "number", "virt_exten", "company")
MAX_ROWS = 1_000_000
# The most bytes the API and the page accept (the CLI reads a file of any size, up to MAX_ROWS
# rows): a million rows of typical company identifiers is about 40 MB.
MAX_BYTES = 64 * 1024 * 1024
SAMPLES = 100  # changes of each kind a preview shows
# Rows read, checked and written together: each chunk costs a few statements, so larger chunks
# mean fewer round trips; the lookups are split further where SQLite needs (intervals.chunks).
CHUNK = 2000
# What the CSV downloads put before a cell a spreadsheet would run as a formula
# (views/downloads.py); the import takes such a cell back as it was, so a download imports back
# unchanged.
_NEUTRALISED = ("'=", "'+", "'-", "'@")

# A source opens the file afresh, as bytes, each time it is called: it is read twice.
Source = Callable[[], IO[bytes]]
BOM = b"\xef\xbb\xbf"


def bytes_source(data: bytes) -> Source:
    """A source over an uploaded or posted body."""
    return lambda: io.BytesIO(data)


def path_source(path: str) -> Source:
    """A source over a file on disk."""
    return lambda: open(path, "rb")


def _text_lines(binary: IO[bytes]) -> Iterator[str]:
    """The file's lines as text, decoded one by one so a byte that is not UTF-8 is named by
    its line; a byte order mark (spreadsheets write one) is dropped."""
    for number, raw in enumerate(binary, 1):
        if number == 1 and raw.startswith(BOM):
            raw = raw[len(BOM) :]
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _Stop(number, "the file is not UTF-8 text (is it a CSV?)") from None


class _Stop(Exception):
    """A problem after which the file cannot be read on (not text, broken quoting): the check
    ends there, naming it after the problems of the lines before it."""

    def __init__(self, line: int, why: str):
        super().__init__(why)
        self.line, self.why = line, why


class Row(NamedTuple):
    line: int
    dialcode: str
    number: str
    virt_exten: str
    company: str

    @property
    def key(self) -> str:
        return f"{self.dialcode}:{self.number}"

    def values(self) -> dict[str, str]:
        return {
            "dialcode": self.dialcode,
            "number": self.number,
            "virt_exten": self.virt_exten,
            "company": self.company,
        }


class Stored(NamedTuple):
    id: int
    virt_exten: str
    company: str


@dataclass(frozen=True)
class Sample:
    """One change as a preview shows it: the DDI, before (None: created) and after."""

    key: str
    before: dict[str, str] | None
    after: dict[str, str]


@dataclass
class Plan:
    """What importing the file would do, as of the moment it was computed."""

    import_id: str
    rows: int = 0
    created: int = 0
    updated: int = 0  # moved included
    moved: int = 0
    samples: dict[str, list[Sample]] = field(
        default_factory=lambda: {"created": [], "updated": [], "moved": []}
    )
    delta: Counter[str] = field(default_factory=Counter)  # company -> change in its DDI count
    companies: set[str] = field(default_factory=set)  # whose history and rollup it changes
    fingerprint: str = ""
    applied: bool = False

    @property
    def unchanged(self) -> int:
        return self.rows - self.created - self.updated

    @property
    def changes(self) -> int:
        return self.created + self.updated

    def summary(self) -> str:
        """The CLI's line: 'created N, updated M (K moved), unchanged U'."""
        return (
            f"created {self.created}, updated {self.updated} ({self.moved} moved), "
            f"unchanged {self.unchanged}"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "updated": self.updated,
            "moved": self.moved,
            "unchanged": self.unchanged,
            "dry_run": not self.applied,
        }


class Flawed(NamedTuple):
    """A row with problems: each reason (naming its field), and the cells that are in their
    format (None for one that is not), so the checks against the file's other rows and the
    database still run on them and the file is reported whole. A problem the file cannot be
    read past (not text, broken quoting) is a Flawed too, the last one `_rows` yields."""

    line: int
    problems: list[str]
    dialcode: str | None = None
    number: str | None = None
    company: str | None = None


def _cell(text: str) -> str:
    text = text.strip()
    return text[1:] if text.startswith(_NEUTRALISED) else text


# A row as a clean file writes it (no spaces, no quotes), checked in one match: the common case.
# Anything else goes through _check, which also says what is wrong.
_PLAIN = re.compile("[0-9]{1,7}\x00[0-9]{1,15}\x00[0-9]{1,10}\x00[a-z0-9._-]{1,64}")


def _check(line: int, cells: list[str]) -> Row | Flawed:
    if len(cells) != len(HEADER):
        return Flawed(line, [f"expected {len(HEADER)} columns, found {len(cells)}"])
    values = [_cell(c) for c in cells]
    problems: list[str] = []
    valid: dict[str, str] = {}
    for name, value in zip(HEADER, values, strict=True):
        pattern, why = FORMATS[name]
        if pattern.fullmatch(value):
            valid[name] = value
        else:
            shown = value if len(value) <= 40 else value[:40] + "…"
            problems.append(f"{name} {shown!r} {why}")
    dialcode, number = valid.get("dialcode"), valid.get("number")
    if dialcode is not None and number is not None and len(dialcode + number) > MAX_DDI_DIGITS:
        problems.append(f"dialcode and number together must be at most {MAX_DDI_DIGITS} digits")
    if not problems:
        return Row(line, *values)
    return Flawed(line, problems, dialcode, number, valid.get("company"))


def _rows(source: Source) -> Iterator[Row | Flawed]:
    """The file's rows after its header, each checked on its own (a Row, or a Flawed naming
    its problems); blank lines skipped. A file that is not such a CSV ends with a Flawed
    naming the line where it stops being one."""
    line = 1
    with source() as binary:
        reader = csv.reader(_text_lines(binary), strict=True)
        try:
            header = next(reader, None)
            if header is None:
                why = f"the file is empty; its first line must be {','.join(HEADER)}"
                yield Flawed(1, [why])
                return
            if tuple(h.strip().lower() for h in header) != HEADER:
                yield Flawed(1, [f"the header must be {','.join(HEADER)}"])
                return
            count = 0
            for cells in reader:
                line = reader.line_num
                plain = (
                    len(cells) == 4
                    and _PLAIN.fullmatch("\x00".join(cells)) is not None
                    and len(cells[0]) + len(cells[1]) <= MAX_DDI_DIGITS
                )
                if not plain and not any(c.strip() for c in cells):
                    continue  # a blank line
                count += 1
                if count > MAX_ROWS:
                    yield Flawed(line, [f"a file holds at most {MAX_ROWS:,} rows"])
                    return
                yield Row(line, *cells) if plain else _check(line, cells)
        except _Stop as stop:
            yield Flawed(stop.line, [stop.why])
        except csv.Error as exc:
            yield Flawed(reader.line_num or line, [f"not valid CSV ({exc})"])


def _chunks(rows: Iterator[Row | Flawed]) -> Iterator[list[Row | Flawed]]:
    chunk: list[Row | Flawed] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _key_code(row: Row | Flawed) -> int | None:
    """The row's key as one small int (its digits, and the dialcode's length to tell 44:123
    from 441:23): a set of a million costs about 60 MB where a set of strings would cost twice
    that. None for a row whose dialcode or number is not in its format."""
    if row.dialcode is None or row.number is None:
        return None
    return int(row.dialcode + row.number) * 8 + len(row.dialcode)


def _stored(session: Session, rows: Sequence[Row], lock: bool) -> dict[tuple[str, str], Stored]:
    """The stored state of the chunk's DDIs, by (dialcode, number). With `lock` (PostgreSQL),
    the rows the chunk would change are locked until commit and read again under the lock,
    so applying sees exactly what it planned from; rows it leaves alone are not locked (a
    lock writes to the row: a re-import of a million unchanged rows would rewrite them all)."""
    by_dialcode: dict[str, list[str]] = {}
    for row in rows:
        by_dialcode.setdefault(row.dialcode, []).append(row.number)
    found: dict[tuple[str, str], Stored] = {}
    postgresql = session.get_bind().dialect.name == "postgresql"
    for dialcode, all_numbers in by_dialcode.items():
        # PostgreSQL takes the whole list as one array; SQLite a few hundred parameters.
        for numbers in [all_numbers] if postgresql else intervals.chunks(all_numbers):
            # One dialcode at a time: `dialcode = ? AND number IN (…)` is one range of the
            # unique index on both databases.
            query = select(Ddi.id, Ddi.number, Ddi.virt_exten, Ddi.company).where(
                Ddi.dialcode == dialcode, one_of(session, Ddi.number, list(numbers))
            )
            for id_, number, exten, company in session.execute(query):
                found[(dialcode, number)] = Stored(id_, exten, company)
    if lock and postgresql:
        changing = sorted(
            s.id
            for r in rows
            if (s := found.get((r.dialcode, r.number))) is not None
            and (s.virt_exten, s.company) != (r.virt_exten, r.company)
        )
        if changing:
            again = select(Ddi.id, Ddi.dialcode, Ddi.number, Ddi.virt_exten, Ddi.company)
            locked = (
                again.where(one_of(session, Ddi.id, changing)).order_by(Ddi.id).with_for_update()
            )
            for id_, dialcode, number, exten, company in session.execute(locked):
                found[(dialcode, number)] = Stored(id_, exten, company)
    return found


class _Repeat(NamedTuple):
    """A DDI seen on an earlier line: which line, found once the whole file is read."""

    code: int
    key: str


class _Reader:
    """One read of the file: checks every row and classifies it against the stored state,
    chunk by chunk, keeping only what Plan keeps. Every problem of the file is gathered
    (problems.py) and raised together once it has been read to its end (or to the line it
    cannot be read past); after the first, rows are only checked, not planned."""

    def __init__(self, session: Session, principal: Principal, plan: Plan, lock: bool, again=False):
        self.session, self.principal, self.plan, self.lock = session, principal, plan, lock
        # The second read of a file the first found good: its keys and companies were
        # checked (and a file changed in between shows in the fingerprint).
        self.again = again
        self.seen: set[int] = set()
        self.known: set[str] = set()
        # Companies named that do not exist: every row naming one is a problem.
        self.unknown: set[str] = set()
        self.digest = hashlib.sha256()
        self.problems = Problems()
        # Listed problems saying 'repeats line ?', by their index in problems.listed: the
        # line is looked up after the read, in one more pass, only for these.
        self.repeats: dict[int, _Repeat] = {}

    def chunks(self, source: Source) -> Iterator[tuple[list[Row], dict[tuple[str, str], Stored]]]:
        for items in _chunks(_rows(source)):
            found: list[tuple[int, str | _Repeat]] = [
                (item.line, why)
                for item in items
                if isinstance(item, Flawed)
                for why in item.problems
            ]
            rows = [item for item in items if isinstance(item, Row)]
            # A file already refused is only checked on: no stored rows read or locked (its
            # holds are then looked up for every row, which finds the same ones).
            stored = {} if self.problems else _stored(self.session, rows, self.lock)
            if not self.again:
                found += self._check_keys(items)
                found += self._check_companies(items)
                # A number with a DDI is in service, so held for no one: only the others.
                found += self._check_holds(
                    [r for r in rows if (r.dialcode, r.number) not in stored]
                )
            self._add(found)
            if self.problems:
                continue  # the file is refused: only its problems matter now
            for row in rows:
                self._count(row, stored.get((row.dialcode, row.number)))
            yield rows, stored
        if self.problems:
            self._name_repeated_lines(source)
            self.problems.raise_any()
        self.plan.fingerprint = self.digest.hexdigest()

    def _add(self, found: list[tuple[int, str | _Repeat]]) -> None:
        # Sorted by line (stable: a line's own problems in the order the checks found them).
        for line, why in sorted(found, key=lambda problem: problem[0]):
            if isinstance(why, _Repeat):
                if self.problems.add(line, f"DDI {why.key} repeats line ?"):
                    self.repeats[len(self.problems.listed) - 1] = why
            else:
                self.problems.add(line, why)

    def _name_repeated_lines(self, source: Source) -> None:
        if not self.repeats:
            return
        wanted = {repeat.code for repeat in self.repeats.values()}
        first: dict[int, int] = {}
        for item in _rows(source):
            code = _key_code(item)
            if code in wanted and code not in first:
                first[code] = item.line
        for index, repeat in self.repeats.items():
            line, _ = self.problems.listed[index]
            # '?' only if the file changed on disk since the read that found the repeat.
            earlier = first.get(repeat.code, "?")
            self.problems.listed[index] = (line, f"DDI {repeat.key} repeats line {earlier}")

    def _check_keys(self, items: list[Row | Flawed]) -> list[tuple[int, str | _Repeat]]:
        found: list[tuple[int, str | _Repeat]] = []
        for item in items:
            code = _key_code(item)
            if code is None:
                continue
            if code in self.seen:
                found.append((item.line, _Repeat(code, f"{item.dialcode}:{item.number}")))
            self.seen.add(code)
        return found

    def _check_holds(self, rows: list[Row]) -> list[tuple[int, str | _Repeat]]:
        """Rows whose number is held for another company (docs/numbers.md): reserved for it,
        or aging after leaving it."""
        takes = [inventory.Taking((r.dialcode, r.number), r.company) for r in rows]
        held = inventory.held_against(self.session, takes)
        return [
            (r.line, f"number {r.key} is {held[(r.dialcode, r.number)].fields['number']}")
            for r in rows
            if (r.dialcode, r.number) in held
        ]

    def _check_companies(self, items: list[Row | Flawed]) -> list[tuple[int, str | _Repeat]]:
        named = {item.company for item in items if item.company is not None}
        new = named - self.known - self.unknown
        if new:
            exist = set(self.session.scalars(select(Company.id).where(Company.id.in_(new))))
            for item in items:
                if item.company in exist and not self.principal.may_admin(item.company):
                    raise Forbidden(
                        f"line {item.line}: company {item.company!r} is outside your grants; "
                        "nothing was imported.",
                        {f"line {item.line}": "company outside your grants"},
                    )
            self.known |= exist
            self.unknown |= new - exist
        if not named & self.unknown:
            return []
        return [
            (item.line, f"company {item.company!r} does not exist")
            for item in items
            if item.company in self.unknown
        ]

    def _count(self, row: Row, now: Stored | None) -> None:
        plan = self.plan
        plan.rows += 1
        if now is None:
            kind, before = "created", None
            plan.created += 1
            plan.delta[row.company] += 1
            plan.companies.add(row.company)
        elif now.company != row.company:
            kind, before = "moved", {**row.values(), "virt_exten": now.virt_exten}
            before["company"] = now.company
            plan.updated += 1
            plan.moved += 1
            plan.delta[now.company] -= 1
            plan.delta[row.company] += 1
            plan.companies |= {now.company, row.company}
        elif now.virt_exten != row.virt_exten:
            kind, before = "updated", {**row.values(), "virt_exten": now.virt_exten}
            plan.updated += 1
        else:
            return
        self.digest.update(
            f"{row.key},{'' if now is None else f'{now.virt_exten},{now.company}'},"
            f"{row.virt_exten},{row.company}\n".encode()
        )
        if len(plan.samples[kind]) < SAMPLES:
            plan.samples[kind].append(Sample(row.key, before, row.values()))


def _read_plan(session: Session, principal: Principal, source: Source, lock: bool) -> Plan:
    principal.require_system_admin("import DDIs")
    plan = Plan(import_id=secrets.token_hex(6))
    for _chunk in _Reader(session, principal, plan, lock).chunks(source):
        pass
    return plan


def plan(principal: Principal, source: Source) -> Plan:
    """The dry run: what importing `source` would do now, and nothing written.

    Guarantees: the whole file is checked, in one pass, and a file with any problem (a field
    not in its format, a column count, a DDI twice, an unknown company) raises FileRejected
    naming every problem with its line, up to problems.MAX_PROBLEMS of them, in line order
    (a file that is not text or not CSV: up to the line where it stops being so).
    System-Admin only (Forbidden).
    """
    session = db.session()
    try:
        with timed(IMPORT_SECONDS, "plan"):
            return _read_plan(session, principal, source, lock=False)
    finally:
        session.rollback()  # end the read transaction: the dry run holds nothing


def apply(principal: Principal, source: Source, expected: str | None = None) -> Plan:
    """Import `source`: check it whole, then create, update and move its DDIs in one
    transaction through the change path; return the Plan carried out (`applied` True).

    Guarantees: all or nothing; the checks of `plan` first. Every DDI the file would change
    is locked before the change's instant is read, so the changes applied are exactly the
    ones planned. With `expected` (a preview's fingerprint), a plan that differs from it (the
    data changed since the preview) raises Stale, carrying the new plan, and writes nothing.
    One audit entry per changed DDI, each naming the import ('import <id>' in its detail).
    A DDI created by someone else while the import runs raises Conflict.
    """
    with (
        timed(IMPORT_SECONDS, "apply"),
        write_transaction() as session,
        bulk_cache(session, IMPORT_CACHE_KIB),
    ):
        first = _read_plan(session, principal, source, lock=True)
        if expected is not None and first.fingerprint != expected:
            raise Stale(first)
        if first.changes:
            again = Plan(import_id=first.import_id)
            reader = _Reader(session, principal, again, lock=False, again=True)
            changes.write_chunks(
                session,
                principal,
                "ddi",
                changes.Lock(companies=first.companies),
                lambda _now: _write(session, reader.chunks(source), first.import_id),
            )
            if again.fingerprint != first.fingerprint:
                # The file changed on disk between the two reads, or a DDI the file left
                # alone (so not locked) was changed meanwhile: roll back rather than apply a mix.
                raise Conflict(
                    "The file or its DDIs changed while the import ran; nothing was imported. "
                    "Try again."
                )
        first.applied = True
        return first


class Stale(Conflict):
    """The data changed since the preview: `plan` is what the import would do now."""

    def __init__(self, plan: Plan):
        super().__init__(
            "The DDIs changed since the preview; nothing was imported. Check the new preview."
        )
        self.plan = plan


# A move sets both columns; an extension change only its own, so the indexes on the company
# (four of the six) are left alone.
_MOVE = (
    update(Ddi.__table__)
    .where(Ddi.__table__.c.id == bindparam("row_id"))
    .values(virt_exten=bindparam("new_exten"), company=bindparam("new_company"))
)
_SET_EXTEN = (
    update(Ddi.__table__)
    .where(Ddi.__table__.c.id == bindparam("row_id"))
    .values(virt_exten=bindparam("new_exten"))
)


def _update(session: Session, moves: list[dict[str, Any]], extens: list[dict[str, Any]]) -> None:
    """A chunk's changed DDI rows written (their rows locked by the first read)."""
    if session.get_bind().dialect.name != "postgresql":
        # SQLite changes in process, a statement per row costing nothing more; the two
        # statements leave the company indexes alone for an extension change.
        if moves:
            session.execute(_MOVE, moves)
        if extens:
            session.execute(_SET_EXTEN, extens)
        return
    changed = sorted(moves + extens, key=lambda r: r["row_id"])
    if not changed:
        return
    # One statement for the chunk. A PostgreSQL update writes every index of a row whose
    # indexed column changes (the extension is one), so the moves need no statement of their
    # own; an extension change sets the company it already has.
    t = Ddi.__table__.c
    v = unnest_rows(
        {
            "id": (t.id.type, [r["row_id"] for r in changed]),
            "exten": (t.virt_exten.type, [r["new_exten"] for r in changed]),
            "company": (t.company.type, [r["new_company"] for r in changed]),
        }
    )
    session.execute(
        update(Ddi.__table__)
        .where(t.id == v.c.id)
        .values(virt_exten=v.c.exten, company=v.c.company)
    )


def _write(
    session: Session,
    chunks: Iterator[tuple[list[Row], dict[tuple[str, str], Stored]]],
    import_id: str,
) -> Iterator[changes.Change]:
    """The change path's step 3, one chunk at a time: the chunk's DDI rows written, and the
    history starts and ends and audit entries they imply."""
    detail = f"import {import_id}"
    for chunk, stored in chunks:
        new: list[dict[str, str]] = []
        moves: list[dict[str, Any]] = []
        extens: list[dict[str, Any]] = []
        starts: list[tuple[str, str]] = []
        ends: list[tuple[str, str]] = []
        entries: list[AuditData] = []
        for row in chunk:
            now = stored.get((row.dialcode, row.number))
            after = row.values()
            if now is None:
                new.append(kinds.stored_ddi(after))
                starts.append((row.company, row.key))
                entries.append(kinds.DDI.change("create", after=after, detail=detail))
                continue
            if now.company == row.company and now.virt_exten == row.virt_exten:
                continue
            before = {**after, "virt_exten": now.virt_exten, "company": now.company}
            moved = now.company != row.company
            if moved:
                moves.append(
                    {"row_id": now.id, "new_exten": row.virt_exten, "new_company": row.company}
                )
            else:
                # Its company too, unchanged: PostgreSQL writes both lists in one statement.
                extens.append(
                    {"row_id": now.id, "new_exten": row.virt_exten, "new_company": now.company}
                )
            if moved:
                ends.append((now.company, row.key))
                starts.append((row.company, row.key))
            entries.append(kinds.DDI.change("update", before, after, detail))
        if new:
            raced = (
                "A DDI of the file was created by someone else meanwhile; nothing was "
                "imported. Try again."
            )
            takes = [inventory.Taking((r["dialcode"], r["number"]), r["company"]) for r in new]
            inventory.enter_service(session, takes, exists_message=raced)
            try:
                insert_rows(session, Ddi.__table__, new)
            except IntegrityError as exc:
                raise Conflict(raced) from exc
        _update(session, moves, extens)
        yield changes.Change(starts=starts, ends=ends, audit=entries)


def billing_effect(plan: Plan, limit: int = SAMPLES) -> list[tuple[str, int, int]]:
    """Per company that gains or loses DDIs (created, moved in or away), (company, count now,
    count after), largest change first (a company whose gains and losses cancel out last), at
    most `limit`: a preview shows what the invoice would see."""
    ranked = sorted(plan.delta.items(), key=lambda cd: (-abs(cd[1]), cd[0]))[:limit]
    session = db.session()
    names = [c for c, _ in ranked]
    counts: dict[str, int] = {}
    for chunk in intervals.chunks(names):
        query = select(Ddi.company, func.count()).where(Ddi.company.in_(chunk))
        counts.update({c: n for c, n in session.execute(query.group_by(Ddi.company))})
    return [(c, counts.get(c, 0), counts.get(c, 0) + d) for c, d in ranked]
