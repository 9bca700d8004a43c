"""Change events (docs/events.md): every door that changes a DDI or phone user (the API, the
pages, the bulk actions, the DDI import) records one event per change with its type, actor,
company, key, before and after; a history import records none. Ids run 1..n without gaps in
commit order, and a refused write uses none. The feed, read in pages, rebuilds the tables
exactly (an oracle over random histories), for a System-Admin and for a Company-Admin's
companies. POST /rest/events/read: defaults, paging, filters, who may read what (the other side
of a move as null), bad bodies, the long poll (which holds no transaction while it waits).
Pruning deletes only older transactions."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from bs4 import BeautifulSoup
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, func, select, text, update
from werkzeug.datastructures import MultiDict

from webapp.access import Principal
from webapp.database import utcnow, write_transaction
from webapp.errors import ServiceError
from webapp.extensions import db
from webapp.models import (
    AuditEntry,
    DailyPeak,
    Ddi,
    Event,
    EventCounter,
    EventTxn,
    HistoryInterval,
    PhoneUser,
    WebhookAttempt,
)
from webapp.services.billing import periods, rollups
from webapp.services.events import feed, journal, webhooks
from webapp.services.imports import history_import
from webapp.services.records import crud, ddis, kinds

from .factories import ACME, GLOBEX, INITECH, snapshot

ROOT = Principal.cli("oracle")
READ = "/rest/events/read"
AT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
VERB = {"create": "created", "update": "updated", "link": "updated", "delete": "deleted"}


def ddi(number: str, company: str = ACME, exten: str = "100") -> dict[str, str]:
    return {"dialcode": "44", "number": number, "virt_exten": exten, "company": company}


def user(username: str, company: str = ACME, exten: str = "200") -> dict[str, str]:
    return {"username": username, "virt_exten": exten, "company": company}


def key_of(kind: str, record: dict[str, Any]) -> dict[str, Any]:
    if kind == "ddi":
        return {"dialcode": record["dialcode"], "number": record["number"]}
    return {"company": record["company"], "username": record["username"]}


def last_id() -> int:
    """The event counter: the id of the last event committed."""
    db.session.rollback()
    return db.session.scalar(select(EventCounter.last_id).where(EventCounter.id == 1))


def read_feed(after: int = 0, principal: Principal = ROOT, **query: Any) -> list[dict[str, Any]]:
    """The events after `after` as `principal` reads them (the service behind the API)."""
    db.session.rollback()
    got = feed.read(principal, feed.Query(after=after, limit=1000, **query))
    db.session.rollback()
    return got.values


def brief(values: list[dict[str, Any]]) -> list[tuple]:
    """What an event says, without its id and instant: (type, actor, company, before, after)."""
    for e in values:  # the key is always the record's own
        kind = e["type"].partition(".")[0]
        assert e["key"] == key_of(kind, e["after"] or e["before"]), e
        assert AT.fullmatch(e["at"]), e
    return [(e["type"], e["actor"], e["company"], e["before"], e["after"]) for e in values]


def assert_one_transaction(values: list[dict[str, Any]]) -> None:
    """The events came from one write: consecutive ids, one instant, one actor."""
    ids = [e["id"] for e in values]
    assert ids == list(range(ids[0], ids[0] + len(ids)))
    assert len({(e["at"], e["actor"]) for e in values}) == 1


def assert_events_match_audit(ordered: bool = True) -> None:
    """Every audit entry of a DDI or phone-user change has its event, in the same order, with
    the same instant, actor, company, before and after; and no event lacks its entry.
    `ordered` False: concurrent writers, whose audit ids need not follow commit order."""
    db.session.rollback()
    entries = db.session.scalars(
        select(AuditEntry)
        .where(AuditEntry.action.like("ddi.%") | AuditEntry.action.like("user.%"))
        .order_by(AuditEntry.id)
    ).all()
    audited = [
        (
            a.at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            a.actor,
            f"{a.action.partition('.')[0]}.{VERB[a.action.partition('.')[2]]}",
            a.company,
            a.before,
            a.after,
        )
        for a in entries
    ]
    recorded = [
        (e["at"], e["actor"], e["type"], e["company"], e["before"], e["after"]) for e in read_feed()
    ]
    if ordered:
        assert recorded == audited
    else:
        assert sorted(map(repr, recorded)) == sorted(map(repr, audited))
    ids = [e["id"] for e in read_feed()]
    assert ids == list(range(1, len(ids) + 1)) and last_id() == len(ids)


def api_read(world, caller, body: Any = None, **kwargs: Any):
    headers = caller.headers if caller else {}
    return world.client.post(READ, json={} if body is None else body, headers=headers, **kwargs)


def assert_error(response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.get_data(as_text=True))
    body = response.json
    assert body["result"] == "error" and body["error"]["code"] == code, body
    assert "values" not in body
    return body["error"]


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def form_post(client, path: str, data: dict[str, Any] | MultiDict | None = None):
    data = MultiDict(data or {})
    data["csrf_token"] = client.csrf
    return client.post(path, data=data)


def submit(client, path: str, data: dict[str, Any] | None = None) -> None:
    """Post a page's form; it must succeed (a redirect back to the list)."""
    r = form_post(client, path, data)
    assert r.status_code in (302, 303), (path, r.status_code, r.get_data(as_text=True))


def write(world, caller, op: str, body: dict[str, Any]) -> int:
    """An API write that must succeed; answers its numrows."""
    r = world.factory.api(caller, op, body)
    assert r.status_code == 200, (op, body, r.json)
    return r.json["numrows"]


# --- every door records its changes -----------------------------------------------------------


