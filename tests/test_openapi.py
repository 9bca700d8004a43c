"""The OpenAPI document (docs/api.md#the-openapi-document-and-restdocs) and its page, /rest/docs.

The document agrees with the real request validation: a body the schema accepts is never
refused as a bad request, and a body it rejects always is, for the record operations (random
bodies) and for every report and month-close month around today (each month and year near
the bounds). It reads well to a generator and to people: an operationId, one declared tag, a
summary and an example per operation; every body and answer a named component; examples that
fit their schemas. The page shows every operation and every schema, without credentials and
without a script.
"""

from __future__ import annotations

import copy
import itertools
import json
import re

import pytest
from bs4 import BeautifulSoup
from flask import current_app
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from webapp.services import fields
from webapp.services.billing import periods
from webapp.services.events import feed
from webapp.services.records import crud

FIELD_VALUES = {
    "dialcode": ["44", "1", "1234567", "12345678", "", "4a", 44, None],
    "number": ["2071234567", "123456789012345", "1234567890123456", "abc", 1234],
    "virt_exten": ["100", "1234567890", "12345678901", "x", 7],
    "company": ["acme", "globex", "Bad!", "", 3],
    "username": ["ana.kim", "a@b", "Ana", "", 5],
    "extra": ["x"],
}
METHODS = ("get", "post")


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


def operations(spec: dict):
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            yield path, method, operation


def body_schema(spec: dict, path: str, media_type: str = "application/json") -> dict:
    body = spec["paths"][path]["post"]["requestBody"]["content"][media_type]["schema"]
    return resolve(spec, body)


def test_the_document_is_well_formed(spec):
    assert spec["openapi"].startswith("3.1")
    for schema in spec["components"]["schemas"].values():
        Draft202012Validator.check_schema(resolve(spec, schema))
    for path, _method, operation in operations(spec):
        body = operation.get("requestBody")
        for content in (body or {}).get("content", {}).values():  # JSON, or the import's CSV
            Draft202012Validator.check_schema(resolve(spec, content["schema"]))
        assert "200" in operation["responses"], path


def test_servers_name_the_address_the_request_reached(factory):
    spec = factory.client.get("/rest/openapi.json", base_url="https://api.example.net").get_json()
    assert spec["servers"][0]["url"] == "https://api.example.net"
    assert all(p.startswith("/") for p in spec["paths"])  # paths hang off the server's root


def test_every_operation_reads_well_to_a_generator(spec):
    """What openapi-python-client names its modules, functions and models after."""
    declared = [t["name"] for t in spec["tags"]]
    ids = [op["operationId"] for _p, _m, op in operations(spec)]
    assert len(ids) == len(set(ids)), ids
    used = set()
    for path, method, op in operations(spec):
        assert re.fullmatch(r"[a-z][A-Za-z]+", op["operationId"]), op["operationId"]
        assert len(op["tags"]) == 1 and op["tags"][0] in declared, (path, method)
        used.add(op["tags"][0])
        assert op["summary"] and op["description"], (path, method)
        for content in op.get("requestBody", {}).get("content", {}).values():
            schema = content["schema"]
            if content is op["requestBody"]["content"].get("application/json"):
                # A named component, or a choice of named components: never an inline object.
                options = schema.get("oneOf", [schema])
                assert all("$ref" in o for o in options), (path, schema)
            assert content.get("examples"), (path, method)
        for status, answer in op["responses"].items():
            for media_type, content in answer.get("content", {}).items():
                if media_type == "application/json":
                    assert "$ref" in content["schema"], (path, status)
    assert used == set(declared)


