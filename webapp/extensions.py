"""Flask extensions, created unbound here and bound to an app in `create_app`."""

import time
from typing import TYPE_CHECKING, ClassVar

from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_login import LoginManager
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFProtect
from limits.storage import MemoryStorage
from sqlalchemy import MetaData, Table
from sqlalchemy.orm import DeclarativeBase

# Named constraints keep Alembic migrations portable between SQLite and PostgreSQL.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)

    if TYPE_CHECKING:
        # Every model here is mapped to a Table (no mapping to a join or select), so its
        # __table__ offers insert() for the Core inserts of the write path.
        __table__: ClassVar[Table]


db = SQLAlchemy(model_class=Base)
migrate = Migrate()
login_manager = LoginManager()
csrf = CSRFProtect()


class SweepingMemoryStorage(MemoryStorage):
    """`memory://` rate-limit storage that sweeps expired entries inline, at most once a second.

    limits' MemoryStorage starts a threading.Timer thread (10 ms) from nearly every hit to drop
    expired counters and moving-window events: under steady API traffic that is a new thread
    per request, a measurable share of a read. The sweep only frees memory; the counting never
    depends on it (an expired counter is dropped when it is next read, and expired moving-window
    entries are skipped by their timestamps), so running it from the request itself, now and
    then, keeps the limits exactly as they were. Registered under the `memory` scheme, so
    RATELIMIT_STORAGE_URI=memory:// (the default) gets it; redis:// and the rest are untouched.
    tests/test_api_errors.py checks that hits start no thread, in case limits renames the hook.
    """

    STORAGE_SCHEME = ["memory"]
    SWEEP_SECONDS = 1.0

    def __init__(self, uri: str | None = None, wrap_exceptions: bool = False, **options: str):
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        self._next_sweep = time.monotonic() + self.SWEEP_SECONDS

    # The base class's private hook (name-mangled), called by every hit instead of its Timer.
    def _MemoryStorage__schedule_expiry(self) -> None:
        now = time.monotonic()
        if now >= self._next_sweep:
            self._next_sweep = now + self.SWEEP_SECONDS
            self._MemoryStorage__expire_events()  # type: ignore[attr-defined]


# No default limits: the API and sign-in set their own (docs/api.md#limits).
limiter = Limiter(key_func=get_remote_address, default_limits=[])
