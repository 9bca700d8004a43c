"""Who may do what on /rest/ops/ (docs/api.md#roles).

The matrix: every role x every operation x record type x own/other company, asserting the exact
status and the effect: an allowed write changed exactly the rows it should (and wrote history and
audit), a refused one changed nothing at all, a read returned exactly the visible rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from .factories import snapshot
from .snapshots import kept

HOME, OTHER, SECOND = "acme", "globex", "initech"
TARGETS = {"own": HOME, "other": OTHER}

# Seed rows. The two users called "alice" share a username across companies on purpose.
SEED_DDIS = {
    HOME: [("44", "2070000001"), ("44", "2070000002")],
    OTHER: [("44", "2080000001"), ("44", "2080000002")],
    SECOND: [("44", "2090000001")],
}
SEED_USERS = {HOME: ["alice", "bob"], OTHER: ["alice", "carol"], SECOND: ["dave"]}
NEW = {
    "ddi": {"dialcode": "33", "number": "140000001", "virt_exten": "300"},
    "user": {"username": "newbie", "virt_exten": "300"},
}


# One line per role of factories.ROLES. Columns: the operations of OPS aimed at the caller's own
# company (acme), then at the other company (globex).
#   Y  200, and the change is made (a read returns the company's rows)
#   0  200 with zero rows (a read silently filtered)
#   F  403 forbidden, nothing changed
#   N  404 not_found, nothing changed
OPS = (
    ("create", "ddi"),
    ("read", "ddi"),
    ("update", "ddi"),
    ("link", "ddi"),
    ("delete", "ddi"),
    ("create", "user"),
    ("read", "user"),
    ("update", "user"),
    ("delete", "user"),
)
# fmt: off
#                         own company  other company
#                         ddi   user   ddi   user
#   role (grants)         CRULD CRUD   CRULD CRUD
MATRIX = {
    "root":     ("YYYYY YYYY", "YYYYY YYYY"),  # System-Admin
    "cadmin":   ("FYYYF YYYY", "F0FNF F0FF"),  # Company-Admin of acme
    "cadmin2":  ("FYYYF YYYY", "F0FNF F0FF"),  # Company-Admin of acme and initech
    "summary":  ("FFFFF FFFF", "FFFFF FFFF"),  # Billing Call-Summary
    "reporter": ("FFFFF FFFF", "FFFFF FFFF"),  # Billing/Call Reporting for acme
    "nobody":   ("FFFFF FFFF", "FFFFF FFFF"),  # no grant
}
# fmt: on
STATUS = {"Y": 200, "0": 200, "F": 403, "N": 404}
ERROR_CODE = {403: "forbidden", 404: "not_found"}


@dataclass(frozen=True)
class Case:
    role: str
    op: str
    kind: str
    target: str  # "own" | "other"
    status: int
    filtered: bool = False  # a 200 read that must come back empty

    def __str__(self) -> str:
        return f"{self.role}-{self.op}-{self.kind}-{self.target}-{self.status}"


def _cases() -> list[Case]:
    cases = []
    for role, (own, other) in MATRIX.items():
        for target, line in (("own", own), ("other", other)):
            codes = line.replace(" ", "")
            assert len(codes) == len(OPS), f"{role}: {line!r} needs {len(OPS)} columns"
            for (op, kind), code in zip(OPS, codes, strict=True):
                cases.append(Case(role, op, kind, target, STATUS[code], filtered=code == "0"))
    return cases


CASES = _cases()


# --- fixtures and helpers ------------------------------------------------------------------------
@pytest.fixture
def world_accounts() -> dict[str, str]:
    return {}  # each test makes only the role it asks for, with world.caller


@pytest.fixture
@kept
def world(world):
    """The shared world's three companies with DDIs and phone users; answers a function giving
    a role's Caller."""
    for company in (HOME, OTHER, SECOND):
        for i, (dialcode, number) in enumerate(SEED_DDIS[company]):
            world.factory.ddi(dialcode, number, company, virt_exten=f"10{i}")
        for i, username in enumerate(SEED_USERS[company]):
            world.factory.user(username, company, virt_exten=f"20{i}")
    return world.caller


