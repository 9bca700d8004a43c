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
