"""`flask --app app ARGS…` for the tests, two ways. In this process (`run_in_process`, what the
`flask` fixture does): Click's test runner drives the same command line `flask` has, on a fresh
app built as app.py builds it, from the environment; about 0.1 s instead of the 1.5 s a
Python process takes to start and import the app, over a hundred calls a pass. As a real
process (`run_process`, the `flask_process` fixture): where the process itself is what a test
checks (the exit status and stderr of the actual executable, two processes at once)."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alembic.config import Config as AlembicConfig
from click.testing import CliRunner
from flask import Flask
from flask.cli import FlaskGroup

from webapp import create_app
from webapp.config import ConfigError, exit_with
from webapp.extensions import db, limiter

ROOT = Path(__file__).resolve().parent.parent
FLASK = [sys.executable, "-m", "flask", "--app", "app"]


@dataclass
class Ran:
    """What the tests read of a subprocess.CompletedProcess, for a command run in process."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def run_process(
    args: Sequence[str], env: Mapping[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess:
    """`flask --app app ARGS…` as a subprocess from the checkout's top directory, with this
    process's environment plus `env`."""
    return subprocess.run(
        [*FLASK, *args],
        cwd=ROOT,
        env={**os.environ, **env},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def run_in_process(args: Sequence[str], env: Mapping[str, str], stdin: str | None = None) -> Ran:
    """`flask --app app ARGS…` run by Click in this process, as the subprocess would run it:
    Flask's own command group (FlaskGroup, what the `flask` executable is) loading a new app
    built with this process's environment plus `env`, inside the invocation (so its
    start-up output and a bad setting's one line land in the result, exit status 1, as
    app.py does); stdin, stdout and stderr are the runner's. An exception the command lets
    out is not swallowed: as Python would, its traceback ends stderr and the status is 1.
    What building the app changes in the process (the environment, the working directory,
    logging's level and format, the rate limiter) is put back afterwards, and the new app's
    connections are closed."""
    made: list[Flask] = []

    def load() -> Flask:
        try:
            made.append(create_app())
        except ConfigError as error:  # app.py's (webapp.wsgi) handling of a bad setting
            exit_with(error)
        return made[-1]

    # No .env files: none is read in a test run (python-dotenv is not even installed), and
    # reading them would change this process's environment.
    command_line = FlaskGroup(create_app=load, load_dotenv=False)
    try:
        with process_state(), python_warnings(), alembic_stdout():
            result = CliRunner().invoke(
                command_line, list(args), input=stdin, env=dict(env), prog_name="python -m flask"
            )
    finally:
        for made_app in made:
            with made_app.app_context():
                db.session.remove()
                db.engine.dispose()
    stderr, status = result.stderr, result.exit_code
    if result.exc_info is not None and not isinstance(result.exc_info[1], SystemExit):
        # The runner keeps an uncaught exception aside; a process would print it and exit 1.
        stderr += "".join(traceback.format_exception(*result.exc_info))
        status = 1
    return Ran([*FLASK, *args], status, result.stdout, stderr)


class _CurrentStdout:
    """sys.stdout as it is when written to."""

    def __getattr__(self, name: str) -> Any:
        return getattr(sys.stdout, name)


@contextlib.contextmanager
def alembic_stdout() -> Iterator[None]:
    """Alembic's Config prints (`db check`'s verdict, `db current`) to the sys.stdout of
    Alembic's import, a default argument: in a process, stdout; here, the runner's."""
    init = AlembicConfig.__init__
    defaults = init.__defaults__ or ()
    names = init.__code__.co_varnames[: init.__code__.co_argcount]
    index = names.index("stdout") - (len(names) - len(defaults))
    init.__defaults__ = (*defaults[:index], _CurrentStdout(), *defaults[index + 1 :])
    try:
        yield
    finally:
        init.__defaults__ = defaults


@contextlib.contextmanager
def python_warnings() -> Iterator[None]:
    """Warnings as a Python process started without -W shows them: its default filters, each
    printed on stderr (the runner's), instead of the suite's (pytest makes them errors, or
    records them for its summary). Alembic's warnings that SQLite's expression indexes cannot
    be compared are on stderr, not a failed `db check`."""
    with warnings.catch_warnings():
        warnings.resetwarnings()
        for category in (ResourceWarning, ImportWarning, PendingDeprecationWarning):
            warnings.filterwarnings("ignore", category=category)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")

        def show(message, category, filename, lineno, file=None, line=None) -> None:
            text = warnings.formatwarning(message, category, filename, lineno, line)
            (file or sys.stderr).write(text)

        warnings.showwarning = show
        yield


@contextlib.contextmanager
def process_state() -> Iterator[None]:
    """Put back, on the way out, the process-wide state that building an app and running a
    command change: environment variables (FlaskGroup sets FLASK_RUN_FROM_CLI), the working
    directory (the subprocess ran from the checkout's top), the root logger's level, handlers
    and the app handler's format (create_app configures them from LOG_LEVEL and LOG_FORMAT),
    the `alembic` logger's level (migrations/env.py sets it), and the shared rate limiter
    (create_app re-initialises it for the new app)."""
    environ = dict(os.environ)
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    formats = {handler: handler.formatter for handler in handlers}
    alembic = logging.getLogger("alembic")
    alembic_level = alembic.level
    limiter_state = dict(vars(limiter))
    try:
        with contextlib.chdir(ROOT):
            yield
    finally:
        vars(limiter).clear()
        vars(limiter).update(limiter_state)
        alembic.setLevel(alembic_level)
        root.handlers[:] = handlers
        for handler, format_ in formats.items():
            handler.setFormatter(format_)
        root.setLevel(level)
        if os.environ != environ:
            os.environ.clear()
            os.environ.update(environ)
