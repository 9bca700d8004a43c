"""Month close over the API: closeMonth, reopenMonth, readAdjustments, and `period` in every
report answer (docs/month-close.md). Who may do what, every refusal changing nothing, and the
closed figures holding whatever the history says later.

History is inserted directly as intervals (naive UTC) into October 2025, a month of 31 days
that has ended; REPORT_TIMEZONE is UTC unless a test changes it.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest
from sqlalchemy import delete, func, select, text

from webapp.access import Principal
from webapp.database import write_transaction
from webapp.errors import Invalid
from webapp.extensions import db
from webapp.models import AuditEntry, ClosedFigures, MonthClose, RollupState
from webapp.services.billing import month_close, reports

from .factories import ACME, GLOBEX, INITECH, add_history

MONTH, YEAR = 10, 2025
SCOPE = {"month": MONTH, "year": YEAR}
PATHS = {"ddi": "/rest/call/readDDICount", "user": "/rest/call/readUserCount"}


def post(world, caller, path: str, body: dict[str, Any]):
    headers = world.caller(caller).headers if caller else {}
    return world.client.post(f"/rest/call/{path}", json=body, headers=headers)


def body(scope=None) -> dict[str, Any]:
    return {"type": "cdr", "scope": SCOPE if scope is None else scope}


def close(world, caller="root", scope=None):
    return post(world, caller, "closeMonth", body(scope))


def reopen(world, caller="root", scope=None, reason: Any = "a late CDR batch"):
    body: dict[str, Any] = {"type": "cdr", "scope": SCOPE if scope is None else scope}
    if reason is not None:
        body["reason"] = reason
    return post(world, caller, "reopenMonth", body)


def adjustments(world, caller="root", scope=None):
    return post(world, caller, "readAdjustments", body(scope))


def report(world, kind="ddi", caller="root", scope=None):
    response = post(world, caller, PATHS[kind].rsplit("/", 1)[1], body(scope))
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def state() -> dict[str, int]:
    db.session.rollback()
    return {
        "closes": db.session.scalar(select(func.count()).select_from(MonthClose)),
        "reopened": db.session.scalar(
            select(func.count()).select_from(MonthClose).where(MonthClose.reopened_at.is_not(None))
        ),
        "figures": db.session.scalar(select(func.count()).select_from(ClosedFigures)),
        "audit": db.session.scalar(select(func.count()).select_from(AuditEntry)),
    }


@pytest.fixture
def history(world):
    """Acme: one DDI on the 1st to the 10th; Globex: one DDI all month and one more from the
    16th; one phone user in Acme all month."""
    add_history(
        ("ddi", ACME, "44:1", datetime(2025, 10, 1), datetime(2025, 10, 11)),
        ("ddi", GLOBEX, "44:2", datetime(2025, 9, 20), None),
        ("ddi", GLOBEX, "44:3", datetime(2025, 10, 16), None),
        ("user", ACME, "ana", datetime(2025, 9, 1), None),
    )
    return world


def test_close_answers_the_period_and_reports_carry_it(history):
    assert report(history)["period"] == {"year": YEAR, "month": MONTH, "closed": False}
    response = close(history)
    assert response.status_code == 200, response.get_json()
    answer = response.get_json()
    assert answer["result"] == "success"
    period = answer["period"]
    assert period["closed"] is True and period["version"] == 1 and period["closed_by"] == "root"
    assert (period["year"], period["month"]) == (YEAR, MONTH)
    closed_at = datetime.strptime(period["closed_at"], "%Y-%m-%dT%H:%M:%SZ")
    assert abs((datetime.now(UTC).replace(tzinfo=None) - closed_at).total_seconds()) < 60
    for kind in ("ddi", "user"):
        assert report(history, kind)["period"] == period
    # GET reports carry it too; the current month is open.
    got = history.client.get(
        "/rest/call/readDDICount", query_string=SCOPE, headers=history.root.headers
    ).get_json()
    assert got["period"] == period
    now = datetime.now(UTC)
    assert report(history, scope={})["period"] == {
        "year": now.year,
        "month": now.month,
        "closed": False,
    }


def test_a_closed_month_keeps_its_figures_and_adjustments_show_the_backfill(history):
    before = {kind: report(history, kind)["values"] for kind in ("ddi", "user")}
    assert close(history).status_code == 200
    nothing = adjustments(history).get_json()
    assert nothing["values"] == {} and nothing["period"]["closed"] is True
    # A backfill: a DDI of Initech on the 3rd to the 5th, one more of Acme on the 10th.
    add_history(
        ("ddi", INITECH, "44:9", datetime(2025, 10, 3), datetime(2025, 10, 6)),
        ("ddi", ACME, "44:8", datetime(2025, 10, 10, 12), datetime(2025, 10, 10, 13)),
    )
    for kind in ("ddi", "user"):
        assert report(history, kind)["values"] == before[kind], "closed figures never change"
    got = adjustments(history).get_json()
    assert got["values"] == {
        ACME: {
            "ddi": {
                "dates": {"2025-10-10": {"closed": 1, "now": 2}},
                "billableDDIDaysForMonth": {"closed": 10, "now": 11},
            }
        },
        INITECH: {
            "ddi": {
                "dates": {
                    d: {"closed": 0, "now": 1} for d in ("2025-10-03", "2025-10-04", "2025-10-05")
                },
                "billableDDIDaysForMonth": {"closed": 0, "now": 3},
            }
        },
    }
    # Reopen: the report computes from the history again; the next close is version 2.
    response = reopen(history)
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["period"] == {"year": YEAR, "month": MONTH, "closed": False}
    assert report(history)["values"][INITECH]["billableDDIDaysForMonth"] == 3
    again = close(history).get_json()["period"]
    assert again["version"] == 2
    assert adjustments(history).get_json()["values"] == {}
    assert report(history)["values"][INITECH]["billableDDIDaysForMonth"] == 3


def test_adjustments_are_restricted_to_the_readers_companies(history):
    close(history)
    add_history(
        ("ddi", INITECH, "44:9", datetime(2025, 10, 3), datetime(2025, 10, 6)),
        ("user", ACME, "bob", datetime(2025, 10, 2), datetime(2025, 10, 3)),
    )
    everything = adjustments(history).get_json()["values"]
    assert set(everything) == {ACME, INITECH}
    assert set(everything[ACME]) == {"user"}
    assert everything[ACME]["user"]["billableUserDaysForMonth"] == {"closed": 31, "now": 32}
    assert adjustments(history, "reporter").get_json()["values"] == {ACME: everything[ACME]}
    assert adjustments(history, "summary").get_json()["values"] == everything
    chosen = {**SCOPE, "company": [INITECH, "nosuch"]}
    assert adjustments(history, scope=chosen).get_json()["values"] == {INITECH: everything[INITECH]}
    assert adjustments(history, "reporter", scope=chosen).get_json()["values"] == {}


@pytest.mark.parametrize("caller", ["root", "summary"])
def test_who_may_close(history, caller):
    response = close(history, caller)
    assert response.status_code == 200
    assert response.get_json()["period"]["closed_by"] == caller


@pytest.mark.parametrize("caller", ["reporter", "cadmin", "nobody"])
def test_who_may_not_close(history, caller):
    before = state()
    response = close(history, caller)
    assert response.status_code == 403
    assert response.get_json()["error"]["code"] == "forbidden"
    assert state() == before


@pytest.mark.parametrize("caller", ["summary", "reporter", "cadmin", "nobody"])
def test_only_a_system_admin_may_reopen(history, caller):
    close(history)
    before = state()
    assert reopen(history, caller).status_code == 403
    assert state() == before


def test_adjustments_need_report_permission(history):
    close(history)
    assert adjustments(history, "cadmin").status_code == 403
    assert adjustments(history, "nobody").status_code == 403
    assert adjustments(history, None).status_code == 401
    assert close(history, None).status_code == 401
    assert reopen(history, None).status_code == 401


def test_the_current_and_a_future_month_cannot_be_closed(history):
    now = datetime.now(UTC)
    before = state()
    for scope in ({"month": now.month, "year": now.year}, {"month": now.month}):
        response = close(history, scope=scope)
        assert response.status_code == 400
        assert response.get_json()["error"]["fields"] == {"month": "not ended"}
    future = close(history, scope={"month": 1, "year": now.year + 1})
    assert future.status_code == 400
    assert state() == before


@pytest.mark.parametrize(
    "body, field",
    [
        ({"type": "cdr"}, "month"),
        ({"type": "cdr", "scope": {"year": 2025}}, "month"),
        ({"type": "cdr", "scope": {"month": 13, "year": 2025}}, "month"),
        ({"type": "cdr", "scope": {"month": "10", "year": 2025}}, "month"),
        ({"type": "cdr", "scope": {"month": 10, "year": 1969}}, "year"),
        ({"type": "cdr", "scope": {**SCOPE, "company": ["acme"]}}, "company"),
        ({"type": "cdr", "scope": [10]}, "scope"),
        ({"type": "ddi", "scope": SCOPE}, "type"),
        ({"scope": SCOPE}, "type"),
        ({"type": "cdr", "scope": SCOPE, "reason": "x"}, "reason"),
    ],
)
def test_bad_close_requests_are_400_and_change_nothing(history, body, field):
    before = state()
    response = post(history, "root", "closeMonth", body)
    assert response.status_code == 400, response.get_json()
    error = response.get_json()["error"]
    assert error["code"] == "bad_request" and field in error["fields"]
    assert state() == before


def test_closing_a_closed_month_and_reopening_an_open_one_are_409(history):
    assert reopen(history).status_code == 409
    assert adjustments(history).status_code == 409
    close(history)
    before = state()
    response = close(history)
    assert response.status_code == 409
    assert response.get_json()["error"]["code"] == "conflict"
    assert "already closed" in response.get_json()["error"]["message"]
    assert state() == before
    reopen(history)
    assert reopen(history).status_code == 409
    assert adjustments(history).status_code == 409


@pytest.mark.parametrize(
    "reason, why",
    [
        (None, "required"),
        ("", "required"),
        ("   ", "required"),
        (" \ufeff\n", "required"),  # white space only (the BOM is white space to ECMA too)
        ("a\u0000b", "must not contain control characters"),  # PostgreSQL cannot store a NUL
        ("a\u0007", "must not contain control characters"),
        ("a\u0088", "must not contain control characters"),  # C1 too
        (7, "must be a string"),
        ("x" * 501, "must be at most 500 characters"),
    ],
)
def test_a_reopen_needs_a_reason_of_1_to_500_characters(history, reason, why):
    close(history)
    before = state()
    response = reopen(history, reason=reason)
    assert response.status_code == 400
    assert response.get_json()["error"]["fields"] == {"reason": why}
    assert state() == before
    assert reopen(history, reason="x" * 500).status_code == 200


def test_every_close_and_reopen_is_audited(history):
    close(history)
    reopen(history, reason="CDRs of the 3rd arrived late")
    close(history, "summary")
    db.session.rollback()
    entries = db.session.execute(
        select(AuditEntry.actor, AuditEntry.action, AuditEntry.target, AuditEntry.detail)
        .where(AuditEntry.action.like("month.%"))
        .order_by(AuditEntry.id)
    ).all()
    assert [tuple(e) for e in entries] == [
        ("root", "month.close", "month 2025-10", "version 1, figures in UTC"),
        ("root", "month.reopen", "month 2025-10", "version 1: CDRs of the 3rd arrived late"),
        ("summary", "month.close", "month 2025-10", "version 2, figures in UTC"),
    ]


def test_a_company_absent_at_the_close_answers_zeros(history):
    close(history)
    history.factory.company("latecomer", "Late Comer")
    add_history(("ddi", "latecomer", "44:7", datetime(2025, 10, 5), datetime(2025, 10, 7)))
    entry = report(history)["values"]["latecomer"]
    assert set(entry["dates"].values()) == {0} and entry["billableDDIDaysForMonth"] == 0
    assert adjustments(history).get_json()["values"]["latecomer"]["ddi"][
        "billableDDIDaysForMonth"
    ] == {"closed": 0, "now": 2}


def test_a_time_zone_change_leaves_the_closed_figures_and_shows_as_adjustments(history, app):
    # An interval 23:00-24:00 UTC on the 20th: in Europe/Berlin that is the 21st.
    add_history(("ddi", INITECH, "44:5", datetime(2025, 10, 20, 23), datetime(2025, 10, 21)))
    close(history)
    closed = report(history)["values"]
    assert closed[INITECH]["dates"]["2025-10-20"] == 1
    app.config["REPORT_TIMEZONE"] = "Europe/Berlin"
    assert report(history)["values"] == closed
    got = adjustments(history).get_json()["values"]
    assert got[INITECH]["ddi"]["dates"] == {
        "2025-10-20": {"closed": 1, "now": 0},
        "2025-10-21": {"closed": 0, "now": 1},
    }
    assert got[INITECH]["ddi"]["billableDDIDaysForMonth"] == {"closed": 1, "now": 1}
    # Reopened and closed again in the new zone: the figures are the new zone's.
    reopen(history)
    assert close(history).status_code == 200
    assert report(history)["values"][INITECH]["dates"]["2025-10-21"] == 1
    assert adjustments(history).get_json()["values"] == {}


def test_without_the_rollup_every_company_is_recomputed(history):
    """A close made while the rollup is not built stores no marks: its adjustments compare
    every company's figures (the same answer, by the slower way)."""
    with write_transaction() as session:
        session.execute(delete(RollupState))
    assert close(history).status_code == 200
    db.session.rollback()
    assert db.session.scalar(select(MonthClose.with_marks)) is False
    add_history(("ddi", INITECH, "44:9", datetime(2025, 10, 3), datetime(2025, 10, 6)))  # rebuilds
    got = adjustments(history).get_json()["values"]
    assert got == {
        INITECH: {
            "ddi": {
                "dates": {
                    d: {"closed": 0, "now": 1} for d in ("2025-10-03", "2025-10-04", "2025-10-05")
                },
                "billableDDIDaysForMonth": {"closed": 0, "now": 3},
            }
        }
    }


