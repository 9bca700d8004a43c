"""An audit entry's before and after as a reader sees them: 'Extension: 100 → 101'.

The log stores each side as the record's fields (JSON); the page and its CSV show what changed,
field by field, under the labels the other pages use (forms.FIELD_LABELS) plus the account,
token and company fields the admin pages audit. Values are text: yes/no for booleans, lists
joined by commas, '(none)' for nothing. The templates escape them like any other text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .forms import FIELD_LABELS

# The record fields' labels, and those of the other things the log records.
LABELS: dict[str, str] = {
    **FIELD_LABELS,
    "system_admin": "System-Admin",
    "admin_of": "Company-Admin of",
    "billing_summary": "Billing Call-Summary",
    "reporting_for": "Billing/Call Reporting for",
    "active": "Active",
    "token_id": "Token",
    "label": "Label",
    "prefix": "Prefix",
    "id": "Identifier",
    "name": "Name",
}
NONE = "(none)"
ARROW = "→"


@dataclass(frozen=True)
class FieldChange:
    """One field of an entry. `before` None: it was set (a creation); `after` None: it was
    removed (a deletion); both: it changed from one to the other."""

    label: str
    before: str | None
    after: str | None

    def text(self) -> str:
        """The change as one line of plain text, as the CSV holds it."""
        if self.before is not None and self.after is not None:
            return f"{self.label}: {self.before} {ARROW} {self.after}"
        return f"{self.label}: {self.after if self.after is not None else self.before}"


def label(field: str) -> str:
    """A field's label; an unknown field by its name, made readable ('max_rows': 'Max rows')."""
    return LABELS.get(field) or field.replace("_", " ").capitalize()


def readable(value: Any) -> str:
    """A stored value as text: yes/no, comma-joined lists, '(none)' for nothing."""
    if type(value) is str:  # most values: first, as the CSV reads millions of them
        return value
    if value is None:
        return NONE
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(readable(v) for v in value) if value else NONE
    if isinstance(value, Mapping):
        return ", ".join(f"{label(str(k))}: {readable(v)}" for k, v in value.items()) or NONE
    return str(value)


def changes(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[FieldChange]:
    """The fields an entry records, in the order they were stored. With both sides only the
    fields that differ, as 'before → after'; with one side (a creation, a deletion) every
    field with its value."""
    old, new = before or {}, after or {}
    if before is not None and after is not None:
        fields = [*old, *(f for f in new if f not in old)]
        return [
            FieldChange(label(f), readable(old.get(f)), readable(new.get(f)))
            for f in fields
            if old.get(f) != new.get(f)
        ]
    if after is not None:
        return [FieldChange(label(f), None, readable(v)) for f, v in new.items()]
    return [FieldChange(label(f), readable(v), None) for f, v in old.items()]


class _Labels(dict[str, str]):
    """`label` of each field met, kept (the fields the log records are few; past MAX_LABELS
    unknown names are labelled afresh each time rather than held)."""

    MAX_LABELS = 10_000

    def __missing__(self, field: str) -> str:
        text = label(field)
        if len(self) < self.MAX_LABELS:
            self[field] = text
        return text


_LABELS = _Labels()


def changes_text(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> str:
    """All of an entry's changes as one line ('; ' between fields), for the CSV: the text of
    each of `changes` (FieldChange.text), built without them, as the CSV reads millions: the
    labels kept (_LABELS), a text value taken as it is (`readable`'s first case) without a
    call."""
    labels = _LABELS
    if before is not None and after is not None:
        old, new = before, after
        fields = [*old, *(f for f in new if f not in old)]
        return "; ".join(
            [
                f"{labels[f]}: {readable(old.get(f))} {ARROW} {readable(new.get(f))}"
                for f in fields
                if old.get(f) != new.get(f)
            ]
        )
    side = after if after is not None else before
    if not side:
        return ""
    # A list, not a generator: join makes one of either first.
    return "; ".join(
        [f"{labels[f]}: {v if type(v) is str else readable(v)}" for f, v in side.items()]
    )
