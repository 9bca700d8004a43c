"""History intervals: written in the caller's transaction with every create, delete and move."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import tuple_, update
from sqlalchemy.orm import Session

from ..models import HistoryInterval

# Keeps every statement well under SQLite's bound-parameter limit.
CHUNK = 400


def _chunks(items: list, size: int = CHUNK):
    for i in range(0, len(items), size):
        yield items[i : i + size]


def open_intervals(
    session: Session, kind: str, members: Iterable[tuple[str, str]], at: datetime
) -> None:
    """Start an interval at `at` for each (company, key): the record is active from then on."""
    rows = [
        {"kind": kind, "company": c, "key": k, "start_at": at, "end_at": None, "source": "live"}
        for c, k in members
    ]
    if rows:
        session.execute(HistoryInterval.__table__.insert(), rows)  # Core: no ORM bulk overhead


def close_intervals(
    session: Session, kind: str, members: Iterable[tuple[str, str]], at: datetime
) -> None:
    """End at `at` the open interval of each (company, key): the record is inactive from then on.

    Half-open intervals make a move exact: the old company's interval ends at the same instant
    the new one's starts, so at no moment does the record count twice.
    """
    pairs = list(dict.fromkeys(members))
    for chunk in _chunks(pairs):
        session.execute(
            update(HistoryInterval)
            .where(
                HistoryInterval.kind == kind,
                HistoryInterval.end_at.is_(None),
                tuple_(HistoryInterval.company, HistoryInterval.key).in_(chunk),
            )
            .values(end_at=at)
            .execution_options(synchronize_session=False)
        )
