"""The record operations of the API (/rest/ops/): a create read back, a path without its
trailing slash, the row of a batch that names an unknown company."""


def test_create_and_read_roundtrip(factory):
    factory.company("acme")
    admin = factory.account("root", system_admin=True)
    body = {
        "type": "ddi",
        "values": {
            "dialcode": "44",
            "number": "2071234567",
            "virt_exten": "100",
            "company": "acme",
        },
    }
    r = factory.api(admin, "create", body)
    assert r.status_code == 200, r.json
    assert r.json == {"result": "success", "numrows": 1}
    r = factory.api(admin, "read", {"type": "ddi", "scope": {"company": "acme"}})
    assert r.json["values"] == [
        {"dialcode": "44", "number": "2071234567", "virt_exten": "100", "company": "acme"}
    ]
    assert r.json["numrows"] == 1 and r.json["total"] == 1


def test_paths_without_the_trailing_slash_answer_json_not_a_redirect(factory):
    admin = factory.account("root", system_admin=True)
    r = factory.client.post("/rest/ops/read", json={"type": "ddi"}, headers=admin.headers)
    assert r.status_code == 200 and r.json["result"] == "success"


def test_unknown_company_in_a_batch_names_its_row(factory):
    factory.company("acme")
    admin = factory.account("root", system_admin=True)
    row = {"dialcode": "44", "number": "1", "virt_exten": "1", "company": "acme"}
    batch = [row, {**row, "number": "2"}, {**row, "number": "3", "company": "nope"}]
    r = factory.api(admin, "create", {"type": "ddi", "values": batch})
    assert r.status_code == 400
    assert r.json["error"]["fields"] == {"values[2].company": "unknown company"}


def test_an_operations_answer_is_jsonifys_byte_for_byte(app):
    """rest.ops.json_response encodes with pydantic_core: the same bytes and headers as
    jsonify, for what the two would write alike and for what they would not (a DEL, a lone
    surrogate), and debug mode's indented answer as jsonify gives it."""
    from flask import jsonify

    from webapp.rest.ops import json_response

    payloads = [
        {"result": "success", "values": [{"a": 'é\u2028😀\x00"\\/', "n": None}], "numrows": 1},
        {"result": "success", "big": 2**70, "flag": True, "empty": [{}]},
        {"result": "success", "del": "a\x7fb"},
        {"result": "success", "surrogate": "\ud800"},
    ]
    for debug in (False, True):
        app.debug = debug
        try:
            with app.test_request_context():
                for payload in payloads:
                    ours, flasks = json_response(payload), jsonify(payload)
                    assert ours.get_data() == flasks.get_data()
                    assert list(ours.headers) == list(flasks.headers)
        finally:
            app.debug = False
