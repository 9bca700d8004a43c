"""Change events: recorded by the change path, in the transaction of the change (docs/events.md).

How ids never let a reader skip an event, on PostgreSQL too. A sequence would not do: two
transactions take ids 7 and 8, 8 commits first, a reader sees 8 and asks for what follows it;
7 commits later and is never read. So ids are given at the very end of a transaction, by one
UPDATE of the one-row `event_counter`, the last statement before COMMIT (a `before_commit`
hook): the row lock it takes is held until the commit, so the next transaction to record
events waits for it and takes the next ids. Ids therefore increase in commit order: whoever
can see an id can see every smaller one. The events themselves are written earlier, as the
change goes, under their transaction's row (`event_txns`); the end only stamps that row with
`first_id` and `last_id` (an event's id is `first_id + seq`), so the counter is held for two
one-row updates and the commit, even for an import of a million DDIs. A rollback rolls the
counter back too: ids have no gaps.

On SQLite the write lock already makes writers one at a time; the same steps run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, event, insert, select, update
from sqlalchemy.orm import Session

from ...access import Principal
from ...database import insert_rows, utcnow, write_transaction
from ...errors import Invalid
from ...extensions import db
from ...models import Event, EventCounter, EventTxn, WebhookAttempt
from ..history.audit import AuditData

KINDS = ("ddi", "user")
# The change path's actions (`kind.verb`) and the event type each records.
VERBS = {"create": "created", "update": "updated", "link": "updated", "delete": "deleted"}
# A number's moves between the inventory's states outside service (docs/numbers.md).
NUMBER_VERBS = {
    "stock": "stocked",
    "reserve": "reserved",
    "release": "released",
    "retire": "retired",
}
TYPES = tuple(
    f"{kind}.{verb}" for kind in KINDS for verb in ("created", "updated", "deleted")
) + tuple(f"number.{verb}" for verb in NUMBER_VERBS.values())

_PENDING = "events.pending"  # session.info key: the open transaction's event row and count


@dataclass
class _Pending:
    txn_id: int
    count: int = 0


def newest() -> int:
    """The id of the last event committed (0 before the first): every smaller id is committed
    too (module docstring)."""
    return db.session.scalar(select(EventCounter.last_id).where(EventCounter.id == 1)) or 0


def event_type(action: str) -> str | None:
    """The event type an audit action records ('ddi.link' -> 'ddi.updated', 'number.reserve'
    -> 'number.reserved'), or None when the action is not a change of a DDI, a phone user or
    a number (a history import)."""
    kind, _, verb = action.partition(".")
    if kind in KINDS and verb in VERBS:
        return f"{kind}.{VERBS[verb]}"
    if kind == "number" and verb in NUMBER_VERBS:
        return f"number.{NUMBER_VERBS[verb]}"
    return None


def record(
    session: Session, principal: Principal, at: datetime, changes: Sequence[AuditData]
) -> int:
    """Add one event per change of a DDI or phone user in `changes` to the caller's
    transaction; return how many. They commit or roll back with it, and get their ids at its
    commit (module docstring), in the order recorded."""
    rows = [row for change in changes if (row := _row(change)) is not None]
    if not rows:
        return 0
    pending = session.info.get(_PENDING)
    if pending is None:
        txn_id = session.execute(
            insert(EventTxn).values(at=at, actor=principal.username).returning(EventTxn.id)
        ).scalar_one()
        pending = session.info[_PENDING] = _Pending(txn_id)
    for seq, row in enumerate(rows, start=pending.count):
        row["txn_id"] = pending.txn_id
        row["seq"] = seq
    insert_rows(session, Event.__table__, rows)
    pending.count += len(rows)
    return len(rows)


def _row(change: AuditData) -> dict[str, Any] | None:
    """The events row of one change (models.Event), or None if it records no event."""
    type_ = event_type(change.action)
    if type_ is None:
        return None
    before, after = change.before or {}, change.after or {}
    record = after or before
    # A number's event is the company its audit entry names, the reservation's
    # (inventory.number_change): also for a release, whose record after names none.
    company = change.company if type_.startswith("number.") else record.get("company")
    moved_from = before.get("company") if before and after else None
    return {
        "type": type_,
        "company": company,
        "other_company": moved_from if moved_from != company else None,
        "dialcode": record.get("dialcode"),
        "number": record.get("number"),
        "username": record.get("username"),
        "before_exten": before.get("virt_exten"),
        "after_exten": after.get("virt_exten"),
        "before_state": before.get("state"),
        "after_state": after.get("state"),
    }


@event.listens_for(Session, "before_commit")
def _stamp(session: Session) -> None:
    """Give the transaction's events their ids: the last statements before COMMIT."""
    pending = session.info.pop(_PENDING, None)
    if pending is None:
        return
    session.flush()  # anything the ORM still holds goes first: the counter is held from here
    last = session.execute(
        update(EventCounter)
        .where(EventCounter.id == 1)
        .values(last_id=EventCounter.last_id + pending.count)
        .returning(EventCounter.last_id)
    ).scalar_one()
    session.execute(
        update(EventTxn)
        .where(EventTxn.id == pending.txn_id)
        .values(first_id=last - pending.count + 1, last_id=last)
    )


@event.listens_for(Session, "after_rollback")
def _forget(session: Session) -> None:
    session.info.pop(_PENDING, None)


PRUNE_CHUNK = 1000  # transactions deleted per database transaction


def parse_retention(value: object) -> int:
    """EVENTS_RETENTION_DAYS or `--days`: a whole number of days from 1 to 36500 (the one rule,
    config.parse_retention, which checks the setting at start), else Invalid."""
    from ...config import parse_retention as days

    try:
        return days(value)
    except ValueError:
        raise Invalid(
            f"The retention must be a whole number of days from 1 to 36500 (not '{value}').",
            {"days": "must be a whole number, at least 1"},
        ) from None


def prune(days: int, now: datetime | None = None) -> int:
    """Delete the events recorded more than `days` days ago, and the webhook attempts as old;
    return how many events were deleted.

    Whole transactions at a time, oldest first, a chunk per database transaction, so the
    writers never wait long. Ids are never reused: a reader whose last id was pruned simply
    reads on from the oldest event kept."""
    cutoff = (now or utcnow()) - timedelta(days=days)
    deleted = 0
    while True:
        with write_transaction() as session:
            txns = session.execute(
                select(EventTxn.id, EventTxn.first_id, EventTxn.last_id)
                .where(EventTxn.at < cutoff)
                .order_by(EventTxn.id)
                .limit(PRUNE_CHUNK)
            ).all()
            if not txns:
                session.execute(delete(WebhookAttempt).where(WebhookAttempt.at < cutoff))
                return deleted
            ids = [t.id for t in txns]
            session.execute(delete(Event).where(Event.txn_id.in_(ids)))
            session.execute(delete(EventTxn).where(EventTxn.id.in_(ids)))
            deleted += sum(t.last_id - t.first_id + 1 for t in txns)
