"""The field rules of webapp/services/fields.py, driven directly (no app, no HTTP).

The same rules answer the API (tests/test_api_errors.py checks them through /rest/ops/) and the
pages; here each one is pinned down on its own: the formats and their reasons, the DDI digit
limit, how one request object (`scope` / `values`) is parsed, and integers such as month/limit.
See docs/api.md#field-formats.
"""

from __future__ import annotations

import pytest

from webapp.errors import Invalid
from webapp.services.fields import FORMATS, MAX_DDI_DIGITS, Bounded, Part, check_format, parse_part

DDI = ("dialcode", "number", "virt_exten", "company")
CREATE = Part(allowed=DDI, required=DDI)
SCOPE = Part(allowed=DDI)
UPDATE = Part(
    allowed=("virt_exten", "company"), not_editable=("dialcode", "number"), at_least_one=True
)

REASONS = {
    "dialcode": "must be 1 to 7 digits",
    "number": "must be 1 to 15 digits",
    "virt_exten": "must be 1 to 10 digits",
    "company": "must be 1 to 64 of a-z 0-9 . _ -",
    "username": "must be 1 to 64 of a-z 0-9 . _ - @",
    "prefix": "must be 1 to 15 digits",
}


def ddi(**over: str) -> dict[str, str]:
    return {"dialcode": "33", "number": "140000000", "virt_exten": "100", "company": "acme", **over}


def parse_int(value, name, low, high, default, label=None):
    """An integer field as the services read one: Bounded, the type the request models use."""
    return Bounded(low, high, default).parse(value, name, label)


def refused(part: Part, data, name: str = "values", prefix: str = "") -> Invalid:
    with pytest.raises(Invalid) as caught:
        parse_part(part, data, name, prefix)
    return caught.value


# --- check_format ----------------------------------------------------------------------------


def test_every_field_has_its_reason():
    assert {field: why for field, (_, why) in FORMATS.items()} == REASONS


GOOD = [
    ("dialcode", "4"),
    ("dialcode", "1234567"),
    ("dialcode", "0"),
    ("number", "1" * 15),
    ("number", "0"),
    ("virt_exten", "1" * 10),
    ("virt_exten", "0"),
    ("company", "a"),
    ("company", "a.b_c-" + "z" * 58),  # 64 characters
    ("company", "acme2"),
    ("username", "ana.kim"),
    ("username", "ana@acme"),
    ("username", "x" * 64),
]


@pytest.mark.parametrize(("field", "value"), GOOD)
def test_valid_values_pass(field, value):
    assert check_format(field, value) is None


BAD = [
    ("dialcode", "12345678"),
    ("dialcode", ""),
    ("dialcode", "4a"),
    ("dialcode", "+44"),
    ("dialcode", " 44"),
    ("dialcode", "44\n"),  # `$` would have let a trailing newline through
    ("dialcode", "\u0664\u0664"),  # Arabic-Indic digits: `\d` would have let them through
    ("dialcode", "\uff14\uff14"),  # fullwidth digits
    ("dialcode", "-1"),
    ("dialcode", "4\u00004"),
    ("number", "1" * 16),
    ("number", ""),
    ("number", "207 123"),
    ("number", "1e5"),
    ("number", "\ud800"),
    ("virt_exten", "1" * 11),
    ("virt_exten", ""),
    ("virt_exten", "10a"),
    ("virt_exten", "100\n"),
    ("company", "Acme"),
    ("company", "ACME"),
    ("company", "a" * 65),
    ("company", ""),
    ("company", "ac me"),
    ("company", "acme/x"),
    ("company", "acm\u00e9"),
    ("company", "acme\u0000"),
    ("username", "Ana"),
    ("username", "x" * 65),
    ("username", "ana kim"),
    ("username", ""),
]


@pytest.mark.parametrize(("field", "value"), BAD, ids=repr)
def test_invalid_values_give_the_fields_reason(field, value):
    assert check_format(field, value) == REASONS[field]


@pytest.mark.parametrize("value", [1234, 0, 44.0, None, True, False, ["44"], {"v": "44"}], ids=repr)
@pytest.mark.parametrize("field", sorted(FORMATS))
def test_a_value_that_is_not_a_string_is_never_converted(field, value):
    assert check_format(field, value) == "must be a string"


# --- parse_part ------------------------------------------------------------------------------


def test_a_valid_object_comes_back_as_a_plain_dict():
    assert parse_part(CREATE, ddi(), "values") == ddi()


@pytest.mark.parametrize("data", [None, {}])
def test_an_absent_object_is_an_empty_one(data):
    assert parse_part(SCOPE, data, "scope") == {}


