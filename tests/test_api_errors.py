"""The JSON API's status codes and error envelope (docs/api.md#errors), and its success shapes.

Every refused request is checked for the exact status, the exact envelope and, for writes, that
nothing changed (`snapshot()` before and after).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import insert, select

from webapp import create_app
from webapp.database import utcnow, write_transaction
from webapp.extensions import ProcessCounters, db, limiter
from webapp.models import Account, ApiToken, Company
from webapp.services import fields
from webapp.services.events import feed
from webapp.services.identity import accounts, api_tokens

from .conftest import empty_all_tables
from .factories import OPERATOR, Caller, Factory, World, snapshot
from .snapshots import kept

OPS = ("create", "read", "update", "link", "delete")
WRITE_OPS = ("create", "update", "link", "delete")
LEAKS = ("Traceback", "sqlalchemy", "SQLAlchemy", "SELECT", "INSERT", "psycopg", 'File "')
# Statuses where no field is at fault, so the envelope must not carry `fields`.
FIELDLESS = {401, 404, 405, 413, 415, 429}
MIB = 1024 * 1024


class _Missing:
    """A field left out of a request (its repr names the test cases the same in every run)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()


# --- helpers ---------------------------------------------------------------------------------


def assert_no_leak(response) -> None:
    text = response.get_data(as_text=True)
    for word in LEAKS:
        assert word not in text, f"{word!r} leaked into the response: {text[:500]}"


def assert_error(
    response,
    status: int,
    code: str,
    fields: set[str] | dict[str, str] | None = None,
    *,
    no_fields: bool = False,
) -> dict[str, Any]:
    """The exact status and envelope; `fields` names exactly the fields at fault (a dict also
    fixes each reason). Returns the `error` object."""
    assert_no_leak(response)
    assert response.status_code == status, response.get_data(as_text=True)[:500]
    assert "Location" not in response.headers
    assert response.mimetype == "application/json"
    body = response.get_json()
    assert isinstance(body, dict)
    assert set(body) == {"result", "error"}, body
    assert body["result"] == "error"
    error = body["error"]
    assert isinstance(error, dict)
    assert {"code", "message"} <= set(error) <= {"code", "message", "fields"}, error
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"].strip()
    if "fields" in error:
        assert isinstance(error["fields"], dict) and error["fields"], error
        for name, why in error["fields"].items():
            assert isinstance(name, str) and name
            assert isinstance(why, str) and why.strip()
    if no_fields or status in FIELDLESS:
        assert "fields" not in error, error
    if fields is not None:
        assert "fields" in error, error
        assert set(error["fields"]) == set(fields), error["fields"]
        if isinstance(fields, dict):
            for name, why in fields.items():
                assert error["fields"][name] == why, error["fields"]
    return error


def assert_success(response, **expected: Any) -> dict[str, Any]:
    assert_no_leak(response)
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    body = response.get_json()
    assert body["result"] == "success"
    for key, value in expected.items():
        assert body[key] == value, body
    return body


@contextmanager
def unchanged() -> Iterator[None]:
    """Nothing a write may touch changes inside the block."""
    before = snapshot()
    yield
    assert snapshot() == before


def ddi_values(**over: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "dialcode": "33",
        "number": "140000000",
        "virt_exten": "100",
        "company": "acme",
    }
    values.update(over)
    return {k: v for k, v in values.items() if v is not MISSING}


def valid_body(op: str) -> dict[str, Any]:
    """A body each operation accepts from a System-Admin in `world`."""
    return {
        "create": {"type": "ddi", "values": ddi_values()},
        "read": {"type": "ddi", "scope": {"company": "acme"}},
        "update": {"type": "ddi", "scope": {"company": "acme"}, "values": {"virt_exten": "555"}},
        "link": {
            "type": "ddi",
            "scope": {"dialcode": "44", "number": "2071234567"},
            "values": {"virt_exten": "555", "company": "acme"},
        },
        "delete": {"type": "ddi", "scope": {"company": "acme", "number": "2071234567"}},
    }[op]


def raw_post(factory: Factory, caller: Caller | None, op: str, data: bytes, **kwargs: Any):
    kwargs.setdefault("content_type", "application/json")
    headers = caller.headers if caller else {}
    return factory.client.post(f"/rest/ops/{op}/", data=data, headers=headers, **kwargs)


# The shared world's acme and globex, with these accounts (username -> role).
ACCOUNTS = {
    "root": "root",  # System-Admin
    "ca": "cadmin",  # Company-Admin of acme
    "billing": "summary",  # Billing Call-Summary only
    "reporter": "reporter",  # Billing / Call Reporting for acme only
}


@pytest.fixture
def world_companies() -> dict[str, str]:
    return {"acme": "Acme", "globex": "Globex"}


@pytest.fixture
def world_accounts() -> dict[str, str]:
    return ACCOUNTS


@pytest.fixture
@kept
def world(world: World) -> World:
    """The shared world (callers world.root, world.ca, world.billing, world.reporter) with two
    DDIs and three phone users."""
    factory = world.factory
    factory.ddi("44", "2071234567", "acme", "100")
    factory.ddi("44", "2079999999", "globex", "101")
    factory.user("ana", "acme")
    factory.user("bob", "acme")
    factory.user("bob", "globex")
    return world


# --- 400 bad_request: the body ---------------------------------------------------------------


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(
    "raw",
    [b"[]", b'[{"type": "ddi"}]', b'"ddi"', b"null", b"1234", b"true"],
    ids=["empty-array", "array", "string", "null", "number", "bool"],
)
def test_body_that_is_not_a_json_object_is_400(world, op, raw):
    with unchanged():
        r = raw_post(world.factory, world.root, op, raw)
    assert_error(r, 400, "bad_request", no_fields=True)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{",
        b"{'type': 'ddi'}",
        b'{"type": "ddi",}',
        b'{"type": "ddi"} trailing',
        b"\xff\xfe\xfd",
        b'{"type": "ddi", "scope": {"company": "ac\xffme"}}',
        b'{"type": "ddi", "scope": {"company": "\xc3\x28"}}',
        b'{"type": "ddi", "scope": {"company": "ac\x00me"}}',
    ],
    ids=[
        "empty",
        "truncated",
        "single-quotes",
        "trailing-comma",
        "trailing-garbage",
        "invalid-utf8",
        "invalid-utf8-in-string",
        "invalid-utf8-sequence",
        "raw-nul-in-string",
    ],
)
def test_invalid_json_is_400(world, op, raw):
    with unchanged():
        r = raw_post(world.factory, world.root, op, raw)
    assert_error(r, 400, "bad_request", no_fields=True)


