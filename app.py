"""Entry point for `flask --app app` and `gunicorn 'app:app'`."""

import gc

from webapp import create_app

app = create_app()

# Everything alive now (modules, the app, its templates' and SQLAlchemy's caches) lives as long
# as the process: move it out of the cyclic collector's reach. A page that builds many small
# objects (10,000 companies on the many-company report) otherwise triggers full collections
# that walk all of it, about 50 ms each: the difference between the page budget's p95 and
# twice it (README, Benchmarks). Under gunicorn this runs in each worker (no --preload).
gc.freeze()
