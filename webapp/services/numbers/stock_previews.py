"""The /ddis/stock page's stock in two steps: a preview (how many numbers, from which to which,
any already in the inventory), then Apply (docs/pages.md, "Stock").

A block needs nothing kept between the two: the page posts its three fields again. An uploaded
file waits in the database, as the DDI import's does (models.ImportPreview, its fingerprint
STOCK_PREVIEW), so Apply may reach any worker; it is deleted when applied, and purged a day
old. Apply is stock.write's, all or nothing: a number that reached the inventory since the
preview is a Conflict and nothing is stocked.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from sqlalchemy import delete

from ...access import Principal
from ...database import utcnow, write_transaction
from ...errors import Invalid, NotFound, TooLarge
from ...extensions import db
from ...models import STOCK_PREVIEW, ImportPreview
from . import stock, stock_file
from .stock import Entry

# An upload's limit: the DDI import's (imports/ddi_import.MAX_BYTES; tests hold them equal).
MAX_BYTES = 64 * 1024 * 1024
KEPT_FOR = timedelta(days=1)
SHOWN = 20  # numbers already in the inventory that a preview names; the rest are counted
COUNT_WHY = f"must be a whole number from 1 to {stock.MAX_ROWS:,}"


@dataclass
class StockPreview:
    """What a stock would add: `count` numbers from `lowest` to `highest` (dialcode, number);
    `existing`, the first SHOWN of them already in the inventory (labelled by their line, or
    'block'), `existing_total` in all. `dialcode` and `prefix`: what every number shares, for a
    link to the list of them (None, '' when they share none). A file's: its kept `id`."""

    count: int = 0
    lowest: tuple[str, str] | None = None
    highest: tuple[str, str] | None = None
    existing: list[Entry] = field(default_factory=list)
    existing_total: int = 0
    id: str | None = None
    filename: str = ""

    @property
    def dialcode(self) -> str | None:
        if self.lowest is None or self.highest is None or self.lowest[0] != self.highest[0]:
            return None
        return self.lowest[0]

    @property
    def prefix(self) -> str:
        """The digits every number starts with: those the lowest and the highest share (in
        text order, which is the inventory's, every number between shares them too)."""
        if self.dialcode is None or self.lowest is None or self.highest is None:
            return ""
        low, high = self.lowest[1], self.highest[1]
        same = 0
        while same < min(len(low), len(high)) and low[same] == high[same]:
            same += 1
        return low[:same]

    def add(self, chunk: list[Entry]) -> None:
        """Count a chunk of the numbers in."""
        for entry in chunk:
            key = (entry.dialcode, entry.number)
            if self.lowest is None or key < self.lowest:
                self.lowest = key
            if self.highest is None or key > self.highest:
                self.highest = key
        self.count += len(chunk)


def _scan(chunks: Iterable[list[Entry]]) -> StockPreview:
    """The preview of `chunks`, with the numbers among them already in the inventory (read
    only, nothing locked: Apply checks again)."""
    preview = StockPreview()
    session = db.session()
    for chunk in chunks:
        preview.add(chunk)
        found = stock.existing(session, chunk)
        preview.existing += found[: SHOWN - len(preview.existing)]
        preview.existing_total += len(found)
    return preview


def _tallied(chunks: Iterator[list[Entry]], preview: StockPreview) -> Iterator[list[Entry]]:
    for chunk in chunks:
        preview.add(chunk)
        yield chunk


# --- a block ----------------------------------------------------------------------------------
def block_body(dialcode: str, first: str, count: str) -> dict[str, Any]:
    """The stock body of a block as the page's form gives it (text fields): Invalid with
    fields.count for a count that is no whole number (the rest is stock.parse's to check)."""
    text = count.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 6):
        raise Invalid(f"'count' {COUNT_WHY}.", {"block.count": COUNT_WHY})
    return {"block": {"dialcode": dialcode.strip(), "first": first.strip(), "count": int(text)}}


def preview_block(principal: Principal, dialcode: str, first: str, count: str) -> StockPreview:
    """What stocking the block would do, nothing written.

    Guarantees: System-Admin only; Invalid naming the field at fault (fields `block.dialcode`,
    `block.first`, `block.count`), as POST /rest/numbers/stock says; the numbers of the block
    already in the inventory in `existing` (the first SHOWN) and `existing_total`."""
    principal.require_system_admin("stock numbers")
    entries = stock.parse(block_body(dialcode, first, count))
    return _scan(_in_chunks(entries))


