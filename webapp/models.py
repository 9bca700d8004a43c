"""Typed SQLAlchemy 2.0 models. Every timestamp is a naive UTC datetime (see database.utcnow)."""

from __future__ import annotations

from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from flask_login import UserMixin
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    literal_column,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship
from sqlalchemy.sql.elements import ColumnElement

from .database import utcnow
from .extensions import db

if TYPE_CHECKING:
    # Flask-SQLAlchemy builds db.Model from Base at run time, out of the type checker's sight:
    # to it the models are plain declarative classes of Base, which is what they are.
    from .extensions import Base as Model
else:
    Model = db.Model

COMPANY_ID = String(64)
EXTENSION_DIGITS = 10  # the longest extension (services/fields.py)


def extension_order(column: Any) -> list[ColumnElement[Any]]:
    """An extension's numeric order, as index columns and ORDER BY terms: its digits
    left-padded with zeros to 10 characters (so 130 before 1017), then the text itself (ties:
    007 before 7). The same expressions in the indexes and the queries, so an index serves the
    order, and a single leading term, so SQLite can seek a cursor's position on it. Text
    functions, not a cast, so no stored value can make a write fail (PostgreSQL's cast refuses
    non-digits). Constants are written into the SQL, not bound: an index on expressions serves
    only the same expression."""
    padded = func.substr(
        literal_column(f"'{'0' * EXTENSION_DIGITS}'").concat(column),
        func.length(column, type_=Integer) + literal_column("1", Integer),
    )
    return [padded, column]


def padded_extension(value: str) -> str:
    """extension_order's first term for one value, as the database computes it."""
    return ("0" * EXTENSION_DIGITS + value)[len(value) :]


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
    # The last successful password sign-in (services/identity/signin.py); API token use does not
    # count.
    last_sign_in_at: Mapped[datetime | None] = mapped_column(DateTime)
    # The authenticator app's shared secret (RFC 6238), sealed like webhook secrets
    # (services/identity/factors.py); None while the account has none. The secret is kept
    # only after a correct code (enrolment holds it in the signed-in session until then).
    totp_secret: Mapped[str | None] = mapped_column(String(400))
    totp_added_at: Mapped[datetime | None] = mapped_column(DateTime)
    # The time step (Unix time // 30) of the last code accepted: a code is accepted at most
    # once, and no code of an earlier step after it.
    totp_last_step: Mapped[int | None] = mapped_column(BigInteger)

    admin_of: Mapped[list[Company]] = relationship(
        secondary=account_admin_companies, order_by=Company.id
    )
    reporting_for: Mapped[list[Company]] = relationship(
        secondary=account_reporting_companies, order_by=Company.id
    )
    tokens: Mapped[list[ApiToken]] = relationship(back_populates="account")
    # For /account/security's sections (services/identity/factors.py, passkeys.py).
    passkeys: Mapped[list[Passkey]] = relationship(order_by="Passkey.id", viewonly=True)
    recovery_codes: Mapped[list[RecoveryCode]] = relationship(
        order_by="RecoveryCode.id", viewonly=True
    )

    @property
    def is_active(self) -> bool:  # flask-login refuses inactive accounts
        return self.active

    # Not a column: the key of the sign-in session (account_sessions) this object was signed in
    # with or loaded for by the session cookie; None otherwise (services/identity/signin.py).
    # session_via and session_confirmed_at: how that session was signed in ("password",
    # "oidc") and when its holder last proved who they are (sign-in, or /account/confirm).
    if TYPE_CHECKING:
        session_key: str | None
        session_via: str | None
        session_confirmed_at: datetime | None
    else:
        session_key = None
        session_via = None
        session_confirmed_at = None

    def get_id(self) -> str:
        """What flask-login keeps in the session cookie: the account, its session epoch and the
        key of its sign-in session (services/identity/signin.py checks all three on every
        request)."""
        return f"{self.id}:{self.session_epoch}:{self.session_key or ''}"


