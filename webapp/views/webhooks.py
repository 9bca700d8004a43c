"""Webhook pages (System-Admin): /admin/webhooks, a webhook's page, edit, pause and resume,
send a test event, redeliver, rotate the signing secret, delete (docs/pages.md#webhooks,
docs/events.md#webhooks).

Every rule (who may, what is a valid URL, event type or company, what may be redelivered) is
services/events/webhooks.py's; these views parse the forms, call it and render. The signing secret
is shown once, in the answer to the POST that created the webhook or rotated its secret (never in
a flash cookie, never on a later page), marked not to be cached; both forms are one-time forms
(views/once.py), so a reload of that answer neither adds a second webhook nor rotates again.

The add and edit forms take the companies with a company chooser (templates/_macros/pickers.html:
the chosen ones as hidden fields `company`, each with a Remove button, and a picker `add_company`);
a `company` value may also be a list separated by commas or spaces (a form posted without the
chooser). A refused form shows every field at fault at once, the first one focused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from flask_login import login_required
from flask_wtf import FlaskForm
from werkzeug.datastructures import MultiDict
from wtforms import SelectMultipleField, StringField
from wtforms.fields.choices import SelectChoice  # type: ignore[attr-defined]
from wtforms.widgets import CheckboxInput, ListWidget

from ..access import Principal
from ..database import utcnow
from ..errors import ServiceError
from ..models import Webhook, WebhookAttempt
from ..security import NO_STORE
from ..services.events import ping, webhooks
from ..services.events.journal import TYPES
from . import once, pickers
from .common import principal
from .confirm import confirmation_required
from .forms import FORM_STATUSES, ConfirmForm

bp = Blueprint("webhooks", __name__, url_prefix="/admin/webhooks")

WHAT = "manage webhooks"
SEPARATORS = re.compile(r"[\s,;]+")
OUTCOMES = {
    "delivered": "delivered",
    "retry": "will retry",
    "failed": "failed (given up)",
    "test": "test event (not retried)",
}
PURPOSE = "webhooks"  # the company picker's (services/companies.picker_scope)
FIELDS = ("url", "event", "company")  # in the form's order: the first at fault gets the focus


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


COMPANIES_HINT = (
    "The companies whose events it receives (either side of a move). None chosen: every company."
)


def chosen_companies(values: MultiDict) -> list[str]:
    """The companies a form sent (`company`, repeated; each may itself be a list separated by
    commas or spaces), in order, as sent (the service says what is wrong)."""
    return [c for v in values.getlist("company") for c in SEPARATORS.split(v) if c]


def chooser(me: Principal, ids: list[str]) -> pickers.Chosen:
    """The form's company list as this request leaves it (a Remove pressed, one added)."""
    values = request.form if request.method == "POST" else MultiDict()
    return pickers.choose(me, PURPOSE, "company", ids, values)


def refused(form: WebhookForm, chosen: pickers.Chosen, exc: ServiceError) -> int:
    """Every field the service refused, with its sentence beside it (the companies' beside
    the chooser's picker, with the closest matches to what was typed there); the status."""
    if not isinstance(exc, webhooks.SettingsInvalid):
        return _form_error(form, exc)
    for name, sentence in exc.sentences.items():
        if name == "company":
            picked = chosen.picked
            chosen.picked = pickers.Picked(picked.text, error=sentence, matches=picked.matches)
        else:
            getattr(form, name).errors = [sentence]
    return exc.status


def first_invalid(form: WebhookForm, chosen: pickers.Chosen) -> str | None:
    """The field to focus after a refused form: the first at fault, in the form's order."""
    for name in FIELDS:
        if chosen.picked.error if name == "company" else getattr(form, name).errors:
            return name
    return None


def _settings(chosen: pickers.Chosen) -> list[str]:
    """What to send the service: the chosen companies, and text left in the picker that names
    none (the service refuses it with its sentence, beside the other fields' own)."""
    return chosen.ids + ([chosen.picked.text] if chosen.picked.error else [])


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
@confirmation_required(methods=("POST",))  # creating one; the list itself asks nothing
def index() -> ResponseReturnValue:
    me = _admin()
    form = WebhookForm()
    chosen = chooser(me, chosen_companies(request.form))
    status = 200
    created: tuple[Webhook, str] | None = None
    if pickers.pressed(request.form):
        status = 200 if chosen.ok else 400  # Add or Remove: the form again, nothing saved
    elif form.validate_on_submit():
        try:
            done = once.act(
                url_for("webhooks.index"),
                lambda: webhooks.create(
                    me, form.url.data or "", form.event.data or [], _settings(chosen)
                ),
                lambda made: (
                    f"webhook {made[0].id} was added for {made[0].url} (its secret is shown"
                    " only once; if it was not copied, rotate it on the webhook's page)"
                ),
            )
        except ServiceError as exc:
            status = refused(form, chosen, exc)
        else:
            if isinstance(done, once.Answer):  # a reload of the form: the secret is not shown
                return done.response
            created = done
            form = WebhookForm(formdata=None)
            chosen = pickers.Chosen("company", [])
            flash(f"Webhook {created[0].id} created for {created[0].url}.", "success")
    elif form.is_submitted():
        status = 400  # the CSRF check is CSRFProtect's: here only if a field is refused
    rows = [row(hook, recent=1) for hook in webhooks.listed(me)]
    html = render_template(
        "webhooks/index.html",
        rows=rows,
        form=form,
        chosen=chosen,
        focus=first_invalid(form, chosen) if status == 400 else None,
        hint=COMPANIES_HINT,
        created=created[0] if created else None,
        secret=created[1] if created else None,
        when=when,
    )
    # The answer that shows the secret, and every page that lists webhooks: kept by no cache.
    return html, status, NO_STORE


