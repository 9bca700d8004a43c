"""The audit log's pages (services/history/audit_query.py) against a simple independent computation.

Random logs (entries on few instants, so ties on `at` are common; moves with `other_company`;
entries about no company) are read through audit.search by principals of every scope, with
every filter, both ways of splitting a Company-Admin's scope into branches, and small pages;
walking the Older links from the newest page and the Newer links from the oldest must give
exactly the entries a plain filter and sort in Python gives, and the count must be that number
(stopped at the cap). The action filter is one more of them (its own branch when it is the only
filter of a System-Admin's view; held by each branch of a company, the reader's or the company
filter's, with the actor filter; a condition otherwise), and every action is walked for each
reader, alone and with an actor or a company.
"""

from __future__ import annotations

import random
import re
from datetime import datetime, timedelta

import pytest
from sqlalchemy import delete

from webapp.access import Principal
from webapp.database import write_transaction
from webapp.models import AuditEntry
from webapp.services.history import audit, audit_query

COMPANIES = ["acme", "globex", "initech", "umbrella"]
ACTORS = ["ana", "bob"]
ACTIONS = ["ddi.create", "ddi.delete", "account.grants"]
TARGETS = ["ddi 44:1", "ddi 44:2", "user acme/ana", "account bob"]
START = datetime(2025, 3, 1)


def random_log(rng: random.Random, size: int) -> list[dict]:
    entries = []
    for _ in range(size):
        company = rng.choice([*COMPANIES, None])
        moved = company is not None and rng.random() < 0.3
        entries.append(
            {
                "at": START + timedelta(hours=rng.randrange(12)),
                "actor": rng.choice(ACTORS),
                "via": "api",
                "action": rng.choice(ACTIONS),
                "target": rng.choice(TARGETS),
                "company": company,
                "other_company": rng.choice([c for c in COMPANIES if c != company])
                if moved
                else None,
                "before": None,
                "after": None,
                "detail": None,
            }
        )
    return entries


def expected(entries, scope, actor, target, company, action=None) -> list[int]:
    """Ids of the view, newest first: the plain reading of the filters."""

    def about(e, companies) -> bool:
        return e["company"] in companies or e["other_company"] in companies

    # A filter naming a company the reader may not see finds nothing (the move filed under it
    # would say where a record went): the company filter, or a phone user's target.
    named = re.match(r"\S+ ([^/\s]+)/", target or "")
    if scope is not None and (
        (company is not None and company not in scope) or (named and named[1] not in scope)
    ):
        return []
    kept = [
        e
        for e in entries
        if (scope is None or about(e, scope))
        and (actor is None or e["actor"] == actor)
        and (target is None or e["target"] == target)
        and (company is None or about(e, {company}))
        and (action is None or e["action"] == action)
    ]
    kept.sort(key=lambda e: (e["at"], e["id"]), reverse=True)
    return [e["id"] for e in kept]


def random_filters(rng: random.Random, i: int) -> dict:
    """The view's filters, at random; none for i == 0 (the scope alone decides the branches)."""
    return {
        "actor": rng.choice([None, *ACTORS]) if i else None,
        "target": rng.choice([None, None, *TARGETS]) if i else None,
        "company": rng.choice([None, None, *COMPANIES]) if i else None,
        "action": rng.choice([None, None, *ACTIONS]) if i else None,
    }


PRINCIPALS = {
    "system_admin": Principal(username="root", via="ui", system_admin=True),
    "admin_of_one": Principal(username="one", via="ui", admin_of=frozenset({"acme"})),
    "admin_of_three": Principal(
        username="three", via="ui", admin_of=frozenset({"acme", "globex", "initech"})
    ),
}


@pytest.mark.parametrize("scope_branches", [20, 1], ids=["per-company", "in-lists"])
@pytest.mark.parametrize("seed", range(4))
def test_every_page_walk_gives_the_plain_filter(app, factory, monkeypatch, seed, scope_branches):
    monkeypatch.setattr(audit_query, "SCOPE_BRANCHES", scope_branches)
    monkeypatch.setattr(audit_query, "COUNT_CAP", 25)
    rng = random.Random(seed)
    entries = random_log(rng, 90)
    with write_transaction() as session:
        session.execute(delete(AuditEntry))
        for e in entries:
            e["id"] = session.execute(
                AuditEntry.__table__.insert().values(**e)
            ).inserted_primary_key[0]
    for name, principal in PRINCIPALS.items():
        scope = principal.auditable_companies()
        views = [random_filters(rng, i) for i in range(7)] + [
            {"actor": actor, "target": None, "company": company, "action": action}
            for action in ACTIONS
            for actor, company in [(None, None), (rng.choice(ACTORS), None), (None, "acme")]
        ]
        for filters in views:
            actor, target, company, action = (
                filters["actor"],
                filters["target"],
                filters["company"],
                filters["action"],
            )
            want = expected(entries, scope, actor, target, company, action)
            per_page = rng.choice([1, 4, 7])
            label = (name, filters, per_page)
            first = audit.search(principal, **filters, per_page=per_page)
            assert (first.total, first.more) == (min(len(want), 25), len(want) > 25), label
            # Older from the newest page.
            seen, found = [], first
            while True:
                seen += [r.id for r in found.rows]
                if not found.has_older:
                    break
                found = audit.search(
                    principal, **filters, after=found.rows[-1].id, per_page=per_page
                )
                assert found.has_newer, label
            assert seen == want, label
            # Newer from the oldest page.
            seen, found = [], audit.search(principal, **filters, oldest=True, per_page=per_page)
            while True:
                seen = [r.id for r in found.rows] + seen
                if not found.has_newer:
                    break
                found = audit.search(
                    principal, **filters, before=found.rows[0].id, per_page=per_page
                )
                assert found.has_older, label
            assert seen == want, label
            # An old page=N address: the same slice.
            number = rng.randrange(1, 4)
            found = audit.search(principal, **filters, page=number, per_page=per_page)
            skip = (number - 1) * per_page
            if skip >= len(want) > 0:  # past the end: the oldest page, the last per_page
                skip = max(0, len(want) - per_page)
            assert [r.id for r in found.rows] == want[skip : skip + per_page], label