HUGE_INT = b"1" + b"0" * 5000
DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("op", "raw"),
    [
        ("read", b'{"type": "ddi", "limit": ' + HUGE_INT + b"}"),
        ("read", b'{"type": "ddi", "offset": -' + HUGE_INT + b"}"),
        (
            "create",
            b'{"type": "ddi", "values": {"dialcode": "44", "number": '
            + HUGE_INT
            + b', "virt_exten": "1", "company": "acme"}}',
        ),
        ("read", b'{"type": "ddi", "scope": ' + DEEP + b"}"),
        ("create", b'{"type": "ddi", "values": ' + DEEP + b"}"),
        ("update", b'{"type": "ddi", "scope": {"company": "acme"}, "values": ' + DEEP + b"}"),
        ("read", b'{"type": "ddi", "limit": 1e999}'),
        ("read", b'{"type": "ddi", "limit": NaN}'),
        ("read", b'{"type": "ddi", "limit": Infinity}'),
    ],
    ids=[
        "huge-int-limit",
        "huge-negative-int-offset",
        "huge-int-number",
        "deep-nesting-scope",
        "deep-nesting-values",
        "deep-nesting-update",
        "float-overflow-limit",
        "nan-limit",
        "infinity-limit",
    ],
)
def test_hostile_json_is_400_not_a_crash(world, op, raw):
    with unchanged():
        r = raw_post(world.factory, world.root, op, raw)
    assert_error(r, 400, "bad_request")


# --- 400 bad_request: `type` and unknown fields ----------------------------------------------


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(
    "kind", ["cdr", "DDI", "Ddi", "ddi ", "", None, 1, ["ddi"], MISSING], ids=repr
)
def test_wrong_or_missing_type_is_400_naming_type(world, op, kind):
    body = dict(valid_body(op))
    if kind is MISSING:
        del body["type"]
    else:
        body["type"] = kind
    with unchanged():
        r = world.factory.api(world.root, op, body)
    assert_error(r, 400, "bad_request", {"type"})


def test_link_of_type_user_is_400_naming_type(world):
    body = {
        "type": "user",
        "scope": {"username": "ana", "company": "acme"},
        "values": {"virt_exten": "555", "company": "acme"},
    }
    with unchanged():
        r = world.factory.api(world.root, "link", body)
    assert_error(r, 400, "bad_request", {"type"})


@pytest.mark.parametrize(
    ("op", "field"),
    [
        *((op, "extra") for op in OPS),
        *((op, "Type") for op in OPS),
        ("create", "scope"),
        ("create", "limit"),
        ("read", "values"),
        ("update", "limit"),
        ("link", "offset"),
        ("delete", "values"),
    ],
)
def test_unknown_top_level_field_is_400_naming_it(world, op, field):
    body = {**valid_body(op), field: {"company": "acme"}}
    with unchanged():
        r = world.factory.api(world.root, op, body)
    assert_error(r, 400, "bad_request", {field: "unknown field"})


@pytest.mark.parametrize(
    ("op", "part", "field"),
    [
        ("create", "values", "foo"),
        ("create", "values", "Dialcode"),
        ("create", "values", "username"),
        ("read", "scope", "foo"),
        ("read", "scope", "Company"),
        ("update", "scope", "foo"),
        ("update", "values", "foo"),
        ("link", "scope", "foo"),
        ("link", "values", "foo"),
        ("delete", "scope", "foo"),
    ],
)
def test_unknown_field_inside_scope_or_values_is_400_naming_it(world, op, part, field):
    body = valid_body(op)
    body = {**body, part: {**body[part], field: "1"}}
    with unchanged():
        r = world.factory.api(world.root, op, body)
    assert_error(r, 400, "bad_request", {field: "unknown field"})


@pytest.mark.parametrize(
    ("op", "part", "value"),
    [
        ("create", "values", "x"),
        ("create", "values", 1),
        ("create", "values", True),
        ("read", "scope", []),
        ("read", "scope", "acme"),
        ("update", "scope", "acme"),
        ("update", "values", ["555"]),
        ("link", "scope", "44:2071234567"),
        ("delete", "scope", ["acme"]),
    ],
)
def test_scope_or_values_that_is_not_an_object_is_400(world, op, part, value):
    body = {**valid_body(op), part: value}
    with unchanged():
        r = world.factory.api(world.root, op, body)
    error = assert_error(r, 400, "bad_request")
    assert "fields" in error and all(k.startswith(part) for k in error["fields"]), error


# --- 400 bad_request: field types and formats ------------------------------------------------


@pytest.mark.parametrize("field", ["dialcode", "number", "virt_exten", "company"])
@pytest.mark.parametrize("value", [1234, 0, 44.0, None, True, False, ["44"], {"v": "44"}], ids=repr)
def test_field_that_is_not_a_string_is_400_naming_it(world, field, value):
    with unchanged():
        r = world.factory.api(
            world.root, "create", {"type": "ddi", "values": ddi_values(**{field: value})}
        )
    assert_error(r, 400, "bad_request", {field})


@pytest.mark.parametrize(
    ("op", "part", "field", "value"),
    [
        ("read", "scope", "company", 1234),
        ("read", "scope", "number", 2071234567),
        ("update", "scope", "company", None),
        ("update", "values", "virt_exten", 555),
        ("link", "scope", "number", 2071234567),
        ("link", "values", "virt_exten", 555),
        ("delete", "scope", "company", ["acme"]),
    ],
)
def test_field_that_is_not_a_string_is_400_in_every_operation(world, op, part, field, value):
    body = valid_body(op)
    body = {**body, part: {**body[part], field: value}}
    with unchanged():
        r = world.factory.api(world.root, op, body)
    assert_error(r, 400, "bad_request", {field})


