"""`flask billing …`: month close (docs/month-close.md)."""

from __future__ import annotations

import click

from ..wording import counted
from .common import Group, friendly, operator

billing_cli = Group("billing", help="Month close: freeze what was invoiced.")


@billing_cli.command("close")
@click.argument("month", metavar="YYYY-MM")
@friendly
def billing_close(month: str) -> None:
    """Close an ended month: store both reports, every company, as they are now."""
    from ..services.billing import month_close

    close = month_close.close_month(operator(), month_close.parse_label(month))
    click.echo(f"Closed {close.label}: version {close.version}, figures in {close.timezone}.")


@billing_cli.command("reopen")
@click.argument("month", metavar="YYYY-MM")
@click.option("--reason", required=True, help="Why the month is reopened (1 to 500 characters).")
@friendly
def billing_reopen(month: str, reason: str) -> None:
    """Reopen a closed month: its reports compute from the history again."""
    from ..services.billing import month_close

    close = month_close.reopen_month(operator(), month_close.parse_label(month), reason)
    click.echo(f"Reopened {close.label} (its close was version {close.version}).")


@billing_cli.command("status")
@friendly
def billing_status() -> None:
    """One line per closed month: version, when and by whom, companies changed since."""
    from ..services.billing import closed_figures, month_close

    found = month_close.status()
    if not found:
        click.echo("No month is closed.")
    for item in found:
        close = item.close
        when = closed_figures.timestamp(close.closed_at)
        click.echo(
            f"{close.label}  version {close.version}  closed {when} by {close.closed_by}  "
            f"{counted(item.changed, 'company', 'companies')} changed since"
        )
