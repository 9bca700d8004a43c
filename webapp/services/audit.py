"""The audit log: who did what, when, before and after, in the same transaction as the change."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from ..access import Principal
from ..database import utcnow
from ..models import AuditEntry


def entry(
    principal: Principal,
    action: str,
    target: str,
    *,
    company: str | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    detail: str | None = None,
    at: datetime | None = None,
) -> dict[str, Any]:
    """One audit row as a dict, for `record`."""
    return {
        "at": at or utcnow(),
        "actor": principal.username,
        "via": principal.via,
        "action": action,
        "target": target,
        "company": company,
        "before": before,
        "after": after,
        "detail": detail,
    }


def record(session: Session, entries: list[dict[str, Any]]) -> None:
    """Add audit rows to the caller's transaction: they commit or roll back with the change."""
    if entries:
        session.execute(insert(AuditEntry), entries)
