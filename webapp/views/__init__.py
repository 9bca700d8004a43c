"""The HTML pages: forms and templates over the same services as /rest/.

Views translate HTTP to service calls and back; every access and validation rule is decided in
the services, and a ServiceError becomes a 403/404 page or field messages on the form.
"""

from __future__ import annotations

from flask import Flask, redirect, url_for
from flask_login import login_required

from .. import wording
from ..access import sole_company
from ..services.history import actions


@login_required
def index():
    """`/` opens the DDI list (docs/pages.md#stable-addresses); an account that may not manage
    DDIs is sent where it may go instead of to a 403."""
    from .common import principal

    me = principal()
    if me.is_admin:
        return redirect(url_for("records.ddis_list"))
    if me.may_report:
        return redirect(url_for("reports.ddis"))
    return redirect(url_for("account.tokens"))


def number(value: int | float | str) -> str:
    """A figure as the pages show it: thousands separated (19,822,240); a per-day figure,
    which the report gives to 4 decimal places (as text or a number), keeps them."""
    if isinstance(value, str):
        value = float(value) if "." in value else int(value)
    if isinstance(value, float):
        return f"{value:,.4f}"
    return f"{value:,}"


def register(app: Flask) -> None:
    from . import (
        account,
        admin,
        audit,
        auth,
        bulk,
        companies,
        confirm,
        ddi_page,
        factors,
        imports,
        mfa_gate,
        months,
        numbers,
        once,
        passkeys,
        pickers,
        records,
        report_day,
        reports,
        search,
        security,
        sso,
        user_page,
        webhooks,
    )
    from .common import principal
    from .errors import refuse_unreadable_input
    from .forms import FIELD_LABELS

    # pickers before companies: /companies/suggest is a static route, /companies/<id> is not
    # (Werkzeug prefers the static one whatever the order; the order only reads better).
    modules = (
        auth,
        records,
        bulk,
        ddi_page,
        user_page,
        imports,
        numbers,
        reports,
        months,
        admin,
        pickers,
        companies,
        account,
        factors,
        security,
        confirm,
        audit,
        webhooks,
        search,
        passkeys,
        sso,
    )
    # The day drill-down's routes are on the reports blueprint: loaded above, before it is
    # registered.
    assert report_day.bp is reports.bp
    for module in modules:
        app.register_blueprint(module.bp)
    # The navigation shows only what the signed-in account may open.
    app.context_processor(lambda: {"nav_principal": principal})
    # The way to the account's companies: "My company" or "Companies" (views/companies.py).
    app.jinja_env.globals["company_nav"] = companies.nav_link
    # The one company a filter's scope holds, when it holds one (access.sole_company).
    app.jinja_env.globals["sole_company"] = sole_company
    app.jinja_env.globals["once_field"] = once.field  # a one-time form's key (views/once.py)
    app.jinja_env.globals["field_labels"] = FIELD_LABELS  # how pages name record fields
    app.jinja_env.filters["num"] = number
    # One way of writing a DDI on every page: "+44 2071234567" (wording.ddi_number).
    app.jinja_env.globals["ddi_number"] = wording.ddi_number
    app.jinja_env.filters["ddi_key"] = wording.ddi_key_number
    app.jinja_env.filters["audit_target"] = wording.audit_target
    # The audit log's actions as readers name them, and whether one creates or deletes.
    app.jinja_env.filters["action_name"] = actions.name
    app.jinja_env.filters["action_effect"] = actions.effect
    app.add_url_rule("/", "index", index)
    app.before_request(refuse_unreadable_input)
    # MFA_REQUIRED: a covered account without a second factor may only set one up.
    app.before_request(mfa_gate.gate)