def test_named_schemas_for_the_records_reports_and_errors(spec):
    schemas = spec["components"]["schemas"]
    for name in ("Ddi", "PhoneUser", "Error", "DdiCountEntry", "UserCountEntry", "Period"):
        assert name in schemas
    assert set(schemas["Ddi"]["required"]) == {"dialcode", "number", "virt_exten", "company"}
    # A read answers a DDI's four fields (DdiRecord); a create may also give its description.
    assert set(schemas["DdiRecord"]["properties"]) == set(schemas["Ddi"]["required"])
    read = spec["paths"]["/rest/ops/read/"]["post"]["responses"]["200"]["content"]
    values = schemas[read["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]]
    assert values["properties"]["values"]["items"]["oneOf"] == [
        {"$ref": "#/components/schemas/DdiRecord"},
        {"$ref": "#/components/schemas/PhoneUser"},
    ]


def test_every_example_fits_its_schema(spec):
    checked = 0
    for path, method, op in operations(spec):
        for media_type, content in op.get("requestBody", {}).get("content", {}).items():
            validator = Draft202012Validator(resolve(spec, content["schema"]))
            for name, example in content["examples"].items():
                assert validator.is_valid(example["value"]), (path, name, media_type)
                checked += 1
        for status, answer in op["responses"].items():
            content = answer.get("content", {}).get("application/json", {})
            if "example" in content:
                assert Draft202012Validator(resolve(spec, content["schema"])).is_valid(
                    content["example"]
                ), (path, method, status)
                checked += 1
        for parameter in op.get("parameters", ()):
            assert Draft202012Validator(resolve(spec, parameter["schema"])).is_valid(
                parameter["example"]
            ), (path, parameter["name"])
    for name, schema in spec["components"]["schemas"].items():
        for example in schema.get("examples", ()):
            assert Draft202012Validator(resolve(spec, schema)).is_valid(example), name
            checked += 1
    assert checked > 50


def test_the_examples_work_against_the_api(factory, spec):
    """Each JSON example, sent as it is by a System-Admin to the API it documents (in the
    order the document lists them, after the companies they name exist), is never a 400."""
    for company in ("acme", "globex"):
        factory.company(company)
    root = factory.account("root", system_admin=True)
    for path, _method, op in operations(spec):
        content = op.get("requestBody", {}).get("content", {}).get("application/json")
        for name, example in (content or {}).get("examples", {}).items():
            body = example["value"]
            if path == "/rest/events/read":
                body = {**body, "wait": 0}  # the same request, without the long poll
            response = factory.client.post(path, json=body, headers=root.headers)
            assert response.status_code in (200, 404, 409), (path, name, response.get_json())


def test_the_probes_answer_as_documented(factory, spec):
    for path in ("/healthz", "/readyz"):
        response = factory.client.get(path)
        answer = spec["paths"][path]["get"]["responses"][str(response.status_code)]
        schema = resolve(spec, answer["content"]["application/json"]["schema"])
        assert Draft202012Validator(schema).is_valid(response.get_json()), path


def test_the_error_codes_are_the_ones_answered(spec):
    """The statuses' codes and every finer code a service gives (`code="…"`)."""
    from pathlib import Path

    from webapp.errors import ERROR_CODES, FINER_CODES

    codes = spec["components"]["schemas"]["ErrorDetail"]["properties"]["code"]["enum"]
    assert codes == sorted(set(ERROR_CODES.values()) | FINER_CODES)
    given = {
        code
        for source in (Path(__file__).parent.parent / "webapp").rglob("*.py")
        for code in re.findall(r'\bcode="([a-z_]+)"', source.read_text())
    }
    assert given and given <= FINER_CODES, given


# --- the schema and the validation agree -----------------------------------------------------


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
    """Dialcode and number together at most 17 digits included: the schema states it too."""
    if not hasattr(factory, "_root"):
        factory.company("acme")
        factory.company("globex")
        factory._root = factory.account("root", system_admin=True)
    schema = body_schema(spec, f"/rest/ops/{op}/")
    body = data.draw(bodies(op))
    schema_ok = Draft202012Validator(schema).is_valid(body)
    response = factory.api(factory._root, op, body)
    app_ok = response.status_code != 400
    assert schema_ok == app_ok, (json.dumps(body), response.status_code, response.get_json())


def _ddi_bodies(dialcode: str, number: str) -> dict[str, dict]:
    """A DDI body per operation, valid but for the dialcode and number under test."""
    key = {"dialcode": dialcode, "number": number}
    return {
        "create": {"type": "ddi", "values": {**key, "virt_exten": "100", "company": "acme"}},
        "read": {"type": "ddi", "scope": key},
        "update": {
            "type": "ddi",
            "scope": {"company": "acme", **key},
            "values": {"virt_exten": "101"},
        },
        "link": {"type": "ddi", "scope": key, "values": {"virt_exten": "1", "company": "acme"}},
        "delete": {"type": "ddi", "scope": {"company": "acme", **key}},
    }


def test_the_17_digit_rule_agrees(factory, spec):
    """Dialcode and number together at most 17 digits: each dialcode length with the longest
    number it allows and one digit more, in every operation that names both."""
    factory.company("acme")
    root = factory.account("root", system_admin=True)
    seen = set()
    for length in range(1, 8):
        for digits in {17 - length, 18 - length} & set(range(1, 16)):
            dialcode, number = "4" * length, "2" * digits
            for op, body in _ddi_bodies(dialcode, number).items():
                schema_ok = Draft202012Validator(body_schema(spec, f"/rest/ops/{op}/")).is_valid(
                    body
                )
                response = factory.api(root, op, body)
                assert schema_ok == (response.status_code != 400), (op, body, response.get_json())
                seen.add(schema_ok)
    assert seen == {True, False}


def test_dry_run_values_agree(factory, spec):
    """The import's `dry_run` is read in any case with white space around it (Python's white
    space, which is not quite ECMA's): the pattern says exactly that."""
    factory.company("acme")
    root = factory.account("root", system_admin=True)
    parameter = spec["paths"]["/rest/ops/import/"]["post"]["parameters"][0]
    schema = Draft202012Validator(parameter["schema"])
    csv = b"dialcode,number,virt_exten,company\n44,2071234567,100,acme\n"
    values = [
        "1",
        "0",
        "true",
        "FALSE",
        " 1 ",
        "\u3000True\x85",
        "\x1c0",
        "\ufeff1",
        "yes",
        "10",
        "",
    ]
    for value in values:
        response = factory.client.post(
            "/rest/ops/import/",
            query_string={"dry_run": value},
            data=csv,
            headers={**root.headers, "Content-Type": "text/csv"},
        )
        assert schema.is_valid(value) == (response.status_code == 200), (value, response.json)


MONTH_PATHS = (
    "/rest/call/readDDICount",
    "/rest/call/closeMonth",
    "/rest/call/reopenMonth",
    "/rest/call/readAdjustments",
)


@pytest.mark.parametrize("path", MONTH_PATHS)
def test_month_rules_agree_around_today(factory, spec, path):
    """Every month and year near the bounds the document states from today: the current
    month, the one after, the year after, a year without a month, null, the current month
    of a past year. The schema accepts exactly what the validation does not refuse with 400
    (a month not closed, or closed already, is a 409)."""
    factory.company("acme")
    root = factory.account("root", system_admin=True)
    today = periods.today_in(periods.zone(current_app.config["REPORT_TIMEZONE"]))
    schema = Draft202012Validator(body_schema(spec, path))
    months = [
        None,
        *sorted({1, max(today.month - 1, 1), today.month, min(today.month + 1, 12), 12}),
    ]
    years = [None, 1969, 1970, today.year - 1, today.year, today.year + 1]
    extra = {"reason": "late records"} if path.endswith("reopenMonth") else {}
    for month, year in itertools.product(months, years):
        scope = {k: v for k, v in (("month", month), ("year", year)) if v is not None}
        for body in (
            {"type": "cdr", "scope": scope, **extra},
            {"type": "cdr", "scope": {**scope, "year": year}, **extra},  # null year
        ):
            response = factory.client.post(path, json=body, headers=root.headers)
            app_ok = response.status_code != 400
            assert schema.is_valid(body) == app_ok, (body, response.get_json())
            assert response.status_code in (200, 400, 409), (body, response.get_json())


def test_the_query_parameters_state_the_year_bounds(factory, spec):
    """GET takes separate query parameters, so the rules across them (a year needs its month;
    this year's months up to the current one) are in the descriptions; the year's own bound
    is in its schema."""
    today = periods.today_in(periods.zone(current_app.config["REPORT_TIMEZONE"]))
    get = spec["paths"]["/rest/call/readDDICount"]["get"]
    year = next(p for p in get["parameters"] if p["name"] == "year")
    assert year["schema"]["maximum"] == today.year
    assert "without a `month` is refused" in get["description"]
    assert "in the future is refused" in year["description"]


def test_every_list_a_client_sends_states_its_cap(spec):
    """docs/api.md#limits: each list in a request body or the query has maxItems, the cap the
    API enforces (tests/test_api_errors.py holds the API to it)."""
    caps = {
        "/rest/call/readDDICount": ("scope", "company", fields.MAX_COMPANIES),
        "/rest/call/readUserCount": ("scope", "company", fields.MAX_COMPANIES),
        "/rest/call/readAdjustments": ("scope", "company", fields.MAX_COMPANIES),
        "/rest/events/read": ("scope", "company", fields.MAX_COMPANIES),
    }
    for path, (part, name, cap) in caps.items():
        member = body_schema(spec, path)["properties"][part]
        member = member.get("anyOf", [member])[0]["properties"][name]
        assert member.get("anyOf", [member])[0]["maxItems"] == cap, (path, member)
    scope = body_schema(spec, "/rest/events/read")["properties"]["scope"]["anyOf"][0]
    assert scope["properties"]["type"]["maxItems"] == feed.MAX_TYPES
    get = spec["paths"]["/rest/call/readDDICount"]["get"]
    company = next(p for p in get["parameters"] if p["name"] == "company")
    assert company["schema"]["maxItems"] == fields.MAX_COMPANIES
    create = body_schema(spec, "/rest/ops/create/")
    batches = [
        v for s in create["oneOf"] for v in s["properties"]["values"]["anyOf"] if "items" in v
    ]
    assert batches and all(b["maxItems"] == crud.MAX_BATCH for b in batches)


# --- /rest/docs ---------------------------------------------------------------------------


@pytest.fixture
def docs_page(client):
    response = client.get("/rest/docs")  # signed out: the same audience as the document
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    return response


def test_the_docs_page_shows_every_operation_and_schema(spec, docs_page):
    soup = BeautifulSoup(docs_page.get_data(as_text=True), "html.parser")
    assert [h.get_text(strip=True) for h in soup.find_all("h1")] == ["API reference"]
    ids = {element["id"]: element for element in soup.find_all(id=True)}
    contents = {a["href"] for a in soup.select("nav a[href]")}
    for path, method, op in operations(spec):
        heading = ids.get(f"op-{op['operationId']}")
        assert heading is not None, op["operationId"]
        assert heading.get_text(" ", strip=True) == f"{method.upper()} {path}"
        article = heading.find_parent("article")
        assert op["summary"] in article.get_text(" ", strip=True)
        # Every answer the document lists, and every example of the body.
        statuses = [r.find("th").get_text(strip=True) for r in article.select("tbody tr")]
        assert set(op["responses"]) <= set(statuses), op["operationId"]
        if "requestBody" in op:
            content = next(iter(op["requestBody"]["content"].values()))
            assert len(article.select("figure.api-example")) >= len(content["examples"])
        assert f"#op-{op['operationId']}" in contents  # reachable from the contents
    for name in spec["components"]["schemas"]:
        assert f"schema-{name}" in ids, name
    # Every link to a schema lands on one.
    for link in soup.select('a[href^="#schema-"]'):
        assert link["href"][1:] in ids, link["href"]


def test_the_docs_page_is_rendered_from_the_served_document(docs_page, factory):
    html = docs_page.get_data(as_text=True)
    assert "http://localhost" in html  # `servers`, as this request reached the app
    assert 'href="/rest/openapi.json"' in html
    # Descriptions' `code` becomes <code>, escaped: nothing in a description is markup.
    soup = BeautifulSoup(html, "html.parser")
    assert soup.find("code", string="type") is not None


def test_the_docs_page_needs_no_script_and_no_other_site(docs_page):
    html = docs_page.get_data(as_text=True)
    soup = BeautifulSoup(html, "html.parser")
    assert "script-src 'self'" in docs_page.headers["Content-Security-Policy"]
    assert soup.find("style") is None and soup.find(style=True) is None
    assert all(s.get("src", "").startswith("/static/") for s in soup.find_all("script"))
    for tag, attribute in (("link", "href"), ("img", "src"), ("a", "href")):
        for element in soup.find_all(tag):
            assert not element.get(attribute, "").startswith(("http:", "https:", "//")), element


# --- the numbers operations: the schema states every rule across members --------------------

NUMBER_OPS = ("read", "reserve", "release", "allocate", "retire")


@st.composite
def number_bodies(draw, op: str, today, examples: list[dict]):
    """Bodies near every rule of the numbers operations (docs/numbers.md): a number or a
    prefix, a count only with a prefix, 17 digits, `until` within a year of today, a cursor,
    force with a reason; members of the other operations now and then."""
    from datetime import timedelta

    from webapp.services.numbers.read import encode_cursor

    day = lambda n: (today + timedelta(days=n)).isoformat()  # noqa: E731
    scope_values = {
        "dialcode": st.sampled_from(["44", "1", "1234567", "12345678", "", 44]),
        "number": st.sampled_from(["2071230000", "1" * 10, "1" * 15, "1" * 16, "x", 5]),
        "prefix": st.sampled_from(["20712", "1" * 10, "1" * 15, "1" * 16, "", "2a", None]),
        "count": st.sampled_from([1, 3, 10_000, 10_001, 0, "3", 2.0, True, None]),
        "state": st.sampled_from([["available"], ["reserved", "aging"], [], ["bogus"], "x"]),
        "company": st.sampled_from(["acme", "Bad!", None]),
        "extra": st.just("x"),
    }
    values = {
        "company": st.sampled_from(["acme", "globex", "Bad!", 3]),
        "until": st.sampled_from(
            [day(0), day(30), day(365), day(366), day(-1), "2027-02-30", "20270101", 20270101]
        ),
        "virt_exten": st.sampled_from(["100", "0099", "12345678901", "", 7]),
        "extra": st.just("x"),
    }
    top = {
        "force": st.sampled_from([True, False, None, "yes"]),
        "reason": st.sampled_from(["contract moved", "", "   ", None, "x" * 501, "a\x00b"]),
        "limit": st.sampled_from([1, 1000, 1001, 0, None, "5"]),
        # A real cursor, or strings unlike any (a string like one is a cursor only if a `next`
        # gave it, which no document can state: tests/schemathesis_hooks.py says so too).
        "after": st.sampled_from(
            [encode_cursor(("44", "2071230000")), "a" * 101, "ab=", "", "!!", None]
        ),
        "block": st.just({"dialcode": "44", "first": "1", "count": 1}),
    }
    own = MEMBERS[op]
    pick = lambda pool, names: {  # noqa: E731
        k: v for k, v in pool.items() if k in names or draw(st.integers(0, 19)) == 0
    }
    if draw(st.booleans()):  # one of the document's examples, one member changed (or none)
        body = copy.deepcopy(draw(st.sampled_from(examples)))
        part, pool = draw(
            st.sampled_from([("scope", scope_values), ("values", values), (None, top)])
        )
        inner = body if part is None else body.get(part)
        if isinstance(inner, dict) and draw(st.integers(0, 4)):
            name = draw(st.sampled_from(sorted(pool)))
            if draw(st.integers(0, 3)):
                inner[name] = draw(pool[name])
            else:
                inner.pop(name, None)
        return body
    body = {}
    if draw(st.integers(0, 9)):  # mostly a scope
        body["scope"] = draw(st.fixed_dictionaries({}, optional=pick(scope_values, own)))
    if "values" in own or not draw(st.integers(0, 9)):
        body["values"] = draw(st.fixed_dictionaries({}, optional=pick(values, own)))
    body |= draw(st.fixed_dictionaries({}, optional=pick(top, own)))
    return body


# Each operation's own members (others are drawn now and then: unknown members are a 400).
MEMBERS = {
    "read": ("state", "dialcode", "prefix", "company", "limit", "after"),
    "reserve": ("dialcode", "number", "prefix", "count", "values", "company", "until"),
    "release": ("dialcode", "number", "prefix"),
    "allocate": ("dialcode", "prefix", "count", "values", "company", "virt_exten"),
    "retire": ("dialcode", "number", "prefix"),
}
MEMBERS = {
    op: (*names, "force", "reason") if op in ("reserve", "allocate", "retire") else names
    for op, names in MEMBERS.items()
}
AGREED: dict[str, set[bool]] = {}


@pytest.mark.slow
@pytest.mark.parametrize("op", NUMBER_OPS)
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_numbers_schema_and_validation_agree(factory, spec, op, data):
    """A body the document accepts is never a 400, and one it refuses always is."""
    from webapp.services import inventory

    if not hasattr(factory, "_root"):
        factory.company("acme")
        factory.company("globex")
        factory._root = factory.account("root", system_admin=True)
        factory._today = inventory.today()
    path = f"/rest/numbers/{op}"
    content = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    examples = [e["value"] for e in content["examples"].values()]
    body = data.draw(number_bodies(op, factory._today, examples))
    schema_ok = Draft202012Validator(body_schema(spec, path)).is_valid(body)
    response = factory.client.post(path, json=body, headers=factory._root.headers)
    assert response.status_code in (200, 400, 404, 409), (body, response.get_json())
    app_ok = response.status_code != 400
    assert schema_ok == app_ok, (json.dumps(body), response.status_code, response.get_json())
    AGREED.setdefault(op, set()).add(schema_ok)


@pytest.mark.slow
def test_the_numbers_agreement_saw_both_sides():
    """The bodies drawn above were valid and invalid for every operation (run after it)."""
    if len(AGREED) < len(NUMBER_OPS):
        pytest.skip("run with test_numbers_schema_and_validation_agree")
    assert all(seen == {True, False} for seen in AGREED.values()), AGREED


def test_the_reservation_days_are_exactly_the_year_ahead(factory, spec):
    """`until`'s pattern, made from today, holds every day from today to 365 days ahead and
    no other (every day of the two years around, and days that do not exist)."""
    from datetime import timedelta

    from webapp.services import inventory

    today = inventory.today()
    scope = body_schema(spec, "/rest/numbers/reserve")["properties"]["values"]
    until = re.compile(scope["properties"]["until"]["pattern"])
    for n in range(-400, 400):
        day = today + timedelta(days=n)
        assert bool(until.search(day.isoformat())) == (0 <= n <= 365), day
    for bad in ("2027-02-29", "2027-02-30", "2027-04-31", "2027-13-01", "2027-1-01", "27-01-01"):
        assert not until.search(bad), bad
