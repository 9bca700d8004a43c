"""Entry point for `flask --app app` and `gunicorn 'app:app'`."""

from webapp import create_app

app = create_app()
