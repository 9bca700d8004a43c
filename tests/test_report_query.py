"""services.report_query without HTTP: the one parser of a report's query parameters, in the
API's strict style and the pages' forgiving one."""

from __future__ import annotations

import pytest

from webapp.errors import Invalid
from webapp.services.billing.report_query import API, PAGE, QueryStyle, scope_from_query


@pytest.mark.parametrize("style", [API, PAGE])
def test_company_month_and_year_make_the_scope(style: QueryStyle) -> None:
    args = {"company": ["acme", "umbrella"], "month": ["10"], "year": ["2026"]}
    assert scope_from_query(args, style) == {
        "company": ["acme", "umbrella"],
        "month": 10,
        "year": 2026,
    }


@pytest.mark.parametrize("style", [API, PAGE])
def test_nothing_asked_is_an_empty_scope(style: QueryStyle) -> None:
    assert scope_from_query({}, style) == {}


def test_the_api_refuses_an_unknown_parameter_first() -> None:
    with pytest.raises(Invalid) as caught:
        scope_from_query({"month": ["x"], "type": ["cdr"], "foo": ["1"]}, API)
    assert caught.value.message == "Query parameter 'type' is not known here."
    assert caught.value.fields == {"type": "unknown field"}


def test_a_page_ignores_unknown_parameters() -> None:
    assert scope_from_query({"month": ["3"], "_": ["123"]}, PAGE) == {"month": 3}


@pytest.mark.parametrize(
    ("style", "message", "why"),
    [
        (API, "Query parameter 'year' is given more than once.", "given twice"),
        (PAGE, "Give 'year' only once.", "given more than once"),
    ],
)
def test_month_or_year_given_twice(style: QueryStyle, message: str, why: str) -> None:
    with pytest.raises(Invalid) as caught:
        scope_from_query({"month": ["3"], "year": ["2025", "2025"]}, style)
    assert (caught.value.message, caught.value.fields) == (message, {"year": why})


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "12345", "\u0661\u0660", "", " 3"])
def test_the_api_takes_only_up_to_four_ascii_digits(value: str) -> None:
    with pytest.raises(Invalid) as caught:
        scope_from_query({"month": [value]}, API)
    assert caught.value.message == "Query parameter 'month' must be a whole number."
    assert caught.value.fields == {"month": "must be an integer"}


@pytest.mark.parametrize(("name", "example"), [("month", "10"), ("year", "2026")])
def test_a_page_words_a_bad_number_with_an_example(name: str, example: str) -> None:
    with pytest.raises(Invalid) as caught:
        scope_from_query({name: ["20x6"]}, PAGE)
    assert caught.value.message == f"The {name} must be a whole number, such as {example}."
    assert caught.value.fields == {name: "must be a whole number"}


def test_a_page_takes_blank_values_as_absent_and_trims_numbers() -> None:
    args = {"company": ["", "acme", ""], "month": [" 3 ", ""], "year": ["  "]}
    assert scope_from_query(args, PAGE) == {"company": ["acme"], "month": 3}
    assert scope_from_query({"company": [""]}, PAGE) == {}


def test_the_api_keeps_an_empty_company_for_the_service_to_refuse() -> None:
    assert scope_from_query({"company": [""]}, API) == {"company": [""]}
