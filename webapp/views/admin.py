"""System-Admin pages: /admin/companies, /admin/accounts, an account's API tokens.

Every rule (who may, what is valid, the last-System-Admin guard) is decided by the services;
these views parse forms, call them and render. A generated password is shown once, in the
answer to the POST itself (never in a flash cookie), marked not to be cached.

Both lists are searched (`q`) and paged (`page`, 50 a page) by query parameters, so every view
is a link; with htmx the answer to a list request is only its rows partial. The forms opened
from a list's rows (rename; grants, password, disable) carry the list as it was shown as
`back` (common.list_back) and return there.
"""

from __future__ import annotations

from typing import Any, TypedDict

from flask import Blueprint, flash, redirect, render_template, request, session, url_for
from flask_login import login_required
from flask_wtf import FlaskForm
from werkzeug.datastructures import MultiDict
from wtforms import BooleanField, PasswordField, SelectMultipleField, StringField

from ..errors import Invalid, NotFound, ServiceError
from ..request_auth import replica_reads
from ..security import NO_STORE
from ..services import companies
from ..services.identity import accounts, api_tokens, reset, signin
from . import companies as company_views
from . import pickers
from .common import is_htmx, list_back, list_here, page_args, principal
from .confirm import confirmation_required
from .forms import ConfirmForm, form_error

bp = Blueprint("admin", __name__, url_prefix="/admin")
PER_PAGE = 50
# What a list's address may hold when a form comes back to it.
COMPANIES_BACK = ("q", "sort", "dir", "page")
ACCOUNTS_BACK = ("q", "page")


# The row a list marks once, after one of its forms saved (as the record lists do,
# views/records.py MARK): {"list": "companies" or "accounts", "key": the row's identifier}.
ADMIN_MARK = "changed_admin_row"


def _mark(list_name: str, key: str) -> None:
    session[ADMIN_MARK] = {"list": list_name, "key": key}


def _take_mark(list_name: str) -> str | None:
    """The row to mark on this list, once: the next page of it shown no longer marks it."""
    # Only a session holding a mark is changed (and so sent back as a cookie).
    mark = session.pop(ADMIN_MARK) if ADMIN_MARK in session else None
    if not isinstance(mark, dict) or mark.get("list") != list_name:
        return None
    key = mark.get("key")
    return key if isinstance(key, str) else None


def _companies_back() -> str:
    return list_back("admin.companies", request.values.get("back"), COMPANIES_BACK)


def _accounts_back() -> str:
    return list_back("admin.accounts", request.values.get("back"), ACCOUNTS_BACK)


# The same address answers a page or an htmx partial: caches must keep them apart.
VARY = {"Vary": "HX-Request"}


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
@replica_reads
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
    context, list_status = company_views.listing(me, companies.search, "admin.companies", PER_PAGE)
    status = list_status if list_status != 200 else status
    context["marked"] = _take_mark("companies")
    if is_htmx() and request.method == "GET":
        return render_template("admin/_company_rows.html", oob=True, **context), status, VARY
    return render_template("admin/companies.html", form=form, **context), status, VARY


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
            _mark("companies", company_id)
            return redirect(_companies_back())
    context = {"company": company, "form": form, "back": _companies_back()}
    return render_template("admin/company_rename.html", **context), status


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
    return _accounts_list()


def _accounts_list(error: str | None = None, status: int = 200):
    me = principal()
    args = page_args(request.args, ("q",))
    try:
        listing = accounts.search(
            me, args.get("q", ""), page=request.args.get("page") or 1, per_page=PER_PAGE
        )
    except Invalid as exc:
        error, status = exc.message, 400
        listing = accounts.AccountPage([], 0, 1, 1)
    context = {
        "listing": listing,
        "args": args,
        "error": error,
        "back_arg": list_here("admin.accounts", args, listing.number),
        "marked": _take_mark("accounts"),
    }
    if is_htmx() and request.method == "GET":
        return render_template("admin/_account_rows.html", **context), status, VARY
    return render_template("admin/accounts.html", **context), status, VARY


