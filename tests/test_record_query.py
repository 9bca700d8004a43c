"""The one record read (services/records/record_query.py) without HTTP: the selection both the API
read and the list pages build on (scope restriction, the fixed company, exact and prefix matching),
and `get`, the pages' one-record read."""

from __future__ import annotations

import pytest

from webapp.access import Principal
from webapp.database import upper_bound
from webapp.errors import Forbidden, NotFound
from webapp.services.records import kinds, listing, record_query

from .factories import OPERATOR, Factory

ROOT = OPERATOR
ACME_ADMIN = Principal(username="a", via="cli", admin_of=frozenset({"acme"}))
TWO_ADMIN = Principal(username="b", via="cli", admin_of=frozenset({"acme", "initech"}))
NOBODY = Principal(username="c", via="cli")


@pytest.fixture
def rows(factory: Factory) -> None:
    for company in ("acme", "globex", "initech"):
        factory.company(company)
    for number, company in (
        ("1899", "acme"),
        ("19", "acme"),
        ("1900", "globex"),
        ("1999999", "acme"),
        ("2", "initech"),
        ("29", "acme"),
    ):
        factory.ddi("44", number, company)
    for username, company in (
        ("a_c", "acme"),
        ("abc", "acme"),
        ("a_", "globex"),
        ("ab", "initech"),
    ):
        factory.user(username, company)


def numbers(principal: Principal, filters: dict[str, str]) -> list[str]:
    page = listing.page(principal, kinds.DDI, filters, per_page=100)
    return [r["number"] for r in page.rows]


def usernames(principal: Principal, filters: dict[str, str]) -> list[str]:
    page = listing.page(principal, kinds.PHONE_USER, filters, per_page=100)
    return [r["username"] for r in page.rows]


def test_upper_bound_is_the_last_characters_successor():
    assert upper_bound("19") == "1:"
    assert upper_bound("9") == ":"
    assert upper_bound("ab") == "ac"
    assert upper_bound("a.") == "a/"


def test_prefix_matches_from_the_start_up_to_the_last_characters_successor(rows):
    assert numbers(ROOT, {"number": "19"}) == ["19", "1900", "1999999"]
    assert numbers(ROOT, {"number": "1999999"}) == ["1999999"]
    assert numbers(ROOT, {"number": "2"}) == ["2", "29"]
    assert numbers(ROOT, {"number": "3"}) == []


def test_prefix_wildcards_are_plain_characters(rows):
    # '_' is LIKE's one-character wildcard: escaped, it matches only itself.
    assert usernames(ROOT, {"username": "a_"}) == ["a_c", "a_"]
    assert usernames(ROOT, {"username": "ab"}) == ["abc", "ab"]


def test_exact_matching_is_the_api_reads(rows):
    page = record_query.read(ROOT, kinds.DDI, {"number": "19"})
    assert [r["number"] for r in page.rows] == ["19"]
    assert page.total == 1


def test_the_scope_restriction_and_the_fixed_company(app):
    one = record_query.select_rows(ACME_ADMIN, kinds.DDI, {"number": "1"}, prefix=True)
    assert one.company == "acme"  # the only company: fixed, as if filtered
    assert not one.shape.restricted and not one.empty
    two = record_query.select_rows(TWO_ADMIN, kinds.DDI, {})
    assert two.company is None and two.shape.restricted
    assert two.params["visible"] == ["acme", "initech"]
    outside = record_query.select_rows(TWO_ADMIN, kinds.DDI, {"company": "globex"})
    assert outside.empty
    root = record_query.select_rows(ROOT, kinds.DDI, {"company": "globex"})
    assert root.company == "globex" and not root.shape.restricted and not root.empty
    with pytest.raises(Forbidden):
        record_query.select_rows(NOBODY, kinds.DDI, {})


def test_both_readers_see_only_the_principals_companies(rows):
    assert numbers(ACME_ADMIN, {}) == ["1899", "19", "1999999", "29"]
    assert numbers(TWO_ADMIN, {"number": "2"}) == ["2", "29"]
    assert numbers(ACME_ADMIN, {"company": "globex"}) == []
    read = record_query.read(TWO_ADMIN, kinds.DDI, {})
    assert [r["company"] for r in read.rows] == ["acme", "acme", "acme", "initech", "acme"]
    assert read.total == 5
    assert record_query.read(ACME_ADMIN, kinds.DDI, {"company": "globex"}).total == 0


def test_conditions_are_built_once_per_shape(app):
    a = record_query.select_rows(ROOT, kinds.DDI, {"number": "1", "company": "acme"}, prefix=True)
    b = record_query.select_rows(ROOT, kinds.DDI, {"number": "2", "company": "x"}, prefix=True)
    assert a.shape == b.shape and a.where is b.where
    assert a.params != b.params
    c = record_query.select_rows(ROOT, kinds.DDI, {"number": "1", "company": "acme"})
    assert c.shape != a.shape  # exact, not prefix


def test_get_finds_one_visible_record(rows):
    key = {"dialcode": "44", "number": "19"}
    assert record_query.get(ACME_ADMIN, kinds.DDI, key) == {
        **key,
        "virt_exten": "100",
        "company": "acme",
    }
    user = record_query.get(ROOT, kinds.PHONE_USER, {"company": "initech", "username": "ab"})
    assert user == {"username": "ab", "virt_exten": "200", "company": "initech"}
    for principal, key in (
        (ACME_ADMIN, {"dialcode": "44", "number": "1900"}),  # another company's
        (ROOT, {"dialcode": "44", "number": "1"}),  # a prefix is not a key
        (ROOT, {"dialcode": "44", "number": "x"}),  # malformed
        (ROOT, {"dialcode": "44"}),  # incomplete
    ):
        with pytest.raises(NotFound):
            record_query.get(principal, kinds.DDI, key)
    with pytest.raises(NotFound):
        record_query.get(ACME_ADMIN, kinds.PHONE_USER, {"company": "initech", "username": "ab"})
    with pytest.raises(Forbidden):
        record_query.get(NOBODY, kinds.DDI, {"dialcode": "44", "number": "19"})