def test_targets_name_a_record_every_way_people_write_it():
    assert "ddi 44:2071234567" in audit_query.targets("+44 (20) 7123-4567")
    assert "ddi 44:2071234567" in audit_query.targets("44:2071234567")
    assert "ddi 44:2071234567" in audit_query.targets("DDI 44:2071234567")
    assert "user acme/ana.kim" in audit_query.targets("acme/ana.kim")
    assert "account Bob" in audit_query.targets("Bob") and "account bob" in audit_query.targets(
        "Bob"
    )
    assert audit_query.targets("history legacy.csv") == ("history legacy.csv",)
    # Every split after a possible dialcode (1 to 7 digits), never an empty number.
    splits = [t for t in audit_query.targets("12345678") if ":" in t]
    assert splits == [f"ddi {'12345678'[:k]}:{'12345678'[k:]}" for k in range(1, 8)]


def test_moves_away_are_read_on_their_index_even_with_statistics(app):
    """SQLite: other_company is NULL in nearly every entry and ANALYZE counts the NULLs, so
    the planner judged its index useless and scanned the whole log for a company's moves
    (0.3 s at 3 million entries). The branch tells it the equality is rare."""
    from sqlalchemy import func, select, text

    from webapp.extensions import db

    if db.engine.dialect.name != "sqlite":
        pytest.skip("SQLite's planner and statistics")
    now = datetime(2026, 11, 1)
    # As at a provider's size: no entry of this log moved away (the statistics then say the
    # index holds every entry under one value).
    rows = [
        {
            "at": now,
            "actor": "a",
            "via": "cli",
            "action": "ddi.update",
            "target": f"ddi 1:{i}",
            "company": "acme",
            "other_company": None,
        }
        for i in range(3000)
    ]
    with write_transaction() as session:
        session.execute(AuditEntry.__table__.insert(), rows)
        session.execute(text("ANALYZE"))
    part = audit_query.branches(None, (), "globex", None)[1]
    query = select(func.count()).select_from(
        select(AuditEntry.id).where(audit_query._planned(part)).subquery()
    )
    compiled = query.compile(db.engine, compile_kwargs={"literal_binds": True})
    plan = db.session.execute(text("EXPLAIN QUERY PLAN " + str(compiled))).all()
    assert any("ix_audit_log_other_company" in str(r) for r in plan), plan
    assert db.session.execute(query).scalar() == 0


def test_the_action_filter_alone_is_one_range_of_its_index(app):
    """A System-Admin's view filtered by action alone reads the action's entries as one range
    of ix_audit_log_action (migration 0017) in (at, id) order, not the whole log by time."""
    from sqlalchemy import select, text

    from webapp.extensions import db

    # Statistics as at a provider's: many entries, few of the action asked for (without them
    # the plan depends on what earlier tests left in the statistics).
    now = datetime(2026, 11, 1)
    rows = [
        {
            "at": now + timedelta(seconds=i),
            "actor": "a",
            "via": "cli",
            "action": "month.close" if i % 1000 == 0 else "ddi.update",
            "target": f"ddi 1:{i}",
            "company": "acme",
            "other_company": None,
        }
        for i in range(5000)
    ]
    with write_transaction() as session:
        session.execute(AuditEntry.__table__.insert(), rows)
        session.execute(text("ANALYZE"))
    parts = audit_query.branches(None, (), None, None, "month.close")
    assert len(parts) == 1
    query = (
        select(AuditEntry.id)
        .where(AuditEntry.action == "month.close", parts[0])
        .order_by(AuditEntry.at.desc(), AuditEntry.id.desc())
        .limit(51)
    )
    compiled = str(query.compile(db.engine, compile_kwargs={"literal_binds": True}))
    if db.engine.dialect.name == "sqlite":
        plan = db.session.execute(text("EXPLAIN QUERY PLAN " + compiled)).all()
        assert any("ix_audit_log_action" in str(r) for r in plan), plan
        assert not any("TEMP B-TREE" in str(r) for r in plan), plan  # no sort: index order
    else:
        plan = db.session.execute(text("EXPLAIN " + compiled)).all()
        db.session.rollback()
        assert any("ix_audit_log_action" in str(r) for r in plan), plan
        assert not any("Sort" in str(r) for r in plan), plan
    # The actor's branch still comes first: an account's entries are the narrower range.
    assert str(audit_query.branches(None, (), None, "ana", "month.close")[0]) == str(
        AuditEntry.actor == "ana"
    )


