"""The WSGI target of an installed package: `gunicorn webapp.wsgi:app` (no app.py needed, from
any directory). app.py, the checkout's target for `flask --app app`, serves the same app."""

import gc

from . import create_app
from .config import ConfigError, exit_with

try:
    app = create_app()
except ConfigError as error:  # a bad setting: one line naming it, exit 1 (docs/configuration.md)
    exit_with(error)

# Everything alive now (modules, the app, its templates' and SQLAlchemy's caches) lives as long
# as the process: move it out of the cyclic collector's reach. A page that builds many small
# objects (10,000 companies on the many-company report) otherwise triggers full collections
# that walk all of it, about 50 ms each: the difference between the page budget's p95 and
# twice it (bench/README.md). Under gunicorn this runs in each worker (no --preload).
gc.freeze()