def test_api_creates_one_and_a_batch(world):
    assert last_id() == 0  # the world (companies, accounts) changes no DDI or phone user
    assert write(world, world.root, "create", {"type": "ddi", "values": ddi("1")}) == 1
    batch = [ddi("3", GLOBEX), ddi("2", INITECH, "7")]
    assert write(world, world.root, "create", {"type": "ddi", "values": batch}) == 2
    users = [user("zoe"), user("amy", exten="201")]
    assert write(world, world.cadmin, "create", {"type": "user", "values": users}) == 2

    got = read_feed()
    assert [e["id"] for e in got] == [1, 2, 3, 4, 5]
    assert brief(got) == [
        ("ddi.created", "root", ACME, None, ddi("1")),
        # A batch is written in key order, one transaction.
        ("ddi.created", "root", INITECH, None, ddi("2", INITECH, "7")),
        ("ddi.created", "root", GLOBEX, None, ddi("3", GLOBEX)),
        ("user.created", "cadmin", ACME, None, user("amy", exten="201")),
        ("user.created", "cadmin", ACME, None, user("zoe")),
    ]
    assert got[0]["key"] == {"dialcode": "44", "number": "1"}
    assert got[3]["key"] == {"company": ACME, "username": "amy"}
    assert_one_transaction(got[1:3])
    assert_one_transaction(got[3:5])
    at = datetime.strptime(got[0]["at"], "%Y-%m-%dT%H:%M:%SZ")
    assert abs(utcnow() - at) < timedelta(minutes=1)
    assert_events_match_audit()


def test_api_updates_moves_links_and_deletes_ddis(world):
    world.factory.ddi("44", "1", ACME, "100")
    start = last_id()
    scope = {"company": ACME, "number": "1"}
    exten = {"type": "ddi", "scope": scope, "values": {"virt_exten": "5"}}
    assert write(world, world.root, "update", exten) == 1
    assert write(world, world.root, "update", exten) == 0  # nothing changes: no event
    move = {"type": "ddi", "scope": scope, "values": {"company": GLOBEX}}
    assert write(world, world.root, "update", move) == 1
    link = {
        "type": "ddi",
        "scope": {"dialcode": "44", "number": "1"},
        "values": {"virt_exten": "7", "company": INITECH},
    }
    assert write(world, world.root, "link", link) == 1
    assert write(world, world.root, "delete", {"type": "ddi", "scope": {"company": INITECH}}) == 1

    got = read_feed(start)
    assert [e["id"] for e in got] == [start + 1, start + 2, start + 3, start + 4]
    assert brief(got) == [
        ("ddi.updated", "root", ACME, ddi("1", ACME, "100"), ddi("1", ACME, "5")),
        ("ddi.updated", "root", GLOBEX, ddi("1", ACME, "5"), ddi("1", GLOBEX, "5")),
        ("ddi.updated", "root", INITECH, ddi("1", GLOBEX, "5"), ddi("1", INITECH, "7")),
        ("ddi.deleted", "root", INITECH, ddi("1", INITECH, "7"), None),
    ]
    assert got[3]["key"] == {"dialcode": "44", "number": "1"}
    assert_events_match_audit()


def test_api_updates_moves_and_deletes_phone_users_one_event_per_row(world):
    world.factory.user("ana", ACME, "200")
    world.factory.user("bob", ACME, "201")
    start = last_id()
    # A Company-Admin of acme and initech moves both acme users in one request.
    move = {"type": "user", "scope": {"company": ACME}, "values": {"company": INITECH}}
    assert write(world, world.cadmin2, "update", move) == 2
    bob = {"company": INITECH, "username": "bob"}
    exten = {"type": "user", "scope": bob, "values": {"virt_exten": "9"}}
    assert write(world, world.cadmin2, "update", exten) == 1
    gone = {"type": "user", "scope": {"company": INITECH}}
    assert write(world, world.cadmin2, "delete", gone) == 2

    got = read_feed(start)
    ana, bob_ = user("ana", exten="200"), user("bob", exten="201")
    assert brief(got) == [
        ("user.updated", "cadmin2", INITECH, ana, {**ana, "company": INITECH}),
        ("user.updated", "cadmin2", INITECH, bob_, {**bob_, "company": INITECH}),
        (
            "user.updated",
            "cadmin2",
            INITECH,
            user("bob", INITECH, "201"),
            user("bob", INITECH, "9"),
        ),
        ("user.deleted", "cadmin2", INITECH, user("ana", INITECH, "200"), None),
        ("user.deleted", "cadmin2", INITECH, user("bob", INITECH, "9"), None),
    ]
    # A moved user's key is its new one: (company, username) in the company it moved to.
    assert got[0]["key"] == {"company": INITECH, "username": "ana"}
    assert_one_transaction(got[0:2])
    assert_one_transaction(got[3:5])
    assert_events_match_audit()


def test_the_pages_record_the_changes_they_make(world):
    client = world.browser("root")
    start = last_id()
    submit(client, "/ddis/new", ddi("2071230000"))
    # A block of three numbers: three events in one transaction.
    block = {**ddi("2071230010", GLOBEX, "300"), "count": "3", "extensions": "increment"}
    submit(client, "/ddis/new", block)
    path = "/ddis/44/2071230000"
    submit(client, f"{path}/edit", {"virt_exten": "555", "company": INITECH})
    submit(client, f"{path}/link", {"virt_exten": "556", "company": INITECH})
    submit(client, f"{path}/delete")
    submit(client, "/users/new", user("eve"))
    submit(client, "/users/acme/eve/edit", {"virt_exten": "250", "company": GLOBEX})
    submit(client, "/users/globex/eve/delete")

    got = read_feed(start)
    assert brief(got) == [
        ("ddi.created", "root", ACME, None, ddi("2071230000")),
        ("ddi.created", "root", GLOBEX, None, ddi("2071230010", GLOBEX, "300")),
        ("ddi.created", "root", GLOBEX, None, ddi("2071230011", GLOBEX, "301")),
        ("ddi.created", "root", GLOBEX, None, ddi("2071230012", GLOBEX, "302")),
        ("ddi.updated", "root", INITECH, ddi("2071230000"), ddi("2071230000", INITECH, "555")),
        (
            "ddi.updated",
            "root",
            INITECH,
            ddi("2071230000", INITECH, "555"),
            ddi("2071230000", INITECH, "556"),
        ),
        ("ddi.deleted", "root", INITECH, ddi("2071230000", INITECH, "556"), None),
        ("user.created", "root", ACME, None, user("eve")),
        ("user.updated", "root", GLOBEX, user("eve"), user("eve", GLOBEX, "250")),
        ("user.deleted", "root", GLOBEX, user("eve", GLOBEX, "250"), None),
    ]
    assert_one_transaction(got[1:4])
    # A form refused (a bad extension) records nothing.
    before = last_id()
    assert form_post(client, "/users/new", user("fay", exten="x")).status_code == 400
    assert last_id() == before
    assert_events_match_audit()