def test_a_close_writes_iso_days_whatever_the_servers_date_style(history):
    """The stored marks and the database's own (rollups.month_marks) write a day as ISO text
    under any DateStyle: PostgreSQL's cast of a date to text would follow it ("01/10/2025")."""
    from sqlalchemy import event

    from webapp.access import Principal
    from webapp.services.billing import periods, rollups

    if db.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's DateStyle")

    def dmy(dbapi_connection, _record, _proxy):
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SET DateStyle = 'SQL, DMY'")
        dbapi_connection.commit()  # a session setting, kept; no transaction left open

    db.session.remove()
    db.engine.dispose()  # every connection from here on is checked out with the style
    event.listen(db.engine, "checkout", dmy)
    try:
        month_close.close_month(Principal.cli(), month_close.MonthRequest(MONTH, YEAR))
        stored = dict(
            db.session.execute(
                select(ClosedFigures.company, ClosedFigures.marks).where(
                    ClosedFigures.kind == "ddi"
                )
            ).all()
        )
        period = periods.resolve(MONTH, YEAR, periods.zone("UTC"), date.today())
        now = rollups.month_marks(db.session, "ddi", period)
    finally:
        event.remove(db.engine, "checkout", dmy)
        db.session.remove()
        db.engine.dispose()  # no connection keeps the style for later tests
    assert stored[ACME].startswith("0|2025-10-01:1:1"), stored
    assert stored.keys() == now.keys()
    assert all(rollups.same_marks(stored[c], now[c]) for c in now)


