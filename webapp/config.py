"""Configuration defaults, read from the environment; secrets are never stored in the repository."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

MIB = 1024 * 1024


def _secret_key(instance_path: Path) -> str:
    """SECRET_KEY from the environment, else one generated once and kept in instance/secret_key.

    Several gunicorn workers must share the key (sessions and CSRF tokens are signed with it),
    so it is written to disk atomically by whichever process comes first.
    """
    if key := os.environ.get("SECRET_KEY"):
        return key
    path = instance_path / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    instance_path.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another worker won the race
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_urlsafe(48))
    return path.read_text().strip()


def engine_options(database_url: str) -> dict[str, object]:
    """SQLALCHEMY_ENGINE_OPTIONS for a database URL (create_app applies them under any set in
    the configuration).

    PostgreSQL: a pooled connection can die under the app (a server restart or failover, an
    idle timeout in a firewall or pooler), and must not turn into errors for users. No
    pool_pre_ping: its `SELECT 1` is a round trip on every checkout, about a fifth of an API
    read's time. Instead database.configure_engine installs a checkout check that costs no
    round trip and refuses every connection the server has closed (a restart, a terminated
    backend); SQLAlchemy itself invalidates the whole pool on the first disconnect error it
    meets, so a dead peer it could not see costs at most one failed request per worker; and
    pool_recycle retires connections after an hour, before the usual idle timeouts cut them.

    SQLite: no server, nothing can drop a connection to a file: nothing to check.
    """
    if database_url.startswith("sqlite"):
        return {}
    return {"pool_recycle": 3600}


def default_config(instance_path: Path) -> dict[str, object]:
    """The settings every app starts from; `create_app(config)` and instance/config.py override."""
    database_url = os.environ.get("DATABASE_URL") or f"sqlite:///{instance_path / 'telephony.db'}"
    https = os.environ.get("HTTPS", "").lower() in {"1", "true", "yes"}
    return {
        "SQLALCHEMY_DATABASE_URI": database_url,
        "REPORT_TIMEZONE": os.environ.get("REPORT_TIMEZONE", "UTC"),
        "RATELIMIT_STORAGE_URI": os.environ.get("RATELIMIT_STORAGE_URI", "memory://"),
        "RATELIMIT_HEADERS_ENABLED": True,
        "API_RATE_LIMIT": os.environ.get("API_RATE_LIMIT", "600 per minute"),
        "MAX_CONTENT_LENGTH": MIB,
        "WTF_CSRF_TIME_LIMIT": None,  # valid for the session's life; sessions end on sign-out
        "WTF_CSRF_SSL_STRICT": https,
        "SESSION_COOKIE_HTTPONLY": True,
        "SESSION_COOKIE_SAMESITE": "Lax",
        "SESSION_COOKIE_SECURE": https,
        "REMEMBER_COOKIE_HTTPONLY": True,
        "REMEMBER_COOKIE_SECURE": https,
        "PREFERRED_URL_SCHEME": "https" if https else "http",
        "HTTPS": https,
        "PASSWORD_HASH_METHOD": "scrypt",
        # `flask events prune` deletes change events (and webhook attempts) older than this.
        "EVENTS_RETENTION_DAYS": os.environ.get("EVENTS_RETENTION_DAYS", "90"),
    }
