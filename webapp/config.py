"""Configuration: every setting, read from the environment (or instance/config.py), checked at
start. Secrets are never stored in the repository.

`SETTINGS` is the one list of what an operator can set: `default_config` reads them from the
environment, `check_config` parses and validates the values the app ends up with (whichever
source they came from), so a mistyped value stops the app and every command at start with one
line naming the variable, instead of silently turning a feature off or failing on first use.
docs/configuration.md lists the same settings.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Network, ip_network
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MIB = 1024 * 1024
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"", "0", "false", "no", "off"})


class ConfigError(Exception):
    """A setting the app cannot run with; str(exc) is one line that names the variable."""


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
    the configuration). PostgreSQL: a connection the server ended never reaches a user (the
    checkout check in database.configure_engine, not pool_pre_ping's round trip on every
    checkout), and pool_recycle retires connections before the usual idle timeouts cut them.
    SQLite: nothing can drop a connection to a file."""
    if database_url.startswith("sqlite"):
        return {}
    # connect_timeout: a database host that drops packets must fail a request (and the check
    # at start) in seconds, not after the operating system's TCP timeout of minutes.
    return {"pool_recycle": 3600, "connect_args": {"connect_timeout": 10}}


# --- Parsers: each takes what the environment or instance/config.py gave (a string, or already
# the right type) and returns the value the app uses, or raises ValueError with the reason.


def parse_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in TRUE_WORDS | FALSE_WORDS:
        return word in TRUE_WORDS
    raise ValueError(f"{value!r} is not one of 1/true/yes/on or 0/false/no/off")


def int_between(low: int, high: int) -> Callable[[object], int]:
    def parse(value: object) -> int:
        text = str(value).strip()
        if isinstance(value, bool) or not text.lstrip("-").isdigit():
            raise ValueError(f"{value!r} is not a whole number")
        number = int(text)
        if not low <= number <= high:
            raise ValueError(f"{number} is not between {low} and {high}")
        return number

    return parse


