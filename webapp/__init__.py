"""Application factory: `create_app(config)` builds a configured app; app.py calls it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flask import Flask
from flask.sessions import SecureCookieSessionInterface
from flask.typing import ResponseReturnValue

from .config import _secret_key, default_config, engine_options
from .database import configure_engine
from .extensions import csrf, db, limiter, login_manager, migrate

ROOT = Path(__file__).resolve().parent.parent


class CookieSessions(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, except that a request without the cookie (every API
    call with a Bearer token) gets its new empty session without first building the signing
    serializer, which Flask does on every request; what it answers is the same."""

    def open_session(self, app, request):
        if app.secret_key and not request.cookies.get(self.get_cookie_name(app)):
            return self.session_class()
        return super().open_session(app, request)


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """Build the app: defaults, then instance/config.py, then `config` (tests pass a dict)."""
    instance_path = Path(os.environ.get("INSTANCE_PATH") or ROOT / "instance")
    app = Flask(
        __name__,
        instance_path=str(instance_path),
        template_folder=str(ROOT / "templates"),
        static_folder=str(ROOT / "static"),
    )
    app.config.update(default_config(instance_path))
    app.config.from_pyfile("config.py", silent=True)
    if config:
        app.config.update(config)
    app.config["SQLALCHEMY_ENGINE_OPTIONS"] = {
        **engine_options(app.config["SQLALCHEMY_DATABASE_URI"]),
        **app.config.get("SQLALCHEMY_ENGINE_OPTIONS", {}),
    }
    if not app.config.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = _secret_key(instance_path)

    app.session_interface = CookieSessions()
    app.json.sort_keys = False  # type: ignore[attr-defined]  # answers keep the documented field order

    db.init_app(app)
    migrate.init_app(app, db, directory=str(ROOT / "migrations"))
    login_manager.init_app(app)
    csrf.init_app(app)
    limiter.init_app(app)
    with app.app_context():
        configure_engine(db.engine)

    from . import (
        request_auth,  # noqa: F401  (registers the session loader)
        security,
        views,
    )
    from .cli import register_cli
    from .rest import bp as rest_bp
    from .rest.meta import healthz

    app.register_blueprint(rest_bp)
    views.register(app)
    security.register(app)
    app.add_url_rule("/healthz", "healthz", healthz)
    register_error_handlers(app)
    register_cli(app)
    return app


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