BAD_FORMATS = [
    ("dialcode", "12345678"),
    ("dialcode", ""),
    ("dialcode", "4a"),
    ("dialcode", "+44"),
    ("dialcode", " 44"),
    ("dialcode", "44\n"),
    ("dialcode", "\u0664\u0664"),  # Arabic-Indic digits
    ("dialcode", "\uff14\uff14"),  # fullwidth digits
    ("dialcode", "-1"),
    ("number", "1" * 16),
    ("number", ""),
    ("number", "207 123"),
    ("number", "2071234567\n"),
    ("number", "\u0662\u0660\u0667"),
    ("number", "1e5"),
    ("virt_exten", "1" * 11),
    ("virt_exten", ""),
    ("virt_exten", "10a"),
    ("virt_exten", "100\n"),
    ("company", "Acme"),
    ("company", "ACME"),
    ("company", "a" * 65),
    ("company", ""),
    ("company", "ac me"),
    ("company", "acme\n"),
    ("company", "acme/x"),
    ("company", "acm\u00e9"),
]
BAD_STRINGS = [
    ("dialcode", "4\u00004"),
    ("number", "207\u0000"),
    ("virt_exten", "\u0000"),
    ("company", "acme\u0000"),
    ("dialcode", "4\ud800"),
    ("number", "\ud800"),
    ("virt_exten", "1\udfff"),
    ("company", "acme\ud800"),
]


def _json_bytes(body: Any) -> bytes:
    # ensure_ascii writes a lone surrogate as the escape "\ud800", which is valid JSON text.
    return json.dumps(body, ensure_ascii=True).encode("ascii")


@pytest.mark.parametrize(("field", "value"), BAD_FORMATS + BAD_STRINGS, ids=repr)
def test_create_with_badly_formatted_field_is_400_naming_it(world, field, value):
    body = {"type": "ddi", "values": ddi_values(**{field: value})}
    with unchanged():
        r = raw_post(world.factory, world.root, "create", _json_bytes(body))
    assert_error(r, 400, "bad_request", {field})


@pytest.mark.parametrize(("field", "value"), BAD_FORMATS + BAD_STRINGS, ids=repr)
def test_read_with_badly_formatted_scope_field_is_400_naming_it(world, field, value):
    body = {"type": "ddi", "scope": {field: value}}
    r = raw_post(world.factory, world.root, "read", _json_bytes(body))
    assert_error(r, 400, "bad_request", {field})


@pytest.mark.parametrize(
    ("op", "part", "field", "value"),
    [
        ("update", "scope", "company", "ACME"),
        ("update", "scope", "company", "acme\u0000"),
        ("update", "scope", "dialcode", "12345678"),
        ("update", "values", "virt_exten", "1" * 11),
        ("update", "values", "company", "a" * 65),
        ("update", "values", "virt_exten", "\ud800"),
        ("link", "scope", "dialcode", "44\n"),
        ("link", "scope", "number", "1" * 16),
        ("link", "values", "virt_exten", "\u0661"),
        ("link", "values", "company", "Acme"),
        ("delete", "scope", "company", "acme "),
        ("delete", "scope", "virt_exten", "1" * 11),
        ("delete", "scope", "number", "2071234567\u0000"),
    ],
    ids=repr,
)
def test_badly_formatted_field_is_400_in_every_write(world, op, part, field, value):
    body = valid_body(op)
    body = {**body, part: {**body[part], field: value}}
    with unchanged():
        r = raw_post(world.factory, world.root, op, _json_bytes(body))
    assert_error(r, 400, "bad_request", {field})


@pytest.mark.parametrize(
    ("dialcode", "number"),
    [("1234567", "1" * 11), ("12", "1" * 16), ("1234", "1" * 14), ("1234567", "1" * 15)],
)
def test_dialcode_and_number_over_17_digits_together_is_400(world, dialcode, number):
    body = {"type": "ddi", "values": ddi_values(dialcode=dialcode, number=number)}
    with unchanged():
        r = world.factory.api(world.root, "create", body)
    error = assert_error(r, 400, "bad_request")
    # The contract does not say which of the two is named; one of them must be.
    assert error.get("fields") and set(error["fields"]) <= {"dialcode", "number"}, error


@pytest.mark.parametrize(
    "key",
    ["a\u0000b", "\ud800", "type\u0000"],
    ids=["nul", "lone-surrogate", "type-nul"],
)
def test_nul_or_lone_surrogate_in_a_field_name_is_400(world, key):
    raw = _json_bytes({"type": "ddi", key: "1"})
    r = raw_post(world.factory, world.root, "read", raw)
    assert_error(r, 400, "bad_request")
    raw = _json_bytes({"type": "ddi", "values": {**ddi_values(), key: "1"}})
    with unchanged():
        r = raw_post(world.factory, world.root, "create", raw)
    assert_error(r, 400, "bad_request")


# --- 400 bad_request: required and non-editable fields ---------------------------------------


@pytest.mark.parametrize("field", ["dialcode", "number", "virt_exten", "company"])
def test_create_missing_a_required_field_is_400_naming_it(world, field):
    with unchanged():
        r = world.factory.api(
            world.root, "create", {"type": "ddi", "values": ddi_values(**{field: MISSING})}
        )
    assert_error(r, 400, "bad_request", {field})


@pytest.mark.parametrize("values", [MISSING, None, {}], ids=["missing", "null", "empty"])
def test_create_without_values_is_400(world, values):
    body: dict[str, Any] = {"type": "ddi"}
    if values is not MISSING:
        body["values"] = values
    with unchanged():
        r = world.factory.api(world.root, "create", body)
    assert_error(r, 400, "bad_request")


@pytest.mark.parametrize(
    ("part", "field"),
    [
        ("scope", "dialcode"),
        ("scope", "number"),
        ("values", "virt_exten"),
        ("values", "company"),
    ],
)
def test_link_missing_a_required_field_is_400_naming_it(world, part, field):
    body = valid_body("link")
    body = {**body, part: {k: v for k, v in body[part].items() if k != field}}
    with unchanged():
        r = world.factory.api(world.root, "link", body)
    assert_error(r, 400, "bad_request", {field})


@pytest.mark.parametrize("field", ["dialcode", "number"])
@pytest.mark.parametrize("caller", ["root", "ca"])
def test_update_of_dialcode_or_number_is_400_field_not_editable(world, field, caller):
    body = {
        "type": "ddi",
        "scope": {"company": "acme", "dialcode": "44", "number": "2071234567"},
        "values": {field: "99"},
    }
    with unchanged():
        r = world.factory.api(getattr(world, caller), "update", body)
    assert_error(r, 400, "bad_request", {field: "field not editable"})


def test_update_of_dialcode_beside_an_editable_field_is_still_400(world):
    body = {
        "type": "ddi",
        "scope": {"company": "acme"},
        "values": {"virt_exten": "555", "number": "2070000000"},
    }
    with unchanged():
        r = world.factory.api(world.root, "update", body)
    assert_error(r, 400, "bad_request", {"number": "field not editable"})