@bp.route("/<int:webhook_id>/edit", methods=["GET", "POST"], endpoint="edit")
@login_required
def edit(webhook_id: int) -> ResponseReturnValue:
    """A webhook's URL, events and companies: the form, and saving it (the cursor stays)."""
    me = _admin()
    hook = webhooks.get(me, webhook_id)  # 404 for an unknown webhook
    if request.method == "POST":
        form = WebhookForm()
        ids = chosen_companies(request.form)
    else:
        form = WebhookForm(data={"url": hook.url, "event": webhooks.named(hook.event_types)})
        ids = webhooks.named(hook.companies)
    chosen = chooser(me, ids)
    status = 200
    if pickers.pressed(request.form):
        status = 200 if chosen.ok else 400
    elif form.validate_on_submit():
        try:
            webhooks.edit(
                me, webhook_id, form.url.data or "", form.event.data or [], _settings(chosen)
            )
        except ServiceError as exc:
            status = refused(form, chosen, exc)
        else:
            flash(f"Webhook {webhook_id} saved.", "success")
            return redirect(url_for("webhooks.page", webhook_id=webhook_id))
    elif form.is_submitted():
        status = 400
    html = render_template(
        "webhooks/edit.html",
        hook=hook,
        form=form,
        chosen=chosen,
        focus=first_invalid(form, chosen) if status == 400 else None,
        hint=COMPANIES_HINT,
    )
    return html, status


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


def _confirmed(me: Principal, webhook_id: int) -> ResponseReturnValue | None:
    """None when the POST holds a valid CSRF token; else the page with why (400)."""
    webhooks.get(me, webhook_id)  # 404 for an unknown webhook
    if ConfirmForm().validate_on_submit():
        return None
    return _page(me, webhook_id, "The form has expired; reload the page and try again.", 400)


@bp.post("/<int:webhook_id>/pause", endpoint="pause")
@login_required
def pause(webhook_id: int) -> ResponseReturnValue:
    me = _admin()
    if (expired := _confirmed(me, webhook_id)) is not None:
        return expired
    webhooks.set_paused(me, webhook_id, True)
    flash(f"Webhook {webhook_id} is paused: nothing is sent to it until it is resumed.", "info")
    return redirect(url_for("webhooks.page", webhook_id=webhook_id))


@bp.post("/<int:webhook_id>/resume", endpoint="resume")
@login_required
def resume(webhook_id: int) -> ResponseReturnValue:
    me = _admin()
    if (expired := _confirmed(me, webhook_id)) is not None:
        return expired
    webhooks.set_paused(me, webhook_id, False)
    flash(f"Webhook {webhook_id} is resumed: the events held back go out in order.", "success")
    return redirect(url_for("webhooks.page", webhook_id=webhook_id))


@bp.post("/<int:webhook_id>/test", endpoint="test")
@login_required
def send_test(webhook_id: int) -> ResponseReturnValue:
    """Send a test event now (through the delivery's Sender: checked, signed, 10 s at most);
    the page then says what the receiver answered, and the attempt is in its list."""
    me = _admin()
    if (expired := _confirmed(me, webhook_id)) is not None:
        return expired
    attempt = ping.send_test(me, webhook_id)
    if attempt.status is not None and 200 <= attempt.status < 300:
        flash(f"Test event delivered to webhook {webhook_id}: HTTP {attempt.status}.", "success")
    else:
        said = f"HTTP {attempt.status}" if attempt.status is not None else attempt.error
        flash(f"Test event not delivered to webhook {webhook_id}: {said}.", "error")
    return redirect(url_for("webhooks.page", webhook_id=webhook_id, _anchor="attempts-head"))


@bp.post("/<int:webhook_id>/redeliver/<int:event_id>", endpoint="redeliver")
@login_required
def redeliver(webhook_id: int, event_id: int) -> ResponseReturnValue:
    me = _admin()
    if (expired := _confirmed(me, webhook_id)) is not None:
        return expired
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
        done = once.act(
            url_for("webhooks.page", webhook_id=webhook_id),
            lambda: webhooks.rotate_secret(me, webhook_id),
            lambda _: (
                f"the signing secret of webhook {webhook_id} was rotated (the new one is shown"
                " only once; if it was not copied, rotate again)"
            ),
        )
        if isinstance(done, once.Answer):  # rotating again would drop the secret still in use
            return done.response
        _, secret = done
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
