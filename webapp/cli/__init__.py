"""The `flask --app app …` commands (docs/cli.md), one module per group, each calling the
same services as the pages and the API. A user mistake prints one line and exits 1."""

from __future__ import annotations

import click
from flask import Flask

from . import admin, backup, billing, demo, events, records
from .common import friendly


def register_cli(app: Flask) -> None:
    for group in (
        admin.companies_cli,
        admin.accounts_cli,
        admin.tokens_cli,
        demo.demo_cli,
        records.history_cli,
        records.ddis_cli,
        billing.billing_cli,
        events.webhooks_cli,
        events.events_cli,
    ):
        app.cli.add_command(group)
    backup.register(app)  # `db backup`, beside Flask-Migrate's `db` commands
    _friendly_migrate_commands(app)


def _friendly_migrate_commands(app: Flask) -> None:
    """Flask-Migrate's `db` commands (upgrade, check, current, ...) get the same treatment as
    ours: a database that cannot be reached (a mistyped host, port or role in DATABASE_URL) is
    one line and exit 1, not SQLAlchemy's traceback. The group is Flask-Migrate's one object,
    shared by every app of the process: each command is wrapped once."""
    group = app.cli.commands.get("db")
    if not isinstance(group, click.Group):
        return
    for command in group.commands.values():
        callback = command.callback
        if callback is not None and not getattr(callback, "_friendly", False):
            wrapped = friendly(callback)
            wrapped._friendly = True
            command.callback = wrapped