def hidden_fields(page) -> MultiDict:
    return MultiDict([(i["name"], i.get("value")) for i in page.select("form input[type=hidden]")])


def test_bulk_move_and_delete_record_one_event_per_record(world):
    for i in range(3):
        world.factory.ddi("44", f"20700000{i}", ACME, f"10{i}")
    world.factory.ddi("44", "207000009", GLOBEX, "109")
    world.factory.user("ana", ACME)
    start = last_id()
    client = world.browser("root")

    page = soup(
        form_post(
            client,
            "/ddis/bulk",
            {"scope": "all", "f_company": ACME, "action": "move", "to_company": INITECH},
        )
    )
    assert client.post("/ddis/bulk/apply", data=hidden_fields(page)).status_code == 303
    ticked = MultiDict(
        [
            ("scope", "selected"),
            ("action", "delete"),
            ("key", "44:207000000"),
            ("key", "44:207000009"),
        ]
    )
    page = soup(form_post(client, "/ddis/bulk", ticked))
    assert client.post("/ddis/bulk/apply", data=hidden_fields(page)).status_code == 303
    page = soup(
        form_post(
            client,
            "/users/bulk",
            {"scope": "selected", "key": "acme/ana", "action": "move", "to_company": GLOBEX},
        )
    )
    assert client.post("/users/bulk/apply", data=hidden_fields(page)).status_code == 303

    got = read_feed(start)
    assert brief(got) == [
        *[
            (
                "ddi.updated",
                "root",
                INITECH,
                ddi(f"20700000{i}", ACME, f"10{i}"),
                ddi(f"20700000{i}", INITECH, f"10{i}"),
            )
            for i in range(3)
        ],
        ("ddi.deleted", "root", INITECH, ddi("207000000", INITECH, "100"), None),
        ("ddi.deleted", "root", GLOBEX, ddi("207000009", GLOBEX, "109"), None),
        ("user.updated", "root", GLOBEX, user("ana"), user("ana", GLOBEX)),
    ]
    assert_one_transaction(got[0:3])
    assert_one_transaction(got[3:5])
    assert_events_match_audit()


def test_the_ddi_import_records_its_creates_and_updates_not_the_unchanged(world):
    for number in ("1", "2", "3"):
        world.factory.ddi("44", number, ACME, "100")
    start = last_id()
    csv = (
        "dialcode,number,virt_exten,company\n"
        "44,1,100,acme\n"  # unchanged
        "44,2,200,acme\n"  # updated
        "44,3,100,globex\n"  # moved
        "44,4,300,initech\n"  # created
    )
    r = world.client.post(
        "/rest/ops/import/", data=csv, content_type="text/csv", headers=world.root.headers
    )
    assert r.status_code == 200, r.json
    assert (r.json["created"], r.json["updated"], r.json["unchanged"]) == (1, 2, 1)
    # A dry run records nothing.
    again = world.client.post(
        "/rest/ops/import/?dry_run=1",
        data=csv.replace("300", "301"),
        content_type="text/csv",
        headers=world.root.headers,
    )
    assert again.status_code == 200 and again.json["updated"] == 1

    got = read_feed(start)
    assert_one_transaction(got)
    assert sorted(brief(got), key=lambda e: (e[4] or e[3])["number"]) == [
        ("ddi.updated", "root", ACME, ddi("2"), ddi("2", ACME, "200")),
        ("ddi.updated", "root", GLOBEX, ddi("3"), ddi("3", GLOBEX)),
        ("ddi.created", "root", INITECH, None, ddi("4", INITECH, "300")),
    ]
    assert_events_match_audit()


def test_a_history_import_records_no_event(world):
    world.factory.ddi("44", "1", ACME)
    start = last_id()
    content = (
        "kind,company,key,start,end\n"
        "ddi,acme,44:9,2025-10-01T00:00:00Z,2025-10-11T00:00:00Z\n"
        "user,globex,ana,2025-10-05T10:00:00Z,2025-10-05T11:00:00Z\n"
    )
    history_import.import_csv(Principal.cli("importer"), content)
    db.session.rollback()
    assert (
        db.session.scalar(
            select(func.count())
            .select_from(AuditEntry)
            .where(AuditEntry.action == "history.import")
        )
        == 1
    )
    assert last_id() == start == 1
    assert read_feed(start) == []
    assert db.session.scalar(select(func.count()).select_from(EventTxn)) == 1


# --- ids: 1..n in commit order, none used by a refused write ---------------------------------