def test_update_of_phone_user_username_is_400_field_not_editable(world):
    body = {
        "type": "user",
        "scope": {"company": "acme", "username": "ana"},
        "values": {"username": "anna"},
    }
    with unchanged():
        r = world.factory.api(world.root, "update", body)
    assert_error(r, 400, "bad_request", {"username": "field not editable"})


@pytest.mark.parametrize("values", [MISSING, None, {}], ids=["missing", "null", "empty"])
def test_update_with_no_values_is_400(world, values):
    body: dict[str, Any] = {"type": "ddi", "scope": {"company": "acme"}}
    if values is not MISSING:
        body["values"] = values
    with unchanged():
        r = world.factory.api(world.root, "update", body)
    assert_error(r, 400, "bad_request", {"values"})


@pytest.mark.parametrize("op", ["update", "delete"])
@pytest.mark.parametrize(
    "scope",
    [MISSING, None, {}, {"dialcode": "44", "number": "2071234567"}],
    ids=["missing", "null", "empty", "without-company"],
)
def test_update_or_delete_without_scope_company_is_400(world, op, scope):
    body = dict(valid_body(op))
    if scope is MISSING:
        del body["scope"]
    else:
        body["scope"] = scope
    with unchanged():
        r = world.factory.api(world.root, op, body)
    assert_error(r, 400, "bad_request", {"company"})


@pytest.mark.parametrize("op", ["create", "update", "link"])
def test_system_admin_naming_a_company_that_does_not_exist_is_400_naming_company(world, op):
    body = valid_body(op)
    body = {**body, "values": {**body["values"], "company": "nosuchco"}}
    with unchanged():
        r = world.factory.api(world.root, op, body)
    assert_error(r, 400, "bad_request", {"company"})


def test_system_admin_creating_a_phone_user_in_a_missing_company_is_400(world):
    body = {"type": "user", "values": {"username": "zed", "virt_exten": "1", "company": "nosuchco"}}
    with unchanged():
        r = world.factory.api(world.root, "create", body)
    assert_error(r, 400, "bad_request", {"company"})


# --- 400 bad_request: batches and paging -----------------------------------------------------


def _batch(n: int, start: int = 0) -> list[dict[str, str]]:
    return [ddi_values(number=str(300000000 + start + i)) for i in range(n)]


@pytest.mark.parametrize("size", [1001, 5000])
def test_batch_over_1000_rows_is_400(world, size):
    with unchanged():
        r = world.factory.api(world.root, "create", {"type": "ddi", "values": _batch(size)})
    assert_error(r, 400, "bad_request", {"values"})


def test_empty_batch_is_400(world):
    with unchanged():
        r = world.factory.api(world.root, "create", {"type": "ddi", "values": []})
    assert_error(r, 400, "bad_request", {"values"})


@pytest.mark.parametrize(
    ("field", "value"),
    [("number", "12x"), ("dialcode", ""), ("virt_exten", 100), ("company", "ACME")],
)
def test_batch_row_with_bad_field_is_400_naming_row_and_field(world, field, value):
    rows: list[Any] = _batch(6)
    rows[3] = {**rows[3], field: value}
    with unchanged():
        r = world.factory.api(world.root, "create", {"type": "ddi", "values": rows})
    assert_error(r, 400, "bad_request", {f"values[3].{field}"})


def test_batch_row_with_unknown_field_is_400_naming_row_and_field(world):
    rows: list[Any] = _batch(3)
    rows[2] = {**rows[2], "foo": "1"}
    with unchanged():
        r = world.factory.api(world.root, "create", {"type": "ddi", "values": rows})
    assert_error(r, 400, "bad_request", {"values[2].foo": "unknown field"})


def test_batch_row_missing_a_field_is_400_naming_row_and_field(world):
    rows: list[Any] = _batch(3)
    del rows[1]["virt_exten"]
    with unchanged():
        r = world.factory.api(world.root, "create", {"type": "ddi", "values": rows})
    assert_error(r, 400, "bad_request", {"values[1].virt_exten"})


@pytest.mark.parametrize("row", ["44", None, 1, ["44"]], ids=repr)
def test_batch_row_that_is_not_an_object_is_400_naming_the_row(world, row):
    rows: list[Any] = _batch(3)
    rows[1] = row
    with unchanged():
        r = world.factory.api(world.root, "create", {"type": "ddi", "values": rows})
    error = assert_error(r, 400, "bad_request")
    assert error.get("fields") and all(k.startswith("values[1]") for k in error["fields"]), error


@pytest.mark.parametrize("name", ["limit", "offset"])
@pytest.mark.parametrize(
    "value",
    [-1, "10", "", True, False, 1.5, 10.5, 1e300, [10], {"n": 1}],
    ids=repr,
)
def test_read_with_bad_limit_or_offset_is_400_naming_it(world, name, value):
    r = world.factory.api(world.root, "read", {"type": "ddi", name: value})
    assert_error(r, 400, "bad_request", {name})


@pytest.mark.parametrize("value", [10_001, 1_000_000, 2**63])
def test_read_with_limit_over_10000_is_400(world, value):
    r = world.factory.api(world.root, "read", {"type": "ddi", "limit": value})
    assert_error(r, 400, "bad_request", {"limit"})


@pytest.mark.parametrize("limit", [0, 1, 10_000, 1.0, 10_000.0])
def test_read_limit_within_bounds_is_accepted(world, limit):
    """JSON has one number type: 1.0 is the integer 1 (JSON Schema agrees), 1.5 is not."""
    r = world.factory.api(world.root, "read", {"type": "ddi", "limit": limit})
    body = assert_success(r, total=2)
    assert body["numrows"] == min(limit, 2) == len(body["values"])


# --- 401 unauthorized ------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(
    "authorization",
    [
        MISSING,
        "",
        "Basic x",
        "Basic cm9vdDpjb3JyZWN0IGhvcnNlIGJhdHRlcnk=",
        "Bearer",
        "Bearer ",
        "Bearer nonsense",
        "Bearer tad_" + "A" * 43,
        "Token tad_" + "A" * 43,
    ],
    ids=repr,
)
def test_missing_or_invalid_credentials_are_401_json_not_a_redirect(world, op, authorization):
    headers = {} if authorization is MISSING else {"Authorization": authorization}
    with unchanged():
        r = world.factory.client.post(f"/rest/ops/{op}/", json=valid_body(op), headers=headers)
    assert_error(r, 401, "unauthorized")


