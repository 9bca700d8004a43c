"""Demo data: companies, one account per role, a few hundred DDIs and phone users, and three
months of history with moves and deletions, so the reports have something real to show.

Deterministic (a fixed random seed, relative to the current month) and idempotent: a second run
loads nothing and only reprints the sign-in accounts, whose generated passwords are kept in
instance/demo-accounts.txt (git-ignored, mode 0600). It fills an empty database only, all in one
transaction: a database holding companies or accounts of its own is refused with nothing written
(the demo's companies would clash with its own, and demo accounts, System-Admin included, do not
belong in it).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click
from flask import current_app
from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from ..access import Principal
from ..database import utcnow, write_transaction
from ..errors import Invalid
from ..models import Account, AuditEntry, Company, Ddi, HistoryInterval, Number, PhoneUser
from ..services import inventory
from ..services.billing import periods, rollups
from ..services.history import audit
from ..services.identity import accounts
from ..services.records import kinds
from .common import Group, friendly, operator

COMPANIES = [
    ("acme", "Acme Telecom Ltd", 110),
    ("globex", "Globex Corporation", 80),
    ("initech", "Initech", 50),
    ("umbrella", "Umbrella Health", 35),
    ("hooli", "Hooli", 25),
]
ACCOUNTS: list[tuple[str, str, dict[str, Any]]] = [
    ("admin", "System-Admin", {"system_admin": True}),
    ("acme-admin", "Company-Admin of acme", {"admin_of": ["acme"]}),
    ("globex-admin", "Company-Admin of globex, initech", {"admin_of": ["globex", "initech"]}),
    ("billing", "Billing Call-Summary (every company)", {"billing_summary": True}),
    ("reporting", "Billing/Call Reporting for acme, globex", {"reporting_for": ["acme", "globex"]}),
]
FIRST = ["ana", "ben", "chloe", "dev", "eva", "finn", "gus", "hana", "ivan", "jade", "kai", "lena"]
LAST = ["smith", "jones", "patel", "garcia", "kim", "novak", "silva", "okafor", "berg", "rossi"]


@dataclass
class Timeline:
    """One record's life: intervals of (company, start, end) and where it stands now."""

    intervals: list[tuple[str, datetime, datetime | None]] = field(default_factory=list)


def _life(rng: random.Random, company: str, start: datetime, now: datetime) -> Timeline:
    span = (now - start).total_seconds()
    life = Timeline()
    at = start + timedelta(seconds=rng.uniform(0, span * 0.6))
    current = company
    while True:
        roll = rng.random()
        if roll < 0.12:  # moves to another company later on
            end = at + timedelta(seconds=rng.uniform(3600, max(3601, (now - at).total_seconds())))
            if end >= now:
                break
            life.intervals.append((current, at, end))
            current = rng.choice([c for c, _, _ in COMPANIES if c != current])
            at = end
        elif roll < 0.22:  # deleted; sometimes re-created a while after
            end = at + timedelta(seconds=rng.uniform(600, max(601, (now - at).total_seconds())))
            if end >= now:
                break
            life.intervals.append((current, at, end))
            if rng.random() < 0.4:
                at = end + timedelta(days=rng.uniform(1, 10))
                if at >= now:
                    return life
                continue
            return life
        else:
            break
    life.intervals.append((current, at, None))
    return life


def _months_back(now: datetime, months: int) -> datetime:
    year, month = now.year, now.month - months
    while month < 1:
        month += 12
        year -= 1
    return datetime(year, month, 1)


def _accounts_file() -> Path:
    return Path(current_app.instance_path) / "demo-accounts.txt"


def _write_logins(lines: list[str]) -> None:
    path = _accounts_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write("\n".join(lines) + "\n")


def _read_logins() -> list[str]:
    try:
        return _accounts_file().read_text().splitlines()
    except FileNotFoundError:
        return ["(the demo passwords were shown when the demo data was loaded)"]


class NotEmpty(Invalid):
    """The database holds companies or accounts the demo data did not make."""


