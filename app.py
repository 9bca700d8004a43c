"""Entry point for `flask --app app` and `gunicorn 'app:app'` in a checkout: the same app as
webapp.wsgi, the installed package's target (a bad setting: one line naming it, exit 1)."""

from webapp.wsgi import app

__all__ = ["app"]
