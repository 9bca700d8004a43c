"""History intervals and audit entries are written with every change, in its transaction."""

from __future__ import annotations

from sqlalchemy import select

from webapp.extensions import db
from webapp.models import AuditEntry, HistoryInterval

from .factories import snapshot
from .invariants import assert_history_consistent

DDI = {"dialcode": "44", "number": "2071234567", "virt_exten": "100", "company": "acme"}


def intervals(kind: str = "ddi") -> list[tuple]:
    db.session.rollback()
    rows = db.session.scalars(
        select(HistoryInterval).where(HistoryInterval.kind == kind).order_by(HistoryInterval.id)
    )
    return [(iv.company, iv.key, iv.start_at, iv.end_at) for iv in rows]


def audit_rows() -> list[AuditEntry]:
    db.session.rollback()
    return list(db.session.scalars(select(AuditEntry).order_by(AuditEntry.id)))


def setup(factory):
    factory.company("acme")
    factory.company("globex")
    return factory.account("root", system_admin=True)


def test_create_opens_one_interval_and_audits(factory):
    root = setup(factory)
    assert factory.api(root, "create", {"type": "ddi", "values": DDI}).status_code == 200
    [(company, key, _start, end)] = intervals()
    assert (company, key, end) == ("acme", "44:2071234567", None)
    entry = audit_rows()[-1]
    assert (entry.actor, entry.via, entry.action, entry.target) == (
        "root",
        "api",
        "ddi.create",
        "ddi 44:2071234567",
    )
    assert entry.before is None and entry.after == DDI
    assert_history_consistent()


def test_move_closes_and_opens_at_the_same_instant(factory):
    root = setup(factory)
    factory.api(root, "create", {"type": "ddi", "values": DDI})
    r = factory.api(
        root,
        "update",
        {"type": "ddi", "scope": {"company": "acme"}, "values": {"company": "globex"}},
    )
    assert r.json == {"result": "success", "numrows": 1}
    (a_company, _, a_start, a_end), (b_company, _, b_start, b_end) = intervals()
    assert (a_company, b_company) == ("acme", "globex")
    assert a_end == b_start and b_end is None and a_start <= a_end
    entry = audit_rows()[-1]
    assert entry.action == "ddi.update"
    assert entry.before["company"] == "acme" and entry.after["company"] == "globex"
    assert_history_consistent()


def test_extension_change_writes_no_history_but_is_audited(factory):
    root = setup(factory)
    factory.api(root, "create", {"type": "ddi", "values": DDI})
    r = factory.api(
        root, "update", {"type": "ddi", "scope": {"company": "acme"}, "values": {"virt_exten": "7"}}
    )
    assert r.json["numrows"] == 1
    assert len(intervals()) == 1
    entry = audit_rows()[-1]
    assert (entry.before["virt_exten"], entry.after["virt_exten"]) == ("100", "7")


def test_update_to_the_same_values_changes_nothing(factory):
    root = setup(factory)
    factory.api(root, "create", {"type": "ddi", "values": DDI})
    before = snapshot()
    r = factory.api(
        root,
        "update",
        {
            "type": "ddi",
            "scope": {"company": "acme"},
            "values": {"virt_exten": "100", "company": "acme"},
        },
    )
    assert r.json == {"result": "success", "numrows": 0}
    assert snapshot() == before


def test_link_moves_history_and_is_audited_as_link(factory):
    root = setup(factory)
    factory.api(root, "create", {"type": "ddi", "values": DDI})
    r = factory.api(
        root,
        "link",
        {
            "type": "ddi",
            "scope": {"dialcode": "44", "number": "2071234567"},
            "values": {"virt_exten": "555", "company": "globex"},
        },
    )
    assert r.json == {"result": "success", "numrows": 1}
    assert [c for c, *_ in intervals()] == ["acme", "globex"]
    assert audit_rows()[-1].action == "ddi.link"
    assert_history_consistent()


def test_delete_closes_the_interval_and_keeps_the_row_in_the_audit(factory):
    root = setup(factory)
    factory.api(root, "create", {"type": "ddi", "values": DDI})
    r = factory.api(root, "delete", {"type": "ddi", "scope": {"company": "acme"}})
    assert r.json == {"result": "success", "numrows": 1}
    [(_, _, start, end)] = intervals()
    assert end is not None and start <= end
    entry = audit_rows()[-1]
    assert entry.action == "ddi.delete" and entry.before == DDI and entry.after is None
    assert_history_consistent()


def test_recreate_after_delete_starts_a_new_interval(factory):
    root = setup(factory)
    for _ in range(3):
        factory.api(root, "create", {"type": "ddi", "values": DDI})
        factory.api(root, "delete", {"type": "ddi", "scope": {"company": "acme"}})
    factory.api(root, "create", {"type": "ddi", "values": DDI})
    assert len(intervals()) == 4
    assert_history_consistent()


def test_phone_user_lifecycle_history(factory):
    root = setup(factory)
    user = {"username": "ana.kim", "virt_exten": "201", "company": "acme"}
    assert factory.api(root, "create", {"type": "user", "values": user}).status_code == 200
    # The same username in another company is another user with its own history.
    assert (
        factory.api(
            root, "create", {"type": "user", "values": {**user, "company": "globex"}}
        ).status_code
        == 200
    )
    r = factory.api(
        root, "delete", {"type": "user", "scope": {"company": "globex", "username": "ana.kim"}}
    )
    assert r.json["numrows"] == 1
    r = factory.api(
        root,
        "update",
        {
            "type": "user",
            "scope": {"company": "acme", "username": "ana.kim"},
            "values": {"company": "globex"},
        },
    )
    assert r.json["numrows"] == 1
    history = intervals("user")
    assert [(c, k, e is None) for c, k, _, e in history] == [
        ("acme", "ana.kim", False),
        ("globex", "ana.kim", False),
        ("globex", "ana.kim", True),
    ]
    assert_history_consistent()


def test_batch_create_is_all_or_nothing_with_history(factory):
    root = setup(factory)
    factory.api(root, "create", {"type": "ddi", "values": {**DDI, "number": "999"}})
    before = snapshot()
    batch = [{**DDI, "number": str(n)} for n in range(100, 150)] + [{**DDI, "number": "999"}]
    r = factory.api(root, "create", {"type": "ddi", "values": batch})
    assert r.status_code == 409
    assert snapshot() == before
    batch = [{**DDI, "number": str(n)} for n in range(2000, 3000)]
    r = factory.api(root, "create", {"type": "ddi", "values": batch})
    assert r.json == {"result": "success", "numrows": 1000}
    assert len(intervals()) == 1001
    assert_history_consistent()


def test_bulk_update_and_delete_move_every_matching_row(factory):
    root = setup(factory)
    batch = [{**DDI, "number": str(n), "virt_exten": str(n % 3)} for n in range(1000, 1900)]
    factory.api(root, "create", {"type": "ddi", "values": batch})
    r = factory.api(
        root,
        "update",
        {
            "type": "ddi",
            "scope": {"company": "acme", "virt_exten": "1"},
            "values": {"company": "globex"},
        },
    )
    assert r.json["numrows"] == 300
    assert_history_consistent()
    r = factory.api(root, "delete", {"type": "ddi", "scope": {"company": "acme"}})
    assert r.json["numrows"] == 600
    assert_history_consistent()
    r = factory.api(root, "read", {"type": "ddi", "scope": {"company": "globex"}, "limit": 5})
    assert r.json["total"] == 300 and r.json["numrows"] == 5
