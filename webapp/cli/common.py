"""What every command shares: the acting operator, one line and exit 1 for any mistake."""

from __future__ import annotations

import functools
import getpass

import click
from flask.cli import AppGroup
from sqlalchemy.exc import SQLAlchemyError

from ..access import Principal
from ..errors import FileRejected, ServiceError, is_outage


def operator() -> Principal:
    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry, as in some containers
        name = "unknown"
    return Principal.cli(f"cli:{name}")


def friendly(func):
    """Turn domain and database errors into one clear line and exit status 1, no traceback (a
    rejected file: that line, then one line per problem)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except FileRejected as exc:
            # Every problem of a rejected file, one line each after the message, so the file
            # is fixed in one go; one problem is the message itself ('line 7: why; ...').
            listed = "".join(f"\n{problem}" for problem in exc.problems) if exc.total > 1 else ""
            raise click.ClickException(exc.message + listed) from None
        except ServiceError as exc:
            # Fields the message already names (an import's 'line 7: why') are not repeated.
            extra = [f"{k}: {v}" for k, v in exc.fields.items() if f"{k}: {v}" not in exc.message]
            fields = "; ".join(extra)
            raise click.ClickException(exc.message + (f" ({fields})" if fields else "")) from None
        except SQLAlchemyError as exc:
            cause = str(getattr(exc, "orig", None) or exc).strip()
            if "no such table" in cause or ("relation" in cause and "does not exist" in cause):
                raise click.ClickException(
                    "The database has no schema yet; run 'flask --app app db upgrade' first."
                ) from None
            first_line = cause.splitlines()[0] if cause else type(exc).__name__
            what = "is unavailable" if is_outage(exc) else "refused the operation"
            raise click.ClickException(f"The database {what}: {first_line}") from None

    return wrapper


def _one_line(exc: click.UsageError, ctx: click.Context) -> click.ClickException:
    return click.ClickException(f"{exc.format_message()} Try '{ctx.command_path} --help'.")


class Command(click.Command):
    """A usage mistake is one line on stderr and exit 1, like every other mistake (Click would
    print a usage block and exit 2)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise _one_line(exc, ctx) from None


class Group(AppGroup):
    command_class = Command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise _one_line(exc, ctx) from None

    def resolve_command(self, ctx: click.Context, args: list[str]):
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            raise _one_line(exc, ctx) from None