def apply_block(principal: Principal, dialcode: str, first: str, count: str) -> StockPreview:
    """Stock the block: stock.stock's guarantees (all or nothing; a number already in the
    inventory is a Conflict naming it). Returns what was stocked."""
    entries = stock.parse(block_body(dialcode, first, count))
    done = StockPreview()
    stock.write(principal, lambda: _tallied(_in_chunks(entries), done))
    return done


def _in_chunks(entries: list[Entry]) -> Iterator[list[Entry]]:
    for i in range(0, len(entries), stock.CHUNK):
        yield entries[i : i + stock.CHUNK]


# --- a file -----------------------------------------------------------------------------------
def too_large_message() -> str:
    """What the page says of a file over MAX_BYTES."""
    return (
        f"The file is larger than {MAX_BYTES // (1024 * 1024)} MiB: split it, or stock it "
        "with the command line (flask numbers stock)."
    )


def preview_file(principal: Principal, filename: str, data: bytes) -> StockPreview:
    """Check an uploaded file (header dialcode,number[,description]) and keep it for Apply;
    return its preview, `id` naming it.

    Guarantees: System-Admin only; the file is checked whole as `flask numbers stock` checks
    it (stock_file.check): a bad one raises FileRejected naming each problem with its line,
    TooLarge past MAX_BYTES, and nothing is kept. Previews older than a day are purged."""
    principal.require_system_admin("stock numbers")
    if principal.account_id is None:
        raise Invalid("Previews belong to a signed-in account.")
    if len(data) > MAX_BYTES:
        raise TooLarge(too_large_message())
    if not data:
        raise Invalid("The file is empty; its first line must be the header.", {"file": "empty"})
    source = stock_file.bytes_source(data)
    stock_file.check(source)
    preview = _scan(stock_file.entries(source))
    preview.id, preview.filename = secrets.token_hex(16), filename[:200] or "numbers.csv"
    with write_transaction() as session:
        session.execute(delete(ImportPreview).where(ImportPreview.created_at < utcnow() - KEPT_FOR))
        session.add(
            ImportPreview(
                id=preview.id,
                account_id=principal.account_id,
                filename=preview.filename,
                size=len(data),
                content=data,
                fingerprint=STOCK_PREVIEW,
            )
        )
    return preview


def _load(principal: Principal, preview_id: str) -> ImportPreview:
    principal.require_system_admin("stock numbers")
    row = db.session.get(ImportPreview, preview_id)
    if (
        row is None
        or row.fingerprint != STOCK_PREVIEW
        or row.account_id != principal.account_id
        or row.created_at < utcnow() - KEPT_FOR
    ):
        raise NotFound("No such stock preview: it was applied, it expired, or it is not yours.")
    return row


def show_file(principal: Principal, preview_id: str) -> StockPreview:
    """A kept file's preview as of now (System-Admin, its own account's only: else
    NotFound)."""
    row = _load(principal, preview_id)
    preview = _scan(stock_file.entries(stock_file.bytes_source(row.content)))
    return replace(preview, id=row.id, filename=row.filename)


def apply_file(principal: Principal, preview_id: str) -> StockPreview:
    """Stock a kept file, then forget it; return what was stocked.

    Guarantees: stock_file.stock_source's (the file checked again, all or nothing, a number
    already in the inventory a Conflict naming its line); on a refusal the file stays kept
    for another try."""
    row = _load(principal, preview_id)
    source, filename = stock_file.bytes_source(row.content), row.filename
    done = StockPreview(id=preview_id, filename=filename)
    stock_file.check(source)
    stock.write(principal, _counting(lambda: stock_file.entries(source), done))
    with write_transaction() as session:
        session.execute(delete(ImportPreview).where(ImportPreview.id == preview_id))
    return done


def _counting(
    chunks: Callable[[], Iterator[list[Entry]]], done: StockPreview
) -> Callable[[], Iterator[list[Entry]]]:
    return lambda: _tallied(chunks(), done)
