"""Application factory: `create_app(config)` builds a configured app; app.py calls it."""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from weakref import WeakSet

from flask import Flask
from flask.sessions import SecureCookieSessionInterface
from flask.typing import ResponseReturnValue
from werkzeug.middleware.proxy_fix import ProxyFix

from . import observability
from .config import (
    ConfigError,
    _secret_key,
    check_config,
    default_config,
    engine_options,
    serving_warnings,
)
from .database import (
    check_database_exists,
    configure_engine,
    end_read_connection,
    make_private,
    private_sqlite_files,
)
from .extensions import csrf, db, login_manager, migrate
from .security import add_vary

PACKAGE_DIR = Path(__file__).resolve().parent
# templates/, static/ and migrations/ live at the top of the repo, beside webapp/: a checkout
# (`make run`, an editable install) reads them there. A wheel carries copies inside the package
# (setup.py puts them there), so finding them there means running from an installed wheel.
INSTALLED = (PACKAGE_DIR / "templates").is_dir()
ROOT = PACKAGE_DIR if INSTALLED else PACKAGE_DIR.parent  # the directory holding those three
APP_NAME = "telephony-admin"


def default_instance_path() -> Path:
    """The instance folder when INSTANCE_PATH is not set (the SQLite database, the generated
    secret key, the demo passwords): `instance/` in a checkout; for an installed wheel the
    user's data directory, `$XDG_DATA_HOME/telephony-admin` (`~/.local/share/telephony-admin`).
    Never a directory inside the installed package: site-packages is shared by every user of
    the environment, often read-only, and replaced by the next upgrade."""
    if not INSTALLED:
        return PACKAGE_DIR.parent / "instance"
    data_home = os.environ.get("XDG_DATA_HOME", "")
    if os.path.isabs(data_home):  # the XDG spec: a relative value is invalid, ignore it
        return Path(data_home) / APP_NAME
    try:
        return Path.home() / ".local" / "share" / APP_NAME
    except RuntimeError:  # no HOME and no passwd entry, as for some service users
        raise ConfigError(
            "INSTANCE_PATH: not set, and there is no home directory to default to; "
            "set it to a directory the app may write to"
        ) from None


def instance_folder() -> Path:
    """INSTANCE_PATH, else default_instance_path(); created (private to the user) if missing,
    as a first run from an installed wheel finds it: ConfigError when it cannot be. An
    existing one open to the group or others (a git checkout makes `instance/` 0755) is
    tightened to the user alone: it holds the SQLite database and the secret key."""
    path = Path(os.environ.get("INSTANCE_PATH") or default_instance_path())
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"INSTANCE_PATH: cannot create {path} ({exc.strerror}); "
            "set it to a directory the app may write to"
        ) from None
    make_private(path)
    return path