@bp.route("/accounts/new", methods=["GET", "POST"])
@login_required
@confirmation_required
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
@confirmation_required
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
            _mark("accounts", username)
            return redirect(_accounts_back())
    context = {"account": account, "form": form, "choosers": choosers, "back": _accounts_back()}
    return render_template("admin/account_grants.html", **context), status or 200


@bp.route("/accounts/<username>/password", methods=["GET", "POST"])
@login_required
# Not in decisions §15's list, but setting another's password hands that account over as surely
# as resetting its factors does (docs/security.md#confirmation).
@confirmation_required
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
            _mark("accounts", username)
            if generated is not None:
                return _secret_page(
                    title="Password reset",
                    message=f"The new password of {username} is shown this once; its "
                    "sessions have ended.",
                    label="New password",
                    secret=generated,
                    back=_accounts_back(),
                )
            flash(f"Password of {username} changed; its sessions have ended.", "success")
            return redirect(_accounts_back())
    context = {"account": account, "form": form, "back": _accounts_back()}
    return render_template("admin/account_password.html", **context), status


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
            _mark("accounts", username)
            return redirect(_accounts_back())
    context = {"account": account, "form": form, "back": _accounts_back()}
    return render_template("admin/account_disable.html", **context), status


@bp.post("/accounts/<username>/enable")
@login_required
def account_enable(username: str):
    """The Enable button of the accounts list: no confirmation, nothing is lost by it."""
    me = principal()
    form = ConfirmForm()
    if not form.validate_on_submit():
        return _accounts_list("The form expired; reload the page and try again.", 400)
    try:
        accounts.enable(me, username)
    except ServiceError as exc:
        if exc.status not in (400, 409):
            raise
        return _accounts_list(exc.message, exc.status)
    flash(
        f"Account {username} enabled: it can sign in again, and its API tokens that were "
        "not revoked work again (see its tokens).",
        "success",
    )
    _mark("accounts", username)
    back: dict[str, Any] = page_args(request.form, ("q", "page"))
    return redirect(url_for("admin.accounts", _anchor=f"account-{username}", **back))


@bp.route("/accounts/<username>/reset-mfa", methods=["GET", "POST"])
@login_required
@confirmation_required
def account_reset_mfa(username: str):
    """Recovery by an admin: remove another account's second factors (services/identity/
    reset.py), after a page saying what that does."""
    me = principal()
    account = accounts.get(me, username)  # 403 for all but a System-Admin, 404 if none
    form = ConfirmForm()
    status = 200
    if form.validate_on_submit():
        try:
            removed = reset.reset_factors(me, username)
        except ServiceError as exc:
            status = form_error(form, exc)
        else:
            flash(
                f"Second factors of {username} reset (removed: {removed}); its sessions have "
                "ended and it signs in with its password alone until it adds a factor.",
                "success",
            )
            _mark("accounts", username)
            return redirect(_accounts_back())
    context = {"account": account, "form": form, "back": _accounts_back()}
    return render_template("admin/account_reset_mfa.html", **context), status


@bp.get("/accounts/<username>/tokens")
@login_required
def account_tokens(username: str):
    me = principal()
    account = accounts.get(me, username)  # 403 for all but a System-Admin, 404 if none
    tokens = api_tokens.of_account(me, username)
    return render_template("admin/account_tokens.html", account=account, tokens=tokens)


@bp.post("/accounts/<username>/tokens/<int:token_id>/revoke")
@login_required
def account_token_revoke(username: str, token_id: int):
    me = principal()
    accounts.get(me, username)  # 403 for all but a System-Admin, 404 if none
    token = api_tokens.get(me, token_id)
    if token.account.username != username:
        raise NotFound("No such token.")
    form = ConfirmForm()
    if not form.validate_on_submit():
        tokens = api_tokens.of_account(me, username)
        page = render_template(
            "admin/account_tokens.html",
            account=token.account,
            tokens=tokens,
            error="The form expired; reload the page and try again.",
        )
        return page, 400
    prefix = token.prefix
    api_tokens.revoke(me, token_id)
    flash(f"Token {prefix}… of {username} revoked; the API refuses it from now on.", "info")
    return redirect(url_for("admin.account_tokens", username=username))
