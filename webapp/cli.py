"""The `flask --app app …` commands (docs/cli.md). A user mistake prints one line, exits 1."""

from __future__ import annotations

import functools
import getpass
import sys
from pathlib import Path

import click
from flask import Flask
from flask.cli import AppGroup
from sqlalchemy.exc import SQLAlchemyError

from .access import Principal
from .errors import ServiceError, is_outage
from .services import companies
from .services.identity import accounts, api_tokens


def _operator() -> Principal:
    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry, as in some containers
        name = "unknown"
    return Principal.cli(f"cli:{name}")


def friendly(func):
    """Turn domain and database errors into one clear line and exit status 1, no traceback."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
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


companies_cli = Group("companies", help="Manage companies.")
accounts_cli = Group("accounts", help="Manage sign-in accounts and their grants.")
tokens_cli = Group("tokens", help="Manage API tokens.")
demo_cli = Group("demo", help="Demo data.")


@companies_cli.command("create")
@click.argument("company_id")
@click.option("--name", required=True, help="Display name.")
@friendly
def companies_create(company_id: str, name: str) -> None:
    """Add a company; COMPANY_ID is the identifier used everywhere."""
    companies.create(_operator(), company_id, name)
    click.echo(f"Created company {company_id}.")


@accounts_cli.command("create")
@click.argument("username")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@click.option("--system-admin", is_flag=True, help="Grant System-Admin.")
@click.option("--admin-of", multiple=True, metavar="ID", help="Company-Admin of ID (repeatable).")
@click.option("--billing-summary", is_flag=True, help="Billing Call-Summary: every company.")
@click.option("--reporting-for", multiple=True, metavar="ID", help="Call Reporting for ID.")
@friendly
def accounts_create(
    username, password_stdin, system_admin, admin_of, billing_summary, reporting_for
):
    """Add a sign-in account. Without --password-stdin a password is generated and printed once."""
    password = None
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    new = accounts.create(
        _operator(),
        username,
        password,
        system_admin=system_admin,
        admin_of=admin_of,
        billing_summary=billing_summary,
        reporting_for=reporting_for,
    )
    click.echo(f"Created account {username}.")
    if new.password is not None:
        click.echo(f"Password (shown once): {new.password}")


@accounts_cli.command("disable")
@click.argument("username")
@friendly
def accounts_disable(username: str) -> None:
    """Stop an account: its sessions and tokens are refused from the next request on."""
    accounts.disable(_operator(), username)
    click.echo(f"Disabled account {username}.")


@accounts_cli.command("enable")
@click.argument("username")
@friendly
def accounts_enable(username: str) -> None:
    """Let a disabled account sign in again; its unrevoked API tokens work again."""
    accounts.enable(_operator(), username)
    click.echo(f"Enabled account {username}.")


@tokens_cli.command("create")
@click.argument("username")
@click.option("--name", "label", default="", help="A label to recognise the token by.")
@friendly
def tokens_create(username: str, label: str) -> None:
    """Create an API token; it is printed alone on the last line and never shown again."""
    raw = api_tokens.create(_operator(), username, label)
    click.echo(f"Token for {username} (shown once; only a hash is kept):")
    click.echo(raw)


@demo_cli.command("seed")
@friendly
def demo_seed() -> None:
    """Load demo companies, accounts, DDIs, phone users and three months of history (idempotent)."""
    from .demo import seed

    seeded, logins = seed(_operator())
    click.echo("Loaded the demo data." if seeded else "Demo data already present; nothing loaded.")
    if logins:
        click.echo("Demo sign-in accounts (username / password / grants):")
        for line in logins:
            click.echo("  " + line)


history_cli = Group("history", help="History intervals.")


@history_cli.command("import")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@friendly
def history_import(path: Path) -> None:
    """Backfill closed intervals from a CSV: kind,company,key,start,end (checked whole first)."""
    from .services.imports.history_import import import_csv

    try:
        content = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise click.ClickException(f"{path}: no such file.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"{path}: cannot be read as UTF-8 text ({exc}).") from None

    def progress(rows):
        if not sys.stderr.isatty():  # a script wants one line on error, not a bar's remains
            yield from rows
            return
        with click.progressbar(rows, label="Checking and importing", file=sys.stderr) as bar:
            yield from bar

    result = import_csv(_operator(), content, source=path.name, progress=progress)
    click.echo(
        f"Imported {result.written} intervals from {path.name} ({result.skipped} already recorded)."
    )
    for month in result.closed_months:
        click.echo(
            f"Warning: {month} is closed; its reports keep the figures stored at its close and "
            f"the change shows as an adjustment (flask billing status).",
            err=True,
        )


@history_cli.command("rollup")
@friendly
def history_rollup() -> None:
    """Rebuild the reports' daily rollup from the history, in REPORT_TIMEZONE."""
    from .services.billing import rollups

    counts = rollups.build(_operator())
    rows = ", ".join(f"{n} {kind} day rows" for kind, n in counts.items())
    click.echo(f"Rebuilt the report rollup: {rows}.")