def parse_database_url(value: object) -> str:
    """A SQLAlchemy URL of a database this app can use: SQLite (whose folder exists) or
    PostgreSQL through psycopg 3 (the driver the app installs)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    text = str(value).strip()
    try:
        url = make_url(text)
    except (ArgumentError, ValueError):
        raise ValueError(
            "not a database URL; use sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"
        ) from None
    # From the name alone: asking the URL loads the dialect, which fails for unknown names.
    backend, _, driver = url.drivername.partition("+")
    if backend in {"postgresql", "postgres"}:
        if backend != "postgresql" or driver != "psycopg":
            raise ValueError(
                f"use postgresql+psycopg://… (the psycopg 3 driver this app installs), "
                f"not {url.drivername}://…"
            )
        if not url.database:
            raise ValueError("the URL names no database (postgresql+psycopg://USER@HOST/DB)")
    elif backend == "sqlite":
        path = url.database
        if path and path != ":memory:" and not path.startswith("file:"):
            folder = Path(path).resolve().parent
            if not folder.is_dir():
                raise ValueError(f"the folder of the SQLite database, {folder}, does not exist")
    else:
        raise ValueError(f"{backend!r} databases are not supported; use SQLite or PostgreSQL")
    return text


def parse_replica_urls(value: object) -> tuple[str, ...] | None:
    """DATABASE_REPLICA_URLS: PostgreSQL URLs of streaming replicas of DATABASE_URL's
    database, comma-separated (or a list in instance/config.py); empty: none. The message
    names an entry by its place, never repeating a URL (it may hold a password)."""
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    urls = [str(item).strip() for item in items if str(item).strip()]
    for place, url in enumerate(urls, 1):
        try:
            parse_database_url(url)
        except ValueError as exc:
            raise ValueError(f"entry {place}: {exc}") from None
        if not url.startswith("postgresql"):
            raise ValueError(f"entry {place} is not a PostgreSQL URL (replicas are PostgreSQL's)")
    if len(set(urls)) != len(urls):
        raise ValueError("a replica is listed twice")
    return tuple(urls) or None


def parse_seconds(low: float, high: float) -> Callable[[object], float]:
    """Seconds, whole or not ("5", "0.5"), from `low` to `high`."""

    def parse(value: object) -> float:
        try:
            if isinstance(value, bool):
                raise ValueError
            number = float(str(value).strip())
        except ValueError:
            raise ValueError(f"{value!r} is not a number of seconds") from None
        if not low <= number <= high:  # NaN fails this too
            raise ValueError(f"{number:g} is not between {low:g} and {high:g}")
        return number

    return parse


def parse_timezone(value: object) -> str:
    name = str(value).strip()
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not an IANA time zone (e.g. UTC, Europe/Paris)") from None
    return name


def parse_rate_limit(value: object) -> str:
    """A limits rate string ("600 per minute", "10/second; 1000/day"); flask-limiter would
    otherwise skip a limit it cannot parse, turning it off without a word."""
    from limits import parse_many

    text = str(value).strip()
    try:
        if not parse_many(text):
            raise ValueError
    except ValueError:
        raise ValueError(
            f"{text!r} is not a rate such as '600 per minute' or '10/second'"
        ) from None
    return text


def parse_storage_uri(value: object) -> str:
    from limits.storage import SCHEMES

    text = str(value).strip()
    scheme = text.partition("://")[0]
    if "://" not in text or scheme not in SCHEMES:
        raise ValueError(
            f"{text!r} is not a rate-limit storage; use memory:// or redis://HOST:PORT"
        )
    if scheme.startswith("redis"):
        try:
            import redis  # noqa: F401
        except ImportError:
            raise ValueError(
                "redis:// needs the redis package: install the app with its prod extra"
            ) from None
    return text


def parse_secret_key(value: object) -> str:
    text = str(value)
    if len(text) < 16:
        raise ValueError(
            "must be at least 16 characters (generate one with `python3 -c "
            "'import secrets; print(secrets.token_urlsafe(48))'`)"
        )
    return text


# The most reads of the change events one account may have waiting at once that
# EVENTS_MAX_WAITING accepts (services/events/wait_slots.py spaces its slots by it).
MAX_WAITING_READS = 64


def parse_max_waiting(value: object) -> int:
    """Reads of the change events (`wait` above 0) one account may have waiting at once."""
    return int_between(1, MAX_WAITING_READS)(value)


def parse_fernet_keys(value: object) -> tuple[str, ...] | None:
    """WEBHOOK_SECRET_KEYS: Fernet keys, comma-separated (or a list in instance/config.py),
    newest first; empty: none (the key derived from SECRET_KEY alone). The message never
    repeats a key: it names the entry by its place."""
    from cryptography.fernet import Fernet

    items = value if isinstance(value, list | tuple) else str(value).split(",")
    keys = [str(item).strip() for item in items if str(item).strip()]
    for place, key in enumerate(keys, 1):
        try:
            Fernet(key)
        except ValueError:
            raise ValueError(
                f"entry {place} is not a Fernet key (32 bytes in URL-safe base64; generate one "
                "with `python3 -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'`)"
            ) from None
    if len(set(keys)) != len(keys):
        raise ValueError("a key is listed twice")
    return tuple(keys) or None


def parse_retention(value: object) -> int:
    """Days of change events to keep (EVENTS_RETENTION_DAYS, `flask events prune --days`)."""
    return int_between(1, 36500)(value)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def parse_log_format(value: object) -> str:
    word = str(value).strip().lower()
    if word not in ("json", "text"):
        raise ValueError(f"{value!r} is not json (JSON lines) or text (key=value)")
    return word


# Who must have a second factor (docs/security.md#required): nobody, System-Admins, every admin
# (System-Admin or Company-Admin of some company), or every account.
MFA_REQUIRED_VALUES = ("none", "system-admin", "admins", "all")


def parse_mfa_required(value: object) -> str:
    word = str(value).strip().lower()
    if word not in MFA_REQUIRED_VALUES:
        raise ValueError(f"{value!r} is not one of {', '.join(MFA_REQUIRED_VALUES)}")
    return word


def parse_oidc_issuer(value: object) -> str:
    """An issuer is an https URL (http only on this machine, for a local provider in tests and
    trials), without query or fragment, as its discovery document names it."""
    text = str(value).strip()
    parts = urlsplit(text)
    local = parts.hostname in ("127.0.0.1", "localhost", "::1")
    if parts.scheme != "https" and not (parts.scheme == "http" and local):
        raise ValueError(f"{text!r} is not an https:// URL (http:// only for 127.0.0.1)")
    if not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"{text!r} is not an issuer URL (a host, no query or fragment)")
    return text.rstrip("/")


def parse_text(limit: int) -> Callable[[object], str]:
    def parse(value: object) -> str:
        text = str(value).strip()
        if not text or len(text) > limit or any(ord(ch) < 32 for ch in text):
            raise ValueError(f"must be 1 to {limit} printable characters")
        return text

    return parse


def parse_log_level(value: object) -> str:
    word = str(value).strip().upper()
    if word not in LOG_LEVELS:
        raise ValueError(f"{value!r} is not one of {', '.join(LOG_LEVELS)}")
    return word


def parse_metrics_token(value: object) -> str | None:
    """The Bearer token a /metrics scrape must send; empty: none asked for."""
    text = str(value).strip()
    if not text:
        return None
    if len(text) < 16 or any(c.isspace() for c in text):
        raise ValueError("must be at least 16 characters, without spaces")
    return text


def parse_networks(value: object) -> tuple[IPv4Network | IPv6Network, ...] | None:
    """Addresses or networks, comma-separated ('127.0.0.1, 10.0.0.0/8, ::1'), or a list of
    them in instance/config.py; empty: none."""
    items = value if isinstance(value, list | tuple) else str(value).replace(",", " ").split()
    networks = []
    for item in items:
        try:
            networks.append(ip_network(str(item).strip(), strict=False))
        except ValueError:
            raise ValueError(f"{item!r} is not an IP address or network (10.0.0.0/8)") from None
    return tuple(networks) or None


@dataclass(frozen=True)
class Setting:
    """One operator setting: the environment variable, the app.config key it fills, its
    default (None: not set unless given) and its parser."""

    env: str
    key: str
    default: object
    parse: Callable[[Any], object]


SETTINGS: tuple[Setting, ...] = (
    # DATABASE_URL's default depends on the instance folder: see default_config.
    Setting("DATABASE_URL", "SQLALCHEMY_DATABASE_URI", None, parse_database_url),
    # Streaming replicas of a PostgreSQL DATABASE_URL, for the reads webapp/replicas.py routes
    # there (docs/replicas.md); a replica further behind than REPLICA_MAX_LAG_SECONDS is
    # skipped until it catches up.
    Setting("DATABASE_REPLICA_URLS", "DATABASE_REPLICA_URLS", None, parse_replica_urls),
    # At least 1: the lag is known to about a second (webapp/replicas.py's samples).
    Setting("REPLICA_MAX_LAG_SECONDS", "REPLICA_MAX_LAG_SECONDS", "5", parse_seconds(1, 3600)),
    Setting("SECRET_KEY", "SECRET_KEY", None, parse_secret_key),
    # The keys webhook signing secrets are sealed with (services/sealing.py), newest
    # first; the key derived from SECRET_KEY is always tried last.
    Setting("WEBHOOK_SECRET_KEYS", "WEBHOOK_SECRET_KEYS", None, parse_fernet_keys),
    Setting("REPORT_TIMEZONE", "REPORT_TIMEZONE", "UTC", parse_timezone),
    Setting("RATELIMIT_STORAGE_URI", "RATELIMIT_STORAGE_URI", "memory://", parse_storage_uri),
    Setting("API_RATE_LIMIT", "API_RATE_LIMIT", "600 per minute", parse_rate_limit),
    # Failed sign-ins: per account from one address, and per address over all accounts.
    Setting("SIGN_IN_LIMIT", "SIGN_IN_LIMIT", "10 per 15 minutes", parse_rate_limit),
    Setting(
        "SIGN_IN_ADDRESS_LIMIT", "SIGN_IN_ADDRESS_LIMIT", "100 per 15 minutes", parse_rate_limit
    ),
    Setting("HTTPS", "HTTPS", "", parse_bool),
    # How many reverse proxies stand in front of the app, each appending to X-Forwarded-*.
    Setting("TRUSTED_PROXY_COUNT", "TRUSTED_PROXY_COUNT", "0", int_between(0, 5)),
    # `flask events prune` deletes change events (and webhook attempts) older than this.
    Setting("EVENTS_RETENTION_DAYS", "EVENTS_RETENTION_DAYS", "90", parse_retention),
    # How long a number a customer gave back rests before anyone else may have it (its days,
    # the day of release the first; 0: it is available at once). docs/numbers.md#aging.
    Setting("NUMBER_AGING_DAYS", "NUMBER_AGING_DAYS", "0", int_between(0, 3650)),
    # Reads of the change events waiting at once per account; one more is a 429
    # (services/events/wait_slots.py, docs/events.md#limits).
    Setting("EVENTS_MAX_WAITING", "EVENTS_MAX_WAITING", "2", parse_max_waiting),
    # A sign-in session ends after this long without a request, and this long after sign-in
    # whatever its use (services/identity/signin.py; SECURITY.md#sessions says why these
    # defaults).
    Setting("SESSION_IDLE_MINUTES", "SESSION_IDLE_MINUTES", "30", int_between(1, 7 * 24 * 60)),
    Setting("SESSION_MAX_HOURS", "SESSION_MAX_HOURS", "12", int_between(1, 30 * 24)),
    # Who must sign in with a second factor (docs/security.md#required).
    Setting("MFA_REQUIRED", "MFA_REQUIRED", "none", parse_mfa_required),
    # Single sign-on with an OpenID provider (docs/security.md#single-sign-on): offered when
    # the issuer, client id and client secret are all set (check_config refuses a part).
    Setting("OIDC_ISSUER", "OIDC_ISSUER", None, parse_oidc_issuer),
    Setting("OIDC_CLIENT_ID", "OIDC_CLIENT_ID", None, parse_text(200)),
    Setting("OIDC_CLIENT_SECRET", "OIDC_CLIENT_SECRET", None, parse_text(500)),
    Setting("OIDC_NAME", "OIDC_NAME", "single sign-on", parse_text(60)),
    Setting("OIDC_USERNAME_CLAIM", "OIDC_USERNAME_CLAIM", "preferred_username", parse_text(100)),
    # Log lines (webapp/observability/logs.py): JSON lines or key=value text, and the least
    # severe level written; gunicorn.conf.py reads both too, for gunicorn's own lines.
    Setting("LOG_FORMAT", "LOG_FORMAT", "text", parse_log_format),
    Setting("LOG_LEVEL", "LOG_LEVEL", "INFO", parse_log_level),
    # /metrics is served only when one of these is set; a scrape must pass each one set
    # (webapp/observability/metrics.py, docs/observe.md#metrics).
    Setting("METRICS_TOKEN", "METRICS_TOKEN", None, parse_metrics_token),
    Setting("METRICS_ALLOW", "METRICS_ALLOW", None, parse_networks),
    # Networks webhooks may be delivered to although not public (the operator's switches);
    # services/events/targets.py refuses every other non-public address.
    Setting("WEBHOOK_ALLOW_NETWORKS", "WEBHOOK_ALLOW_NETWORKS", None, parse_networks),
)


OIDC_PARTS = ("OIDC_ISSUER", "OIDC_CLIENT_ID", "OIDC_CLIENT_SECRET")


def default_config(instance_path: Path) -> dict[str, object]:
    """The settings every app starts from; `create_app(config)` and instance/config.py override.
    Values are the environment's text here; `check_config` turns them into what the app uses."""
    config: dict[str, object] = {
        s.key: os.environ.get(s.env, s.default)
        for s in SETTINGS
        if os.environ.get(s.env) is not None or s.default is not None
    }
    config.setdefault("SQLALCHEMY_DATABASE_URI", f"sqlite:///{instance_path / 'telephony.db'}")
    config.update(
        {
            "RATELIMIT_HEADERS_ENABLED": True,
            # A rate-limit store that cannot be reached raises limits' StorageError, which the
            # app answers as an outage (503, Retry-After), never as a 500.
            "RATELIMIT_STORAGE_OPTIONS": {"wrap_exceptions": True},
            "MAX_CONTENT_LENGTH": MIB,
            "WTF_CSRF_TIME_LIMIT": None,  # valid for the session's life; sessions end on sign-out
            "SESSION_COOKIE_HTTPONLY": True,
            "SESSION_COOKIE_SAMESITE": "Lax",
            "REMEMBER_COOKIE_HTTPONLY": True,
            "PASSWORD_HASH_METHOD": "scrypt",
        }
    )
    return config


