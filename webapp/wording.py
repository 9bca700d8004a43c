"""Counts as an operator reads them: "1 interval", "2 intervals", "0 companies"."""

from __future__ import annotations


def counted(count: int, singular: str, plural: str | None = None, *, grouped: bool = False) -> str:
    """`count` and the noun that agrees with it: `singular` for exactly one, else `plural`
    (default: `singular` + "s"; give it for "company", "companies"). `grouped` writes the
    count with thousands separators (1,234), as the pages do; the command line prints plain
    digits, which a script reads back."""
    number = f"{count:,}" if grouped else str(count)
    return f"{number} {singular if count == 1 else (plural or singular + 's')}"


def ddi_number(dialcode: str, number: str) -> str:
    """A DDI as every page writes it: "+44 2071234567", the dialcode part after a plus, a
    space, then the number part (docs/pages.md, "One way of writing a number"). The space sits
    where the record's key splits, so two records whose digits run together alike (44 and
    2071234567, 4420 and 71234567) never read the same; the number search takes the form
    back as typed."""
    return f"+{dialcode} {number}"


def ddi_key_number(key: str) -> str:
    """A history key ("44:2071234567", as reports and the audit log hold a DDI) written the
    way pages write a number; anything else (a phone user's "acme/ana.kim") comes back as it
    is."""
    dialcode, colon, number = key.partition(":")
    if not colon or not dialcode.isdigit() or not number.isdigit():
        return key
    return ddi_number(dialcode, number)


def audit_target(target: str) -> str:
    """An audit entry's target as pages show it: a DDI ("ddi 44:2071234567") written as pages
    write a number, "+44 2071234567"; any other target ("user acme/ana.kim", "webhook 3") as
    the log names it. The CSV keeps the log's words, which its target filter takes back."""
    word, space, key = target.partition(" ")
    if word == "ddi" and space:
        shown = ddi_key_number(key)
        if shown != key:
            return shown
    return target
