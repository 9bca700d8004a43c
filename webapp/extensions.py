"""Flask extensions, created unbound here and bound to an app in `create_app`."""

import threading
import time
from typing import TYPE_CHECKING, Any, ClassVar

from flask import has_request_context, request
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_login import LoginManager
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_sqlalchemy.session import Session as FlaskSession
from flask_wtf.csrf import CSRFProtect
from limits.storage import Storage
from sqlalchemy import MetaData, Table
from sqlalchemy.engine import Connection, Engine
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


# Where a request keeps the replica its reads were routed to (database.route_reads): the WSGI
# environ lives exactly as long as the request.
READ_ENGINE_KEY = "telephony.read_engine"


class RoutedSession(FlaskSession):
    """The app's ORM Session: a request whose reads were routed to a replica
    (database.route_reads, docs/replicas.md) runs its statements there; everything else, and
    every statement once the request writes (database.write_transaction takes the route
    away first), on DATABASE_URL's database."""

    def get_bind(
        self,
        mapper: Any | None = None,
        clause: Any | None = None,
        bind: Engine | Connection | None = None,
        **kwargs: Any,
    ) -> Engine | Connection:
        if bind is None and has_request_context():
            routed = request.environ.get(READ_ENGINE_KEY)
            if routed is not None:
                return routed
        return super().get_bind(mapper=mapper, clause=clause, bind=bind, **kwargs)


db = SQLAlchemy(model_class=Base, session_options={"class_": RoutedSession})
migrate = Migrate()
login_manager = LoginManager()
csrf = CSRFProtect()


class ProcessCounters(Storage):
    """`memory://` rate-limit storage: fixed-window counters in this process's memory, each
    process counting alone (several workers need a shared store, redis://).

    Registered for the `memory` scheme through limits' public Storage interface. Unlike
    limits' own MemoryStorage, which starts a timer thread from nearly every hit, it drops
    expired counters inline, at most once a second; an expired counter reads as 0 whether or
    not it was dropped."""

    STORAGE_SCHEME = ["memory"]
    SWEEP_SECONDS = 1.0

    def __init__(self, uri: str | None = None, wrap_exceptions: bool = False, **options: str):
        self._counters: dict[str, tuple[int, float]] = {}  # key -> (count, expires at)
        self._lock = threading.Lock()
        self._next_sweep = time.time() + self.SWEEP_SECONDS
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)

    @property
    def base_exceptions(self) -> type[Exception]:
        return ValueError  # nothing here fails like a server can

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        return self.incr_window(key, expiry, amount)[0]

    def incr_window(self, key: str, expiry: int, amount: int = 1) -> tuple[int, float]:
        """incr, answering the window's expiry too: what get_expiry would say right after
        (the API's limit reads both for every request, rest/rate_limit.py)."""
        now = time.time()
        with self._lock:
            if now >= self._next_sweep:
                self._next_sweep = now + self.SWEEP_SECONDS
                self._counters = {k: v for k, v in self._counters.items() if v[1] > now}
            count, expires = self._counters.get(key, (0, 0.0))
            if expires <= now:
                count, expires = 0, now + expiry
            self._counters[key] = (count + amount, expires)
            return count + amount, expires

    def get(self, key: str) -> int:
        count, expires = self._counters.get(key, (0, 0.0))
        return count if expires > time.time() else 0

    def get_expiry(self, key: str) -> float:
        _count, expires = self._counters.get(key, (0, 0.0))
        return expires if expires > time.time() else time.time()

    def check(self) -> bool:
        return True

    def reset(self) -> int | None:
        with self._lock:
            cleared, self._counters = len(self._counters), {}
        return cleared

    def clear(self, key: str) -> None:
        with self._lock:
            self._counters.pop(key, None)


# No default limits: the API and sign-in set their own (docs/api.md#limits).
limiter = Limiter(key_func=get_remote_address, default_limits=[])