class ReadFence(Model):
    """How many writes an account has made while replicas were configured, counted in each
    write's own transaction: a replica showing the primary's count has replayed the account's
    last write, and only such a replica serves its reads (webapp/replicas.py,
    docs/replicas.md)."""

    __tablename__ = "read_fences"

    account_id: Mapped[int] = mapped_column(
        ForeignKey("accounts.id", ondelete="CASCADE"), primary_key=True
    )
    writes: Mapped[int] = mapped_column(BigInteger)


class AccountSession(Model):
    """One sign-in of an account in a browser: the session cookie names it by a random key of
    which only the SHA-256 is stored here. Ended by signing out, or refused once idle or old
    beyond the configured limits (services/identity/signin.py)."""

    __tablename__ = "account_sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # sha256 hex of the key
    account_id: Mapped[int] = mapped_column(
        ForeignKey("accounts.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(DateTime)
    # How it was signed in: "password" (with the second factor, if any) or "oidc".
    via: Mapped[str] = mapped_column(String(16), default="password")
    # The client's address and browser (User-Agent, cut) at sign-in, for the account's own
    # list of its sessions (/account/security).
    address: Mapped[str | None] = mapped_column(String(64))
    browser: Mapped[str | None] = mapped_column(String(300))
    # The last time its holder proved who they are: sign-in, or the confirmation asked before
    # a sensitive action (docs/security.md#confirmation).
    confirmed_at: Mapped[datetime | None] = mapped_column(DateTime)


class RecoveryCode(Model):
    """One of an account's recovery codes: usable once instead of a second factor. Only the
    SHA-256 of the code is kept (a code is random, 50 bits: a slow hash would add nothing a
    sign-in limit does not). Regenerating deletes the old ones."""

    __tablename__ = "recovery_codes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    account_id: Mapped[int] = mapped_column(
        ForeignKey("accounts.id", ondelete="CASCADE"), index=True
    )
    digest: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    used_at: Mapped[datetime | None] = mapped_column(DateTime)


class Passkey(Model):
    """A passkey or security key of an account (WebAuthn): the credential the authenticator
    made, its public key and signature counter, and the name its owner gave it."""

    __tablename__ = "passkeys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    account_id: Mapped[int] = mapped_column(
        ForeignKey("accounts.id", ondelete="CASCADE"), index=True
    )
    # base64url of the authenticator's credential id (at most 1,023 bytes by the standard).
    credential_id: Mapped[str] = mapped_column(String(1400), unique=True)
    public_key: Mapped[bytes] = mapped_column(LargeBinary)
    sign_count: Mapped[int] = mapped_column(BigInteger, default=0)
    name: Mapped[str] = mapped_column(String(64))
    # Comma-separated transports the authenticator named ("usb,nfc", "internal"), for hints.
    transports: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime)