def check_config(config: dict[str, Any]) -> None:
    """Parse every setting in `config` in place; ConfigError names the first that cannot be
    used. Guarantees that after it returns each SETTINGS key holds a valid, parsed value."""
    for setting in SETTINGS:
        if config.get(setting.key) is None:
            continue
        try:
            config[setting.key] = setting.parse(config[setting.key])
        except ValueError as exc:
            raise ConfigError(f"{setting.env}: {exc}") from None
    oidc = [key for key in OIDC_PARTS if config.get(key)]
    if oidc and len(oidc) < len(OIDC_PARTS):
        missing = [key for key in OIDC_PARTS if key not in oidc]
        verb = "is" if len(missing) == 1 else "are"
        raise ConfigError(
            f"{oidc[0]} is set but {' and '.join(missing)} {verb} not: single sign-on needs "
            "all three"
        )
    replicas = config.get("DATABASE_REPLICA_URLS") or ()
    primary = str(config.get("SQLALCHEMY_DATABASE_URI") or "")
    if replicas and not primary.startswith("postgresql"):
        raise ConfigError(
            "DATABASE_REPLICA_URLS is set but DATABASE_URL is not PostgreSQL: replicas are "
            "PostgreSQL streaming replicas of a PostgreSQL primary"
        )
    if replicas and _same_database(primary, replicas):
        raise ConfigError("DATABASE_REPLICA_URLS lists DATABASE_URL itself: name the replicas")
    # What HTTPS implies, from its checked value whichever source set it.
    https = bool(config.get("HTTPS"))
    for key in ("WTF_CSRF_SSL_STRICT", "SESSION_COOKIE_SECURE", "REMEMBER_COOKIE_SECURE"):
        config[key] = https
    config["PREFERRED_URL_SCHEME"] = "https" if https else "http"