def test_marks_compare_as_sets_of_rows_with_the_carried_level():
    from webapp.services.billing.rollups import same_marks

    a = "2|2025-10-03:5:4,2025-10-07:4:4"
    assert same_marks(a, a)
    assert same_marks(a, "2|2025-10-07:4:4,2025-10-03:5:4")  # another order, the same rows
    assert not same_marks(a, "1|2025-10-03:5:4,2025-10-07:4:4")  # another carried level
    assert not same_marks(a, "2|2025-10-03:5:4")
    assert not same_marks(a, "2|2025-10-03:5:4,2025-10-07:4:5")
    assert not same_marks(a, None) and not same_marks(None, a) and same_marks(None, None)
    assert not same_marks("0|", "0|2025-10-01:0:0")


def test_a_reason_keeps_its_line_breaks(history):
    close(history)
    assert reopen(history, reason="Late CDRs:\n\tacme, globex").status_code == 200
    db.session.rollback()
    assert db.session.scalar(select(MonthClose.reopen_reason)) == "Late CDRs:\n\tacme, globex"


def test_a_closed_month_seen_as_current_again_computes_from_the_history(history, app):
    """Closed early on the 1st of November (UTC); REPORT_TIMEZONE then moved west, where it is
    still October: October is the current month to date again there (here its 30th), and
    that partial period answers from the history, not from the stored whole-month figures."""
    month_close.close_month(
        Principal.cli(), month_close.MonthRequest(MONTH, YEAR), today=date(2025, 11, 1)
    )
    app.config["REPORT_TIMEZONE"] = "America/New_York"
    scope = reports.parse_scope({"month": MONTH, "year": YEAR})
    answer = reports.answer(Principal.cli(), "ddi", scope, today=date(2025, 10, 30))
    assert answer["period"] == {"year": YEAR, "month": MONTH, "closed": False}
    assert len(answer["values"][ACME]["dates"]) == 30


