"""A report answer as JSON text, written directly (docs/reports.md#the-answer).

The API's report for every company is 10,000 entries of 28 to 31 days at a provider: built
as dicts and then encoded, the dicts and their encoding cost more than reading the figures.
Here each entry is one %-format of a template made once per answer (every company has the
same days), giving byte for byte what json.dumps writes for reports.answer's dict with the
app's JSON settings: compact separators, the documented key order, strings escaped as
json.dumps escapes them (tests/test_report_json.py holds the two together).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any


def answer_text(
    head: Mapping[str, Any],
    day_labels: Sequence[str],
    keys: tuple[str, str],
    entries: Iterable[tuple[str, str, Sequence[int]]],
    per_day: Callable[[int, int], float | int],
    *,
    ensure_ascii: bool = True,
) -> str:
    """json.dumps({**head, "values": {company: entry}}, separators=(",", ":"),
    ensure_ascii=ensure_ascii) for `entries` (company id, name, its values for `day_labels`),
    each entry in the order reports._entry makes it: name, days, dates, then `keys` (the
    per-day figure's name, `per_day(total, days)`, and the month total's)."""
    string = encode_basestring_ascii if ensure_ascii else encode_basestring
    days = len(day_labels)
    per_day_key, month_key = keys
    # ISO dates and the figures' names: nothing to escape, and no '%' in the template.
    dates = ",".join(f"{string(label)}:%d" for label in day_labels)
    template = (
        f'%s:{{"name":%s,"days":{days},"dates":{{{dates}}},'
        f"{string(per_day_key)}:%r,{string(month_key)}:%d}}"
    )
    parts = []
    for company, name, values in entries:
        total = sum(values)
        # float's repr is json.dumps's: 103.0323, 12.0; an int (no days) is written as one.
        figures = (string(company), string(name), *values, per_day(total, days), total)
        parts.append(template % figures)
    opening = json.dumps(dict(head), separators=(",", ":"), ensure_ascii=ensure_ascii)
    values_member = f"{string('values')}:{{{','.join(parts)}}}"
    return f"{opening[:-1]},{values_member}}}" if head else f"{{{values_member}}}"
