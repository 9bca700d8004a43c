"""/rest/call/readDDICount and /rest/call/readUserCount (docs/reports.md; who may ask:
docs/api.md#roles).

History for past months is inserted directly as HistoryInterval rows (naive UTC), so every
figure below is known exactly. REPORT_TIMEZONE is the default, UTC.
"""

from __future__ import annotations

import calendar
from datetime import UTC, date, datetime
from typing import Any

import pytest

from webapp.access import Principal
from webapp.services.billing import reports
from webapp.services.records import crud, kinds

from .factories import OPERATOR, Caller, Factory, World, add_history
from .snapshots import kept

HOME, OTHER, SECOND = "acme", "globex", "initech"
ALL = (HOME, OTHER, SECOND)
NAMES = {HOME: "Acme Telecom", OTHER: "Globex", SECOND: "Initech"}
PATHS = {"ddi": "/rest/call/readDDICount", "user": "/rest/call/readUserCount"}
FIGURES = {
    "ddi": ("billableDDIDaysPerDay", "billableDDIDaysForMonth"),
    "user": ("billableUserDaysPerDay", "billableUserDaysForMonth"),
}
KINDS = ("ddi", "user")
METHODS = ("POST", "GET")
MONTH, YEAR = 10, 2025  # a closed month of 31 days
LEAKS = ("Traceback", "sqlalchemy", "SQLAlchemy", "SELECT", "psycopg", 'File "')

# Keys of the world's history per kind. The phone user "ana" exists in two companies on purpose.
KEYS = {
    "ddi": {HOME: "44:1", OTHER: ("44:2", "44:3")},
    "user": {HOME: "ana", OTHER: ("ana", "bob")},
}
# The world's October 2025, day by day.
EXPECTED = {
    HOME: [1] * 10 + [0] * 21,  # 1 record for 10 of 31 days: 10 / 31 = 0.3226
    OTHER: [1] * 15 + [2] * 16,  # 47 / 31 = 1.5161
    SECOND: [0] * 31,  # nothing counted
}
TOTALS = {HOME: (0.3226, 10), OTHER: (1.5161, 47), SECOND: (0, 0)}


# --- helpers ---------------------------------------------------------------------------------


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute)


def month_dates(year: int, month: int, last: int | None = None) -> list[str]:
    last = last or calendar.monthrange(year, month)[1]
    return [date(year, month, d).isoformat() for d in range(1, last + 1)]


def utc_today() -> date:
    return datetime.now(UTC).date()


def call(
    factory: Factory | World,
    caller: Caller | None,
    kind: str,
    method: str,
    scope: dict[str, Any] | None = None,
):
    """Ask for a report as `caller`: POST {"type": "cdr", "scope": …} or the same as a GET query."""
    headers = caller.headers if caller else {}
    if method == "POST":
        body: dict[str, Any] = {"type": "cdr"}
        if scope is not None:
            body["scope"] = scope
        return factory.client.post(PATHS[kind], json=body, headers=headers)
    return factory.client.get(PATHS[kind], query_string=scope or {}, headers=headers)


def assert_no_leak(response) -> None:
    text = response.get_data(as_text=True)
    for word in LEAKS:
        assert word not in text, f"{word!r} leaked into the response: {text[:500]}"


def assert_error(response, status: int, code: str) -> dict[str, Any]:
    assert_no_leak(response)
    assert response.status_code == status, response.get_data(as_text=True)[:500]
    assert response.mimetype == "application/json"
    assert "Location" not in response.headers
    body = response.get_json()
    assert set(body) == {"result", "error"}, body
    assert body["result"] == "error"
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"].strip()
    return body["error"]


def values_of(response) -> dict[str, Any]:
    assert_no_leak(response)
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    body = response.get_json()
    assert set(body) == {"result", "period", "values"}, body
    assert body["result"] == "success"
    # No month here is closed: `period` names the month answered and says so.
    assert set(body["period"]) == {"year", "month", "closed"} and body["period"]["closed"] is False
    assert isinstance(body["values"], dict)
    return body["values"]