def test_a_close_waiting_too_long_for_an_import_answers_409(history, app, monkeypatch):
    """PostgreSQL: a close waits for a running history import (its lock) at most
    LOCK_WAIT_SECONDS, then answers 409 and changes nothing."""
    if db.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL only: SQLite writers take turns at the write lock")
    monkeypatch.setattr(month_close, "LOCK_WAIT_SECONDS", 1)
    before = state()
    with db.engine.connect() as importer:
        importer.execute(text("LOCK TABLE history_intervals IN SHARE ROW EXCLUSIVE MODE"))
        response = close(history)
        importer.rollback()
    assert response.status_code == 409, response.get_json()
    assert "Try again" in response.get_json()["error"]["message"]
    assert state() == before
    assert close(history).status_code == 200


def test_the_openapi_reason_pattern_says_what_the_service_checks():
    import re as regex

    pattern = regex.compile(month_close.REASON_PATTERN)
    for reason in ("late CDRs", "line one\nline two\t", "  x  ", "ünïcödé ✓"):
        assert pattern.match(reason) and month_close.parse_reason(reason) == reason
    for reason in ("", "   ", "\n\t", "a\u0000b", "a\u0088", "\u0007"):
        assert not pattern.match(reason)
        with pytest.raises(Invalid):
            month_close.parse_reason(reason)
