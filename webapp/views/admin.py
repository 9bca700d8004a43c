"""System-Admin pages: /admin/companies, /admin/accounts.

Every rule (who may, what is valid, the last-System-Admin guard) is decided by the services;
these views parse forms, call them and render. A generated password is shown once, in the
answer to the POST itself (never in a flash cookie), marked not to be cached.
"""

from __future__ import annotations

from typing import TypedDict

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask_login import login_required
from flask_wtf import FlaskForm
from werkzeug.datastructures import MultiDict
from wtforms import BooleanField, PasswordField, SelectMultipleField, StringField

from ..security import NO_STORE
from ..services import accounts, companies, signin
from ..services.errors import ServiceError
from . import pickers
from .common import principal
from .forms import ConfirmForm, form_error

bp = Blueprint("admin", __name__, url_prefix="/admin")


def _secret_page(**context):
    """A page that shows a secret once: rendered in the POST's own answer, never cached."""
    response = render_template("admin/secret.html", **context)
    return response, 200, NO_STORE


# --- companies ---------------------------------------------------------------------------------


class CompanyForm(FlaskForm):
    id = StringField("Identifier", description="1 to 64 of a-z 0-9 . _ - ; never changes.")
    name = StringField("Name")


class RenameForm(FlaskForm):
    name = StringField("New name")


@bp.route("/companies", methods=["GET", "POST"], endpoint="companies")
@login_required
def companies_page():
    me = principal()
    form = CompanyForm()
    status = 200
    if form.validate_on_submit():
        try:
            companies.create(me, form.id.data or "", form.name.data or "")
        except ServiceError as exc:
            status = form_error(form, exc)
        else:
            flash(f"Company {form.id.data} created.", "success")
            return redirect(url_for("admin.companies"))
    rows = companies.list_all(me)
    return render_template("admin/companies.html", rows=rows, form=form), status


@bp.route("/companies/<company_id>/rename", methods=["GET", "POST"])
@login_required
def company_rename(company_id: str):
    me = principal()
    company = companies.get(me, company_id)
    form = RenameForm(data={"name": company.name})
    status = 200
    if form.validate_on_submit():
        try:
            companies.rename(me, company_id, form.name.data or "")
        except ServiceError as exc:
            status = form_error(form, exc)
        else:
            flash(f"Company {company_id} renamed.", "success")
            return redirect(url_for("admin.companies"))
    return render_template("admin/company_rename.html", company=company, form=form), status


# --- accounts ----------------------------------------------------------------------------------


GRANT_LISTS = ("admin_of", "reporting_for")


def _choosers(form: GrantsForm) -> dict[str, pickers.Chosen]:
    """The grants' two company lists as this request leaves them: a remove button pressed, a
    company typed into a list's picker (`add_<list>`). Sets them as the form's data."""
    values = request.form if request.method == "POST" else MultiDict()
    choosers = {}
    for name in GRANT_LISTS:
        f = getattr(form, name)
        choosers[name] = pickers.choose(principal(), "grants", name, f.data or [], values)
        f.data = choosers[name].ids
    return choosers


def _reshow(choosers: dict[str, pickers.Chosen]) -> int | None:
    """The status to show the form (again) with instead of saving it: 200 for a GET or after
    an add or remove button, 400 for a company typed into a picker that names none; None when
    the form is to be saved."""
    if request.method != "POST":
        return 200
    if not all(c.ok for c in choosers.values()):
        return 400
    return 200 if pickers.pressed(request.form) else None


class Grants(TypedDict):
    system_admin: bool
    admin_of: list[str]
    billing_summary: bool
    reporting_for: list[str]


class GrantsForm(FlaskForm):
    system_admin = BooleanField("System-Admin", description="Everything, every company.")
    # Company pickers (views/pickers.py): the chosen companies come as the list, repeated.
    admin_of = SelectMultipleField(
        "Company-Admin of",
        validate_choice=False,  # the service says which company does not exist
        description="DDIs and phone users of these companies.",
    )
    billing_summary = BooleanField(
        "Billing Call-Summary", description="Both reports, every company."
    )
    reporting_for = SelectMultipleField(
        "Billing/Call Reporting for",
        validate_choice=False,
        description="Both reports, only these companies.",
    )

    def grants(self) -> Grants:
        return {
            "system_admin": bool(self.system_admin.data),
            "admin_of": list(self.admin_of.data or ()),
            "billing_summary": bool(self.billing_summary.data),
            "reporting_for": list(self.reporting_for.data or ()),
        }


