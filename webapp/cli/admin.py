"""`flask companies …`, `flask accounts …`, `flask tokens …` (docs/cli.md)."""

from __future__ import annotations

import sys

import click

from ..services import companies
from ..services.identity import accounts, api_tokens, reset
from .common import Group, friendly, operator

companies_cli = Group("companies", help="Manage companies.")
accounts_cli = Group("accounts", help="Manage sign-in accounts and their grants.")
tokens_cli = Group("tokens", help="Manage API tokens.")


@companies_cli.command("create")
@click.argument("company_id")
@click.option("--name", required=True, help="Display name.")
@friendly
def companies_create(company_id: str, name: str) -> None:
    """Add a company; COMPANY_ID is the identifier used everywhere."""
    companies.create(operator(), company_id, name)
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
        operator(),
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
    accounts.disable(operator(), username)
    click.echo(f"Disabled account {username}.")


@accounts_cli.command("enable")
@click.argument("username")
@friendly
def accounts_enable(username: str) -> None:
    """Let a disabled account sign in again; its unrevoked API tokens work again."""
    accounts.enable(operator(), username)
    click.echo(f"Enabled account {username}.")


@accounts_cli.command("reset-mfa")
@click.argument("username")
@friendly
def accounts_reset_mfa(username: str) -> None:
    """Remove an account's second factors (authenticator app, passkeys, recovery codes) and end
    its sessions, for someone who lost them; it then signs in with its password alone."""
    removed = reset.reset_factors(operator(), username)
    click.echo(f"Reset the second factors of {username} (removed: {removed}); its sessions ended.")


@tokens_cli.command("create")
@click.argument("username")
@click.option("--name", "label", default="", help="A label to recognise the token by.")
@friendly
def tokens_create(username: str, label: str) -> None:
    """Create an API token; it is printed alone on the last line and never shown again."""
    raw = api_tokens.create(operator(), username, label)
    click.echo(f"Token for {username} (shown once; only a hash is kept):")
    click.echo(raw)
