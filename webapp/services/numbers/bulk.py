"""The /ddis bulk actions on numbers out of service (docs/pages.md#bulk-actions): Reserve the
available numbers ticked, or all the list matches, for a company until a day; Release
reserved ones; Retire available or aging ones. System-Admin only.

Two steps, as the bulk move and delete (services/records/bulk.py): `preview` says how many
numbers the action would change and which, and `apply` goes on only if they are still exactly
those numbers in the states previewed (the preview's fingerprint; otherwise Changed, with the
new preview). The change itself is the numbers' own service (reserving.reserve_numbers,
release_numbers, retiring.retire_numbers): the one change path, all or nothing, each number
checked again under its lock.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

from sqlalchemy import and_, or_, select

from ...access import Principal
from ...errors import Conflict, Invalid
from ...extensions import db
from ...models import Number
from ...wording import counted
from .. import inventory
from ..fields import FORMATS, ISO_DATE
from ..records.bulk import MAX_TICKED, SAMPLE
from . import answers, browse, reserving, retiring
from .requests import MAX_COUNT

# What each action takes: the states its numbers must be in now, and the list states it is
# offered on.
ACTIONS: dict[str, tuple[str, ...]] = {
    "reserve": (inventory.AVAILABLE,),
    "release": (inventory.RESERVED,),
    "retire": (inventory.AVAILABLE, inventory.AGING),
}
MAX_NUMBERS = MAX_COUNT  # at once, as a reserve by prefix: narrow the filters for more


def actions_for(principal: Principal, state: str) -> tuple[str, ...]:
    """The actions the /ddis list in `state` offers the principal (none but to a
    System-Admin)."""
    if not principal.system_admin:
        return ()
    return tuple(a for a, states in ACTIONS.items() if state in states)


@dataclass(frozen=True)
class Target:
    """The numbers named by `keys` ('44:2071234567', as the list ticks them) or, with `keys`
    None, every number of the list in `state` matching `filters` (browse.page's, `q` the
    number search)."""

    state: str
    keys: tuple[str, ...] | None = None
    filters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Choice:
    """The action and what it takes: the company and last day of a reservation (`until`
    None: the default), the reason a retire of aging numbers gives."""

    action: str
    company: str | None = None
    until: date | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Preview:
    choice: Choice
    count: int
    sample: list[dict[str, str]]  # the first SAMPLE, as browse.row gives them
    by_company: list[tuple[str, int]]  # a release's: how many each company had reserved
    fingerprint: str
    until: date | None  # a reservation's last day, the default worked out


class Changed(Conflict):
    """The numbers are not those confirmed: `preview` is the new count and sample."""

    def __init__(self, preview: Preview):
        super().__init__(
            "The selection changed since you confirmed: it is "
            f"{counted(preview.count, 'number', grouped=True)} now. "
            "Nothing was changed; check and confirm again."
        )
        self.preview = preview


def default_until() -> str:
    """The last day a reservation gets when none is given (reserve's default), YYYY-MM-DD:
    what the bulk form's date field starts with."""
    return (inventory.today() + timedelta(days=reserving.DEFAULT_DAYS)).isoformat()


def parse_until(text: str) -> date | None:
    """The form's last day of a reservation: '' the default, else YYYY-MM-DD (Invalid on
    `until` otherwise; the range is reserve's rule)."""
    text = text.strip()
    if not text:
        return None
    if ISO_DATE.fullmatch(text):
        try:
            return date.fromisoformat(text)
        except ValueError:
            pass
    why = "must be a date written YYYY-MM-DD"
    raise Invalid(f"Held until: {why}.", {"until": why})


def _check(principal: Principal, target: Target, choice: Choice) -> date | None:
    """The action allowed (System-Admin, an action of ACTIONS with what it takes); return a
    reservation's last day."""
    if choice.action not in ACTIONS:
        names = ", ".join(ACTIONS)
        raise Invalid(f"Choose an action: {names}.", {"action": f"must be one of {names}"})
    principal.require_system_admin(f"{choice.action} numbers")
    if target.keys is None and target.state not in ACTIONS[choice.action]:
        raise Invalid(
            f"To {choice.action} all matching numbers, list the "
            f"{' or '.join(ACTIONS[choice.action])} ones.",
            {"state": "does not fit the action"},
        )
    if choice.action != "reserve":
        return None
    if not choice.company:
        raise Invalid("Choose the company to reserve them for.", {"company": "required"})
    return reserving.until_day(choice.until, inventory.today())


def _rows(principal: Principal, target: Target, choice: Choice) -> list[dict[str, str]]:
    """The numbers `target` names as they are now, in key order; Invalid when none or too
    many, a Conflict naming the first that is not in a state the action takes."""
    if target.keys is None:
        found = browse.page(
            principal,
            target.state,
            {f: v for f, v in target.filters.items() if f != "q"},
            q=target.filters.get("q") or None,
            limit=MAX_NUMBERS,
        )
        if found.has_next:
            why = f"at most {MAX_NUMBERS:,} at once"
            raise Invalid(f"A bulk action changes {why}: narrow the filters.", {"scope": why})
        rows = found.rows
    else:
        rows = _ticked(principal, target.keys)
    if not rows:
        raise Invalid("Tick the numbers to change first.", {"key": "none ticked"})
    for r in rows:
        if r["state"] not in ACTIONS[choice.action]:
            now = r["state"].replace("_", " ")
            if r["held_until"]:
                now += f" until {r['held_until']}"
            raise Conflict(
                f"The number {r['dialcode']}:{r['number']} is {now}: it cannot be "
                f"{_done(choice.action)}. Nothing was changed.",
                {"number": now},
            )
    return rows


def _done(action: str) -> str:
    return {"reserve": "reserved", "release": "released", "retire": "retired"}[action]


def _ticked(principal: Principal, keys: Sequence[str]) -> list[dict[str, str]]:
    wanted: list[tuple[str, str]] = []
    for key in dict.fromkeys(keys):
        dialcode, _, number = key.partition(":")
        if not (
            FORMATS["dialcode"][0].fullmatch(dialcode) and FORMATS["number"][0].fullmatch(number)
        ):
            raise Invalid(f"'{key}' names no number.", {"key": "malformed"})
        wanted.append((dialcode, number))
    if len(wanted) > MAX_TICKED:
        why = f"at most {MAX_TICKED:,} ticked; for more, choose all matching the filters"
        raise Invalid(f"Tick {why}.", {"key": why})
    on = inventory.today()
    grouped: dict[str, list[str]] = {}
    for dialcode, number in wanted:
        grouped.setdefault(dialcode, []).append(number)
    query = select(Number).where(
        or_(*(and_(Number.dialcode == d, Number.number.in_(ns)) for d, ns in grouped.items()))
    )
    found = {(n.dialcode, n.number): n for n in db.session.scalars(query)}
    for dialcode, number in sorted(wanted):
        if (dialcode, number) not in found:
            raise Conflict(
                f"The number {dialcode}:{number} is no longer in the inventory. "
                "Nothing was changed.",
                {"number": "not in the inventory"},
            )
    return [browse.row(answers.answer(principal, found[k], on)) for k in sorted(wanted)]


def _preview(choice: Choice, rows: list[dict[str, str]], until: date | None) -> Preview:
    digest = hashlib.sha256(f"{choice.action}\n{choice.company or ''}\n{until or ''}\n".encode())
    for r in rows:
        line = "\t".join((r["dialcode"], r["number"], r["state"], r["company"], r["held_until"]))
        digest.update((line + "\n").encode())
    held = Counter(r["company"] for r in rows if r["company"])
    return Preview(
        choice=choice,
        count=len(rows),
        sample=rows[:SAMPLE],
        by_company=sorted(held.items(), key=lambda cn: (-cn[1], cn[0]))[:SAMPLE],
        fingerprint=digest.hexdigest(),
        until=until,
    )


def preview(principal: Principal, target: Target, choice: Choice) -> Preview:
    """How many numbers the action would change, and which.

    Guarantees: the checks of `apply` (System-Admin, the action fits the numbers' states, a
    reservation's company and day, a retire's reason when aging numbers are among them),
    nothing written. Invalid when nothing is selected or more than MAX_NUMBERS are; a
    Conflict naming a number not in a state the action takes."""
    until = _check(principal, target, choice)
    try:
        rows = _rows(principal, target, choice)
        _reason(choice, rows)
        return _preview(choice, rows, until)
    finally:
        db.session.rollback()


def _reason(choice: Choice, rows: list[dict[str, str]]) -> None:
    if choice.action == "retire" and any(r["state"] == inventory.AGING for r in rows):
        inventory.parse_override(True, choice.reason)


def apply(principal: Principal, target: Target, choice: Choice, expected: str) -> int:
    """Carry out a previewed action on the numbers `target` names now; return how many
    changed.

    Guarantees: unless they are the numbers previewed with the fingerprint `expected`, in
    the same states, raises Changed with the new preview and changes nothing. Then the
    numbers' own service changes them, all or nothing, checking each again under its lock
    (a number taken meanwhile: its Conflict, nothing changed)."""
    until = _check(principal, target, choice)
    rows = _rows(principal, target, choice)
    _reason(choice, rows)
    plan = _preview(choice, rows, until)
    db.session.rollback()
    if not hmac.compare_digest(plan.fingerprint, expected):
        raise Changed(plan)
    keys = [(r["dialcode"], r["number"]) for r in rows]
    if choice.action == "reserve":
        assert choice.company is not None
        return reserving.reserve_numbers(principal, keys, choice.company, until)
    if choice.action == "release":
        return reserving.release_numbers(principal, keys)
    aging = any(r["state"] == inventory.AGING for r in rows)
    return retiring.retire_numbers(principal, keys, choice.reason if aging else None)