class FormOnce(Model):
    """A form's one-time key, recorded when the form's action was done: a second POST of the
    same form (a browser reload, a double click) finds it and does nothing again
    (webapp/views/once.py). `what` says what was done; rows older than the longest a session
    lives are pruned (their keys are refused as too old by then)."""

    __tablename__ = "form_once"

    key: Mapped[str] = mapped_column(String(32), primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    used_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, index=True)
    what: Mapped[str] = mapped_column(Text, default="")


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
        # Number search by the end of the number (record_query, q): a prefix of the reversed
        # digits, every company's and one company's (migration 0005). With the key, a search's
        # count reads the index alone.
        Index("ix_ddis_number_reversed", "number_reversed", "dialcode", "number"),
        Index(
            "ix_ddis_company_number_reversed", "company", "number_reversed", "dialcode", "number"
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dialcode: Mapped[str] = mapped_column(String(7))
    number: Mapped[str] = mapped_column(String(15))
    virt_exten: Mapped[str] = mapped_column(String(10))
    company: Mapped[str] = mapped_column(ForeignKey("companies.id"))
    # The number's digits reversed, written once at creation (the number never changes).
    number_reversed: Mapped[str] = mapped_column(String(15))


class Number(Model):
    """A number in the provider's inventory, in exactly one state (docs/numbers.md).

    Every number has one row here, whatever its state; the DDIs table holds the in-service
    ones' company and extension (it is what §4 reads and writes). This row is what every
    change of a number locks first, so two writers of one number (a create and an
    allocation, a delete and a stock) take turns, and its unique key is what keeps a number
    in the inventory once.

    `state` is the state written by the number's last change; a `reserved` or `aging`
    number whose `held_until` has passed is `available` (services/numbers/states.py reads it
    so: no job runs). `held_for` is the company a reservation is for; `previous_company` the
    company an aging number left (kept afterwards for the System-Admin's eyes).
    """

    __tablename__ = "numbers"
    __table_args__ = (
        UniqueConstraint("dialcode", "number", name="uq_numbers_dialcode_number"),
        # The stock by state, dialcode and number start (find free numbers, allocation,
        # /ddis?state=…): one range, read from the index alone when counting.
        Index("ix_numbers_state", "state", "dialcode", "number", "held_until"),
        # A company's reservations (its page, a Company-Admin's reads): only held numbers,
        # so that it is small and every planner takes it for `held_for = …` (migration 0025).
        Index(
            "ix_numbers_held_for",
            "held_for",
            "dialcode",
            "number",
            sqlite_where=literal_column("held_for IS NOT NULL"),
            postgresql_where=literal_column("held_for IS NOT NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dialcode: Mapped[str] = mapped_column(String(7))
    number: Mapped[str] = mapped_column(String(15))
    state: Mapped[str] = mapped_column(String(12))
    held_for: Mapped[str | None] = mapped_column(ForeignKey("companies.id"))
    previous_company: Mapped[str | None] = mapped_column(ForeignKey("companies.id"))
    # The last day (a local day in REPORT_TIMEZONE) a reserved or aging number is held; it is
    # available from the next one.
    held_until: Mapped[date | None] = mapped_column(Date)
    # When the number entered its state; NULL for numbers in service before the inventory
    # existed (their history says since when).
    since: Mapped[datetime | None] = mapped_column(DateTime)
    description: Mapped[str] = mapped_column(String(200), default="")


# A description's word, compared as bytes on PostgreSQL too (the C collation): its index then
# serves a prefix as the range word >= 'lon' AND word < 'loo' whatever the database's
# collation (SQLite compares bytes already).
WORD = String(200).with_variant(String(200, collation="C"), "postgresql")


class NumberWord(Model):
    """One word of a number's description (fields.words_of), for the number search's words
    (`/ddis?q=london`, record_query): a prefix of a word is one range of this table's key, so
    a search never reads the descriptions themselves. Written in the transaction of every
    write of a description (services/inventory.py, set_descriptions) and deleted with the
    number (retire); tests/invariants.py holds it equal to the descriptions' words."""

    __tablename__ = "number_words"
    # Replacing or dropping a number's words finds them by the number.
    __table_args__ = (Index("ix_number_words_number", "dialcode", "number"),)

    word: Mapped[str] = mapped_column(WORD, primary_key=True)
    dialcode: Mapped[str] = mapped_column(String(7), primary_key=True)
    number: Mapped[str] = mapped_column(String(15), primary_key=True)


class PhoneUser(Model):
    """A company's telephony user, billed per day; not a sign-in account."""

    __tablename__ = "phone_users"
    __table_args__ = (
        UniqueConstraint("company", "username", name="uq_phone_users_company_username"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    company: Mapped[str] = mapped_column(ForeignKey("companies.id"))
    username: Mapped[str] = mapped_column(String(64))
    virt_exten: Mapped[str] = mapped_column(String(10))


# A username's start across every company (the search, /users?username=… of a System-Admin;
# migration 0020): on PostgreSQL in pattern order, so that LIKE 'x%' is a range of it whatever
# the database's collation.
Index(
    "ix_phone_users_username",
    PhoneUser.__table__.c.username,
    PhoneUser.__table__.c.company,
    postgresql_ops={"username": "text_pattern_ops"},
)
# The list sorted by extension, in numeric order (extension_order; migration 0005): every
# company's (a System-Admin's list) and one company's; the unique constraints and the indexes
# above serve the other orders.
Index(
    "ix_ddis_virt_exten_numeric",
    *extension_order(Ddi.__table__.c.virt_exten),
    Ddi.dialcode,
    Ddi.number,
)
Index(
    "ix_phone_users_virt_exten_numeric",
    *extension_order(PhoneUser.__table__.c.virt_exten),
    PhoneUser.company,
    PhoneUser.username,
)
Index(
    "ix_ddis_company_virt_exten_numeric",
    Ddi.company,
    *extension_order(Ddi.__table__.c.virt_exten),
    Ddi.dialcode,
    Ddi.number,
)
Index(
    "ix_phone_users_company_virt_exten_numeric",
    PhoneUser.company,
    *extension_order(PhoneUser.__table__.c.virt_exten),
    PhoneUser.username,
)


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
        # ...and those of its records that end within the day (migration 0021).
        Index("ix_history_kind_company_end", "kind", "company", "end_at", "start_at"),
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
    Kept in the same transaction as each change (services/billing/rollups.py); days are local days
    in the time zone RollupState names.
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


class RollupDay(Model):
    """Per (kind, local day) with rollup rows, what those rows change in the sum over every
    company (services/billing/_rollup_sums.py).

    For each daily_peaks row of the day, with `carried` the level of its company's previous row
    (0 if none): `rise` sums peak - carried and `change` sums level - carried. So the sum of
    every company's level at the end of a day is the sum of `change` up to it, and a day's sum
    of every company's peak is the level at the end of the day before plus its `rise`: a
    report's totals row without reading a row per company. A day's sums are those of its rows:
    a writer adds to the row of its connection's `slot` (migration 0029), so writers on other
    connections do not wait for its commit; the full rebuild writes slot 0.
    """

    __tablename__ = "rollup_days"

    kind: Mapped[str] = mapped_column(String(8), primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    slot: Mapped[int] = mapped_column(SmallInteger, primary_key=True, default=0, server_default="0")
    rise: Mapped[int] = mapped_column(BigInteger)
    change: Mapped[int] = mapped_column(BigInteger)


class RollupMonth(Model):
    """Per (kind, calendar month, company) with rollup rows in the month, the company's month
    total so far (services/billing/_rollup_sums.py).

    `through` is the sum of the company's daily peaks from the month's first day to `last_day`,
    the day of its last row in the month, whose end level is `level`; every later day of the
    month until the next row peaks at `level`. So a month total is one row's arithmetic, and a
    company without a row in the month has the `level` of its latest earlier row all month.
    """

    __tablename__ = "rollup_months"
    __table_args__ = (
        # The level a company carries into a month without rows: its latest earlier month.
        Index("ix_rollup_months_company", "kind", "company", "month", "level"),
        # A month's rows by last day, in `through` order: the ranking of the current month
        # (ranks.py) reads them from the largest down, as far as its page needs.
        Index("ix_rollup_months_last_day", "kind", "month", "last_day", "through"),
    )

    kind: Mapped[str] = mapped_column(String(8), primary_key=True)
    month: Mapped[date] = mapped_column(Date, primary_key=True)  # the month's first day
    company: Mapped[str] = mapped_column(ForeignKey("companies.id"), primary_key=True)
    through: Mapped[int] = mapped_column(BigInteger)
    last_day: Mapped[date] = mapped_column(Date)
    level: Mapped[int] = mapped_column(Integer)


class RollupLatest(Model):
    """Per kind whose rollup is built and every company, the month and `level` of the
    company's latest rollup_months row: the level it is at now, kept beside the rollup
    (services/billing/_rollup_sums.py). A company without rollup_months rows (it never held a
    record of the kind) has level 0 and no month.

    The report page for every company ranks the current month by reading companies in level
    order from ix_rollup_latest_level (ranks.py) instead of every company's month total; a
    company without a row in the month totals this level times the month's days so far. The
    companies list sorted by a count reads one range of that index (services/companies.py):
    every company is in it, so no join of every company finds those without a row.
    """

    __tablename__ = "rollup_latest"
    __table_args__ = (Index("ix_rollup_latest_level", "kind", "level", "company"),)

    kind: Mapped[str] = mapped_column(String(8), primary_key=True)
    company: Mapped[str] = mapped_column(ForeignKey("companies.id"), primary_key=True)
    month: Mapped[date | None] = mapped_column(Date)
    level: Mapped[int] = mapped_column(Integer)


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
    # Each page of /audit is a few ranges of these indexes in (at, id) order, newest first
    # (services/history/audit_query.py): the whole log, one company's own entries or its moves away,
    # one actor's, one target's (migration 0010), one action's (migration 0017), one company's
    # of one action or one actor (migration 0018).
    __table_args__ = (
        Index("ix_audit_log_at", "at", "id"),
        Index("ix_audit_log_company", "company", "at", "id"),
        Index("ix_audit_log_other_company", "other_company", "at", "id"),
        Index("ix_audit_log_actor", "actor", "at", "id"),
        Index("ix_audit_log_target", "target", "at", "id"),
        Index("ix_audit_log_action", "action", "at", "id"),
        Index("ix_audit_log_company_action", "company", "action", "at", "id"),
        Index("ix_audit_log_company_actor", "company", "actor", "at", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    actor: Mapped[str] = mapped_column(String(80))
    via: Mapped[str] = mapped_column(String(8))  # api | ui | cli
    action: Mapped[str] = mapped_column(String(40))
    target: Mapped[str] = mapped_column(String(200))
    company: Mapped[str | None] = mapped_column(String(64))
    # The company a record left when the entry is a move (company changed): the entry is in
    # the audit of both companies (services/history/audit.py). NULL for everything else.
    other_company: Mapped[str | None] = mapped_column(String(64))
    before: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    detail: Mapped[str | None] = mapped_column(Text)
    # The X-Request-ID of the request that wrote the entry (its log lines carry the same id);
    # NULL for the command line and for entries written before migration 0014.
    request_id: Mapped[str | None] = mapped_column(String(64))


# The two kinds of record the record services serve (services/records/crud.py, Kind.model).
Record = Ddi | PhoneUser
RecordModel = type[Ddi] | type[PhoneUser]


# The fingerprint of an ImportPreview that is a stock file (a plan's is 64 hex digits).
STOCK_PREVIEW = "stock"


class ImportPreview(Model):
    """An uploaded DDI import waiting for its confirmation (services/imports/import_previews.py).

    The file is kept here, not on the web server's disk, so the confirmation may reach any
    worker or host. `fingerprint` is the plan the account was last shown: confirming applies
    the file only while the plan is still that one. Deleted when applied; a day old, purged.
    A file waiting to be stocked (services/numbers/stock_previews.py) is kept here too, its
    `fingerprint` STOCK_PREVIEW: it is no DDI import, and the import's page does not show it.
    """

    __tablename__ = "import_previews"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, index=True)
    filename: Mapped[str] = mapped_column(String(200))
    size: Mapped[int] = mapped_column(Integer)
    content: Mapped[bytes] = mapped_column(LargeBinary)
    fingerprint: Mapped[str] = mapped_column(String(64))


class MonthClose(Model):
    """One close of a report month (services/billing/month_close.py): the month is closed while its
    latest close has no `reopened_at`. Each close of a month is a new row, `version` 1, 2, …;
    the unique (year, month, version) lets only one of several concurrent closes win.

    `timezone` is the REPORT_TIMEZONE the figures were computed in; `ddi_days` and `user_days`
    hold each day's sum over every company ("3,3,4,…"), the closed month's totals row.
    """

    __tablename__ = "month_closes"
    __table_args__ = (UniqueConstraint("year", "month", "version", name="uq_month_closes_version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    year: Mapped[int] = mapped_column(Integer)
    month: Mapped[int] = mapped_column(Integer)
    version: Mapped[int] = mapped_column(Integer)
    timezone: Mapped[str] = mapped_column(String(64))
    closed_at: Mapped[datetime] = mapped_column(DateTime)
    closed_by: Mapped[str] = mapped_column(String(64))
    reopened_at: Mapped[datetime | None] = mapped_column(DateTime)
    reopened_by: Mapped[str | None] = mapped_column(String(64))
    reopen_reason: Mapped[str | None] = mapped_column(String(500))
    ddi_days: Mapped[str] = mapped_column(Text)
    user_days: Mapped[str] = mapped_column(Text)
    # Whether the close stored each company's rollup marks (rollups.month_marks): only when
    # both rollups were built in `timezone`.
    with_marks: Mapped[bool] = mapped_column(Boolean, default=False)
    # Whether close_writes holds every (kind, company) whose rollup rows this close's figures
    # depend on were written since it (services/billing/close_writes.py): not for a close made
    # before the record existed, nor after a full rollup rebuild. Without it, what changed
    # since the close is found by comparing every company's rollup marks.
    writes_kept: Mapped[bool] = mapped_column(Boolean, default=False)


class CloseWrite(Model):
    """A (kind, company) whose rollup rows of a closed month (or of the days before it, which
    carry their level into it) were written after the month's close: its figures may differ
    from the closed ones (services/billing/close_writes.py). Written in the transaction of the
    rollup write; a company written to whose figures came back equal still has its row."""

    __tablename__ = "close_writes"

    close_id: Mapped[int] = mapped_column(
        ForeignKey("month_closes.id", ondelete="CASCADE"), primary_key=True
    )
    kind: Mapped[str] = mapped_column(String(8), primary_key=True)
    company: Mapped[str] = mapped_column(COMPANY_ID, primary_key=True)


class ClosedFigures(Model):
    """A company's figures of one kind as stored by a close: each day's peak ("0,0,3,…", one
    per day of the month), their sum, and the rollup marks they were computed from. Only
    companies with a non-zero day or marks have a row: a company without one answers zeros.
    Never changed once written."""

    __tablename__ = "closed_figures"
    __table_args__ = (
        # The report page's ranking of a closed month: the page's rows in total order
        # (services/billing/ranks.py), not every company's.
        Index("ix_closed_figures_rank", "close_id", "kind", "total", "company"),
    )

    # The close's id (month_closes.id) without a foreign key: the close writes these rows in
    # the transaction that creates it, and PostgreSQL's check of each (198,000 at 100,000
    # companies) was a third of the 5 s a close has (migration 0031).
    close_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(8), primary_key=True)
    company: Mapped[str] = mapped_column(COMPANY_ID, primary_key=True)
    total: Mapped[int] = mapped_column(BigInteger)
    days: Mapped[str] = mapped_column(Text)
    marks: Mapped[str | None] = mapped_column(Text)


class EventCounter(Model):
    """One row: the id of the last event committed (services/events/journal.py). Taken with an
    UPDATE as the last statement of a transaction that records events, so ids follow commit
    order."""

    __tablename__ = "event_counter"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    last_id: Mapped[int] = mapped_column(BigInteger)


class EventTxn(Model):
    """The events of one write transaction: ids `first_id` to `last_id`, given at its end.

    NULL ids only inside the transaction that records them: every committed row has both."""

    __tablename__ = "event_txns"
    __table_args__ = (
        Index("ix_event_txns_last_id", "last_id", unique=True),
        Index("ix_event_txns_at", "at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    first_id: Mapped[int | None] = mapped_column(BigInteger)
    last_id: Mapped[int | None] = mapped_column(BigInteger)
    at: Mapped[datetime] = mapped_column(DateTime)
    actor: Mapped[str] = mapped_column(String(80))


class Event(Model):
    """One change of a DDI or phone user; its id is its transaction's first_id + seq.

    The record before and after the change, in plain columns (no JSON to encode per event):
    its key (`dialcode` and `number`, or `username` within `company`), its extension before
    and after (NULL for a create / a delete), and its company: `company` after the change (the
    one it had, for a delete), `other_company` the one a move took it from.
    services/events/feed.shape gives them back as `before` and `after`."""

    __tablename__ = "events"
    # A Company-Admin's feed and a webhook's company filter: one index range per side of a
    # move (the other side only for moves, so that index holds moves only).
    __table_args__ = (
        Index("ix_events_company", "company", "txn_id"),
        Index(
            "ix_events_other_company",
            "other_company",
            "txn_id",
            postgresql_where=literal_column("other_company IS NOT NULL"),
            sqlite_where=literal_column("other_company IS NOT NULL"),
        ),
    )

    # No foreign key (migration 0013): events.record writes the transaction's row itself.
    txn_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    type: Mapped[str] = mapped_column(String(16))
    company: Mapped[str | None] = mapped_column(COMPANY_ID)
    other_company: Mapped[str | None] = mapped_column(COMPANY_ID)  # a move's old company
    dialcode: Mapped[str | None] = mapped_column(String(7))
    number: Mapped[str | None] = mapped_column(String(15))
    username: Mapped[str | None] = mapped_column(String(64))
    before_exten: Mapped[str | None] = mapped_column(String(10))
    after_exten: Mapped[str | None] = mapped_column(String(10))
    # A number's state before and after a `number.*` event (migration 0023); NULL otherwise.
    before_state: Mapped[str | None] = mapped_column(String(12))
    after_state: Mapped[str | None] = mapped_column(String(12))


class Webhook(Model):
    """A receiver of events (services/events/webhooks.py, services/events/delivery.py).

    `cursor`: the id of the last event handled (delivered or given up); events after it that
    match `event_types` and `companies` (comma lists; NULL: all) are still to deliver, in order.
    `head_event`, `head_attempts` and `next_attempt_at`: the retry state of the next event to
    deliver (a queued redelivery first, else the first matching event after `cursor`).
    `secret_sealed`: the signing secret ('whsec_…', shown once at creation or rotation),
    encrypted (services/sealing.py): every delivery is signed with it, so it is kept,
    but never in clear. `previous_secret_sealed`: the secret a rotation replaced, which signs
    too until `previous_secret_until` (then it is ignored, and cleared by the next rotation or
    `flask events prune`). `paused_at`: when it was paused (NULL: active); the worker sends
    nothing to a paused webhook, and the events recorded meanwhile go out once it is resumed."""

    __tablename__ = "webhooks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    url: Mapped[str] = mapped_column(String(2000))
    secret_sealed: Mapped[str] = mapped_column(Text)
    event_types: Mapped[str | None] = mapped_column(Text)
    companies: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    created_by: Mapped[str] = mapped_column(String(80))
    cursor: Mapped[int] = mapped_column(BigInteger)
    head_event: Mapped[int | None] = mapped_column(BigInteger)
    head_attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(DateTime)
    previous_secret_sealed: Mapped[str | None] = mapped_column(Text)
    previous_secret_until: Mapped[datetime | None] = mapped_column(DateTime)
    paused_at: Mapped[datetime | None] = mapped_column(DateTime)


class WebhookAttempt(Model):
    """One POST of an event to a webhook: its answer's status (NULL: no answer), time taken,
    and `outcome`: delivered, retry (another attempt is due) or failed (given up); or `test`,
    a test event sent from the webhook's page (`event_id` 0: no event of the feed)."""

    __tablename__ = "webhook_attempts"
    __table_args__ = (Index("ix_webhook_attempts_webhook", "webhook_id", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    webhook_id: Mapped[int] = mapped_column(ForeignKey("webhooks.id", ondelete="CASCADE"))
    event_id: Mapped[int] = mapped_column(BigInteger)
    at: Mapped[datetime] = mapped_column(DateTime)
    status: Mapped[int | None] = mapped_column(Integer)
    duration_ms: Mapped[int] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(String(200))
    outcome: Mapped[str] = mapped_column(String(12))


class WebhookRedelivery(Model):
    """An event a System-Admin asked to deliver again to a webhook (after it failed)."""

    __tablename__ = "webhook_redeliveries"

    webhook_id: Mapped[int] = mapped_column(
        ForeignKey("webhooks.id", ondelete="CASCADE"), primary_key=True
    )
    event_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    requested_at: Mapped[datetime] = mapped_column(DateTime)
    requested_by: Mapped[str] = mapped_column(String(80))
