"""`telephony-admin`, the console script: the commands of `flask --app app` (db, run, shell,
routes and the app's own groups, docs/cli.md) from any directory, without app.py."""

from __future__ import annotations

from flask import Flask
from flask.cli import FlaskGroup

from . import create_app
from .config import ConfigError, exit_with


def _create_app() -> Flask:
    try:
        return create_app()
    except ConfigError as error:  # one line naming the setting, exit 1, as `flask --app app`
        exit_with(error)


HELP = """telephony-admin: DDI administration and billing counts.

The commands of `flask --app app`, from any directory. Settings come from the environment
(docs/configuration.md). Without INSTANCE_PATH the instance folder (SQLite database, secret
key) is ./instance in a checkout, $XDG_DATA_HOME/telephony-admin (~/.local/share/...) for an
installed wheel.
"""


class Cli(FlaskGroup):
    """Flask's own command group, with the app it builds fixed: `--app` would be ignored, so it
    is not offered (`--env-file` and `--debug` stay)."""

    def __init__(self) -> None:
        super().__init__(create_app=_create_app, help=HELP)
        self.params = [p for p in self.params if p.name != "app"]


def main() -> None:
    """The console script's entry point (pyproject.toml, [project.scripts])."""
    Cli().main(prog_name="telephony-admin")
