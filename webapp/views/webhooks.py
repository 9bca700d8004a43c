"""Webhook pages (System-Admin): /admin/webhooks, a webhook's page, redeliver, rotate the
signing secret, delete (docs/pages.md#webhooks, docs/events.md#webhooks).

Every rule (who may, what is a valid URL, event type or company, what may be redelivered) is
services/events/webhooks.py's; these views parse the forms, call it and render. The signing secret
is shown once, in the answer to the POST that created the webhook or rotated its secret (never in
a flash cookie, never on a later page), marked not to be cached.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from flask import Blueprint, flash, redirect, render_template, url_for
from flask.typing import ResponseReturnValue
from flask_login import login_required
from flask_wtf import FlaskForm
from wtforms import SelectMultipleField, StringField
from wtforms.fields.choices import SelectChoice  # type: ignore[attr-defined]
from wtforms.widgets import CheckboxInput, ListWidget

from ..access import Principal
from ..database import utcnow
from ..errors import ServiceError
from ..models import Webhook, WebhookAttempt
from ..security import NO_STORE
from ..services.events import webhooks
from ..services.events.journal import TYPES
from .common import principal
from .forms import FORM_STATUSES, ConfirmForm

bp = Blueprint("webhooks", __name__, url_prefix="/admin/webhooks")

WHAT = "manage webhooks"
SEPARATORS = re.compile(r"[\s,;]+")
OUTCOMES = {"delivered": "delivered", "retry": "will retry", "failed": "failed (given up)"}


class WebhookForm(FlaskForm):
    url = StringField(
        "URL",
        description="Where the events are POSTed: an http:// or https:// address.",
        render_kw={
            "maxlength": webhooks.MAX_URL,
            "autocomplete": "off",
            "spellcheck": "false",
            "inputmode": "url",
        },
    )
    event = SelectMultipleField(
        "Events",
        choices=[SelectChoice(t) for t in TYPES],
        validate_choice=False,  # the service says which type is unknown
        widget=ListWidget(prefix_label=False),
        option_widget=CheckboxInput(),
        description="None ticked: every event type.",
    )
    company = StringField(
        "Companies",
        description="Company identifiers, separated by commas or spaces. Empty: every company.",
        render_kw={"autocomplete": "off", "spellcheck": "false"},
    )

    def companies(self) -> list[str]:
        """The identifiers typed, in order, as typed (the service says what is wrong)."""
        return [c for c in SEPARATORS.split(self.company.data or "") if c]


def when(moment: datetime | None) -> str:
    """A stored instant as these pages show it: 2026-11-22 10:00:05 UTC."""
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else ""


@dataclass(frozen=True)
class Row:
    """A webhook as the pages show it: its filters, how far its delivery is, what failed."""

    hook: Webhook
    events: list[str]  # empty: every type
    companies: list[str]  # empty: every company
    newest: int
    behind: int  # events recorded after its cursor (of every type and company)
    retrying: bool
    failed: list[WebhookAttempt]  # one per event (its newest failed attempt), newest first
    queued: list[int]
    recent: list[WebhookAttempt]


def row(hook: Webhook, recent: int = webhooks.RECENT_ATTEMPTS) -> Row:
    state = webhooks.state(hook, recent=recent)  # failed: one attempt per event
    return Row(
        hook=hook,
        events=webhooks.named(hook.event_types),
        companies=webhooks.named(hook.companies),
        newest=state.newest,
        behind=max(state.newest - hook.cursor, 0),
        retrying=state.retrying,
        failed=state.failed,
        queued=state.queued,
        recent=state.recent,
    )


def _form_error(form: WebhookForm, exc: ServiceError) -> int:
    """The service's sentence beside the field it names (url, event, company), else above
    the form; the status to answer with. Any status but 400 and 409 is the error page."""
    if exc.status not in FORM_STATUSES:
        raise exc
    form.form_errors = []
    placed = False
    for name in exc.fields:
        field = getattr(form, name, None)
        if field is not None and hasattr(field, "errors"):
            field.errors = [*list(field.errors), exc.message]
            placed = True
    if not placed:
        form.form_errors.append(exc.message)
    return exc.status


def _admin() -> Principal:
    me = principal()
    me.require_system_admin(WHAT)  # before reading any form: 403 whatever was sent
    return me


@bp.route("", methods=["GET", "POST"], endpoint="index")
@login_required
def index() -> ResponseReturnValue:
    me = _admin()
    form = WebhookForm()
    status = 200
    created: tuple[Webhook, str] | None = None
    if form.validate_on_submit():
        try:
            created = webhooks.create(
                me, form.url.data or "", form.event.data or [], form.companies()
            )
        except ServiceError as exc:
            status = _form_error(form, exc)
        else:
            form = WebhookForm(formdata=None)
            flash(f"Webhook {created[0].id} created for {created[0].url}.", "success")
    elif form.is_submitted():
        status = 400  # the CSRF check is CSRFProtect's: here only if a field is refused
    rows = [row(hook, recent=1) for hook in webhooks.listed(me)]
    html = render_template(
        "webhooks/index.html",
        rows=rows,
        form=form,
        created=created[0] if created else None,
        secret=created[1] if created else None,
        when=when,
    )
    # The answer that shows the secret, and every page that lists webhooks: kept by no cache.
    return html, status, NO_STORE


def _page(
    me: Principal,
    webhook_id: int,
    error: str | None = None,
    status: int = 200,
    secret: str | None = None,
) -> ResponseReturnValue:
    hook = webhooks.get(me, webhook_id)
    html = render_template(
        "webhooks/page.html",
        r=row(hook),
        error=error,
        when=when,
        outcomes=OUTCOMES,
        secret=secret,
        now=utcnow(),
    )
    return html, status, NO_STORE


@bp.get("/<int:webhook_id>", endpoint="page")
@login_required
def page(webhook_id: int) -> ResponseReturnValue:
    return _page(_admin(), webhook_id)


@bp.post("/<int:webhook_id>/redeliver/<int:event_id>", endpoint="redeliver")
@login_required
def redeliver(webhook_id: int, event_id: int) -> ResponseReturnValue:
    me = _admin()
    webhooks.get(me, webhook_id)  # 404 for an unknown webhook
    if not ConfirmForm().validate_on_submit():
        return _page(me, webhook_id, "The form has expired; reload the page and try again.", 400)
    try:
        webhooks.redeliver(me, webhook_id, event_id)
    except ServiceError as exc:
        if exc.status not in FORM_STATUSES:
            raise
        return _page(me, webhook_id, exc.message, exc.status)
    flash(f"Event {event_id} is queued for redelivery.", "success")
    return redirect(url_for("webhooks.page", webhook_id=webhook_id, _anchor="failed-head"))


@bp.route("/<int:webhook_id>/rotate-secret", methods=["GET", "POST"], endpoint="rotate_secret")
@login_required
def rotate_secret(webhook_id: int) -> ResponseReturnValue:
    """GET: what rotating does, and the button; POST: rotate, and the webhook's page with the
    new secret, shown this once."""
    me = _admin()
    hook = webhooks.get(me, webhook_id)  # 404 for an unknown webhook
    form = ConfirmForm()
    if form.validate_on_submit():
        _, secret = webhooks.rotate_secret(me, webhook_id)
        flash(f"The signing secret of webhook {webhook_id} was rotated.", "success")
        return _page(me, webhook_id, secret=secret)
    status = 400 if form.is_submitted() else 200
    html = render_template(
        "webhooks/rotate.html",
        hook=hook,
        form=form,
        hours=int(webhooks.PREVIOUS_SECRET_LIFE.total_seconds() // 3600),
    )
    return html, status


@bp.route("/<int:webhook_id>/delete", methods=["GET", "POST"], endpoint="delete")
@login_required
def delete(webhook_id: int) -> ResponseReturnValue:
    me = _admin()
    hook = webhooks.get(me, webhook_id)
    form = ConfirmForm()
    if form.validate_on_submit():
        url = hook.url
        webhooks.delete_webhook(me, webhook_id)
        flash(f"Webhook {webhook_id} ({url}) deleted: nothing more is sent to it.", "info")
        return redirect(url_for("webhooks.index"))
    status = 400 if form.is_submitted() else 200
    return render_template("webhooks/delete.html", hook=hook, form=form), status
