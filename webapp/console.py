"""`telephony-admin`, the console script: the commands of `flask --app app` (db, run, shell,
routes and the app's own groups, docs/cli.md) from any directory, without app.py."""

from __future__ import annotations

import importlib.metadata
import importlib.util

import click
from flask import Flask
from flask.cli import FlaskGroup

from . import APP_NAME, create_app
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


def version() -> str:
    """The installed package's name and version, from its metadata: `telephony-admin 0.1.0`."""
    try:
        return f"{APP_NAME} {importlib.metadata.version(APP_NAME)}"
    except importlib.metadata.PackageNotFoundError:  # a checkout never installed: no metadata
        return f"{APP_NAME} (not installed: no version)"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version())
        ctx.exit()


VERSION_OPTION = click.Option(
    ["--version"],
    help="Show the app's name and version.",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
)

# Flask's `-e/--env-file` (and its reading of .env and .flaskenv) needs python-dotenv, which
# is not a dependency: without it the option could only fail, so it is not offered.
DOTENV = importlib.util.find_spec("dotenv") is not None


class Cli(FlaskGroup):
    """Flask's own command group, with the app it builds fixed: `--app` would be ignored, so it
    is not offered; `--version` is the app's (Flask's names Python, Flask and Werkzeug);
    `-e/--env-file` only where python-dotenv is installed (DOTENV); `--debug` stays."""

    def __init__(self) -> None:
        super().__init__(
            create_app=_create_app, help=HELP, add_version_option=False, load_dotenv=DOTENV
        )
        dropped = {"app"} if DOTENV else {"app", "env_file"}
        self.params = [p for p in self.params if p.name not in dropped] + [VERSION_OPTION]


def main() -> None:
    """The console script's entry point (pyproject.toml, [project.scripts])."""
    Cli().main(prog_name="telephony-admin")