def assert_entry(
    entry: dict[str, Any], kind: str, name: str, dates: list[str], counts: list[int]
) -> None:
    """One company's entry: exactly these fields, every day in order, the two figures exact."""
    per_day_key, month_key = FIGURES[kind]
    assert set(entry) == {"name", "days", "dates", per_day_key, month_key}, entry
    assert entry["name"] == name
    assert entry["days"] == len(dates)
    assert list(entry["dates"]) == dates  # every day, in order, zeros included
    assert list(entry["dates"].values()) == counts
    assert all(type(v) is int for v in entry["dates"].values())
    total = sum(counts)
    assert entry[month_key] == total
    assert entry[per_day_key] == (round(total / len(dates), 4) if dates else 0)


def assert_world_entry(entry: dict[str, Any], kind: str, company: str) -> None:
    assert_entry(entry, kind, NAMES[company], month_dates(YEAR, MONTH), EXPECTED[company])
    per_day, for_month = TOTALS[company]
    per_day_key, month_key = FIGURES[kind]
    assert entry[per_day_key] == per_day
    assert entry[month_key] == for_month


# --- the world: three companies and a known October 2025 -------------------------------------


@pytest.fixture
@kept
def world(world: World) -> World:
    """The shared world (acme, globex, initech and an account per role) and this history."""
    rows = []
    for kind in KINDS:
        home = KEYS[kind][HOME]
        first, second = KEYS[kind][OTHER]
        rows += [
            # Outside October: before, ending exactly at its first instant, and after.
            (kind, HOME, home, at(2025, 9, 1), at(2025, 9, 20)),
            (kind, HOME, home, at(2025, 9, 30, 12), at(2025, 10, 1)),
            (kind, HOME, home, at(2025, 11, 2), at(2025, 11, 3)),
            # October 1 00:00 up to (not including) October 11 00:00: days 1 to 10.
            (kind, HOME, home, at(2025, 10, 1), at(2025, 10, 11)),
            # Spans both month ends: every day of October.
            (kind, OTHER, first, at(2025, 9, 20), at(2025, 11, 5)),
            # Still open: from noon on the 16th to the end of the month (and to date).
            (kind, OTHER, second, at(2025, 10, 16, 12), None),
        ]
    add_history(*rows)
    return world


@pytest.fixture
def root(world: World) -> Caller:
    return world.caller("root")


# --- shape and figures -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_closed_month_has_every_day_and_exact_figures(world, root, kind):
    values = values_of(
        call(world, root, kind, "POST", {"company": list(ALL), "month": MONTH, "year": YEAR})
    )
    assert list(values) == sorted(ALL)
    for company in ALL:
        assert_world_entry(values[company], kind, company)


@pytest.mark.parametrize("kind", KINDS)
def test_per_day_figure_is_rounded_to_four_places(world, root, kind):
    values = values_of(
        call(world, root, kind, "POST", {"company": [HOME], "month": MONTH, "year": YEAR})
    )
    per_day_key, month_key = FIGURES[kind]
    assert values[HOME][month_key] == 10
    assert values[HOME][per_day_key] == 0.3226  # 10 / 31 = 0.32258…


@pytest.mark.parametrize("kind", KINDS)
def test_no_scope_means_every_company(world, root, kind):
    values = values_of(call(world, root, kind, "POST", {"month": MONTH, "year": YEAR}))
    assert set(values) == set(ALL)
    for company in ALL:
        assert_world_entry(values[company], kind, company)


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_companies_are_left_out_and_empty_ones_are_zeros(world, root, kind):
    scope = {"company": [SECOND, "nope", "umbrella"], "month": MONTH, "year": YEAR}
    values = values_of(call(world, root, kind, "POST", scope))
    assert list(values) == [SECOND]
    assert_world_entry(values[SECOND], kind, SECOND)
    assert values_of(call(world, root, kind, "POST", {"company": ["nope"]})) == {}


@pytest.mark.parametrize("kind", KINDS)
def test_no_month_is_the_current_month_to_date(world, root, kind):
    before = utc_today()
    r = call(world, root, kind, "POST", {"company": [HOME, OTHER]})
    after = utc_today()
    values = values_of(r)
    today = before if values[HOME]["days"] == before.day else after
    dates = month_dates(today.year, today.month, today.day)
    assert_entry(values[HOME], kind, NAMES[HOME], dates, [0] * today.day)
    # The interval still open since October 2025 counts on every day to date.
    assert_entry(values[OTHER], kind, NAMES[OTHER], dates, [1] * today.day)
    # A body without scope, and a GET without parameters, mean the same.
    assert values_of(call(world, root, kind, "POST"))[HOME]["days"] == today.day
    assert values_of(call(world, root, kind, "GET"))[HOME]["days"] == today.day


