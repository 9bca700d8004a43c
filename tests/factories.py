"""Small helpers that make rows through the real services, and call the API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import Flask
from sqlalchemy import func, select

from webapp.access import Principal
from webapp.extensions import db
from webapp.models import AuditEntry, Ddi, HistoryInterval, PhoneUser
from webapp.services import accounts, companies, ddis, phone_users

OPERATOR = Principal.cli("test")


@dataclass
class Caller:
    username: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


class Factory:
    def __init__(self, app: Flask):
        self.app = app
        self.client = app.test_client()

    def company(self, company_id: str, name: str | None = None) -> str:
        companies.create(OPERATOR, company_id, name or company_id.title())
        return company_id

    def account(self, username: str, **grants: Any) -> Caller:
        """An account with the given grants and an API token for it."""
        accounts.create(OPERATOR, username, "correct horse battery", **grants)
        return Caller(username, accounts.create_token(OPERATOR, username, "test"))

    def ddi(self, dialcode: str, number: str, company: str, virt_exten: str = "100") -> None:
        ddis.create(
            OPERATOR,
            {"dialcode": dialcode, "number": number, "virt_exten": virt_exten, "company": company},
        )

    def user(self, username: str, company: str, virt_exten: str = "200") -> None:
        phone_users.create(
            OPERATOR, {"username": username, "virt_exten": virt_exten, "company": company}
        )

    def api(self, caller: Caller | None, op: str, body: Any, **kwargs: Any):
        """POST a JSON body to /rest/ops/<op>/ as `caller` (None: no credentials)."""
        headers = caller.headers if caller else {}
        return self.client.post(f"/rest/ops/{op}/", json=body, headers=headers, **kwargs)


def snapshot() -> dict[str, Any]:
    """Everything a write may touch, to prove a refused request changed nothing."""
    db.session.rollback()
    return {
        "ddis": sorted(
            tuple(r)
            for r in db.session.execute(
                select(Ddi.dialcode, Ddi.number, Ddi.virt_exten, Ddi.company)
            )
        ),
        "users": sorted(
            tuple(r)
            for r in db.session.execute(
                select(PhoneUser.company, PhoneUser.username, PhoneUser.virt_exten)
            )
        ),
        "history": db.session.scalar(select(func.count()).select_from(HistoryInterval)),
        "open_history": db.session.scalar(
            select(func.count())
            .select_from(HistoryInterval)
            .where(HistoryInterval.end_at.is_(None))
        ),
        "audit": db.session.scalar(select(func.count()).select_from(AuditEntry)),
    }