class AccountForm(GrantsForm):
    username = StringField("Username", description="1 to 64 of a-z 0-9 . _ - @")
    password = PasswordField(
        "Password",
        description=f"At least {signin.MIN_PASSWORD} characters. "
        "Leave empty to generate one, shown once.",
    )


class PasswordForm(FlaskForm):
    password = PasswordField(
        "New password",
        description=f"At least {signin.MIN_PASSWORD} characters. "
        "Leave empty to generate one, shown once.",
    )


@bp.get("/accounts", endpoint="accounts")
@login_required
def accounts_page():
    rows = accounts.list_all(principal())
    return render_template("admin/accounts.html", rows=rows)


@bp.route("/accounts/new", methods=["GET", "POST"])
@login_required
def account_new():
    me = principal()
    me.require_system_admin("create accounts")  # before listing companies for the form
    form = AccountForm()
    choosers = _choosers(form)
    status = _reshow(choosers)
    if status is None and form.validate_on_submit():
        try:
            new = accounts.create(
                me, form.username.data or "", form.password.data or None, **form.grants()
            )
        except ServiceError as exc:
            status = form_error(form, exc)
        else:
            if new.password is not None:
                return _secret_page(
                    title="Account created",
                    message=f"Account {form.username.data} created. Its password is shown "
                    "this once: hand it over now.",
                    label="Password",
                    secret=new.password,
                )
            flash(f"Account {form.username.data} created.", "success")
            return redirect(url_for("admin.accounts"))
    html = render_template("admin/account_new.html", form=form, choosers=choosers)
    return html, status or 200


@bp.route("/accounts/<username>/grants", methods=["GET", "POST"])
@login_required
def account_grants(username: str):
    me = principal()
    account = accounts.get(me, username)
    form = GrantsForm(data=accounts.grants_of(account))
    choosers = _choosers(form)
    status = _reshow(choosers)
    if status is None and form.validate_on_submit():
        try:
            accounts.set_grants(me, username, **form.grants())
        except ServiceError as exc:
            status = form_error(form, exc)
        else:
            flash(f"Grants of {username} saved.", "success")
            return redirect(url_for("admin.accounts"))
    context = {"account": account, "form": form, "choosers": choosers}
    return render_template("admin/account_grants.html", **context), status or 200


@bp.route("/accounts/<username>/password", methods=["GET", "POST"])
@login_required
def account_password(username: str):
    me = principal()
    account = accounts.get(me, username)
    form = PasswordForm()
    status = 200
    if form.validate_on_submit():
        try:
            generated = accounts.reset_password(me, username, form.password.data or None)
        except ServiceError as exc:
            status = form_error(form, exc)
        else:
            if generated is not None:
                return _secret_page(
                    title="Password reset",
                    message=f"The new password of {username} is shown this once; its "
                    "sessions have ended.",
                    label="New password",
                    secret=generated,
                )
            flash(f"Password of {username} changed; its sessions have ended.", "success")
            return redirect(url_for("admin.accounts"))
    return render_template("admin/account_password.html", account=account, form=form), status


@bp.route("/accounts/<username>/disable", methods=["GET", "POST"])
@login_required
def account_disable(username: str):
    me = principal()
    account = accounts.get(me, username)
    form = ConfirmForm()
    status = 200
    if form.validate_on_submit():
        try:
            accounts.disable_other(me, username)
        except ServiceError as exc:
            status = form_error(form, exc)
        else:
            flash(f"Account {username} disabled; its sessions and tokens no longer work.", "info")
            return redirect(url_for("admin.accounts"))
    return render_template("admin/account_disable.html", account=account, form=form), status