@pytest.mark.parametrize("kind", KINDS)
def test_live_changes_count_today(world, root, kind):
    """Created, moved and deleted through the services today: counted today."""
    if kind == "ddi":
        crud.create(
            OPERATOR,
            kinds.DDI,
            {"dialcode": "33", "number": "1", "virt_exten": "1", "company": HOME},
        )
        crud.update(OPERATOR, kinds.DDI, {"company": HOME, "number": "1"}, {"company": SECOND})
        crud.delete_rows(OPERATOR, kinds.DDI, {"company": SECOND, "number": "1"})
    else:
        crud.create(
            OPERATOR, kinds.PHONE_USER, {"username": "zed", "virt_exten": "1", "company": HOME}
        )
        crud.delete_rows(OPERATOR, kinds.PHONE_USER, {"company": HOME, "username": "zed"})
    before = utc_today()
    values = values_of(call(world, root, kind, "POST", {"company": [HOME, SECOND]}))
    today = before if values[HOME]["days"] == before.day else utc_today()
    assert values[HOME]["dates"][today.isoformat()] == 1
    assert values[SECOND]["dates"][today.isoformat()] == (1 if kind == "ddi" else 0)


@pytest.mark.parametrize("kind", KINDS)
def test_month_without_year_is_its_most_recent_past_occurrence(world, root, kind):
    today = utc_today()
    # This month: this year, to date.
    values = values_of(call(world, root, kind, "POST", {"company": [HOME], "month": today.month}))
    assert next(iter(values[HOME]["dates"])) == date(today.year, today.month, 1).isoformat()
    # Next month has not come yet this year: last year's, whole.
    month = today.month % 12 + 1
    year = today.year if month <= today.month else today.year - 1
    values = values_of(call(world, root, kind, "POST", {"company": [HOME], "month": month}))
    assert list(values[HOME]["dates"]) == month_dates(year, month)
    assert values[HOME]["days"] == calendar.monthrange(year, month)[1]


@pytest.mark.parametrize(
    ("today", "month", "first", "days"),
    [
        (date(2026, 11, 15), 12, "2025-12-01", 31),
        (date(2026, 11, 15), 11, "2026-11-01", 15),
        (date(2026, 11, 15), 10, "2026-10-01", 31),
        (date(2026, 1, 1), 1, "2026-01-01", 1),
        (date(2026, 1, 1), 2, "2025-02-01", 28),
        (date(2026, 12, 31), 12, "2026-12-01", 31),
    ],
)
def test_month_without_year_in_the_service(world, today, month, first, days):
    values = reports.report(
        Principal.cli(), "ddi", reports.parse_scope({"month": month}), today=today
    )
    assert next(iter(values[HOME]["dates"])) == first
    assert values[HOME]["days"] == days
    assert len(values[HOME]["dates"]) == days


@pytest.mark.parametrize("kind", KINDS)
def test_closed_month_is_unchanged_by_later_changes(world, root, kind):
    scope = {"company": list(ALL), "month": MONTH, "year": YEAR}
    before = values_of(call(world, root, kind, "POST", scope))
    crud.create(
        OPERATOR, kinds.DDI, {"dialcode": "33", "number": "9", "virt_exten": "1", "company": HOME}
    )
    crud.update(OPERATOR, kinds.DDI, {"company": HOME}, {"company": OTHER})
    crud.create(OPERATOR, kinds.PHONE_USER, {"username": "zed", "virt_exten": "1", "company": HOME})
    crud.delete_rows(OPERATOR, kinds.PHONE_USER, {"company": OTHER, "username": "bob"})
    assert values_of(call(world, root, kind, "POST", scope)) == before


# --- 400 -------------------------------------------------------------------------------------


def _future_months() -> list[dict[str, int]]:
    today = utc_today()
    nxt = (today.year, today.month + 1) if today.month < 12 else (today.year + 1, 1)
    return [
        {"month": nxt[1], "year": nxt[0]},
        {"month": 1, "year": today.year + 1},
        {"month": today.month, "year": today.year + 5},
    ]


