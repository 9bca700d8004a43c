"""A record list's rows as the tests read them (tests/test_views_records.py,
tests/test_number_search.py): each cell's values, a DDI's one Number cell as its two fields."""

from __future__ import annotations

import re

from bs4 import BeautifulSoup

SHOWN_DDI = re.compile(r"\+([0-9]+) ([0-9]+)")  # a DDI as pages write it: "+44 2071234567"


def cell_values(td) -> tuple[str, ...]:
    """A list cell's values: a company cell's identifier ('Acme (acme)' -> 'acme'), a DDI's
    Number cell its dialcode and number ('+44 2071234567' -> '44', '2071234567', the fields
    of the record and of its CSV), else its text."""
    company = td.select_one(".company-id")
    if company:
        return (company.get_text(strip=True).strip("()"),)
    text = td.get_text(" ", strip=True)
    shown = SHOWN_DDI.fullmatch(text) if td.get("data-label") == "Number" else None
    return (shown[1], shown[2]) if shown else (text,)


def table_rows(page: BeautifulSoup) -> list[tuple[str, ...]]:
    """The data cells of every row of the list table (the last cell holds the actions), a
    DDI's Number cell as its two fields; the number's state, held-until and description
    cells are left out (number_info reads them)."""
    return [
        tuple(
            v
            for td in tr.select("td:not(.tick-cell):not(.number-info)")[:-1]
            for v in cell_values(td)
        )
        for tr in page.select("table tbody tr")
    ]


def number_info(page: BeautifulSoup) -> list[dict[str, str]]:
    """Each row's number-info cells (state, held until, description) by their heading."""
    return [
        {td["data-label"]: td.get_text(" ", strip=True) for td in tr.select("td.number-info")}
        for tr in page.select("table tbody tr")
    ]
