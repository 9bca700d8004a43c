"""gunicorn's settings for telephony-admin: `gunicorn -c gunicorn.conf.py` (gunicorn also reads
this file by itself when started from this directory). The settings live in the package,
webapp/gunicorn_conf.py, so that an installed wheel has them too
(`gunicorn -c python:webapp.gunicorn_conf`); docs/deploy.md explains each."""

from webapp.gunicorn_conf import *  # noqa: F403
