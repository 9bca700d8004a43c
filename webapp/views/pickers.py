"""Company pickers: `GET /companies/suggest` (the suggestions as someone types) and what every
page asking for companies shares to read a typed identifier (docs/pages.md#company-pickers).

A picker is a text field taking a company identifier; with JavaScript it suggests companies
(templates/_macros/pickers.html, static/picker.js). Which companies a picker may offer is the
service's to say (`companies.picker_scope`, by the picker's purpose): records, reports, audit,
grants. A choice of several companies is a list of chosen companies, each with a remove button
(a submit button `remove` = `<list>:<company>`), and a picker `add_<list>` to add one. The audit
log's actor field is the same picker over accounts (`/accounts/suggest`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from flask import Blueprint, render_template, request
from flask_login import login_required
from werkzeug.datastructures import MultiDict

from ..access import Principal
from ..errors import Invalid
from ..models import Company
from ..services import companies
from ..services.identity import accounts
from .common import principal

bp = Blueprint("pickers", __name__)

UNKNOWN = "unknown company"
REQUIRED = "required"


@bp.get("/companies/suggest")
@login_required
def suggest():
    """An HTML fragment: at most 20 companies the picker `for` may offer whose identifier or
    name contains `q` (identifier prefix matches first); without `for`, of every company the
    account may see (decisions.md §10). 403 for a picker the account may not use (as its page
    would), 400 for an unknown `for`."""
    me = principal()
    text = request.args.get("q", "")
    try:
        found = companies.suggest(me, request.args.get("for", "").strip(), text)
    except Invalid as exc:
        return render_template("pickers/_suggestions.html", error=exc.message, found=[]), 400
    return render_template("pickers/_suggestions.html", error=None, found=found, typed=text)


@bp.get("/accounts/suggest")
@login_required
def suggest_actors():
    """An HTML fragment for the audit log's actor field, a picker of accounts: at most 20
    usernames containing `q` that the reader may know of (accounts.suggest_actors), prefix
    matches first. 403 for an account that may not read the audit log."""
    text = request.args.get("q", "")
    found = accounts.suggest_actors(principal(), text)
    return render_template("pickers/_account_suggestions.html", found=found, typed=text)


# --- one company -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Picked:
    """What a picker field holds: the company it names, or why not and what is closest."""

    text: str  # as typed, spaces around dropped
    company: str | None = None  # the identifier, when it names a company of the picker
    error: str | None = None  # the field message
    matches: list[Company] = field(default_factory=list)  # the closest companies, for an error


def resolve(p: Principal, purpose: str, text: object, *, required: bool = False) -> Picked:
    """Read a typed company identifier for the picker `purpose`: the company (any case), or
    for an empty field nothing ("required" if `required`), or for an identifier the picker may
    not offer (unknown or out of scope alike) "unknown company" and up to 5 closest matches."""
    typed = text.strip() if isinstance(text, str) else ""
    if not typed:
        return Picked("", error=REQUIRED if required else None)
    found = companies.find(p, purpose, typed)
    if found is not None:
        return Picked(found.id, company=found.id)
    return Picked(typed, error=UNKNOWN, matches=companies.closest(p, purpose, typed))


def on_field(form_field, picked: Picked, *, message: bool = True) -> bool:
    """Put a resolved picker on its WTForms field: the identifier as data, or what was typed,
    the closest matches (`field.matches`, which the picker macro shows) and, with `message`,
    the field message. True when it names a company (or is empty and not required)."""
    form_field.data = picked.company if picked.company is not None else picked.text
    form_field.matches = picked.matches
    if picked.error is None:
        return True
    if message:
        form_field.errors = [*list(form_field.errors or ()), picked.error]
    return False


# --- a list of chosen companies ----------------------------------------------------------------
@dataclass
class Chosen:
    """A list of chosen companies (field `name`, repeated) with its picker `add_<name>`."""

    name: str
    ids: list[str]
    names: dict[str, str] = field(default_factory=dict)  # the chosen companies' names
    picked: Picked = field(default_factory=lambda: Picked(""))

    @property
    def items(self) -> list[tuple[str, str | None]]:
        return [(c, self.names.get(c)) for c in self.ids]

    @property
    def ok(self) -> bool:
        return self.picked.error is None


def removals(values: MultiDict, name: str) -> set[str]:
    """The companies whose remove button of list `name` was pressed (`remove=<name>:<id>`)."""
    return {v.split(":", 1)[1] for v in values.getlist("remove") if v.startswith(f"{name}:")}


def choose(p: Principal, purpose: str, name: str, ids: Iterable[str], values: MultiDict) -> Chosen:
    """The chosen list `name` after this request: `ids` without those removed, plus the one
    typed into its picker (`add_<name>`) when that names a company of the picker; else the
    typed text stays in the picker with its message and closest matches."""
    gone = removals(values, name)
    chosen = list(dict.fromkeys(i for i in ids if i and i not in gone))
    picked = resolve(p, purpose, values.get(f"add_{name}", ""))
    if picked.company is not None:
        if picked.company not in chosen:
            chosen.append(picked.company)
        picked = Picked("")
    known = companies.named(p, purpose, chosen)
    return Chosen(name, chosen, known, picked)


def pressed(values: MultiDict) -> bool:
    """Whether the form was sent by an add or a remove button (re-render it, save nothing)."""
    return "remove" in values or "add" in values