def test_refused_writes_record_nothing_and_use_no_id(world):
    api = world.factory.api
    assert api(world.root, "create", {"type": "ddi", "values": ddi("1")}).status_code == 200
    assert last_id() == 1
    before = snapshot()
    refused = [
        (world.root, "create", {"type": "ddi", "values": [ddi("5"), ddi("5", GLOBEX)]}, 409),
        (world.root, "create", {"type": "ddi", "values": [ddi("6"), ddi("1", GLOBEX)]}, 409),
        (world.cadmin, "create", {"type": "ddi", "values": ddi("7")}, 403),
        (
            world.cadmin,
            "update",
            {"type": "ddi", "scope": {"company": ACME}, "values": {"company": GLOBEX}},
            403,
        ),
        (world.cadmin, "create", {"type": "user", "values": [user("ok"), user("no", GLOBEX)]}, 403),
        (
            world.root,
            "create",
            {"type": "ddi", "values": [ddi("8"), {**ddi("9"), "virt_exten": "x"}]},
            400,
        ),
        (
            world.root,
            "update",
            {"type": "ddi", "scope": {"company": ACME}, "values": {"company": "nope"}},
            400,
        ),
        (world.nobody, "delete", {"type": "user", "scope": {"company": ACME}}, 403),
    ]
    for caller, op, body, status in refused:
        r = api(caller, op, body)
        assert r.status_code == status, (op, body, r.json)
        assert last_id() == 1, (op, body)
    # A write that matches nothing is no refusal, and records nothing either.
    assert (
        api(world.root, "delete", {"type": "ddi", "scope": {"company": GLOBEX}}).json["numrows"]
        == 0
    )
    assert snapshot() == before
    assert db.session.scalar(select(func.count()).select_from(EventTxn)) == 1

    r = api(world.root, "create", {"type": "ddi", "values": [ddi("2"), ddi("3")]})
    assert r.status_code == 200
    assert [e["id"] for e in read_feed()] == [1, 2, 3]
    assert_events_match_audit()


def test_a_transaction_rolled_back_after_recording_its_events_uses_no_id(world):
    world.factory.ddi("44", "1", ACME)
    with pytest.raises(RuntimeError), write_transaction() as session:
        rows = session.scalars(select(Ddi)).all()
        crud.apply_changes(session, ROOT, kinds.DDI, rows, {"virt_exten": "9"}, "update")
        assert session.scalar(select(func.count()).select_from(Event)) == 2  # recorded...
        raise RuntimeError("and then the write fails")
    assert last_id() == 1
    assert db.session.scalar(select(func.count()).select_from(Event)) == 1
    world.factory.ddi("44", "2", ACME)  # the same session goes on: the next write is id 2
    assert [e["id"] for e in read_feed()] == [1, 2]
    assert_events_match_audit()