FIELDS = {
    "ddi": ("dialcode", "number", "virt_exten", "company"),
    "user": ("company", "username", "virt_exten"),
}
TABLE = {"ddi": "ddis", "user": "users"}
ORDER = {"ddi": ("dialcode", "number"), "user": ("company", "username")}
ANSWER_FIELDS = {
    "ddi": ("dialcode", "number", "virt_exten", "company"),
    "user": ("username", "virt_exten", "company"),
}


def rows_of(snap: dict[str, Any], kind: str) -> list[dict[str, str]]:
    return [dict(zip(FIELDS[kind], r, strict=True)) for r in snap[TABLE[kind]]]


def with_rows(snap: dict[str, Any], kind: str, rows: list[dict[str, str]], **counts) -> dict:
    """`snap` with `kind`'s rows replaced and the given counters moved by the given amounts.
    Every audited change here is a change of a record, so it records one event too."""
    counts.setdefault("events", counts.get("audit", 0))
    counts.setdefault("event_ids", counts.get("audit", 0))
    out = dict(snap)
    out[TABLE[kind]] = sorted(tuple(r[f] for f in FIELDS[kind]) for r in rows)
    for name, delta in counts.items():
        out[name] = snap[name] + delta
    return out


def answer_rows(rows: list[dict[str, str]], kind: str) -> list[dict[str, str]]:
    """Rows as the API answers them: in its field order, sorted as a read sorts them."""
    ordered = sorted(rows, key=lambda r: tuple(r[f] for f in ORDER[kind]))
    return [{f: r[f] for f in ANSWER_FIELDS[kind]} for r in ordered]


def key_of(kind: str, company: str) -> dict[str, str]:
    """The first seeded record of `company`, as scope fields."""
    if kind == "ddi":
        dialcode, number = SEED_DDIS[company][0]
        return {"dialcode": dialcode, "number": number}
    return {"username": SEED_USERS[company][0]}


def body_for(op: str, kind: str, company: str) -> dict[str, Any]:
    if op == "create":
        return {"type": kind, "values": {**NEW[kind], "company": company}}
    if op == "read":
        return {"type": kind, "scope": {"company": company}}
    if op == "update":
        return {"type": kind, "scope": {"company": company}, "values": {"virt_exten": "999"}}
    if op == "link":  # the DDI of `company`, linked into the caller's own company
        return {
            "type": kind,
            "scope": key_of(kind, company),
            "values": {"virt_exten": "777", "company": HOME},
        }
    if op == "delete":
        return {"type": kind, "scope": {"company": company, **key_of(kind, company)}}
    raise AssertionError(op)


def expected_write(before: dict, op: str, kind: str, company: str) -> tuple[int, dict]:
    """(numrows, snapshot) an allowed write must produce from `before`."""
    rows = rows_of(before, kind)
    if op == "create":
        rows.append({**NEW[kind], "company": company})
        return 1, with_rows(before, kind, rows, history=1, open_history=1, audit=1)
    if op == "update":
        hit = [r for r in rows if r["company"] == company]
        for r in hit:
            r["virt_exten"] = "999"
        return len(hit), with_rows(before, kind, rows, audit=len(hit))
    key = key_of(kind, company)
    (row,) = [r for r in rows if r["company"] == company and all(r[k] == v for k, v in key.items())]
    if op == "link":
        moved = row["company"] != HOME
        row.update(virt_exten="777", company=HOME)
        return 1, with_rows(before, kind, rows, history=int(moved), audit=1)
    if op == "delete":
        rows.remove(row)
        return 1, with_rows(before, kind, rows, open_history=-1, audit=1)
    raise AssertionError(op)


def assert_error(response, status: int) -> None:
    assert response.status_code == status, response.json
    assert response.json["result"] == "error"
    assert response.json["error"]["code"] == ERROR_CODE[status]


# --- the matrix ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=str)
def test_permission_matrix(world, factory, case: Case):
    caller = world(case.role)
    company = TARGETS[case.target]
    before = snapshot()

    r = factory.api(caller, case.op, body_for(case.op, case.kind, company))

    if case.status != 200:
        assert_error(r, case.status)
        assert snapshot() == before
        return
    assert r.status_code == 200, r.json
    if case.op == "read":
        visible = (
            []
            if case.filtered
            else [row for row in rows_of(before, case.kind) if row["company"] == company]
        )
        if not case.filtered:
            assert visible, "the seed must give every company rows"
        rows = answer_rows(visible, case.kind)
        assert r.json == {
            "result": "success",
            "values": rows,
            "numrows": len(rows),
            "total": len(rows),
        }
        assert snapshot() == before
        return
    numrows, after = expected_write(before, case.op, case.kind, company)
    assert numrows > 0
    assert r.json == {"result": "success", "numrows": numrows}
    assert snapshot() == after


