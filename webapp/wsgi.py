"""The WSGI target of an installed package: `gunicorn webapp.wsgi:app` (no app.py needed, from
any directory). app.py, the checkout's target for `flask --app app`, serves the same app."""

from . import create_app, freeze_startup_objects
from .config import ConfigError, exit_with

try:
    app = create_app()
except ConfigError as error:  # a bad setting: one line naming it, exit 1 (docs/configuration.md)
    exit_with(error)

# Under gunicorn this runs in each worker (no --preload): see freeze_startup_objects.
freeze_startup_objects()