ddis_cli = Group("ddis", help="DDIs in bulk.")


@ddis_cli.command("import")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--dry-run", is_flag=True, help="Check the file and count; write nothing.")
@friendly
def ddis_import(path: Path, dry_run: bool) -> None:
    """Bring DDIs to the states a CSV lists: dialcode,number,virt_exten,company (checked whole
    first; one transaction)."""
    from .services.imports import ddi_import

    if not path.is_file():
        raise click.ClickException(f"{path}: no such file.")
    source = ddi_import.path_source(str(path))
    try:
        if dry_run:
            click.echo("dry run: " + ddi_import.plan(_operator(), source).summary())
        else:
            click.echo(ddi_import.apply(_operator(), source).summary())
    except OSError as exc:
        raise click.ClickException(f"{path}: cannot be read ({exc.strerror or exc}).") from None


billing_cli = Group("billing", help="Month close: freeze what was invoiced.")


@billing_cli.command("close")
@click.argument("month", metavar="YYYY-MM")
@friendly
def billing_close(month: str) -> None:
    """Close an ended month: store both reports, every company, as they are now."""
    from .services.billing import month_close

    close = month_close.close_month(_operator(), month_close.parse_label(month))
    click.echo(f"Closed {close.label}: version {close.version}, figures in {close.timezone}.")


@billing_cli.command("reopen")
@click.argument("month", metavar="YYYY-MM")
@click.option("--reason", required=True, help="Why the month is reopened (1 to 500 characters).")
@friendly
def billing_reopen(month: str, reason: str) -> None:
    """Reopen a closed month: its reports compute from the history again."""
    from .services.billing import month_close

    close = month_close.reopen_month(_operator(), month_close.parse_label(month), reason)
    click.echo(f"Reopened {close.label} (its close was version {close.version}).")


@billing_cli.command("status")
@friendly
def billing_status() -> None:
    """One line per closed month: version, when and by whom, companies changed since."""
    from .services.billing import closed_figures, month_close

    found = month_close.status()
    if not found:
        click.echo("No month is closed.")
    for item in found:
        close = item.close
        when = closed_figures.timestamp(close.closed_at)
        click.echo(
            f"{close.label}  version {close.version}  closed {when} by {close.closed_by}  "
            f"{item.changed} companies changed since"
        )


def register_cli(app: Flask) -> None:
    for group in (
        companies_cli,
        accounts_cli,
        tokens_cli,
        demo_cli,
        history_cli,
        ddis_cli,
        billing_cli,
    ):
        app.cli.add_command(group)
    from .events_cli import events_cli, webhooks_cli

    app.cli.add_command(webhooks_cli)
    app.cli.add_command(events_cli)
    from . import backup

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
