"""Numbered pages for the short administration lists (/admin/companies, /admin/accounts): a
search text and a page number from the query string, checked, and the page clamped to the
list. Tens of thousands of rows at most, so an offset is cheap; the long record lists page by
keyset instead (listing.py)."""

from __future__ import annotations

from ..errors import Invalid

MAX_SEARCH = 200  # longer than any identifier, username or company name
MAX_PAGE = 999_999


def search_text(q: object) -> str:
    """`q` stripped, for a contains-match; "" matches everything. Invalid if it is not text,
    is longer than MAX_SEARCH or holds control characters."""
    if q is None:
        return ""
    if not isinstance(q, str):
        raise Invalid("The search must be text.", {"q": "must be text"})
    q = q.strip()
    if len(q) > MAX_SEARCH or any(ord(ch) < 32 for ch in q):
        raise Invalid(
            f"The search is at most {MAX_SEARCH} printable characters.",
            {"q": f"at most {MAX_SEARCH} printable characters"},
        )
    return q


def page_number(page: object) -> int:
    """A 1-based page number from an int or a string of digits; Invalid otherwise."""
    if isinstance(page, str) and page.isascii() and page.isdigit() and len(page) <= 6:
        page = int(page)
    if not isinstance(page, int) or isinstance(page, bool) or not 1 <= page <= MAX_PAGE:
        raise Invalid(
            f"The page is a whole number from 1 to {MAX_PAGE}.",
            {"page": f"a whole number from 1 to {MAX_PAGE}"},
        )
    return page


def clamp(number: int, total: int, per_page: int) -> tuple[int, int]:
    """(page number within the list, number of pages): a page past the end is the last one;
    an empty list has one (empty) page."""
    pages = max(1, -(-total // per_page))
    return min(number, pages), pages