@pytest.mark.parametrize("op", OPS)
def test_a_valid_token_sent_under_another_scheme_is_401(world, op):
    headers = {"Authorization": f"Basic {world.root.token}"}
    with unchanged():
        r = world.factory.client.post(f"/rest/ops/{op}/", json=valid_body(op), headers=headers)
    assert_error(r, 401, "unauthorized")


def _token_id(caller: Caller) -> int:
    return db.session.scalar(
        select(ApiToken.id).join(Account).where(Account.username == caller.username)
    )


@pytest.mark.parametrize("op", OPS)
def test_revoked_token_is_401(world, op):
    assert world.factory.api(world.root, "read", valid_body("read")).status_code == 200
    api_tokens.revoke(OPERATOR, _token_id(world.root))
    with unchanged():
        r = world.factory.api(world.root, op, valid_body(op))
    assert_error(r, 401, "unauthorized")


@pytest.mark.parametrize("op", OPS)
def test_token_of_a_disabled_account_is_401(world, op):
    assert world.factory.api(world.root, "read", valid_body("read")).status_code == 200
    accounts.disable(OPERATOR, world.root.username)
    with unchanged():
        r = world.factory.api(world.root, op, valid_body(op))
    assert_error(r, 401, "unauthorized")


# --- 403 forbidden ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("caller", "op", "body"),
    [
        ("ca", "create", {"type": "ddi", "values": ddi_values(company="acme")}),
        ("ca", "create", {"type": "ddi", "values": ddi_values(company="globex")}),
        ("ca", "create", {"type": "ddi", "values": [ddi_values(company="acme")]}),
        ("ca", "delete", {"type": "ddi", "scope": {"company": "acme"}}),
        ("ca", "delete", {"type": "ddi", "scope": {"company": "globex"}}),
        (
            "ca",
            "update",
            {"type": "ddi", "scope": {"company": "globex"}, "values": {"virt_exten": "555"}},
        ),
        (
            "ca",
            "update",
            {"type": "ddi", "scope": {"company": "nosuchco"}, "values": {"virt_exten": "5"}},
        ),
        (
            "ca",
            "update",
            {"type": "ddi", "scope": {"company": "acme"}, "values": {"company": "globex"}},
        ),
        (
            "ca",
            "link",
            {
                "type": "ddi",
                "scope": {"dialcode": "44", "number": "2071234567"},
                "values": {"virt_exten": "555", "company": "globex"},
            },
        ),
        (
            "ca",
            "create",
            {"type": "user", "values": {"username": "zed", "virt_exten": "1", "company": "globex"}},
        ),
        (
            "ca",
            "update",
            {
                "type": "user",
                "scope": {"company": "acme", "username": "ana"},
                "values": {"company": "globex"},
            },
        ),
        ("ca", "delete", {"type": "user", "scope": {"company": "globex"}}),
        ("billing", "read", {"type": "ddi"}),
        ("billing", "read", {"type": "ddi", "scope": {"company": "acme"}}),
        ("billing", "read", {"type": "user"}),
        ("reporter", "read", {"type": "ddi", "scope": {"company": "acme"}}),
        (
            "billing",
            "update",
            {"type": "ddi", "scope": {"company": "acme"}, "values": {"virt_exten": "5"}},
        ),
        ("reporter", "create", {"type": "ddi", "values": ddi_values()}),
        ("reporter", "delete", {"type": "ddi", "scope": {"company": "acme"}}),
        (
            "billing",
            "link",
            {
                "type": "ddi",
                "scope": {"dialcode": "44", "number": "2071234567"},
                "values": {"virt_exten": "555", "company": "acme"},
            },
        ),
    ],
)
def test_authenticated_but_not_allowed_is_403(world, caller, op, body):
    with unchanged():
        r = world.factory.api(getattr(world, caller), op, body)
    assert_error(r, 403, "forbidden")


# --- 404 not_found ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/rest/nope"),
        ("GET", "/rest/nope"),
        ("POST", "/rest/ops/frobnicate/"),
        ("GET", "/rest/ops/frobnicate/"),
        ("POST", "/rest/ops/"),
        ("POST", "/rest/ops/create/extra"),
        ("POST", "/rest/"),
        ("GET", "/rest"),
        ("DELETE", "/rest/nope/"),
    ],
)
@pytest.mark.parametrize("authenticated", [True, False])
def test_unknown_path_under_rest_is_404_json(world, method, path, authenticated):
    headers = world.root.headers if authenticated else {}
    with unchanged():
        r = world.factory.client.open(path, method=method, json={"type": "ddi"}, headers=headers)
    assert_error(r, 404, "not_found")


def _link(dialcode: str, number: str, company: str = "acme") -> dict[str, Any]:
    return {
        "type": "ddi",
        "scope": {"dialcode": dialcode, "number": number},
        "values": {"virt_exten": "555", "company": company},
    }


@pytest.mark.parametrize("caller", ["root", "ca"])
def test_link_to_a_ddi_that_does_not_exist_is_404(world, caller):
    with unchanged():
        r = world.factory.api(getattr(world, caller), "link", _link("44", "2070000000"))
    assert_error(r, 404, "not_found")


def test_link_by_company_admin_to_another_companys_ddi_is_404_like_a_missing_one(world):
    with unchanged():
        hidden = world.factory.api(world.ca, "link", _link("44", "2079999999"))
        missing = world.factory.api(world.ca, "link", _link("44", "2070000000"))
    hidden_error = assert_error(hidden, 404, "not_found")
    missing_error = assert_error(missing, 404, "not_found")
    assert hidden_error == missing_error
    assert hidden.get_json() == missing.get_json()


# --- 405 method_not_allowed ------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_other_methods_on_ops_paths_are_405(world, op, method):
    with unchanged():
        r = world.factory.client.open(
            f"/rest/ops/{op}/", method=method, json=valid_body(op), headers=world.root.headers
        )
    assert_error(r, 405, "method_not_allowed")
    assert "POST" in r.headers.get("Allow", "")


# --- 409 conflict ----------------------------------------------------------------------------


def test_create_of_an_existing_ddi_is_409(world):
    values = ddi_values(dialcode="44", number="2071234567", company="globex")
    with unchanged():
        r = world.factory.api(world.root, "create", {"type": "ddi", "values": values})
    assert_error(r, 409, "conflict")