BAD_SCOPES = [
    {"year": 2025},
    {"month": 0},
    {"month": 13},
    {"month": -1},
    {"month": "3"},
    {"month": True},
    {"month": None, "year": 2025},
    {"month": [3]},
    {"month": 3, "year": "2025"},
    {"company": HOME},
    {"company": {"id": HOME}},
    {"company": ["Acme"]},
    {"company": ["acme corp"]},
    {"company": [HOME, 1]},
    {"company": [None]},
    {"company": [""]},
    {"company": ["x" * 65]},
    {"day": 1},
    {"company": [HOME], "kind": "ddi"},
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("scope", BAD_SCOPES, ids=repr)
def test_bad_scope_is_400(world, root, kind, scope):
    assert_error(call(world, root, kind, "POST", scope), 400, "bad_request")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("index", range(3))
def test_future_month_is_400(world, root, kind, index):
    scope = _future_months()[index]
    assert_error(call(world, root, kind, "POST", scope), 400, "bad_request")
    query = {"month": str(scope["month"]), "year": str(scope["year"])}
    assert_error(call(world, root, kind, "GET", query), 400, "bad_request")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "body",
    [
        {"type": "ddi", "scope": {}},
        {"type": "user", "scope": {}},
        {"type": "CDR", "scope": {}},
        {"scope": {}},
        {"type": "cdr", "scope": "all"},
        {"type": "cdr", "scope": [HOME]},
        {"type": "cdr", "scope": {}, "values": {}},
        {"type": "cdr", "company": [HOME]},
    ],
    ids=repr,
)
def test_bad_body_is_400(world, root, kind, body):
    r = world.client.post(PATHS[kind], json=body, headers=root.headers)
    assert_error(r, 400, "bad_request")


# --- the GET form ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_get_gives_the_same_answer_as_post(world, root, kind):
    scope = {"company": [HOME, OTHER], "month": MONTH, "year": YEAR}
    posted = values_of(call(world, root, kind, "POST", scope))
    url = f"{PATHS[kind]}?company={HOME}&company={OTHER}&month={MONTH}&year={YEAR}"
    got = values_of(world.client.get(url, headers=root.headers))
    assert got == posted
    assert list(got) == [HOME, OTHER]
    assert_world_entry(got[OTHER], kind, OTHER)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "query",
    [
        "foo=1",
        "month=10&year=2025&type=cdr",
        "month=abc",
        "month=10&month=10",
        "month=10&year=2025&year=2025",
        "month=0",
        "month=13",
        "month=-1",
        "month=",
        "year=2025",
        "month=10&year=abc",
        "company=Acme",
        "company=acme%20corp",
    ],
)
def test_bad_query_is_400(world, root, kind, query):
    r = world.client.get(f"{PATHS[kind]}?{query}", headers=root.headers)
    assert_error(r, 400, "bad_request")


@pytest.mark.parametrize("kind", KINDS)
def test_get_without_credentials_is_401(world, kind):
    assert_error(world.client.get(f"{PATHS[kind]}?month=10&year=2025"), 401, "unauthorized")
    bad = {"Authorization": "Bearer tad_not-a-real-token"}
    assert_error(world.client.get(PATHS[kind], headers=bad), 401, "unauthorized")


# --- who may see what ------------------------------------------------------------------------

# fmt: off
# One line per role: who calls (a role of factories.ROLES; None: no credentials; a Caller: that
# bearer token), the status, and the companies it sees (None: every company).
INVALID = Caller("nobody", "tad_invalid-token-0000")
ROLES: dict[str, tuple[str | Caller | None, int, tuple[str, ...] | None]] = {
    "system_admin":        ("root",            200, None),
    "billing_summary":     ("summary",         200, None),
    "reporting_acme":      ("reporter",        200, (HOME,)),
    "reporting_two":       ("reporter2",       200, (HOME, SECOND)),
    "admin_and_reporting": ("cadmin_reporter", 200, (HOME,)),
    "company_admin":       ("cadmin",          403, ()),
    "company_admin_all":   ("cadmin_all",      403, ()),
    "no_grant":            ("nobody",          403, ()),
    "no_token":            (None,              401, ()),
    "invalid_token":       (INVALID,           401, ()),
}
# fmt: on
REQUESTS = {
    "both": [HOME, OTHER],  # one of the caller's, one perhaps not
    "none": None,  # no scope.company: every company the caller may see
}


