"""The `flask --app app …` commands (docs/cli.md), one module per group, each calling the
same services as the pages and the API. A user mistake prints one line and exits 1."""

from __future__ import annotations

import functools
import logging

import click
from flask import Flask

from . import admin, backup, billing, demo, events, numbers, records
from .common import friendly


def register_cli(app: Flask) -> None:
    for group in (
        admin.companies_cli,
        admin.accounts_cli,
        admin.tokens_cli,
        demo.demo_cli,
        records.history_cli,
        records.ddis_cli,
        numbers.numbers_cli,
        billing.billing_cli,
        events.webhooks_cli,
        events.events_cli,
    ):
        app.cli.add_command(group)
    backup.register(app)  # `db backup`, beside Flask-Migrate's `db` commands
    _friendly_migrate_commands(app)
    _quiet_db_check(app)


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


def _quiet_db_check(app: Flask) -> None:
    """`db check` prints its verdict alone: Alembic's INFO lines (the database it connected
    to, what it compared: some twenty) are left out unless asked for with `--verbose` or
    LOG_LEVEL=DEBUG. Its warnings and the verdict (stdout, or one error line) stay. Like
    _friendly_migrate_commands, once per process: the command is Flask-Migrate's one object."""
    group = app.cli.commands.get("db")
    check = group.commands.get("check") if isinstance(group, click.Group) else None
    if check is None or check.callback is None or getattr(check.callback, "_quiet", False):
        return
    check.params.append(
        click.Option(
            ["-v", "--verbose"],
            is_flag=True,
            help="Also Alembic's INFO lines: what it compared (so does LOG_LEVEL=DEBUG).",
        )
    )
    callback = check.callback

    @functools.wraps(callback)
    def quiet(*args, verbose: bool = False, **kwargs):
        alembic = logging.getLogger("alembic")
        if verbose or logging.getLogger().isEnabledFor(logging.DEBUG):
            return callback(*args, **kwargs)
        previous = alembic.level
        alembic.setLevel(logging.WARNING)  # migrations/env.py keeps a level set before it
        try:
            return callback(*args, **kwargs)
        finally:
            alembic.setLevel(previous)

    quiet._quiet = True  # type: ignore[attr-defined]
    check.callback = quiet