def test_batch_with_a_duplicate_inside_it_is_409_and_creates_nothing(world):
    rows = _batch(5)
    rows.append(dict(rows[1]))
    with unchanged():
        r = world.factory.api(world.root, "create", {"type": "ddi", "values": rows})
    assert_error(r, 409, "conflict")


def test_batch_whose_last_row_duplicates_a_stored_ddi_is_409_and_creates_nothing(world):
    rows = _batch(999)
    rows.append(ddi_values(dialcode="44", number="2079999999", company="acme"))
    with unchanged():
        r = world.factory.api(world.root, "create", {"type": "ddi", "values": rows})
    assert_error(r, 409, "conflict")


@pytest.mark.parametrize("caller", ["root", "ca"])
def test_create_of_an_existing_phone_user_is_409(world, caller):
    body = {"type": "user", "values": {"username": "ana", "virt_exten": "9", "company": "acme"}}
    with unchanged():
        r = world.factory.api(getattr(world, caller), "create", body)
    assert_error(r, 409, "conflict")


def test_phone_user_batch_with_a_duplicate_inside_it_is_409(world):
    rows = [{"username": u, "virt_exten": "1", "company": "globex"} for u in ("x", "y", "x")]
    with unchanged():
        r = world.factory.api(world.root, "create", {"type": "user", "values": rows})
    assert_error(r, 409, "conflict")


def test_moving_a_phone_user_into_a_company_where_the_username_exists_is_409(world):
    body = {
        "type": "user",
        "scope": {"company": "acme", "username": "bob"},
        "values": {"company": "globex"},
    }
    with unchanged():
        r = world.factory.api(world.root, "update", body)
    assert_error(r, 409, "conflict")


def test_moving_every_user_of_a_company_is_409_when_one_username_clashes(world):
    body = {"type": "user", "scope": {"company": "acme"}, "values": {"company": "globex"}}
    with unchanged():
        r = world.factory.api(world.root, "update", body)
    assert_error(r, 409, "conflict")


# --- 413 too_large ---------------------------------------------------------------------------


def _padded(body: dict[str, Any], size: int) -> bytes:
    raw = json.dumps(body).encode()
    assert len(raw) < size
    return raw[:-1] + b" " * (size - len(raw)) + raw[-1:]


@pytest.mark.parametrize("op", OPS)
def test_body_over_1_mib_is_413(world, op):
    raw = _padded(valid_body(op), MIB + 1)
    assert len(raw) == MIB + 1
    with unchanged():
        r = raw_post(world.factory, world.root, op, raw)
    assert_error(r, 413, "too_large")


def test_body_far_over_1_mib_is_413(world):
    raw = _padded(valid_body("create"), 5 * MIB)
    with unchanged():
        r = raw_post(world.factory, world.root, "create", raw)
    assert_error(r, 413, "too_large")


@pytest.mark.parametrize("size", [MIB - 1, MIB])
def test_body_of_at_most_1_mib_is_not_refused_for_size(world, size):
    raw = _padded(valid_body("create"), size)
    assert len(raw) == size
    r = raw_post(world.factory, world.root, "create", raw)
    assert_success(r, numrows=1)


# --- 415 unsupported_media_type --------------------------------------------------------------


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "text/json",
        None,
    ],
    ids=repr,
)
def test_body_not_declared_as_json_is_415(world, op, content_type):
    raw = json.dumps(valid_body(op)).encode()
    kwargs = {"content_type": content_type} if content_type else {}
    with unchanged():
        r = world.factory.client.post(
            f"/rest/ops/{op}/", data=raw, headers=world.root.headers, **kwargs
        )
    assert_error(r, 415, "unsupported_media_type")


@pytest.mark.parametrize("op", OPS)
def test_form_encoded_body_is_415(world, op):
    with unchanged():
        r = world.factory.client.post(
            f"/rest/ops/{op}/", data={"type": "ddi"}, headers=world.root.headers
        )
    assert_error(r, 415, "unsupported_media_type")


def test_missing_content_type_is_really_missing(world):
    """Guards the `None` case above: the test client sends no Content-Type for raw bytes."""
    r = world.factory.client.post("/rest/ops/read/", data=b"{}", headers=world.root.headers)
    assert r.request.headers.get("Content-Type") is None
    assert_error(r, 415, "unsupported_media_type")


# --- 429 rate_limited ------------------------------------------------------------------------


@pytest.fixture
def limited_factory(migrated, test_config) -> Iterator[Factory]:
    app = create_app({**test_config, "API_RATE_LIMIT": "3 per minute"})
    with app.app_context():
        empty_all_tables()
        yield Factory(app)
        db.session.remove()
        empty_all_tables()
        db.engine.dispose()


def test_fourth_request_of_one_token_is_429_and_other_tokens_still_pass(limited_factory):
    factory = limited_factory
    factory.company("acme")
    first = factory.account("first", system_admin=True)
    second = factory.account("second", system_admin=True)
    read = {"type": "ddi", "scope": {"company": "acme"}}
    for _ in range(3):
        assert_success(factory.api(first, "read", read), numrows=0)
    assert_error(factory.api(first, "read", read), 429, "rate_limited")
    assert_success(factory.api(second, "read", read), numrows=0)


def test_rate_limit_counts_every_request_of_a_token_whatever_the_operation(limited_factory):
    """docs/api.md#limits: N requests a minute per token, not per token and per endpoint."""
    factory = limited_factory
    factory.company("acme")
    first = factory.account("first", system_admin=True)
    second = factory.account("second", system_admin=True)
    factory.ddi("44", "2071234567", "acme")
    assert_success(factory.api(first, "read", {"type": "ddi"}), numrows=1)
    body = {"type": "ddi", "scope": {"company": "acme"}, "values": {"virt_exten": "7"}}
    assert_success(factory.api(first, "update", body), numrows=1)
    assert_success(factory.api(first, "link", _link("44", "2071234567")), numrows=1)
    with unchanged():
        r = factory.api(first, "create", {"type": "ddi", "values": ddi_values()})
    assert_error(r, 429, "rate_limited")
    with unchanged():
        r = factory.api(first, "delete", {"type": "ddi", "scope": {"company": "acme"}})
    assert_error(r, 429, "rate_limited")
    assert_success(factory.api(second, "read", {"type": "ddi"}), numrows=1)