def _caller(world: World, role: str) -> Caller | None:
    who = ROLES[role][0]
    return world.caller(who) if isinstance(who, str) else who


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("role", list(ROLES))
def test_permission_matrix(world, role, kind, method):
    caller = _caller(world, role)
    _, status, visible = ROLES[role]
    for requested in REQUESTS.values():
        scope: dict[str, Any] = {"month": MONTH, "year": YEAR}
        if requested is not None:
            scope["company"] = requested
        r = call(world, caller, kind, method, scope)
        if status != 200:
            code = {401: "unauthorized", 403: "forbidden"}[status]
            assert_error(r, status, code)
            continue
        values = values_of(r)
        may_see = set(ALL) if visible is None else set(visible)
        wanted = set(ALL) if requested is None else set(requested)
        assert set(values) == may_see & wanted, (role, requested)
        for company in values:
            assert_world_entry(values[company], kind, company)


# --- docs/reports.md#a-days-value-is-the-peak: the worked examples -------------------------

DAY = (2025, 3, 12)  # a closed month of 31 days


def _key(kind: str, n: int) -> str:
    return f"44:{n}" if kind == "ddi" else f"user{n}"


def _march(kind: str, company: str) -> list[int]:
    values = reports.report(
        Principal.cli(),
        kind,
        reports.parse_scope({"company": [company], "month": 3, "year": 2025}),
        today=date(2026, 11, 22),
    )
    return list(values[company]["dates"].values())


@pytest.fixture
def companies(factory: Factory) -> Factory:
    for company in ("a", "b"):
        factory.company(company)
    return factory


@pytest.mark.parametrize("kind", KINDS)
def test_created_at_ten_deleted_at_eleven_counts_one(companies, kind):
    add_history((kind, "a", _key(kind, 1), at(*DAY, 10), at(*DAY, 11)))
    root = companies.account("root", system_admin=True)
    values = values_of(
        call(companies, root, kind, "POST", {"company": ["a"], "month": 3, "year": 2025})
    )
    expected = [0] * 31
    expected[11] = 1
    assert_entry(values["a"], kind, "A", month_dates(2025, 3), expected)


@pytest.mark.parametrize("kind", KINDS)
def test_moved_at_noon_counts_one_for_each_company_that_day(companies, kind):
    key = _key(kind, 1)
    add_history(
        (kind, "a", key, at(2025, 3, 1), at(*DAY, 12)),
        (kind, "b", key, at(*DAY, 12), None),
    )
    root = companies.account("root", system_admin=True)
    values = values_of(
        call(companies, root, kind, "GET", {"company": ["a", "b"], "month": 3, "year": 2025})
    )
    assert_entry(values["a"], kind, "A", month_dates(2025, 3), [1] * 12 + [0] * 19)
    assert_entry(values["b"], kind, "B", month_dates(2025, 3), [0] * 11 + [1] * 20)


@pytest.mark.parametrize("kind", KINDS)
def test_back_to_back_intervals_of_one_record_count_one(companies, kind):
    key = _key(kind, 1)
    add_history(
        (kind, "a", key, at(*DAY, 8), at(*DAY, 12)),
        (kind, "a", key, at(*DAY, 12), at(*DAY, 18)),
    )
    root = companies.account("root", system_admin=True)
    values = values_of(
        call(companies, root, kind, "POST", {"company": ["a"], "month": 3, "year": 2025})
    )
    assert values["a"]["dates"]["2025-03-12"] == 1
    assert sum(values["a"]["dates"].values()) == 1
    assert values["a"][FIGURES[kind][1]] == 1


@pytest.mark.parametrize("kind", KINDS)
def test_peak_is_simultaneous_not_a_count_of_records(companies, kind):
    """Two records one after the other count 1; two at the same moment count 2."""
    add_history(
        # Sequential on the 12th: the second starts the instant the first ends.
        (kind, "a", _key(kind, 1), at(*DAY, 8), at(*DAY, 12)),
        (kind, "a", _key(kind, 2), at(*DAY, 12), at(*DAY, 13)),
        # Overlapping on the 13th for one minute.
        (kind, "a", _key(kind, 3), at(2025, 3, 13, 8), at(2025, 3, 13, 9, 1)),
        (kind, "a", _key(kind, 4), at(2025, 3, 13, 9), at(2025, 3, 13, 10)),
        # Ends at midnight: the 15th, not the 16th.
        (kind, "a", _key(kind, 5), at(2025, 3, 15, 23), at(2025, 3, 16)),
    )
    expected = [0] * 31
    expected[11], expected[12], expected[14] = 1, 2, 1
    assert _march(kind, "a") == expected
