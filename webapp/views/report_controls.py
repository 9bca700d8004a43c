"""The report page's controls (/reports/ddis, /reports/users; docs/pages.md, "The report's
controls"): what an Add or a Remove of the company chooser says it did, the folded controls'
summary line, and whether a request is the chooser's in-place (htmx) update of the report.

The figures and who may read them are views/reports.py's and the services'; this module only
words and routes the choice.
"""

from __future__ import annotations

from flask import request, session
from werkzeug.datastructures import MultiDict

from . import pickers
from .common import is_htmx

REGION = "report"  # the id of the part of the page an Add or a Remove swaps in place
# Set by a Remove or an Add answered with a redirect (no JavaScript): the page it leads to
# keeps the controls open, the picker focused, so the next company can be added at once.
_KEEP_OPEN = "report_chooser_open"


def changing(args: MultiDict) -> bool:
    """Whether the controls' form was sent (Show, Add or a Remove), rather than the report's
    own address asked for."""
    return pickers.pressed(args) or "add_company" in args


def in_place() -> bool:
    """Whether the request is htmx swapping the report region (an Add or a Remove with
    JavaScript): answered with that region alone, not a redirect."""
    return is_htmx() and request.headers.get("HX-Target") == REGION


def counted(n: int) -> str:
    """'3 companies chosen', '1 company chosen', 'no company chosen: every company'."""
    if n == 0:
        return "no company chosen: every company"
    return f"{n:,} compan{'y' if n == 1 else 'ies'} chosen"


def change_line(args: MultiDict, chosen: pickers.Chosen) -> str | None:
    """One short line saying what an Add or a Remove did ("Added acme: 3 companies chosen.");
    None for Show (nothing was added or removed on purpose)."""
    if not pickers.pressed(args):
        return None
    before = [c for c in args.getlist("company") if c]
    removed = [c for c in dict.fromkeys(before) if c in pickers.removals(args, "company")]
    added = [c for c in chosen.ids if c not in before]
    count = counted(len(chosen.ids))
    if removed:
        return f"Removed {', '.join(removed)}: {count}."
    if added:
        return f"Added {', '.join(added)}: {count}."
    typed = args.get("add_company", "").strip().casefold()
    again = [c for c in before if c.casefold() == typed]
    if again:
        return f"{again[0]} was chosen already: {count}."
    return f"No company added: {count}."


def summary(ids: list[str], month_name: str, year: int) -> str:
    """The folded controls' line: the month and the companies shown."""
    if not ids:
        who = "every company"
    elif len(ids) == 1:
        who = ids[0]
    else:
        who = f"{len(ids):,} companies"
    return f"{month_name} {year} · {who}"


def keep_open() -> None:
    """Remember, for the page a redirect leads to, that the chooser was being used."""
    session[_KEEP_OPEN] = True


def kept_open() -> bool:
    """Whether this page follows an Add or a Remove (once: the next load folds again)."""
    # Only then touched: a pop of a missing key would still mark the session changed, and
    # every report page would write it.
    return _KEEP_OPEN in session and bool(session.pop(_KEEP_OPEN))