def test_every_counted_answer_carries_its_window_and_the_refusal_says_when_to_retry(
    limited_factory,
):
    """The X-RateLimit-* headers and Retry-After flask-limiter sent, now rest/rate_limit.py's:
    on a success, on an error of the request, and on the 429."""
    factory = limited_factory
    factory.company("acme")
    first = factory.account("first", system_admin=True)
    read = {"type": "ddi", "scope": {"company": "acme"}}
    started = int(time.time())
    answers = [
        factory.api(first, "read", read),
        factory.api(first, "read", {"type": "nope"}),
        factory.api(first, "read", read),
        factory.api(first, "read", read),
    ]
    assert [r.status_code for r in answers] == [200, 400, 200, 429]
    assert [r.headers["X-RateLimit-Remaining"] for r in answers] == ["2", "1", "0", "0"]
    for r in answers:
        assert r.headers["X-RateLimit-Limit"] == "3"
        assert started < int(r.headers["X-RateLimit-Reset"]) <= started + 62
        assert 0 <= int(r.headers["Retry-After"]) <= 61
    assert_error(answers[-1], 429, "rate_limited")


def test_each_limit_of_the_setting_counts_and_the_refusing_one_is_shown(migrated, test_config):
    """API_RATE_LIMIT may hold several limits: every one counts each request, the first to
    refuse answers 429 and is the one the headers describe."""
    app = create_app({**test_config, "API_RATE_LIMIT": "5 per minute; 2 per hour"})
    with app.app_context():
        empty_all_tables()
        try:
            factory = Factory(app)
            factory.company("acme")
            first = factory.account("first", system_admin=True)
            read = {"type": "ddi", "scope": {"company": "acme"}}
            ok = [factory.api(first, "read", read) for _ in range(2)]
            assert [r.headers["X-RateLimit-Limit"] for r in ok] == ["5", "5"]
            assert [r.headers["X-RateLimit-Remaining"] for r in ok] == ["4", "3"]
            refused = factory.api(first, "read", read)
            assert_error(refused, 429, "rate_limited")
            assert refused.headers["X-RateLimit-Limit"] == "2"
            assert refused.headers["X-RateLimit-Remaining"] == "0"
            assert 3540 <= int(refused.headers["Retry-After"]) <= 3601
        finally:
            db.session.remove()
            empty_all_tables()
            db.engine.dispose()


def test_flask_limiter_runs_no_code_on_a_request(app):
    """The limiter's storage and strategy serve the API limit and the sign-in limits; its own
    request hooks, which would search every request for limits the app does not declare, are
    not installed (rest/rate_limit.init_app)."""
    hooks = [
        *app.before_request_funcs.values(),
        *app.after_request_funcs.values(),
        *app.teardown_request_funcs.values(),
    ]
    modules = {getattr(getattr(f, "func", f), "__module__", "") for funcs in hooks for f in funcs}
    assert not [m for m in modules if m.startswith("flask_limiter")], modules
    assert "webapp.rest.rate_limit" in modules


def test_rate_limited_requests_start_no_thread(limited_factory, monkeypatch):
    """The memory:// storage sweeps expired counters inline (extensions.ProcessCounters),
    instead of limits' Timer thread per hit; the limits themselves are the tests above."""
    factory = limited_factory
    factory.company("acme")
    first = factory.account("first", system_admin=True)
    read = {"type": "ddi", "scope": {"company": "acme"}}
    assert isinstance(limiter.storage, ProcessCounters)
    started = []
    start = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start", lambda t: (started.append(t), start(t)))
    # A thread start is recorded when it is asked for: limits' own storage would ask for its
    # Timer on the first hit already, so no wait is needed to see one.
    for _ in range(3):
        assert_success(factory.api(first, "read", read), numrows=0)
    assert started == []


def test_memory_scheme_is_the_process_counters_through_limits_registry():
    """memory:// reaches ProcessCounters through limits' public storage registry; a limits
    release that changes how schemes register fails here, not silently in production."""
    from limits.storage import storage_from_string

    assert isinstance(storage_from_string("memory://"), ProcessCounters)


def test_process_counters_count_in_fixed_windows(monkeypatch):
    """The fixed-window semantics flask-limiter relies on: counts add up inside a window,
    start again at 0 once it has passed, and expired keys are swept without being read."""
    now = [1000.0]
    monkeypatch.setattr("webapp.extensions.time.time", lambda: now[0])
    store = ProcessCounters("memory://")
    assert [store.incr("k", 60) for _ in range(3)] == [1, 2, 3]
    assert store.get("k") == 3 and store.get_expiry("k") == 1060.0
    assert store.incr("k", 60, amount=2) == 5
    now[0] = 1059.9
    assert store.get("k") == 5
    now[0] = 1060.0  # the window has passed
    assert store.get("k") == 0 and store.get_expiry("k") == 1060.0
    assert store.incr("k", 60) == 1 and store.get_expiry("k") == 1120.0
    store.incr("other", 1)
    now[0] = 1200.0
    store.incr("fresh", 60)  # a hit after a second sweeps the expired counters
    assert set(store._counters) == {"fresh"}
    store.clear("fresh")
    assert store.get("fresh") == 0 and store.check() and store.reset() == 0


# --- success shapes --------------------------------------------------------------------------


def test_create_answers_success_with_numrows(world):
    r = world.factory.api(world.root, "create", {"type": "ddi", "values": ddi_values()})
    assert r.status_code == 200
    assert r.get_json() == {"result": "success", "numrows": 1}


def test_create_batch_answers_numrows_of_the_batch(world):
    r = world.factory.api(world.root, "create", {"type": "ddi", "values": _batch(3)})
    assert r.get_json() == {"result": "success", "numrows": 3}


def test_create_batch_of_exactly_1000_rows_is_accepted(world):
    r = world.factory.api(world.root, "create", {"type": "ddi", "values": _batch(1000)})
    assert r.get_json() == {"result": "success", "numrows": 1000}


@pytest.mark.parametrize(
    "values",
    [
        ddi_values(dialcode="1234567", number="1" * 10),  # 17 digits together
        ddi_values(dialcode="1", number="1" * 15),
        ddi_values(virt_exten="1" * 10),
        ddi_values(dialcode="0", number="0", virt_exten="0"),
    ],
    ids=["17-digits", "15-digit-number", "10-digit-exten", "single-zeros"],
)
def test_create_at_the_format_limits_is_accepted(world, values):
    r = world.factory.api(world.root, "create", {"type": "ddi", "values": values})
    assert r.get_json() == {"result": "success", "numrows": 1}