@pytest.mark.parametrize("data", [[], "acme", ["acme"], 1, True])
def test_an_object_that_is_not_an_object_is_refused_by_name(data):
    error = refused(SCOPE, data, "scope")
    assert error.fields == {"scope": "must be an object"}
    assert error.message == "'scope' must be an object."


def test_a_batch_row_that_is_not_an_object_is_named_by_its_row():
    error = refused(CREATE, None, "values", prefix="values[3].")
    assert error.fields == {"values[3]": "must be an object"}
    assert error.message == "'values[3]' must be an object."


def test_unknown_fields_are_named():
    error = refused(SCOPE, {"company": "acme", "foo": "x"}, "scope")
    assert error.fields == {"foo": "unknown field"}
    assert error.message == "Field 'foo' unknown field."


def test_required_fields_are_named():
    error = refused(CREATE, {"dialcode": "44", "number": "1"}, "values")
    assert error.fields == {"virt_exten": "required", "company": "required"}
    assert error.message == "Field 'virt_exten' required (and 1 more)."


def test_key_fields_are_not_editable_even_beside_an_editable_one():
    error = refused(UPDATE, {"number": "1", "virt_exten": "555"}, "values")
    assert error.fields == {"number": "field not editable"}


def test_at_least_one_field_is_needed_where_the_part_says_so():
    error = refused(UPDATE, {}, "values")
    assert error.fields == {"values": "must hold at least one of virt_exten, company"}
    assert parse_part(UPDATE, {"company": "globex"}, "values") == {"company": "globex"}


def test_every_problem_is_named_and_the_message_counts_the_rest():
    error = refused(CREATE, ddi(dialcode="x", number="", virt_exten=5, foo="1"), "values")
    assert error.fields == {
        "dialcode": REASONS["dialcode"],
        "number": REASONS["number"],
        "virt_exten": "must be a string",
        "foo": "unknown field",
    }
    assert error.message == f"Field 'dialcode' {REASONS['dialcode']} (and 3 more)."


def test_a_batch_rows_fields_carry_the_row_prefix():
    error = refused(CREATE, ddi(number="x", bar="1"), "values", prefix="values[2].")
    assert error.fields == {"values[2].number": REASONS["number"], "values[2].bar": "unknown field"}


# --- the DDI digit limit ---------------------------------------------------------------------


def test_dialcode_and_number_together_may_have_17_digits():
    assert MAX_DDI_DIGITS == 17
    for dialcode, number in (("1234567", "1" * 10), ("1", "1" * 15), ("12", "1" * 15)):
        assert len(dialcode + number) <= 17
        assert parse_part(CREATE, ddi(dialcode=dialcode, number=number), "values")


@pytest.mark.parametrize(("dialcode", "number"), [("123", "1" * 15), ("1234567", "1" * 11)])
def test_dialcode_and_number_over_17_digits_are_refused_on_number(dialcode, number):
    error = refused(CREATE, ddi(dialcode=dialcode, number=number), "values")
    reason = "dialcode and number together must be at most 17 digits"
    assert error.fields == {"number": reason}


def test_the_digit_limit_also_binds_a_scope_and_a_batch_row():
    values = {"dialcode": "1234567", "number": "1" * 11}
    assert set(refused(SCOPE, values, "scope").fields) == {"number"}
    assert set(refused(CREATE, ddi(**values), "values", "values[0].").fields) == {
        "values[0].number"
    }


def test_the_digit_limit_is_only_checked_once_the_formats_pass():
    error = refused(CREATE, ddi(dialcode="12345678", number="1" * 15), "values")
    assert error.fields == {"dialcode": REASONS["dialcode"]}


# --- parse_int -------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [(5, 5), (5.0, 5), (1, 1), (12, 12), (None, 7)])
def test_integers_in_range_and_the_default(value, expected):
    assert parse_int(value, "month", 1, 12, 7) == expected


@pytest.mark.parametrize("value", [5.5, "5", True, False, [5], {"m": 5}, float("inf")], ids=repr)
def test_what_is_not_a_json_integer_is_refused(value):
    with pytest.raises(Invalid) as caught:
        parse_int(value, "month", 1, 12, None, label="scope.month")
    assert caught.value.fields == {"month": "must be an integer"}
    assert caught.value.message == "'scope.month' must be an integer."


@pytest.mark.parametrize("value", [0, 13, -1, 2**60])
def test_integers_out_of_range_are_refused_with_the_range(value):
    with pytest.raises(Invalid) as caught:
        parse_int(value, "month", 1, 12, None)
    assert caught.value.fields == {"month": "must be 1 to 12"}
    assert caught.value.message == "'month' must be 1 to 12."