class App(Flask):
    """Flask, except that `ensure_sync` remembers the functions it found synchronous: Flask
    asks, for every view and request hook of every request (about ten), whether it is a
    coroutine function, which the inspect module works out afresh each time. Held weakly, so a
    function made for one call (a class-based view's bound method) is not kept."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._synchronous: WeakSet[Callable[..., Any]] = WeakSet()

    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        if func in self._synchronous:
            return func
        checked = super().ensure_sync(func)
        if checked is func:
            with contextlib.suppress(TypeError):  # a callable no weak reference can name
                self._synchronous.add(func)
        return checked


class CookieSessions(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, except that a request without the cookie (every API
    call with a Bearer token) gets its new empty session without first parsing its Cookie
    header (when it has none) or building the signing serializer, which Flask does on every
    request, and that an empty session nothing changed is saved without first reading the
    seven cookie settings Flask reads for every response; what it answers is the same."""

    def open_session(self, app, request):
        if app.secret_key and (
            "HTTP_COOKIE" not in request.environ
            or not request.cookies.get(self.get_cookie_name(app))
        ):
            return self.session_class()
        return super().open_session(app, request)

    def save_session(self, app, session, response):
        if not session and not session.modified:
            # Flask's own answer for it: nothing to set or delete, Vary if it was read.
            if session.accessed:
                add_vary(response, "Cookie")
            return
        super().save_session(app, session, response)


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """Build the app: defaults, then instance/config.py, then `config` (tests pass a dict).

    Every setting is checked first (config.check_config), and a PostgreSQL database that does
    not exist is reported: either raises ConfigError, one line naming the setting, which
    app.py and webapp.wsgi turn into that line on stderr and exit status 1."""
    instance_path = instance_folder()
    app = App(
        __name__,
        instance_path=str(instance_path),
        template_folder=str(ROOT / "templates"),
        static_folder=str(ROOT / "static"),
    )
    app.config.update(default_config(instance_path))
    # The instance folder's config.py (a relative name would be read beside this package, and
    # so would run webapp/config.py instead).
    app.config.from_pyfile(str(instance_path / "config.py"), silent=True)
    if config:
        app.config.update(config)
    check_config(app.config)
    # Flask refuses a session cookie signed longer ago than this: the sign-in sessions' own
    # absolute limit (services/identity/signin.py), instead of Flask's default of 31 days.
    app.config["PERMANENT_SESSION_LIFETIME"] = timedelta(hours=app.config["SESSION_MAX_HOURS"])
    app.config["SQLALCHEMY_ENGINE_OPTIONS"] = {
        **engine_options(app.config["SQLALCHEMY_DATABASE_URI"]),
        **app.config.get("SQLALCHEMY_ENGINE_OPTIONS", {}),
    }
    if not app.config.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = _secret_key(instance_path)

    if proxies := app.config["TRUSTED_PROXY_COUNT"]:
        # The client's address, scheme, host and port as the proxies in front saw them; only
        # the last `proxies` entries of each X-Forwarded-* header are believed, so a client
        # cannot forge its address by sending the header itself (docs/deploy.md).
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]
            app.wsgi_app, x_for=proxies, x_proto=proxies, x_host=proxies, x_port=proxies
        )
    app.session_interface = CookieSessions()
    app.json.sort_keys = False  # type: ignore[attr-defined]  # answers keep the documented field order

    db.init_app(app)
    migrate.init_app(app, db, directory=str(ROOT / "migrations"))
    app.teardown_request(end_read_connection)  # the request's read connection, if it took one
    login_manager.init_app(app)
    csrf.init_app(app)
    from .rest import rate_limit

    rate_limit.init_app(app)  # the limiter, and the API's limit (docs/api.md#limits)
    with app.app_context():
        private_sqlite_files(db.engine)  # before anything opens the database
        configure_engine(db.engine)
        # Log format and level, request ids and the access line, /metrics when configured.
        observability.init_app(app, db.engine)
        check_database_exists(db.engine)
        from . import replicas

        replicas.init_app(app, db.engine)  # DATABASE_REPLICA_URLS (docs/replicas.md)

    from . import (
        request_auth,  # noqa: F401  (registers the session loader)
        security,
        views,
    )
    from .cli import register_cli
    from .observability import metrics
    from .rest import bp as rest_bp
    from .rest.meta import healthz, readyz
    from .services.events import backlog

    app.register_blueprint(rest_bp)
    views.register(app)
    security.register(app)
    app.add_url_rule("/healthz", "healthz", healthz)  # liveness
    app.add_url_rule("/readyz", "readyz", readyz)  # readiness (docs/observe.md)
    register_error_handlers(app)
    register_cli(app)
    metrics.add_source(backlog.metrics)  # the event backlog, read at each scrape
    metrics.add_source(replicas.metrics)  # each replica's lag, when there are replicas
    return app


def freeze_startup_objects() -> None:
    """What a served process does once its app is built (webapp.wsgi, in each gunicorn worker;
    the in-process benches' clients too, to time what production runs): everything alive now
    (modules, the app, its templates' and SQLAlchemy's caches) lives as long as the process, so
    it is moved out of the cyclic collector's reach. A request that builds many small objects
    (10,000 companies on the many-company report, a thousand companies' month lists on the
    changes since a close) otherwise triggers full collections that walk all of it: about
    50 ms each on a quiet machine, the difference between a page's p95 and twice it
    (bench/README.md)."""
    gc.collect()  # what is garbage already is freed, not kept for good
    gc.freeze()


def check_startup(processes: int = 1, threads: int = 1) -> list[str]:
    """Build the app once and let it go: what gunicorn's master runs before it starts any
    worker (gunicorn.conf.py), so a bad setting or a missing database stops the server with one
    line (ConfigError, as create_app) instead of every worker failing alike. Returns the
    warnings for serving with `processes` worker processes of `threads` threads
    (config.serving_warnings)."""
    app = create_app()
    with app.app_context():
        db.engine.dispose()  # no connection of the master's may leak into forked workers
        from . import replicas

        if chooser := replicas.of(app):
            chooser.dispose()
    return serving_warnings(app.config, processes, threads)


ErrorHandler = Callable[[Any], ResponseReturnValue]


def register_error_handlers(app: Flask) -> None:
    """Each surface maps errors once: the API's JSON envelope is its blueprint's handlers
    (rest.errors), the pages' error page is the app's (views.errors). Flask asks a blueprint's
    handlers only about a request one of its routes matched, so an unknown address or a refused
    method under /rest/ reaches the app's handlers alone: these send it to the API's."""
    from .rest import errors as api_errors
    from .views import errors as page_errors

    for exc_class, page_handler in page_errors.HANDLERS.items():
        app.register_error_handler(
            exc_class, _by_surface(api_errors.HANDLERS[exc_class], page_handler)
        )


def _by_surface(api_handler: ErrorHandler, page_handler: ErrorHandler) -> ErrorHandler:
    from .rest.errors import is_api_request

    def handle(exc: Exception) -> ResponseReturnValue:
        return api_handler(exc) if is_api_request() else page_handler(exc)

    return handle
