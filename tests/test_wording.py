"""Counts as an operator reads them (webapp/wording.py): the noun agrees with the count."""

from __future__ import annotations

import pytest

from webapp.wording import counted


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        ((1, "interval"), {}, "1 interval"),
        ((0, "interval"), {}, "0 intervals"),
        ((2, "interval"), {}, "2 intervals"),
        ((1, "company", "companies"), {}, "1 company"),
        ((0, "company", "companies"), {}, "0 companies"),
        ((-1, "day"), {}, "-1 days"),
        ((1234, "record"), {}, "1234 records"),
        ((1234, "record"), {"grouped": True}, "1,234 records"),
        ((1, "record"), {"grouped": True}, "1 record"),
    ],
)
def test_the_noun_agrees_with_the_count(args, kwargs, expected):
    assert counted(*args, **kwargs) == expected
