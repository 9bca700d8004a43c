"""Small helpers that make rows through the real services, and call the API."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flask import Flask, current_app
from sqlalchemy import func, select

from webapp.access import Principal
from webapp.database import write_transaction
from webapp.extensions import db
from webapp.models import AuditEntry, Ddi, Event, EventCounter, HistoryInterval, PhoneUser
from webapp.services import companies
from webapp.services.billing import periods, rollups
from webapp.services.identity import accounts, api_tokens
from webapp.services.records import crud, kinds

OPERATOR = Principal.cli("test")
# Audit actions of signing in and out, which any browser test client writes.
SIGN_IN_ACTIONS = ("account.sign-in", "account.session-ended", "account.second-factor-failed")

# --- the shared world ------------------------------------------------------------------------

ACME, GLOBEX, INITECH = "acme", "globex", "initech"
# The world's companies: id -> display name.
COMPANIES: dict[str, str] = {ACME: "Acme Telecom", GLOBEX: "Globex", INITECH: "Initech"}

# The one role table: role -> the grants of an account holding it. A world's account is named
# after its role unless a module asks for another username (see World.add).
# fmt: off
ROLES: dict[str, dict[str, Any]] = {
    "root":            {"system_admin": True},
    "cadmin":          {"admin_of": [ACME]},
    "cadmin2":         {"admin_of": [ACME, INITECH]},
    "cadmin_all":      {"admin_of": [ACME, GLOBEX, INITECH]},
    "summary":         {"billing_summary": True},
    "reporter":        {"reporting_for": [ACME]},
    "reporter2":       {"reporting_for": [ACME, INITECH]},
    "reporter_globex": {"reporting_for": [GLOBEX]},
    "cadmin_reporter": {"admin_of": [GLOBEX], "reporting_for": [ACME]},
    "nobody":          {},
}
# fmt: on
# The accounts a world makes unless a module narrows them (username -> role): one per grant.
BASIC_ROLES = ("root", "cadmin", "cadmin2", "summary", "reporter", "nobody")


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
        return Caller(username, api_tokens.create(OPERATOR, username, "test"))

    def ddi(self, dialcode: str, number: str, company: str, virt_exten: str = "100") -> None:
        crud.create(
            OPERATOR,
            kinds.DDI,
            {"dialcode": dialcode, "number": number, "virt_exten": virt_exten, "company": company},
        )

    def user(self, username: str, company: str, virt_exten: str = "200") -> None:
        crud.create(
            OPERATOR,
            kinds.PHONE_USER,
            {"username": username, "virt_exten": virt_exten, "company": company},
        )

    def browser(self, username: str, password: str = "correct horse battery"):
        """A test client signed in through the real /login form (CSRF token and all).

        Its `csrf` attribute holds the session's CSRF token for later form posts."""
        client = self.app.test_client()
        page = client.get("/login")
        token = csrf_from(page.get_data(as_text=True))
        response = client.post(
            "/login", data={"csrf_token": token, "username": username, "password": password}
        )
        assert response.status_code == 302, response.get_data(as_text=True)
        # Signed in, /login only redirects: the token comes from a page every account opens.
        # (Followed: under MFA_REQUIRED an account without a factor is sent to set one up.)
        page = client.get("/account/tokens", follow_redirects=True)
        client.csrf = csrf_from(page.get_data(as_text=True))
        return client

    def api(self, caller: Caller | None, op: str, body: Any, **kwargs: Any):
        """POST a JSON body to /rest/ops/<op>/ as `caller` (None: no credentials)."""
        headers = caller.headers if caller else {}
        return self.client.post(f"/rest/ops/{op}/", json=body, headers=headers, **kwargs)


def csrf_from(html: str) -> str:
    """The CSRF token a page carries (hidden form field or the htmx header attribute)."""
    import re

    match = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', html) or re.search(
        r'"X-CSRFToken": "([^"]+)"', html
    )
    assert match, "no CSRF token on the page"
    return match.group(1)


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
        # Sign-ins are audited too (docs/security.md#audit); a refused write is about records.
        "audit": db.session.scalar(
            select(func.count())
            .select_from(AuditEntry)
            .where(AuditEntry.action.not_in(SIGN_IN_ACTIONS))
        ),
        "events": db.session.scalar(select(func.count()).select_from(Event)),
        "event_ids": db.session.scalar(select(EventCounter.last_id)),
    }


def rollup_rebuilt(session) -> None:
    """For tests that write history rows directly, as an import does: recompute the report
    rollup from the history, in the current REPORT_TIMEZONE, in the caller's transaction."""
    rollups.rebuild_all(session, periods.zone(current_app.config["REPORT_TIMEZONE"]))


def add_history(*rows: tuple[str, str, str, datetime, datetime | None]) -> None:
    """Insert (kind, company, key, start, end) intervals as they would have been recorded."""
    with write_transaction() as session:
        for kind, company, key, start, end in rows:
            session.add(
                HistoryInterval(
                    kind=kind, company=company, key=key, start_at=start, end_at=end, source="live"
                )
            )
        rollup_rebuilt(session)


class World:
    """Companies and accounts made through the real services, with a Caller (API token) per
    account and a signed-in test client per account on demand.

    Callers are reachable by username: `world.caller("root")` or simply `world.root`.
    Built by the `world` fixture (tests/conftest.py); a module needing more records adds them
    in its own `world` fixture on top of this one."""

    def __init__(self, factory: Factory):
        self.factory = factory
        self.callers: dict[str, Caller] = {}
        self._browsers: dict[str, Any] = {}

    @classmethod
    def build(cls, factory: Factory, companies: dict[str, str], accounts: dict[str, str]):
        world = cls(factory)
        for company_id, name in companies.items():
            factory.company(company_id, name)
        for username, role in accounts.items():
            world.add(username, role)
        return world

    @property
    def client(self):
        return self.factory.client

    def add(self, username: str, role: str | None = None) -> Caller:
        """An account `username` holding `role` of ROLES (by default the role of that name)."""
        caller = self.factory.account(username, **ROLES[role or username])
        self.callers[username] = caller
        return caller

    def caller(self, username: str) -> Caller:
        """The account's Caller; a role of ROLES not made yet is made on first use."""
        if username not in self.callers:
            self.add(username)
        return self.callers[username]

    def browser(self, username: str):
        """A test client signed in as `username` through /login, one per account."""
        if username not in self._browsers:
            self._browsers[username] = self.factory.browser(username)
        return self._browsers[username]

    def __getattr__(self, name: str) -> Caller:
        callers = self.__dict__.get("callers", {})
        if name in callers:
            return callers[name]
        raise AttributeError(name)