def _same_database(primary: str, replicas: tuple[str, ...]) -> bool:
    """Whether a replica URL names DATABASE_URL's server and database (user, password and
    options aside)."""
    from sqlalchemy.engine import make_url

    def where(url: str) -> tuple[object, ...]:
        parsed = make_url(url)
        return (parsed.host or "localhost", parsed.port or 5432, parsed.database)

    return where(primary) in {where(url) for url in replicas}


def exit_with(error: ConfigError, status: int | None = None) -> NoReturn:
    """Stop a process that cannot start: one line on stderr, no traceback."""
    print(f"Configuration error: {error}", file=sys.stderr, flush=True)
    if status is None:
        # In a gunicorn worker (a server started without gunicorn.conf.py, whose master checks
        # first), exit code 3 is gunicorn's "worker failed to boot": the master stops instead
        # of starting the worker again forever. Everywhere else, the usual 1.
        status = 3 if "gunicorn.workers.base" in sys.modules else 1
    raise SystemExit(status)


def serving_warnings(config: dict[str, Any], processes: int, threads: int = 1) -> list[str]:
    """What an operator should hear at start about serving with `processes` processes of
    `threads` threads: the settings that work but do not do what they say in that layout."""
    warnings = []
    waiting = int(config.get("EVENTS_MAX_WAITING") or 0)
    if waiting and threads < waiting + 2:
        # One account's waiting reads of the events (up to 30 s each) may all reach one worker.
        warnings.append(
            f"{threads} thread(s) per worker and EVENTS_MAX_WAITING={waiting}: one account's "
            "long polls of /rest/events/read can take a whole worker, and pages and health "
            "checks sent to it wait; set GUNICORN_THREADS to at least "
            f"{waiting + 2} (docs/deploy.md#long-polls)"
        )
    if processes > 1 and str(config.get("RATELIMIT_STORAGE_URI", "")).startswith("memory:"):
        warnings.append(
            f"RATELIMIT_STORAGE_URI is memory:// with {processes} worker processes: each "
            "counts alone, so the API and sign-in limits allow that many times their value; "
            "set it to redis://HOST:PORT (docs/configuration.md)"
        )
    return warnings
