"""Typed SQLAlchemy 2.0 models. Every timestamp is a naive UTC datetime (see database.utcnow)."""

from __future__ import annotations

from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from flask_login import UserMixin
from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from .database import utcnow
from .extensions import db

if TYPE_CHECKING:
    # Flask-SQLAlchemy builds db.Model from Base at run time, out of the type checker's sight:
    # to it the models are plain declarative classes of Base, which is what they are.
    from .extensions import Base as Model
else:
    Model = db.Model

COMPANY_ID = String(64)


class Company(Model):
    __tablename__ = "companies"

    id: Mapped[str] = mapped_column(COMPANY_ID, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


account_admin_companies = Table(
    "account_admin_companies",
    db.metadata,
    Column("account_id", ForeignKey("accounts.id", ondelete="CASCADE"), primary_key=True),
    Column("company_id", ForeignKey("companies.id", ondelete="CASCADE"), primary_key=True),
)

account_reporting_companies = Table(
    "account_reporting_companies",
    db.metadata,
    Column("account_id", ForeignKey("accounts.id", ondelete="CASCADE"), primary_key=True),
    Column("company_id", ForeignKey("companies.id", ondelete="CASCADE"), primary_key=True),
)


class Account(UserMixin, Model):
    """A sign-in account of this application (not a phone user) and its grants."""

    __tablename__ = "accounts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    password_hash: Mapped[str] = mapped_column(String(256))
    system_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    billing_summary: Mapped[bool] = mapped_column(Boolean, default=False)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    # Bumped on disable and password change: sessions carry it, so old ones stop working at once.
    session_epoch: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    admin_of: Mapped[list[Company]] = relationship(
        secondary=account_admin_companies, order_by=Company.id
    )
    reporting_for: Mapped[list[Company]] = relationship(
        secondary=account_reporting_companies, order_by=Company.id
    )
    tokens: Mapped[list[ApiToken]] = relationship(back_populates="account")

    @property
    def is_active(self) -> bool:  # flask-login refuses inactive accounts
        return self.active

    def get_id(self) -> str:
        return f"{self.id}:{self.session_epoch}"


class ApiToken(Model):
    """An API token; only its SHA-256 is stored (tokens are random, so a slow hash adds nothing)."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    label: Mapped[str] = mapped_column(String(100), default="")
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(12))  # shown in lists so a token can be recognised
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime)

    account: Mapped[Account] = relationship(back_populates="tokens")


class Ddi(Model):
    __tablename__ = "ddis"
    __table_args__ = (
        UniqueConstraint("dialcode", "number", name="uq_ddis_dialcode_number"),
        # The list page of one company in each order it offers (sort field, then the key):
        # its first, last and every keyset page is one range of one of these (migration 0004).
        # Sorting by dialcode or company uses the first.
        Index("ix_ddis_company_dialcode_number", "company", "dialcode", "number"),
        Index("ix_ddis_company_number_dialcode", "company", "number", "dialcode"),
        Index("ix_ddis_company_virt_exten", "company", "virt_exten", "dialcode", "number"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dialcode: Mapped[str] = mapped_column(String(7))
    number: Mapped[str] = mapped_column(String(15))
    virt_exten: Mapped[str] = mapped_column(String(10))
    company: Mapped[str] = mapped_column(ForeignKey("companies.id"))


class PhoneUser(Model):
    """A company's telephony user, billed per day; not a sign-in account."""

    __tablename__ = "phone_users"
    __table_args__ = (
        UniqueConstraint("company", "username", name="uq_phone_users_company_username"),
        # One company's list sorted by extension; the unique constraint serves the others.
        Index("ix_phone_users_company_virt_exten", "company", "virt_exten", "username"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    company: Mapped[str] = mapped_column(ForeignKey("companies.id"))
    username: Mapped[str] = mapped_column(String(64))
    virt_exten: Mapped[str] = mapped_column(String(10))


class HistoryInterval(Model):
    """A record's membership of a company over [start_at, end_at); end_at is NULL while active.

    kind is 'ddi' (key 'dialcode:number') or 'user' (key username, unique within company).
    Reports read only this table.
    """

    __tablename__ = "history_intervals"
    __table_args__ = (
        # Closing a key's open interval, and overlap checks on import.
        Index("ix_history_kind_key_start", "kind", "key", "start_at"),
        # Reports: the intervals of a kind that touch a period are bounded on both sides,
        # start before the period's end and end (or NULL) after its start.
        Index("ix_history_kind_start", "kind", "start_at"),
        Index("ix_history_kind_end", "kind", "end_at"),
        # The day drill-down: one company's intervals touching a day, in start order.
        Index("ix_history_kind_company_start", "kind", "company", "start_at", "end_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(8))
    company: Mapped[str] = mapped_column(ForeignKey("companies.id"))
    key: Mapped[str] = mapped_column(String(80))
    start_at: Mapped[datetime] = mapped_column(DateTime)
    end_at: Mapped[datetime | None] = mapped_column(DateTime)
    source: Mapped[str] = mapped_column(String(16), default="live")  # live | import | demo


class DailyPeak(Model):
    """The report's answer for one (kind, company, local day) on which the history has events.

    `peak` is the most records active at once that day, `level` how many are active at its end,
    and `last_at` the instant of its last event. A day without a row has no events: its level
    all day, and so its peak, is the `level` of the company's latest earlier row (0 if none).
    Kept in the same transaction as each change (services/rollups.py); days are local days in
    the time zone RollupState names.
    """

    __tablename__ = "daily_peaks"
    __table_args__ = (
        # Reports: one month's rows for every company, read from the index alone.
        Index("ix_daily_peaks_kind_day", "kind", "day", "company", "peak", "level"),
    )

    kind: Mapped[str] = mapped_column(String(8), primary_key=True)
    company: Mapped[str] = mapped_column(ForeignKey("companies.id"), primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    peak: Mapped[int] = mapped_column(Integer)
    level: Mapped[int] = mapped_column(Integer)
    last_at: Mapped[datetime] = mapped_column(DateTime)


class RollupState(Model):
    """One row per kind once its daily_peaks are complete, naming the time zone of their days.

    No row: the rollup was never built (reports compute from the history, writers skip it).
    """

    __tablename__ = "rollup_state"

    kind: Mapped[str] = mapped_column(String(8), primary_key=True)
    timezone: Mapped[str] = mapped_column(String(64))
    built_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class AuditEntry(Model):
    """Who did what, when, with the record before and after; written with the change itself."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_at", "at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    actor: Mapped[str] = mapped_column(String(80))
    via: Mapped[str] = mapped_column(String(8))  # api | ui | cli
    action: Mapped[str] = mapped_column(String(40))
    target: Mapped[str] = mapped_column(String(200))
    company: Mapped[str | None] = mapped_column(String(64), index=True)
    before: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    detail: Mapped[str | None] = mapped_column(Text)


# The two kinds of record the record services serve (services/records.py, Kind.model).
Record = Ddi | PhoneUser
RecordModel = type[Ddi] | type[PhoneUser]