@pytest.mark.slow
def test_concurrent_writers_get_ids_in_commit_order_and_a_follower_misses_none(app, world):
    """Writers in threads (real concurrency on PostgreSQL); a reader following `last` while
    they write sees every id once, in order, and the ids are 1..n without gaps."""
    writers, per_writer = 4, 6
    done = threading.Event()
    seen: list[int] = []
    errors: list[BaseException] = []

    def write(w: int) -> None:
        try:
            with app.app_context():
                for i in range(per_writer):
                    rows = [ddi(f"{w}{i}{j}", (ACME, GLOBEX)[j % 2]) for j in range(1 + i % 3)]
                    crud.create(ROOT, kinds.DDI, rows)
                    if i % 2:
                        crud.update(
                            ROOT,
                            kinds.DDI,
                            {"company": ACME, "number": f"{w}{i}0"},
                            {"virt_exten": "9"},
                        )
                db.session.remove()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def follow() -> None:
        with app.app_context():
            after = 0
            while True:
                finished = done.is_set()
                got = feed.read(ROOT, feed.Query(after=after, limit=5))
                db.session.rollback()
                seen.extend(e["id"] for e in got.values)
                after = got.last
                if finished and not got.values:
                    break
            db.session.remove()

    reader = threading.Thread(target=follow)
    reader.start()
    threads = [threading.Thread(target=write, args=(w,)) for w in range(1, writers + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    reader.join()
    assert not errors, errors
    total = last_id()
    assert total == writers * sum(1 + i % 3 + i % 2 for i in range(per_writer))
    assert seen == list(range(1, total + 1))
    assert_events_match_audit(ordered=False)


# --- the oracle: the feed rebuilds the tables --------------------------------------------------

COMPANIES = (ACME, GLOBEX, INITECH)
NUMBERS = ("1", "2", "3", "4")
NAMES = ("ana", "bob", "cy")

DDI_CREATE = st.tuples(
    st.just("ddi.create"),
    st.lists(
        st.tuples(st.sampled_from(NUMBERS), st.sampled_from(COMPANIES)),
        min_size=1,
        max_size=3,
        unique_by=lambda t: t[0],
    ),
)
USER_CREATE = st.tuples(
    st.just("user.create"),
    st.lists(
        st.tuples(st.sampled_from(NAMES), st.sampled_from(COMPANIES)),
        min_size=1,
        max_size=3,
        unique=True,
    ),
)
OPS = st.one_of(
    DDI_CREATE,
    USER_CREATE,
    st.tuples(
        st.just("ddi.update"),
        st.sampled_from(COMPANIES),
        st.sampled_from((None, *NUMBERS)),
        st.sampled_from(("x", *COMPANIES)),
    ),
    st.tuples(
        st.just("ddi.link"),
        st.sampled_from(NUMBERS),
        st.sampled_from(COMPANIES),
        st.sampled_from("56"),
    ),
    st.tuples(st.just("ddi.delete"), st.sampled_from(COMPANIES), st.sampled_from((None, *NUMBERS))),
    st.tuples(
        st.just("user.update"),
        st.sampled_from(COMPANIES),
        st.sampled_from((None, *NAMES)),
        st.sampled_from(("x", *COMPANIES)),
    ),
    st.tuples(st.just("user.delete"), st.sampled_from(COMPANIES), st.sampled_from((None, *NAMES))),
)


def apply_op(op: tuple, exten: str) -> None:
    """One write through the services; a refused one (a duplicate, a taken username) writes
    nothing and the history goes on."""
    name = op[0]
    try:
        if name == "ddi.create":
            crud.create(ROOT, kinds.DDI, [ddi(n, c, exten) for n, c in op[1]])
        elif name == "user.create":
            crud.create(ROOT, kinds.PHONE_USER, [user(u, c, exten) for u, c in op[1]])
        elif name in ("ddi.update", "user.update", "ddi.delete", "user.delete"):
            kind_name, verb = name.split(".")
            kind = kinds.KINDS[kind_name]
            field = "number" if kind_name == "ddi" else "username"
            scope = {"company": op[1], **({field: op[2]} if op[2] else {})}
            if verb == "delete":
                crud.delete_rows(ROOT, kind, scope)
            else:
                values = {"virt_exten": exten} if op[3] == "x" else {"company": op[3]}
                crud.update(ROOT, kind, scope, values)
        else:
            _, number, company, tail = op
            ddis.link(
                ROOT,
                {"dialcode": "44", "number": number},
                {"virt_exten": exten + tail, "company": company},
            )
    except ServiceError:
        pass


def fresh_tables() -> None:
    """No record, no history, no event: ids start again at 1 (the companies stay)."""
    with write_transaction() as session:
        for model in (DailyPeak, HistoryInterval, Ddi, PhoneUser, Event, EventTxn, AuditEntry):
            session.execute(delete(model))
        session.execute(update(EventCounter).values(last_id=0))
        rollups.rebuild_all(session, periods.zone("UTC"))


def replay(principal: Principal, limit: int, visible=None) -> tuple[dict, dict, list[int]]:
    """Read the whole feed in pages of `limit`, following `last`, and apply it to empty dicts
    keyed by the events' keys. Checks on the way that each event's `before` is the state
    replayed so far. `visible`: the companies the reader sees (a record moving out of them
    leaves its view, moving in enters it)."""
    state: dict[str, dict[tuple, dict]] = {"ddi": {}, "user": {}}
    ids: list[int] = []
    after = 0
    while True:
        db.session.rollback()
        page = feed.read(principal, feed.Query(after=after, limit=limit))
        assert len(page.values) <= limit
        if not page.values:
            assert page.last == after
            break
        for e in page.values:
            ids.append(e["id"])
            kind = e["type"].partition(".")[0]
            table = state[kind]
            before, after_ = e["before"], e["after"]
            # The side of a move in a company the reader may not see is null as a whole.
            for side in (before, after_):
                assert side is None or visible is None or side["company"] in visible, e
            if before is not None:
                key = tuple(key_of(kind, before).values())
                assert table.pop(key) == before, e
            if after_ is not None:
                key = tuple(key_of(kind, after_).values())
                assert key not in table, e
                table[key] = after_
            if e["type"].endswith(".created"):
                assert before is None and after_ is not None
            elif e["type"].endswith(".deleted"):
                assert before is not None and after_ is None
            elif before is not None and after_ is not None:
                assert before != after_
            else:  # a move into or out of the reader's companies
                assert visible is not None and e["company"] in (*visible, None), e
        after = page.last
    return state["ddi"], state["user"], ids


def tables(visible=None) -> tuple[dict, dict]:
    db.session.rollback()
    ddi_rows = {
        (r.dialcode, r.number): kinds.DDI.as_dict(r)
        for r in db.session.scalars(select(Ddi))
        if visible is None or r.company in visible
    }
    user_rows = {
        (r.company, r.username): kinds.PHONE_USER.as_dict(r)
        for r in db.session.scalars(select(PhoneUser))
        if visible is None or r.company in visible
    }
    return ddi_rows, user_rows


@pytest.mark.slow
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    first=st.tuples(DDI_CREATE, USER_CREATE),
    ops=st.lists(OPS, min_size=2, max_size=14),
    limit=st.integers(1, 6),
)
def test_the_feed_replayed_rebuilds_the_tables(app, world, first, ops, limit):
    """Random writes through the services (some refused: a key taken, a username taken in
    the company moved to), then the feed read in pages of `limit` and replayed."""
    fresh_tables()
    for i, op in enumerate([*first, *ops]):
        apply_op(op, str(100 + i))
    ddi_rows, user_rows, ids = replay(ROOT, limit)
    assert (ddi_rows, user_rows) == tables()
    assert ids == list(range(1, last_id() + 1))
    # A Company-Admin's feed rebuilds the records of its companies.
    mine = frozenset({ACME, INITECH})
    admin = Principal(username="two", via="api", admin_of=mine)
    ddi_rows, user_rows, _ = replay(admin, limit, visible=mine)
    assert (ddi_rows, user_rows) == tables(visible=mine)


# --- reading them: POST /rest/events/read ------------------------------------------------------


def test_read_defaults_paging_and_numrows(world):
    many = {"type": "ddi", "values": [ddi(str(i)) for i in range(1000, 1105)]}
    assert write(world, world.root, "create", many) == 105
    r = api_read(world, world.root)
    assert r.status_code == 200, r.json
    assert set(r.json) == {"result", "values", "numrows", "last"}
    assert r.json["result"] == "success"
    assert r.json["numrows"] == len(r.json["values"]) == 100  # limit defaults to 100
    assert [e["id"] for e in r.json["values"]] == list(range(1, 101))  # after defaults to 0
    assert r.json["last"] == 100
    # null means the same as leaving the field out (docs/api.md, field formats).
    nulls = api_read(world, world.root, {"after": None, "limit": None, "wait": None, "scope": None})
    assert nulls.status_code == 200 and nulls.json == r.json
    assert set(r.json["values"][0]) == {
        "id",
        "at",
        "type",
        "actor",
        "company",
        "key",
        "before",
        "after",
    }

    # Pages of 7 following `last` read every event once, in order.
    ids, after = [], 0
    while True:
        page = api_read(world, world.root, {"after": after, "limit": 7}).json
        assert page["numrows"] == len(page["values"]) <= 7
        if not page["values"]:
            assert page["last"] == after
            break
        ids += [e["id"] for e in page["values"]]
        assert page["last"] == page["values"][-1]["id"]
        after = page["last"]
    assert ids == list(range(1, 106))
    # Past the end: nothing, and `last` is the `after` given.
    end = api_read(world, world.root, {"after": 5000, "limit": 1000, "wait": 0}).json
    assert end == {"result": "success", "values": [], "numrows": 0, "last": 5000}
    # JSON has one number type: 7.0 is the integer 7 (as JSON Schema says).
    assert [e["id"] for e in values(world, world.root, {"after": 7.0, "limit": 2.0})] == [8, 9]
    end = api_read(world, world.root, {"after": 2**63 - 1}).json
    assert end == {"result": "success", "values": [], "numrows": 0, "last": 2**63 - 1}


def test_read_filters_by_company_and_type(world):
    world.factory.ddi("44", "1", ACME)
    world.factory.ddi("44", "2", GLOBEX)
    world.factory.user("ana", INITECH)
    crud.update(
        ROOT, kinds.DDI, {"company": ACME}, {"company": GLOBEX}
    )  # a move: in both companies
    crud.delete_rows(ROOT, kinds.DDI, {"company": GLOBEX, "number": "2"})

    def ids(scope):
        r = api_read(world, world.root, {"scope": scope})
        assert r.status_code == 200, r.json
        return [e["id"] for e in r.json["values"]]

    assert ids({}) == [1, 2, 3, 4, 5]
    assert ids({"company": [ACME]}) == [1, 4]
    assert ids({"company": [GLOBEX]}) == [2, 4, 5]
    assert ids({"company": [INITECH, ACME]}) == [1, 3, 4]
    assert ids({"company": []}) == []
    assert ids({"type": ["ddi.updated"]}) == [4]
    assert ids({"type": ["ddi.created", "user.created"]}) == [1, 2, 3]
    assert ids({"type": ["ddi.deleted"], "company": [ACME]}) == []
    assert ids({"type": ["ddi.deleted", "ddi.updated"], "company": [GLOBEX]}) == [4, 5]
    assert ids({"company": ["nosuch"]}) == []  # well formed, no such company: nothing
    # A System-Admin sees both sides of a move.
    move = api_read(world, world.root, {"after": 3, "limit": 1}).json["values"][0]
    assert move["company"] == GLOBEX
    assert move["before"]["company"] == ACME and move["after"]["company"] == GLOBEX


@pytest.fixture
def moves(world):
    """A DDI and a phone user each moved from acme to globex; one DDI in each company."""
    world.add("gadmin", "cadmin_reporter")  # Company-Admin of globex (and reporter of acme)
    world.factory.ddi("44", "1", ACME, "100")
    world.factory.ddi("44", "2", GLOBEX, "100")
    world.factory.ddi("44", "3", INITECH, "100")
    world.factory.user("ana", ACME, "200")
    crud.update(ROOT, kinds.DDI, {"company": ACME, "number": "1"}, {"company": GLOBEX})  # id 5
    crud.update(ROOT, kinds.PHONE_USER, {"company": ACME}, {"company": GLOBEX})  # id 6
    return world


def values(world, caller, body=None) -> list[dict[str, Any]]:
    r = api_read(world, caller, body)
    assert r.status_code == 200, r.json
    assert r.json["numrows"] == len(r.json["values"])
    return r.json["values"]


def test_a_company_admin_reads_its_companies_with_the_other_side_of_a_move_as_null(moves):
    world = moves
    acme = {e["id"]: e for e in values(world, world.cadmin)}
    assert sorted(acme) == [1, 4, 5, 6]
    assert acme[1]["company"] == ACME and acme[1]["after"] == ddi("1")
    ddi_move, user_move = acme[5], acme[6]
    # It moved to globex, which cadmin may not see: that side is null as a whole.
    assert ddi_move["company"] is None
    assert ddi_move["before"] == ddi("1") and ddi_move["after"] is None
    assert ddi_move["key"] == {"dialcode": "44", "number": "1"}
    assert user_move["company"] is None
    assert user_move["before"] == user("ana") and user_move["after"] is None
    assert user_move["key"] == {"company": None, "username": "ana"}

    globex = {e["id"]: e for e in values(world, world.gadmin)}
    assert sorted(globex) == [2, 5, 6]  # reporting on acme gives no acme events
    assert globex[5]["company"] == GLOBEX
    assert globex[5]["before"] is None
    assert globex[5]["after"] == ddi("1", GLOBEX)
    assert globex[6]["key"] == {"company": GLOBEX, "username": "ana"}
    assert globex[6]["before"] is None

    assert [e["id"] for e in values(world, world.cadmin2)] == [1, 3, 4, 5, 6]
    assert [e["id"] for e in values(world, world.root)] == [1, 2, 3, 4, 5, 6]
    assert values(world, world.root)[4]["before"] == ddi("1")  # nothing hidden


def test_a_company_the_reader_may_not_see_is_silently_left_out(moves):
    world = moves
    mine = [e["id"] for e in values(world, world.cadmin)]
    assert [
        e["id"] for e in values(world, world.cadmin, {"scope": {"company": [ACME, GLOBEX]}})
    ] == mine
    assert values(world, world.cadmin, {"scope": {"company": [GLOBEX]}}) == []
    assert values(world, world.cadmin, {"scope": {"company": [INITECH, GLOBEX]}}) == []
    assert [
        e["id"] for e in values(world, world.cadmin2, {"scope": {"company": [GLOBEX, INITECH]}})
    ] == [3]


def test_only_admins_read_the_events(moves):
    for who in ("summary", "reporter", "nobody"):  # Billing-only accounts and no grant at all
        error = assert_error(api_read(moves, moves.caller(who), {"wait": 1}), 403, "forbidden")
        assert error["message"], who


def test_no_or_bad_credentials_are_401(moves):
    assert_error(api_read(moves, None), 401, "unauthorized")
    r = moves.client.post(READ, json={}, headers={"Authorization": "Bearer nope"})
    assert_error(r, 401, "unauthorized")


def test_a_browser_session_needs_its_csrf_token(moves):
    client = moves.browser("cadmin")
    assert_error(client.post(READ, json={}), 403, "forbidden")
    assert_error(client.post(READ, json={}, headers={"X-CSRFToken": "forged"}), 403, "forbidden")
    r = client.post(READ, json={"limit": 2}, headers={"X-CSRFToken": client.csrf})
    assert r.status_code == 200, r.json
    assert [e["id"] for e in r.json["values"]] == [1, 4]


# Each bad body and the field its answer names (one test: a world per case costs more than
# all the requests together).
BAD_BODIES: list[tuple[Any, str]] = [
    ({"after": -1}, "after"),
    ({"after": "1"}, "after"),
    ({"after": True}, "after"),
    ({"after": 1.5}, "after"),
    ({"after": 2**63}, "after"),  # past the largest id the database holds
    ({"limit": 0}, "limit"),
    ({"limit": 1001}, "limit"),
    ({"limit": "10"}, "limit"),
    ({"limit": 10.5}, "limit"),
    ({"wait": -1}, "wait"),
    ({"wait": 31}, "wait"),
    ({"wait": 30.5}, "wait"),
    ({"wait": "5"}, "wait"),
    ({"wait": True}, "wait"),
    ({"scope": []}, "scope"),
    ({"scope": "acme"}, "scope"),
    ({"scope": 0}, "scope"),
    ({"scope": False}, "scope"),
    ({"scope": {"company": "acme"}}, "scope.company"),
    ({"scope": {"company": {"id": "acme"}}}, "scope.company"),
    ({"scope": {"company": ["Not Valid"]}}, "scope.company[0]"),
    ({"scope": {"company": [ACME, 7]}}, "scope.company[1]"),
    ({"scope": {"type": "ddi.created"}}, "scope.type"),
    ({"scope": {"type": ["ddi.moved"]}}, "scope.type[0]"),
    ({"scope": {"type": ["ddi.created", None]}}, "scope.type[1]"),
    ({"scope": {"kind": ["ddi"]}}, "scope.kind"),
    ({"offset": 5}, "offset"),
    ({"after": 0, "Limit": 5}, "Limit"),
]


def test_a_bad_body_is_400_naming_the_field_and_changes_nothing(moves):
    before = (snapshot(), last_id())
    for body, field in BAD_BODIES:
        error = assert_error(api_read(moves, moves.root, body), 400, "bad_request")
        assert field in error.get("fields", {}), (body, error)
        assert error["message"], body
        # The same for a Company-Admin.
        assert_error(api_read(moves, moves.cadmin, body), 400, "bad_request")
    assert (snapshot(), last_id()) == before


def test_a_body_that_is_no_json_object_is_400(moves):
    for raw in ["[]", '"x"', "3", "null", "{", "", '{"after": 1']:
        r = moves.client.post(
            READ, data=raw, content_type="application/json", headers=moves.root.headers
        )
        assert_error(r, 400, "bad_request")
    r = moves.client.post(READ, data="{}", content_type="text/plain", headers=moves.root.headers)
    assert_error(r, 415, "unsupported_media_type")


def test_read_with_wait_answers_at_once_when_events_are_there(moves):
    began = time.monotonic()
    got = values(moves, moves.root, {"wait": 30, "limit": 2})
    assert [e["id"] for e in got] == [1, 2]
    assert time.monotonic() - began < 1


# --- the long poll --------------------------------------------------------------------------


@pytest.fixture
def read_waits(monkeypatch) -> threading.Event:
    """Set once a read has found nothing, ended its transaction and begun to wait for a
    commit (feed._wait_for_commit): from then on a commit is one it must wake for."""
    began = threading.Event()
    wait_for_commit = feed._wait_for_commit

    def noted(newest: int, deadline: float) -> bool:
        began.set()
        return wait_for_commit(newest, deadline)

    monkeypatch.setattr(feed, "_wait_for_commit", noted)
    return began


def later(
    app, read_waits: threading.Event, write: Callable[[], None], delay: float = 0
) -> threading.Thread:
    """Run `write` in its own thread and app context once a read waits, `delay` seconds
    after (if no read ever waits, after 10 s: the test's assertions then say what it got)."""

    def run() -> None:
        read_waits.wait(10)
        time.sleep(delay)
        with app.app_context():
            write()
            db.session.remove()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.slow
def test_a_waiting_read_answers_soon_after_a_commit(app, moves, read_waits):
    after = last_id()
    # The commit half a second into the wait, so that the answer's time shows the read waited
    # for it (over 0.4 s) and answered soon after (under 2 s).
    writer = later(
        app, read_waits, lambda: crud.create(ROOT, kinds.DDI, ddi("77", GLOBEX)), delay=0.5
    )
    began = time.monotonic()
    r = api_read(moves, moves.root, {"after": after, "wait": 5})
    took = time.monotonic() - began
    writer.join()
    assert r.status_code == 200, r.json
    assert 0.4 < took < 2.0, took
    assert [(e["id"], e["type"], e["after"]) for e in r.json["values"]] == [
        (after + 1, "ddi.created", ddi("77", GLOBEX))
    ]
    assert r.json["last"] == after + 1


def idle_in_transaction(engine) -> list[tuple]:
    """Other sessions of the test database holding a transaction open while doing nothing
    for more than 50 ms (a read's own statements take far less)."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT pid, state, query FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND state LIKE 'idle in transaction%'"
                " AND state_change < clock_timestamp() - interval '50 milliseconds'"
            )
        ).all()
    return [tuple(r) for r in rows]


@pytest.mark.slow
def test_a_read_with_nothing_to_answer_waits_then_answers_empty_holding_no_transaction(
    app, moves, read_waits
):
    after = last_id()
    engine = db.engine
    postgres = engine.dialect.name == "postgresql"
    samples: list[list[tuple]] = []

    def sample() -> None:
        read_waits.wait(10)
        # Six looks, 0.1 s apart, over the first 0.6 s of the 1 s wait: a transaction held
        # since the read's last statement has sat idle past the 50 ms that counts by the first.
        while len(samples) < 6:
            time.sleep(0.1)
            samples.append(idle_in_transaction(engine))

    sampler = threading.Thread(target=sample) if postgres else None
    db.session.remove()  # the test's own session holds nothing either
    if sampler:
        sampler.start()
    began = time.monotonic()
    r = api_read(moves, moves.root, {"after": after, "wait": 1})
    took = time.monotonic() - began
    if sampler:
        sampler.join()
    assert r.status_code == 200, r.json
    assert r.json == {"result": "success", "values": [], "numrows": 0, "last": after}
    assert 0.9 < took < 2.0, took
    if postgres:
        assert len(samples) == 6
        assert samples == [[]] * 6, samples


@pytest.mark.slow
def test_a_commit_the_read_does_not_select_does_not_end_the_wait(app, moves, read_waits):
    """A DDI event commits while a reader waits for phone-user events: the reader wakes,
    finds nothing of its own, and waits on to its deadline."""
    after = last_id()
    writer = later(app, read_waits, lambda: crud.create(ROOT, kinds.DDI, ddi("78")))
    began = time.monotonic()
    r = api_read(
        moves, moves.root, {"after": after, "wait": 1, "scope": {"type": ["user.created"]}}
    )
    took = time.monotonic() - began
    writer.join()
    assert r.json == {"result": "success", "values": [], "numrows": 0, "last": after}
    assert 0.9 < took < 2.0, took
    assert [e["id"] for e in read_feed(after)] == [after + 1]


# --- pruning ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("allow_loopback_webhooks")
def test_prune_deletes_only_older_transactions_and_readers_read_on(world):
    world.factory.ddi("44", "1", ACME)  # id 1
    crud.create(ROOT, kinds.DDI, [ddi("2"), ddi("3")])  # ids 2, 3
    world.factory.ddi("44", "4", ACME)  # id 4
    now = utcnow()
    hook, _ = webhooks.create(ROOT, "http://127.0.0.1:9/hook")
    with write_transaction() as session:
        session.execute(
            update(EventTxn).where(EventTxn.first_id == 1).values(at=now - timedelta(days=10))
        )
        session.execute(
            update(EventTxn)
            .where(EventTxn.first_id == 2)
            .values(at=now - timedelta(days=6, hours=23))
        )
        for event_id, days in ((1, 10), (2, 1)):
            session.add(
                WebhookAttempt(
                    webhook_id=hook.id,
                    event_id=event_id,
                    at=now - timedelta(days=days),
                    status=500,
                    duration_ms=1,
                    outcome="retry",
                )
            )

    assert journal.prune(7) == 1
    assert [e["id"] for e in read_feed()] == [2, 3, 4]
    db.session.rollback()
    assert list(db.session.scalars(select(WebhookAttempt.event_id))) == [2]
    # A reader whose last id was pruned reads on from the oldest event kept.
    page = api_read(world, world.root, {"after": 0, "limit": 1}).json
    assert [e["id"] for e in page["values"]] == [2] and page["last"] == 2
    assert [e["id"] for e in values(world, world.root, {"after": 1})] == [2, 3, 4]
    assert journal.prune(7) == 0  # nothing older left

    assert journal.prune(1) == 2  # the whole transaction of ids 2 and 3
    assert [e["id"] for e in read_feed()] == [4]
    world.factory.ddi("44", "5", ACME)
    assert [e["id"] for e in read_feed()] == [4, 5]  # ids are never reused


@pytest.mark.parametrize("value", ["0", "-1", "x", "1.5", "", None])
def test_the_retention_is_a_whole_number_of_days(value):
    from webapp.errors import Invalid

    with pytest.raises(Invalid) as caught:
        journal.parse_retention(value)
    assert "days" in caught.value.fields


def test_prune_goes_chunk_by_chunk(world, monkeypatch):
    monkeypatch.setattr(journal, "PRUNE_CHUNK", 2)
    for i in range(5):
        world.factory.ddi("44", str(i), ACME)
    with write_transaction() as session:
        session.execute(
            update(EventTxn).where(EventTxn.first_id <= 4).values(at=utcnow() - timedelta(days=100))
        )
    assert journal.prune(90) == 4
    assert [e["id"] for e in read_feed()] == [5]


def test_both_plans_of_a_company_read_give_the_same_events(world, monkeypatch):
    """feed._about bounds a company-filtered read by the transactions committed since
    `after` when the reader is near the newest event, and reads the companies' own events
    otherwise: two plans, the same events, for every `after` and company set."""
    write(world, world.root, "create", {"type": "ddi", "values": [ddi(str(i)) for i in range(40)]})
    for i in range(0, 40, 3):  # moves both ways, so other_company matters
        scope = {"dialcode": "44", "number": str(i)}
        values = {"virt_exten": "9", "company": GLOBEX if i % 2 else INITECH}
        write(world, world.root, "link", {"type": "ddi", "scope": scope, "values": values})
    write(world, world.root, "delete", {"type": "ddi", "scope": {"company": INITECH}})
    newest = journal.newest()
    assert newest > 50
    for companies in ({ACME}, {GLOBEX}, {INITECH, GLOBEX}, {"nobody-here"}):
        for after in range(newest + 1):
            answers = []
            for near in (-1, 10**9):  # never bounded, always bounded
                monkeypatch.setattr(feed, "NEAR", near)
                answers.append(feed.select_rows(after, 7, frozenset(companies)))
            assert answers[0] == answers[1], (companies, after)