def test_matrix_covers_every_role_operation_type_and_target():
    seen = {(c.role, c.op, c.kind, c.target) for c in CASES}
    assert len(seen) == len(CASES) == len(MATRIX) * len(OPS) * len(TARGETS)
    assert {op for op, _ in OPS} == {"create", "read", "update", "link", "delete"}


# --- reads are filtered silently -----------------------------------------------------------------
VISIBLE = {"root": {HOME, OTHER, SECOND}, "cadmin": {HOME}, "cadmin2": {HOME, SECOND}}


@pytest.mark.parametrize("kind", ["ddi", "user"])
@pytest.mark.parametrize("role", sorted(VISIBLE))
def test_read_without_scope_returns_only_visible_rows(world, factory, role, kind):
    caller = world(role)
    visible = [r for r in rows_of(snapshot(), kind) if r["company"] in VISIBLE[role]]
    expected = answer_rows(visible, kind)

    r = factory.api(caller, "read", {"type": kind})
    assert r.status_code == 200, r.json
    assert r.json == {
        "result": "success",
        "values": expected,
        "numrows": len(expected),
        "total": len(expected),
    }

    # A page: `total` still counts only the visible rows, not the other companies'.
    r = factory.api(caller, "read", {"type": kind, "limit": 1, "offset": 1})
    assert r.status_code == 200, r.json
    assert r.json["values"] == expected[1:2]
    assert r.json["numrows"] == 1
    assert r.json["total"] == len(expected)


@pytest.mark.parametrize("role", ["cadmin", "cadmin2"])
def test_read_by_a_key_shared_with_another_company_shows_only_own_row(world, factory, role):
    caller = world(role)
    r = factory.api(caller, "read", {"type": "user", "scope": {"username": "alice"}})
    assert r.status_code == 200, r.json
    assert r.json["values"] == [{"username": "alice", "virt_exten": "200", "company": HOME}]
    assert r.json["total"] == 1

    r = factory.api(caller, "read", {"type": "ddi", "scope": {"number": "2080000001"}})
    assert r.status_code == 200, r.json
    assert r.json["values"] == [] and r.json["numrows"] == 0 and r.json["total"] == 0


def test_read_of_unknown_company_is_empty_not_an_error(world, factory):
    caller = world("cadmin")
    r = factory.api(caller, "read", {"type": "ddi", "scope": {"company": "nosuch"}})
    assert r.status_code == 200, r.json
    assert r.json == {"result": "success", "values": [], "numrows": 0, "total": 0}


# --- moving records between companies ------------------------------------------------------------
MOVES = [("update", "ddi"), ("update", "user"), ("link", "ddi")]


def move_body(op: str, kind: str, dest: str) -> dict[str, Any]:
    key = key_of(kind, HOME)
    if op == "link":
        return {"type": kind, "scope": key, "values": {"virt_exten": "555", "company": dest}}
    return {"type": kind, "scope": {"company": HOME, **key}, "values": {"company": dest}}


@pytest.mark.parametrize(("op", "kind"), MOVES)
@pytest.mark.parametrize("role", ["cadmin2", "root"])
def test_move_to_another_administered_company(world, factory, role, op, kind):
    caller = world(role)
    before = snapshot()

    r = factory.api(caller, op, move_body(op, kind, SECOND))

    assert r.status_code == 200, r.json
    assert r.json == {"result": "success", "numrows": 1}
    rows = rows_of(before, kind)
    key = key_of(kind, HOME)
    (row,) = [r for r in rows if r["company"] == HOME and all(r[k] == v for k, v in key.items())]
    row["company"] = SECOND
    if op == "link":
        row["virt_exten"] = "555"
    # The old company's interval closes and the new one's opens: one more interval, same open.
    assert snapshot() == with_rows(before, kind, rows, history=1, audit=1)
    # The new company's admin sees it there, and no longer in the old company.
    r = factory.api(caller, "read", {"type": kind, "scope": {"company": SECOND, **key}})
    assert r.json["numrows"] == 1
    r = factory.api(caller, "read", {"type": kind, "scope": {"company": HOME, **key}})
    assert r.json["numrows"] == 0


