"""`flask webhooks …` and `flask events …` (docs/cli.md, docs/events.md)."""

from __future__ import annotations

import click
from flask import current_app

from ..extensions import db
from ..models import WebhookAttempt
from ..wording import counted
from .common import Group, friendly, operator

webhooks_cli = Group("webhooks", help="Manage the webhooks the change events go to.")
events_cli = Group("events", help="Deliver and prune the change events.")


@webhooks_cli.command("create")
@click.argument("url")
@click.option("--event", "types", multiple=True, help="An event type to send (repeatable).")
@click.option("--company", "companies", multiple=True, help="A company's events (repeatable).")
@friendly
def webhooks_create(url: str, types: tuple[str, ...], companies: tuple[str, ...]) -> None:
    """Register a webhook; its signing secret is printed alone on the last line, once."""
    from ..services.events import webhooks

    hook, secret = webhooks.create(operator(), url, types, companies)
    click.echo(f"Created webhook {hook.id} for {hook.url}. Signing secret (shown once):")
    click.echo(secret)


@webhooks_cli.command("list")
@friendly
def webhooks_list() -> None:
    """One line per webhook: id, URL, what it receives, how far its delivery is."""
    from ..services.events import webhooks

    hooks = webhooks.listed(operator())
    if not hooks:
        click.echo("No webhook is registered.")
    for hook in hooks:
        state = webhooks.state(hook, recent=1)
        events = hook.event_types or "all events"  # stored as the comma list shown
        companies = hook.companies or "all companies"
        where = f"delivered to {hook.cursor} of {state.newest}"
        if state.retrying:
            failures = counted(hook.head_attempts, "failed attempt")
            where += f", retrying event {hook.head_event} ({failures})"
        if state.failed:
            where += f", {len(state.failed)} failed"
        if state.recent:
            where += f", last answer: {answered(state.recent[0])}"
        if hook.paused_at is not None:
            where += ", paused"
        click.echo(f"{hook.id}  {hook.url}  {events}  {companies}  {where}")


def answered(attempt: WebhookAttempt) -> str:
    """An attempt's answer as the webhook's page shows it: "HTTP 503", else the category of
    failure stored ("connection refused", "timeout", "address not allowed", …)."""
    if attempt.status is not None:
        return f"HTTP {attempt.status}"
    return attempt.error or "no answer"


@webhooks_cli.command("delete")
@click.argument("webhook_id", type=int)
@friendly
def webhooks_delete(webhook_id: int) -> None:
    """Delete a webhook: nothing more is sent to it."""
    from ..services.events import webhooks

    webhooks.delete_webhook(operator(), webhook_id)
    click.echo(f"Deleted webhook {webhook_id}.")


@webhooks_cli.command("rotate-secret")
@click.argument("webhook_id", type=int)
@friendly
def webhooks_rotate_secret(webhook_id: int) -> None:
    """Give a webhook a new signing secret, printed alone on the last line, once; the old one
    also signs for 24 h."""
    from ..services.events import webhooks

    hook, secret = webhooks.rotate_secret(operator(), webhook_id)
    if hook.previous_secret_until is not None:
        until = hook.previous_secret_until.strftime("%Y-%m-%d %H:%M:%S UTC")
        also = f"the previous one also signs until {until}"
    else:
        also = "the previous one could not be decrypted and is dropped"
    click.echo(f"Rotated the secret of webhook {hook.id}; {also}. New secret (shown once):")
    click.echo(secret)


@webhooks_cli.command("pause")
@click.argument("webhook_id", type=int)
@friendly
def webhooks_pause(webhook_id: int) -> None:
    """Pause a webhook: nothing is sent to it until it is resumed."""
    from ..services.events import webhooks

    webhooks.set_paused(operator(), webhook_id, True)
    click.echo(f"Paused webhook {webhook_id}: its events wait until it is resumed.")


@webhooks_cli.command("resume")
@click.argument("webhook_id", type=int)
@friendly
def webhooks_resume(webhook_id: int) -> None:
    """Resume a paused webhook: the events recorded meanwhile go out, in order."""
    from ..services.events import webhooks

    webhooks.set_paused(operator(), webhook_id, False)
    click.echo(f"Resumed webhook {webhook_id}.")


@webhooks_cli.command("rekey")
@friendly
def webhooks_rekey() -> None:
    """Encrypt every webhook secret and authenticator-app secret again with the first key
    (WEBHOOK_SECRET_KEYS)."""
    from ..services.events import webhooks
    from ..services.identity import factors

    done, unreadable = webhooks.rekey(operator())
    apps, locked_out = factors.rekey(operator())
    click.echo(
        f"Re-encrypted {counted(done, 'webhook secret')} and "
        f"{counted(apps, 'authenticator-app secret')} with the first key."
    )
    problems = []
    if unreadable:
        listed = ", ".join(str(i) for i in unreadable)
        which = "webhook" if len(unreadable) == 1 else "webhooks"
        them = "it" if len(unreadable) == 1 else "them"
        problems.append(
            f"No configured key decrypts the secret of {which} {listed}: rotate {them} "
            "(flask webhooks rotate-secret ID)."
        )
    if locked_out:
        problems.append(
            "No configured key decrypts the authenticator-app secret of "
            f"{', '.join(locked_out)}: reset their second factors "
            "(flask accounts reset-mfa USERNAME)."
        )
    if problems:
        raise click.ClickException(" ".join(problems))


@events_cli.command("deliver")
@click.option("--once", is_flag=True, help="Deliver what is due now, then exit.")
@click.option(
    "--concurrency",
    type=click.IntRange(1, 12),  # delivery.MAX_CONCURRENCY: the connection pool's size
    default=8,  # delivery.DEFAULT_CONCURRENCY
    show_default=True,
    help="Webhooks delivered to at once, each on a thread of its own (1 to 12).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=0,
    help="Serve the worker's metrics (Prometheus) on this port (default 0: not served).",
)
@click.option(
    "--metrics-address",
    default="127.0.0.1",
    show_default=True,
    help="The address --metrics-port listens on.",
)
@friendly
def events_deliver(once: bool, concurrency: int, metrics_port: int, metrics_address: str) -> None:
    """POST the change events to the webhooks, signed, in order, until stopped (SIGTERM)."""
    from ..services.events import delivery

    # Its log lines are the app's (LOG_FORMAT, LOG_LEVEL: create_app set them up).
    if metrics_port:
        from prometheus_client import start_http_server

        try:
            start_http_server(metrics_port, addr=metrics_address)
        except OSError as exc:
            raise click.ClickException(
                f"--metrics-port: cannot listen on {metrics_address}:{metrics_port}: "
                f"{exc.strerror or exc}"
            ) from None
    worker = delivery.Worker(db.engine, concurrency=concurrency)
    worker.run(once=once)
    if once:
        click.echo(f"Delivered {worker.delivered} of {counted(worker.attempts, 'attempt')}.")


@events_cli.command("prune")
@click.option("--days", default=None, help="Keep this many days (default EVENTS_RETENTION_DAYS).")
@friendly
def events_prune(days: str | None) -> None:
    """Delete the change events, and webhook attempts, older than the retention (and the
    webhook secrets rotated out more than 24 h ago)."""
    from ..services.events import journal, webhooks

    kept = journal.parse_retention(days or current_app.config["EVENTS_RETENTION_DAYS"])
    deleted = journal.prune(kept)
    webhooks.drop_expired_secrets()  # rotated out more than 24 h ago: off the disk
    click.echo(f"Deleted {counted(deleted, 'event')} older than {counted(kept, 'day')}.")