def seed(principal: Principal) -> tuple[bool, list[str]]:
    """Load the demo data once. Returns (loaded now?, sign-in lines to print).

    Guarantees: all or nothing, in one transaction: the companies, records, history, accounts
    and the audit entries are committed together, and the sign-in lines with the generated
    passwords are returned only then, so no account is ever left whose password nobody saw.
    A database already seeded loads nothing (the kept sign-in lines are returned again). Any
    other database that holds a company or an account is refused (NotEmpty) and nothing is
    written: the demo data fills an empty database only.
    """
    with write_transaction() as session:
        if session.scalar(select(AuditEntry.id).where(AuditEntry.action == "demo.seed").limit(1)):
            return False, _read_logins()
        _refuse_unless_empty(session)
        _load_records(session, principal)
        lines = []
        for username, role, grants in ACCOUNTS:
            new = accounts.add(session, principal, username, **grants)
            lines.append(f"{username:<13} {new.password}   {role}")
        audit.record(session, [audit.entry(principal, "demo.seed", "demo data")])
    # Committed: only now are these the passwords of real accounts.
    try:
        _write_logins(lines)
    except OSError as exc:  # the passwords are still printed below, once
        click.echo(
            f"Warning: could not keep the demo passwords in {_accounts_file()}: {exc}", err=True
        )
    return True, lines


def _refuse_unless_empty(session: Session) -> None:
    company = session.scalar(select(Company.id).order_by(Company.id).limit(1))
    account = session.scalar(select(Account.username).order_by(Account.username).limit(1))
    if company is None and account is None:
        return
    held = f"company '{company}'" if company is not None else f"account '{account}'"
    raise NotEmpty(
        f"The database already holds companies or accounts ({held}); demo seed fills an empty "
        "database only, so nothing was written: run it on a new database (DATABASE_URL)."
    )


def _load_records(session: Session, principal: Principal) -> None:
    rng = random.Random(20260101)
    now = utcnow().replace(microsecond=0)
    start = _months_back(now, 3)
    session.execute(insert(Company), [{"id": c, "name": n} for c, n, _ in COMPANIES])
    history: list[dict] = []
    ddis: list[dict] = []
    users: list[dict] = []
    serial = 0
    for company, _, size in COMPANIES:
        for _ in range(size):
            serial += 1
            dialcode = rng.choice(["44", "44", "44", "33", "49"])
            number = f"20{7000000 + serial * 37:08d}"
            life = _life(rng, company, start, now)
            key = f"{dialcode}:{number}"
            history += [
                {
                    "kind": "ddi",
                    "company": c,
                    "key": key,
                    "start_at": s,
                    "end_at": e,
                    "source": "demo",
                }
                for c, s, e in life.intervals
            ]
            last_company, _, last_end = life.intervals[-1]
            if last_end is None:
                ddis.append(
                    {
                        "dialcode": dialcode,
                        "number": number,
                        "virt_exten": str(rng.randint(100, 9999)),
                        "company": last_company,
                    }
                )
        taken: set[str] = set()
        for i in range(int(size * 0.8)):
            username = f"{rng.choice(FIRST)}.{rng.choice(LAST)}{i}"
            if username in taken:
                continue
            taken.add(username)
            # Phone users stay in their company: moving one is rare in practice.
            life = _life(rng, company, start, now)
            history += [
                {
                    "kind": "user",
                    "company": company,
                    "key": username,
                    "start_at": s,
                    "end_at": e,
                    "source": "demo",
                }
                for _, s, e in life.intervals
            ]
            if life.intervals[-1][2] is None:
                users.append({"company": company, "username": username, "virt_exten": str(200 + i)})
    session.execute(insert(Ddi), [kinds.stored_ddi(d) for d in ddis])
    keys = [(d["dialcode"], d["number"]) for d in ddis]
    session.execute(insert(Number), inventory.in_service_rows(keys))
    session.execute(insert(PhoneUser), users)
    session.execute(insert(HistoryInterval), history)
    # The history was written directly, not change by change: recompute the rollup.
    rollups.rebuild_all(session, periods.zone(current_app.config["REPORT_TIMEZONE"]))
    audit.record(
        session,
        [
            audit.entry(
                principal,
                "demo.load",
                "demo data",
                detail=(
                    f"{len(COMPANIES)} companies, {len(ddis)} DDIs, {len(users)} phone users,"
                    f" {len(history)} history intervals since {start:%Y-%m-%d}"
                ),
            )
        ],
    )


demo_cli = Group("demo", help="Demo data.")


@demo_cli.command("seed")
@friendly
def demo_seed() -> None:
    """Load demo companies, accounts, DDIs, phone users and three months of history (idempotent)."""
    seeded, logins = seed(operator())
    click.echo("Loaded the demo data." if seeded else "Demo data already present; nothing loaded.")
    if logins:
        click.echo("Demo sign-in accounts (username / password / grants):")
        for line in logins:
            click.echo("  " + line)