@pytest.mark.parametrize(("op", "kind"), MOVES)
@pytest.mark.parametrize("role", ["cadmin", "cadmin2"])
def test_move_to_a_company_not_administered_is_forbidden(world, factory, role, op, kind):
    caller = world(role)
    before = snapshot()

    r = factory.api(caller, op, move_body(op, kind, OTHER))

    assert_error(r, 403)
    assert snapshot() == before


# --- naming a company outside the grants ---------------------------------------------------------
VALUES_1 = {"virt_exten": "1"}
OUTSIDE = {
    "create-user-unknown": ("create", "user", None, {**NEW["user"], "company": "nosuch"}),
    "update-user-scope-unknown": ("update", "user", {"company": "nosuch"}, VALUES_1),
    "update-ddi-scope-unknown": ("update", "ddi", {"company": "nosuch"}, VALUES_1),
    "update-user-values-unknown": ("update", "user", {"company": HOME}, {"company": "nosuch"}),
    "update-ddi-one-of-other": (
        "update",
        "ddi",
        {"company": OTHER, "number": "2080000001"},
        VALUES_1,
    ),
    "delete-user-scope-unknown": ("delete", "user", {"company": "nosuch"}, None),
    "delete-user-all-of-other": ("delete", "user", {"company": OTHER}, None),
    "link-values-unknown": (
        "link",
        "ddi",
        key_of("ddi", HOME),
        {"virt_exten": "1", "company": "nosuch"},
    ),
}


@pytest.mark.parametrize("name", OUTSIDE)
def test_write_naming_a_company_outside_the_grants_is_403(world, factory, name):
    """Outside the grants is 403 whether the company exists or not (existence does not leak)."""
    op, kind, scope, values = OUTSIDE[name]
    body = {"type": kind, "scope": scope, "values": values}
    body = {k: v for k, v in body.items() if v is not None}
    caller = world("cadmin")
    before = snapshot()
    r = factory.api(caller, op, body)
    assert_error(r, 403)
    assert snapshot() == before


def test_batch_with_one_row_outside_the_grants_creates_nothing(world, factory):
    caller = world("cadmin")
    before = snapshot()
    values = [
        {"username": "ok.user", "virt_exten": "1", "company": HOME},
        {"username": "bad.user", "virt_exten": "2", "company": OTHER},
    ]
    r = factory.api(caller, "create", {"type": "user", "values": values})
    assert_error(r, 403)
    assert snapshot() == before


def test_batch_of_own_users_is_created(world, factory):
    caller = world("cadmin2")
    before = snapshot()
    values = [
        {"username": "new.one", "virt_exten": "1", "company": HOME},
        {"username": "new.two", "virt_exten": "2", "company": SECOND},
    ]
    r = factory.api(caller, "create", {"type": "user", "values": values})
    assert r.status_code == 200, r.json
    assert r.json == {"result": "success", "numrows": 2}
    rows = rows_of(before, "user") + values
    assert snapshot() == with_rows(before, "user", rows, history=2, open_history=2, audit=2)


# --- link does not leak existence ----------------------------------------------------------------
@pytest.mark.parametrize("role", ["cadmin", "cadmin2"])
def test_link_to_invisible_ddi_answers_exactly_like_a_missing_one(world, factory, role):
    caller = world(role)
    before = snapshot()
    values = {"virt_exten": "777", "company": HOME}

    invisible = factory.api(
        caller, "link", {"type": "ddi", "scope": key_of("ddi", OTHER), "values": values}
    )
    missing = factory.api(
        caller,
        "link",
        {"type": "ddi", "scope": {"dialcode": "44", "number": "2089999999"}, "values": values},
    )

    assert_error(invisible, 404)
    assert_error(missing, 404)
    assert invisible.json == missing.json
    assert snapshot() == before


@pytest.mark.parametrize("role", ["summary", "reporter", "nobody"])
def test_link_without_admin_grant_is_403_even_for_a_missing_ddi(world, factory, role):
    caller = world(role)
    before = snapshot()
    body = {
        "type": "ddi",
        "scope": {"dialcode": "44", "number": "2089999999"},
        "values": {"virt_exten": "777", "company": HOME},
    }
    assert_error(factory.api(caller, "link", body), 403)
    assert snapshot() == before