def test_create_in_a_company_with_a_64_character_identifier_is_accepted(world):
    company = world.factory.company("a.b_c-" + "z" * 58)
    r = world.factory.api(
        world.root, "create", {"type": "ddi", "values": ddi_values(company=company)}
    )
    assert r.get_json() == {"result": "success", "numrows": 1}


def test_read_pages_with_limit_and_offset_and_reports_total(world):
    world.factory.api(world.root, "create", {"type": "ddi", "values": _batch(5)})
    r = world.factory.api(
        world.root, "read", {"type": "ddi", "scope": {"company": "acme"}, "limit": 2, "offset": 1}
    )
    body = r.get_json()
    assert r.status_code == 200
    assert set(body) == {"result", "values", "numrows", "total"}
    assert body["result"] == "success"
    assert body["total"] == 6 and body["numrows"] == 2
    assert body["values"] == [
        {"dialcode": "33", "number": "300000001", "virt_exten": "100", "company": "acme"},
        {"dialcode": "33", "number": "300000002", "virt_exten": "100", "company": "acme"},
    ]
    last = world.factory.api(
        world.root, "read", {"type": "ddi", "scope": {"company": "acme"}, "offset": 5}
    )
    assert last.get_json()["values"] == [
        {"dialcode": "44", "number": "2071234567", "virt_exten": "100", "company": "acme"}
    ]


def test_read_past_the_end_answers_no_rows_and_the_total(world):
    r = world.factory.api(world.root, "read", {"type": "ddi", "offset": 50})
    assert r.get_json() == {"result": "success", "values": [], "numrows": 0, "total": 2}


def test_update_answers_numrows_changed(world):
    body = {"type": "ddi", "scope": {"company": "acme"}, "values": {"virt_exten": "555"}}
    assert world.factory.api(world.root, "update", body).get_json() == {
        "result": "success",
        "numrows": 1,
    }
    assert world.factory.api(world.ca, "update", body).get_json() == {
        "result": "success",
        "numrows": 0,
    }


def test_link_answers_numrows_1(world):
    r = world.factory.api(world.ca, "link", _link("44", "2071234567"))
    assert r.get_json() == {"result": "success", "numrows": 1}


def test_delete_answers_numrows_deleted_and_0_for_no_match(world):
    body = {"type": "ddi", "scope": {"company": "acme"}}
    assert world.factory.api(world.root, "delete", body).get_json() == {
        "result": "success",
        "numrows": 1,
    }
    assert world.factory.api(world.root, "delete", body).get_json() == {
        "result": "success",
        "numrows": 0,
    }


def test_version_answers_without_credentials(client):
    r = client.get("/rest/version")
    assert r.status_code == 200
    body = r.get_json()
    assert set(body) == {"result", "version", "api"}
    assert body["result"] == "success" and body["version"] == "Development"
    assert isinstance(body["api"], str) and body["api"]


def test_healthz_is_200(client):
    assert client.get("/healthz").status_code == 200


# --- 400 bad_request: lists over their cap ---------------------------------------------------

# Every body that takes a list of companies (docs/api.md#limits), by name: (method, path, body
# or query string for a list of n companies).
COMPANY_LISTS = {
    "readDDICount": lambda ids: ("POST", "/rest/call/readDDICount", _report(ids)),
    "readUserCount": lambda ids: ("POST", "/rest/call/readUserCount", _report(ids)),
    "readDDICount GET": lambda ids: ("GET", "/rest/call/readDDICount", {"company": ids}),
    "readAdjustments": lambda ids: ("POST", "/rest/call/readAdjustments", _report(ids)),
    "readEvents": lambda ids: ("POST", "/rest/events/read", {"scope": {"company": ids}}),
}
# How each names the list in `fields` (a report's scope members go without 'scope.').
LIST_FIELD = {"readEvents": "scope.company"}


def _report(ids: list[str]) -> dict[str, Any]:
    return {"type": "cdr", "scope": {"company": ids, "month": 1, "year": 2026}}


def _send(world: World, name: str, ids: list[str]):
    method, path, body = COMPANY_LISTS[name](ids)
    client, headers = world.factory.client, world.root.headers
    if method == "GET":
        return client.get(path, query_string=body, headers=headers)
    return client.post(path, json=body, headers=headers)


@pytest.fixture(scope="module")
def many_ids() -> list[str]:
    return [f"co{i:05d}" for i in range(fields.MAX_COMPANIES)]


@pytest.fixture
def many_companies(world: World, many_ids: list[str]) -> World:
    """`world` with MAX_COMPANIES more companies (so every id of a full list is real and each
    query carries them all), and January 2026 closed (readAdjustments needs a closed month)."""
    rows = [{"id": c, "name": c, "created_at": utcnow()} for c in many_ids]
    with write_transaction() as session:
        session.execute(insert(Company), rows)
    r = world.factory.client.post(
        "/rest/call/closeMonth",
        json={"type": "cdr", "scope": {"month": 1, "year": 2026}},
        headers=world.root.headers,
    )
    assert r.status_code == 200, r.get_data(as_text=True)
    return world


@pytest.mark.slow
@pytest.mark.parametrize("name", COMPANY_LISTS)
def test_a_company_list_of_10000_is_answered_and_10001_is_400(
    many_companies, many_ids, name, caplog
):
    """The cap is the client's mistake on both databases: never a 503, an empty answer or a
    "database unavailable" line (PostgreSQL takes at most 65,535 parameters a statement)."""
    caplog.set_level(logging.WARNING)
    world = many_companies
    body = assert_success(_send(world, name, many_ids))
    if name.startswith("read") and "Count" in name:
        assert len(body["values"]) == fields.MAX_COMPANIES  # every one, zeros included
    field = LIST_FIELD.get(name, "company")
    why = f"must hold at most {fields.MAX_COMPANIES:,} items"
    error = assert_error(_send(world, name, [*many_ids, "acme"]), 400, "bad_request", {field: why})
    assert "scope.company" in error["message"]
    assert not [r for r in caplog.records if "database unavailable" in r.getMessage()]


def test_an_event_type_list_over_its_cap_is_400(world):
    types = ["ddi.created"] * (feed.MAX_TYPES + 1)
    r = world.factory.client.post(
        "/rest/events/read", json={"scope": {"type": types}}, headers=world.root.headers
    )
    why = f"must hold at most {feed.MAX_TYPES:,} items"
    assert_error(r, 400, "bad_request", {"scope.type": why})
    r = world.factory.client.post(
        "/rest/events/read", json={"scope": {"type": types[:-1]}}, headers=world.root.headers
    )
    assert_success(r)