def _plans_of_search(principal: Principal, **filters) -> list[tuple[str, str]]:
    """Every query audit.search runs on the log for this view, with its plan (EXPLAIN QUERY
    PLAN on SQLite, EXPLAIN on PostgreSQL) as one text."""
    from sqlalchemy import event

    from webapp.extensions import db

    run: list[tuple[str, object]] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        if "audit_log" in statement:
            run.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        audit.search(principal, **filters, per_page=50)
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    explain = "EXPLAIN QUERY PLAN " if db.engine.dialect.name == "sqlite" else "EXPLAIN "
    connection = db.session.connection()
    plans = [
        (statement, "\n".join(str(r) for r in connection.exec_driver_sql(explain + statement, p)))
        for statement, p in run
    ]
    db.session.rollback()
    return plans


# SQLite's statistics of the bench's log (3 million entries, 10,000 companies) analyzed before
# migrations 0017 and 0018 built their indexes: none for these until the next ANALYZE.
BENCH_STATISTICS = {
    "ix_audit_log_target": "3091313 3 2 1",
    "ix_audit_log_actor": "3091313 386415 1 1",
    "ix_audit_log_other_company": "3091313 3091313 2 1",
    "ix_audit_log_company": "3091313 310 2 1",
    "ix_audit_log_at": "3091313 2 1",
}


@pytest.mark.parametrize("statistics", ["analyzed", "bench"])
@pytest.mark.parametrize(
    ("filters", "index"),
    [
        ({"action": "ddi.delete"}, "ix_audit_log_company_action"),
        ({"actor": "cli"}, "ix_audit_log_company_actor"),
    ],
    ids=["action", "actor"],
)
def test_a_company_admins_filter_is_one_range_per_company_and_side(app, filters, index, statistics):
    """A Company-Admin's view filtered by action (or actor) reads each company's own entries
    of it as one range of (company, action, at, id) (or actor; migration 0018), and its moves
    away as one range of ix_audit_log_other_company, each in (at, id) order: not the action's
    range of the whole log read for the company's few moves (6 s at 3 million entries, where
    the action's index had no statistics), nor the company's range read for the action's (or
    actor's) few entries."""
    from sqlalchemy import text

    from webapp.extensions import db

    # Statistics as at a provider's: many companies and entries, few of the action and actor
    # asked for, no move away (other_company NULL everywhere).
    now = datetime(2026, 11, 1)
    rows = [
        {
            "at": now + timedelta(seconds=i),
            "actor": "cli" if i % 1000 == 0 else f"api-{i % 7}",
            "via": "api",
            "action": "ddi.delete" if i % 500 == 0 else ("ddi.create", "user.create")[i % 2],
            "target": f"ddi 1:{i}",
            "company": f"c{i % 50:05}",
            "other_company": None,
        }
        for i in range(6000)
    ]
    with write_transaction() as session:
        session.execute(AuditEntry.__table__.insert(), rows)
        session.execute(text("ANALYZE"))
        if statistics != "analyzed":
            if db.engine.dialect.name != "sqlite":
                pytest.skip("SQLite's statistics are per index")
            session.execute(text("DELETE FROM sqlite_stat1 WHERE tbl = 'audit_log'"))
            session.execute(
                text("INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('audit_log', :i, :s)"),
                [{"i": i, "s": stat} for i, stat in BENCH_STATISTICS.items()],
            )
            session.execute(text("ANALYZE sqlite_master"))  # the planner reads them again
    reader = Principal(username="ca", via="ui", admin_of=frozenset({"c00000", "c00001"}))
    plans = _plans_of_search(reader, **filters)
    sort = "TEMP B-TREE" if db.engine.dialect.name == "sqlite" else "Sort"
    # Per company and side: a count and a page.
    assert len(plans) == 2 * 2 * 2, plans
    for statement, plan in plans:
        moved = "other_company =" in statement
        assert ("ix_audit_log_other_company" if moved else index) in plan, (statement, plan)
        assert "ix_audit_log_action" not in plan and sort not in plan, (statement, plan)
    found = audit.search(reader, **filters)
    want = [
        r["at"]
        for r in rows
        if r["company"] in reader.admin_of and all(r[k] == v for k, v in filters.items())
    ]
    assert [r.at for r in found.rows] == sorted(want, reverse=True) and found.total == len(want)
