"""The OpenAPI document agrees with the real request validation: a body the schema accepts is
never refused as a bad request, and a body it rejects always is."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from webapp.services.fields import MAX_DDI_DIGITS

FIELD_VALUES = {
    "dialcode": ["44", "1", "1234567", "12345678", "", "4a", 44, None],
    "number": ["2071234567", "123456789012345", "1234567890123456", "abc", 1234],
    "virt_exten": ["100", "1234567890", "12345678901", "x", 7],
    "company": ["acme", "globex", "Bad!", "", 3],
    "username": ["ana.kim", "a@b", "Ana", "", 5],
    "extra": ["x"],
}


@pytest.fixture
def spec(factory):
    return factory.client.get("/rest/openapi.json").get_json()


def resolve(spec: dict, node):
    """Inline every $ref (the document's refs are local and not recursive)."""
    if isinstance(node, dict):
        if "$ref" in node:
            return resolve(spec, spec["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]])
        return {k: resolve(spec, v) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve(spec, v) for v in node]
    return node


def test_the_document_is_well_formed(spec):
    assert spec["openapi"].startswith("3.1")
    for path, item in spec["paths"].items():
        for operation in item.values():
            body = operation.get("requestBody")
            for content in (body or {}).get("content", {}).values():  # JSON, or the import's CSV
                Draft202012Validator.check_schema(resolve(spec, content["schema"]))
            assert "200" in operation["responses"], path


@st.composite
def bodies(draw, op: str):
    body: dict = {}
    kind = draw(
        st.sampled_from(["ddi", "user", "cdr", None] if op != "link" else ["ddi", "user", None])
    )
    if kind is not None:
        body["type"] = kind
    fields = (
        ["dialcode", "number", "virt_exten", "company", "extra"]
        if kind != "user"
        else ["username", "virt_exten", "company", "extra"]
    )
    for part in ("scope", "values"):
        if draw(st.booleans()):
            body[part] = draw(
                st.fixed_dictionaries(
                    {}, optional={f: st.sampled_from(FIELD_VALUES[f]) for f in fields}
                )
            )
    if op == "read" and draw(st.booleans()):
        body["limit"] = draw(st.sampled_from([0, 5, 10_000, 10_001, -1, "5", True]))
    return body


@pytest.mark.slow
@pytest.mark.parametrize("op", ["create", "read", "update", "link", "delete"])
@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_schema_and_validation_agree(factory, spec, op, data):
    if not hasattr(factory, "_root"):
        factory.company("acme")
        factory.company("globex")
        factory._root = factory.account("root", system_admin=True)
    schema = resolve(
        spec,
        spec["paths"][f"/rest/ops/{op}/"]["post"]["requestBody"]["content"]["application/json"][
            "schema"
        ],
    )
    body = data.draw(bodies(op))
    # The one rule JSON Schema cannot state, so the document states it in prose (the number's
    # description): a DDI's dialcode and number together hold at most 17 digits.
    schema_ok = Draft202012Validator(schema).is_valid(body) and not _over_17_digits(body)
    response = factory.api(factory._root, op, body)
    app_ok = response.status_code != 400
    assert schema_ok == app_ok, (json.dumps(body), response.status_code, response.get_json())


def _over_17_digits(body: dict) -> bool:
    parts = [body.get("scope"), body.get("values")]
    return any(
        isinstance(p, dict)
        and isinstance(p.get("dialcode"), str)
        and isinstance(p.get("number"), str)
        and len(p["dialcode"]) + len(p["number"]) > MAX_DDI_DIGITS
        for p in parts
    )
