"""The audit log as a reader gets it (docs/pages.md, "Audit"): before and after as readable
field changes, /audit.csv of the filtered view, and a DDI or phone user moved between companies
in the audit of both (audit_log.other_company, migration 0007).
"""

from __future__ import annotations

import csv
import importlib.util
import inspect
import io
import re
import threading
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import func, select, update

from webapp.access import Principal
from webapp.database import write_transaction
from webapp.errors import Forbidden, Invalid
from webapp.extensions import db
from webapp.models import AuditEntry
from webapp.services.history import actions as audit_actions
from webapp.services.history import audit, audit_export, audit_query
from webapp.services.identity import accounts
from webapp.services.records import crud, ddis, kinds
from webapp.views import audit_values
from webapp.views.audit_values import FieldChange, changes, changes_text

from .factories import OPERATOR, snapshot

CSV_HEADER = ["at", "actor", "via", "action", "target", "company", "changes", "detail"]


@pytest.fixture
def world_accounts() -> dict[str, str]:
    # cadmin: acme; cadmin2: acme and initech; globex_admin: globex only.
    return {
        "root": "root",
        "cadmin": "cadmin",
        "cadmin2": "cadmin2",
        "globex_admin": "cadmin_reporter",
        "summary": "summary",
        "nobody": "nobody",
    }


def admin_of(*companies: str) -> Principal:
    return Principal(username="reader", via="ui", admin_of=frozenset(companies))


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def company_ids(td):
    """The cell with each company shown as its identifier ('Acme Ltd (acme)' -> 'acme'), as
    the tests compare it."""
    for company in td.select(".company"):
        company.replace_with(company["data-company"])
    td.smooth()  # one text with its neighbours again: 'globex (from acme)'
    return td


def audit_rows(response) -> list[list[str]]:
    return [
        [company_ids(td).get_text(" ", strip=True) for td in tr.find_all("td")]
        for tr in soup(response).select("table.audit tbody tr")
        if not tr.select("td.empty")
    ]


def csv_rows(response) -> list[list[str]]:
    return list(csv.reader(io.StringIO(response.get_data(as_text=True))))


def add_entries(entries) -> None:
    with write_transaction() as session:
        audit.record(session, entries)


def last(action: str) -> AuditEntry:
    db.session.rollback()
    return db.session.scalars(
        select(AuditEntry).where(AuditEntry.action == action).order_by(AuditEntry.id.desc())
    ).first()


# --- readable values -----------------------------------------------------------------------------


def test_an_update_shows_only_the_fields_that_changed():
    before = {"dialcode": "44", "number": "2071", "virt_exten": "100", "company": "acme"}
    after = {**before, "virt_exten": "101", "company": "globex"}
    assert changes(before, after) == [
        FieldChange("Extension", "100", "101"),
        FieldChange("Company", "acme", "globex"),
    ]
    assert changes_text(before, after) == "Extension: 100 → 101; Company: acme → globex"


def test_a_creation_and_a_deletion_list_every_field():
    row = {"username": "ana", "virt_exten": "200", "company": "acme"}
    assert changes_text(None, row) == "Username: ana; Extension: 200; Company: acme"
    assert changes(row, None)[0] == FieldChange("Username", "ana", None)
    assert changes(None, None) == [] and changes_text({}, {}) == ""


def test_account_values_read_as_words():
    before = {
        "system_admin": False,
        "admin_of": [],
        "billing_summary": True,
        "reporting_for": ["acme", "globex"],
        "active": True,
    }
    after = {**before, "system_admin": True, "admin_of": ["acme", "initech"], "active": False}
    assert changes_text(before, after) == (
        "System-Admin: no → yes; Company-Admin of: (none) → acme, initech; Active: yes → no"
    )
    created = changes_text(None, {"username": "eve", **before})
    assert "Billing Call-Summary: yes" in created
    # The grant's name as the grants pages and the company page write it.
    assert "Billing/Call Reporting for: acme, globex" in created
    # Nothing is shown as Python would print it.
    assert "False" not in created and "[" not in created and "None" not in created


def test_unknown_fields_and_odd_values_still_read_well():
    assert audit_values.label("max_rows") == "Max rows"
    assert audit_values.readable(None) == "(none)"
    assert audit_values.readable(7) == "7"
    assert audit_values.readable({"a": True}) == "A: yes"
    assert changes_text({"x": None}, {"x": 3}) == "X: (none) → 3"


def test_the_audit_page_shows_readable_changes(world):
    crud.create(
        OPERATOR,
        kinds.DDI,
        {"dialcode": "44", "number": "2071", "virt_exten": "100", "company": "acme"},
    )
    crud.update(
        OPERATOR,
        kinds.DDI,
        {"dialcode": "44", "number": "2071", "company": "acme"},
        {"virt_exten": "101"},
    )
    ddis.link(
        OPERATOR, {"dialcode": "44", "number": "2071"}, {"virt_exten": "7", "company": "globex"}
    )
    accounts.set_grants(
        OPERATOR,
        "nobody",
        system_admin=False,
        admin_of=["acme"],
        billing_summary=False,
        reporting_for=[],
    )
    rows = audit_rows(world.factory.browser("root").get("/audit"))
    by_action = {r[2]: r for r in rows}  # the actions by their readable names
    assert by_action["DDI changed"][5] == "Extension: 100 → changed to 101"
    link = by_action["DDI linked to an extension"]
    assert link[4] == "globex (from acme)"
    assert "Extension: 101 → changed to 7" in link[5]
    assert "Company: acme → changed to globex" in link[5]
    assert by_action["DDI created"][5].startswith("Created Dialcode: 44 Number: 2071")
    assert by_action["Account's grants changed"][5] == "Company-Admin of: (none) → changed to acme"


def test_the_audit_table_stacks_at_phone_width_and_scrolls_by_keyboard(world):
    add_entries([audit.entry(OPERATOR, "x.one", "thing", company="acme", after={"a": 1})])
    page = soup(world.factory.browser("root").get("/audit"))
    wrap = page.select_one("#audit-rows .table-wrap")
    assert wrap["tabindex"] == "0" and wrap["role"] == "region" and wrap["aria-label"]
    table = wrap.select_one("table")
    assert "stack" in table["class"]  # app.css: labelled blocks under 640 px
    headings = [th.get_text(strip=True) for th in table.select("thead th")]
    for tr in table.select("tbody tr"):
        assert [td["data-label"] for td in tr.find_all("td")] == headings


def test_hostile_values_are_escaped_in_the_changes(world):
    hostile = "<script>alert(1)</script>"
    add_entries(
        [audit.entry(OPERATOR, "x.evil", "thing", before={hostile: hostile}, after={hostile: 1})]
    )
    html = world.factory.browser("root").get("/audit").get_data(as_text=True)
    assert hostile not in html and "&lt;script&gt;" in html


# --- moves in the audit of both companies ----------------------------------------------------


def moved_world() -> None:
    """A DDI moved from globex to initech by update, one by link, a phone user moved by
    update; and an entry about acme alone."""
    for number in ("1", "2"):
        crud.create(
            OPERATOR,
            kinds.DDI,
            {"dialcode": "44", "number": number, "virt_exten": "1", "company": "globex"},
        )
    crud.create(
        OPERATOR, kinds.PHONE_USER, {"username": "ana", "virt_exten": "2", "company": "globex"}
    )
    crud.update(
        OPERATOR,
        kinds.DDI,
        {"dialcode": "44", "number": "1", "company": "globex"},
        {"company": "initech"},
    )
    ddis.link(
        OPERATOR, {"dialcode": "44", "number": "2"}, {"virt_exten": "3", "company": "initech"}
    )
    crud.update(
        OPERATOR, kinds.PHONE_USER, {"username": "ana", "company": "globex"}, {"company": "initech"}
    )
    crud.create(
        OPERATOR, kinds.DDI, {"dialcode": "44", "number": "3", "virt_exten": "1", "company": "acme"}
    )


MOVES = {"ddi.update", "ddi.link", "user.update"}
MOVE_NAMES = {audit_actions.name(m) for m in MOVES}  # as the page's Action column shows them


def test_a_move_records_the_company_it_left(world):
    moved_world()
    for action in MOVES:
        entry = last(action)
        assert (entry.company, entry.other_company) == ("initech", "globex"), action
    # A change that is not a move names no other company.
    crud.update(
        OPERATOR,
        kinds.DDI,
        {"dialcode": "44", "number": "1", "company": "initech"},
        {"virt_exten": "9"},
    )
    assert last("ddi.update").other_company is None
    assert last("ddi.create").other_company is None


def test_the_old_companys_admin_sees_the_move_and_an_unrelated_one_does_not(world):
    moved_world()

    def actions(principal, **filters) -> set[str]:
        found = audit.search(principal, **filters)
        assert found.total == len(found.rows) and not found.more
        return {r.action for r in found.rows}

    old, new, unrelated = admin_of("globex"), admin_of("initech"), admin_of("acme")
    assert actions(old) >= MOVES and actions(new) >= MOVES
    assert not MOVES & actions(unrelated)
    assert actions(unrelated) == {"ddi.create", "company.create"}
    # The company filter finds a move under either company, and only where the reader may look.
    assert actions(OPERATOR, company="globex") >= MOVES
    assert actions(OPERATOR, company="initech") >= MOVES
    assert not MOVES & actions(OPERATOR, company="acme")
    assert actions(unrelated, company="globex") == set()
    # The pages: globex's Company-Admin sees the moves away from it, but not where they went
    # (a company it may not see: access.redact).
    rows = audit_rows(world.factory.browser("globex_admin").get("/audit"))
    moves = [r for r in rows if r[2] in MOVE_NAMES]
    assert len(moves) == 3 and {r[4] for r in moves} == {"another company (from globex)"}
    assert not [r for r in rows if "initech" in " ".join(r)]
    assert not [
        r for r in audit_rows(world.factory.browser("cadmin").get("/audit")) if r[2] in MOVE_NAMES
    ]


def load_migration():
    path = Path(__file__).parent.parent / "migrations" / "versions" / "0007_audit_other_company.py"
    spec = importlib.util.spec_from_file_location("migration_0007", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_migration_backfills_older_moves(world):
    moved_world()
    with write_transaction() as session:  # as the moves were stored before migration 0007
        session.execute(update(AuditEntry).values(other_company=None))
    assert not MOVES & {r.action for r in audit.search(admin_of("globex")).rows}
    with write_transaction() as session:
        changed = load_migration().backfill(session.connection())
    assert changed == 3
    assert {r.action for r in audit.search(admin_of("globex")).rows} >= MOVES
    assert {last(a).other_company for a in MOVES} == {"globex"}
    assert last("ddi.create").other_company is None


# --- /audit.csv ------------------------------------------------------------------------------


def test_csv_holds_the_filtered_view_with_readable_columns(world):
    day = datetime(2024, 3, 1, 12)
    add_entries(
        [
            audit.entry(
                OPERATOR,
                "ddi.update",
                "ddi 44:1",
                company="acme",
                before={"virt_exten": "1", "company": "acme"},
                after={"virt_exten": "2", "company": "acme"},
                at=day,
            ),
            audit.entry(OPERATOR, "x.other", "ddi 44:12", company="globex", at=day),
            audit.entry(OPERATOR, "x.old", "ddi 44:1", company="acme", at=day - timedelta(3)),
        ]
    )
    browser = world.factory.browser("root")
    response = browser.get("/audit.csv?target=%2B44+1&date_from=2024-03-01")
    assert response.status_code == 200 and response.mimetype == "text/csv"
    assert "attachment" in response.headers["Content-Disposition"]
    assert csv_rows(response) == [
        CSV_HEADER,
        [
            "2024-03-01 12:00:00",
            "test",
            "cli",
            "ddi.update",
            "ddi 44:1",
            "acme",
            "Extension: 1 → 2",
            "",
        ],
    ]
    # The page links the download with its filters.
    page = soup(browser.get("/audit?target=%2B44+1&date_from=2024-03-01"))
    link = page.select_one("#audit-csv")["href"]
    assert link.startswith("/audit.csv?") and "target=%2B44+1" in link
    assert "date_from=2024-03-01" in link


def test_csv_follows_the_access_rules_of_the_page(world):
    moved_world()
    add_entries([audit.entry(OPERATOR, "x.none", "no company")])
    factory = world.factory

    def actions(username: str, query: str = "") -> list[str]:
        response = factory.browser(username).get("/audit.csv" + query)
        assert response.status_code == 200
        return [row[3] for row in csv_rows(response)[1:]]

    everything = actions("root")
    assert "x.none" in everything and set(everything) >= MOVES
    acme = actions("cadmin")
    assert acme and "x.none" not in acme and not MOVES & set(acme)
    assert set(actions("globex_admin")) >= MOVES
    # A company the audit picker does not offer this account is "unknown company", as on the
    # page (the company pickers' rule), not an empty download.
    assert factory.browser("cadmin").get("/audit.csv?company=globex").status_code == 400
    for username in ("summary", "nobody"):
        response = factory.browser(username).get("/audit.csv")
        assert response.status_code == 403
    assert world.client.get("/audit.csv").status_code == 302  # signed out: to /login
    response = factory.browser("root").get("/audit.csv?date_from=yesterday")
    assert response.status_code == 400 and "yyyy-mm-dd" in response.get_data(as_text=True)


def test_csv_streams_every_row_in_chunks(world, monkeypatch):
    start = datetime(2023, 1, 1)
    # Pairs of entries at the same instant: chunks must split ties on the id.
    add_entries(
        [
            audit.entry(OPERATOR, "x.n", f"item {i}", company="acme", at=start + timedelta(i // 2))
            for i in range(2345)
        ]
    )
    reads = []
    real = audit_export._chunks

    def counting(conditions, chunk):
        for rows in real(conditions, chunk):
            reads.append(len(rows))
            yield rows

    monkeypatch.setattr(audit_export, "_chunks", counting)
    entries = audit_export.export(OPERATOR, company="acme", date_to="2026-06-30", chunk=100)
    assert inspect.isgenerator(entries) and reads == []  # nothing read until consumed
    first = next(entries)
    assert first.target == "item 2344" and reads == [100]
    targets = [first.target] + [e.target for e in entries]
    expected = [f"item {i}" for i in reversed(range(2345))]
    assert targets == expected
    response = world.factory.browser("root").get("/audit.csv?company=acme&date_to=2026-06-30")
    assert response.is_streamed
    rows = csv_rows(response)
    assert [r[4] for r in rows[1:]] == expected


def test_an_export_left_early_leaves_the_session_usable(world):
    """On PostgreSQL the next chunk is read in a second thread while this one is handled
    (audit_export._chunks): an export given up after its first entry waits for that read,
    then the session and its connection work as before, and no reader thread is left."""
    add_entries(
        [audit.entry(OPERATOR, "x.n", f"item {i}", at=datetime(2023, 1, 1)) for i in range(350)]
    )
    entries = audit_export.export(OPERATOR, date_to="2023-01-01", chunk=100)
    assert next(entries).target == "item 349"
    entries.close()
    counted = select(func.count()).select_from(AuditEntry).where(AuditEntry.action == "x.n")
    assert db.session.scalar(counted) == 350
    assert not [t for t in threading.enumerate() if t.name.startswith("audit-export")]
    again = audit_export.export(OPERATOR, date_to="2023-01-01", chunk=100)
    assert len(list(again)) == 350  # and again, whole


def test_export_checks_access_and_filters_before_reading(world):
    with pytest.raises(Forbidden):
        audit_export.export(Principal(username="x", via="ui", billing_summary=True))
    with pytest.raises(Invalid):
        audit_export.export(OPERATOR, date_from="2024-13-01")
    with pytest.raises(Invalid):
        audit_export.export(OPERATOR, date_from="2024-02-02", date_to="2024-02-01")


def test_csv_cells_cannot_become_formulas(world):
    add_entries(
        [
            audit.entry(
                OPERATOR,
                "x.evil",
                "=HYPERLINK(1)",
                company="acme",
                before={"virt_exten": "1"},
                after={"virt_exten": "2"},
                detail="+cmd|' /C calc'!A0",
            ),
            audit.entry(OPERATOR, "x.evil2", "@SUM(1)", after={"-x": "1"}),
        ]
    )
    rows = {r[3]: r for r in csv_rows(world.factory.browser("root").get("/audit.csv"))[1:]}
    assert rows["x.evil"][4] == "'=HYPERLINK(1)"
    assert rows["x.evil"][7] == "'+cmd|' /C calc'!A0"
    assert rows["x.evil2"][4] == "'@SUM(1)"
    assert rows["x.evil2"][6] == "'-x: 1"


def test_reading_the_audit_changes_nothing(world):
    moved_world()
    before = snapshot()
    world.factory.browser("root").get("/audit.csv")
    world.factory.browser("root").get("/audit")
    assert snapshot() == before


# --- actions by name, the action filter, actor suggestions, the target's forms ---------------


def audit_codes_in_the_source() -> set[str]:
    """Every action code the app writes: those named where an entry is made (audit.entry,
    AuditData, the webhooks' _audit), and each record kind's create, update, delete, and the
    DDI's link (kinds.Kind.change)."""
    root = Path(__file__).parent.parent / "webapp"
    call = r"(?:audit\.entry\(|AuditData\(|_audit\(|audit_action\()"
    made = re.compile(call + r"\s*(?:\w+,\s*)?\"([a-z]+\.[a-z-]+)\"")
    # A call choosing its code on one line: audit_action(p, "webhook.pause" if … else "…", …)
    chosen = re.compile(call + r".*\" if .* else \"([a-z]+\.[a-z-]+)\"")
    found = {
        m
        for path in root.rglob("*.py")
        for pattern in (made, chosen)
        for m in pattern.findall(path.read_text())
    }
    verbs = ("create", "update", "delete")
    return found | {f"{k}.{v}" for k in kinds.KINDS for v in verbs} | {"ddi.link"}


def test_every_action_the_app_writes_has_a_readable_name():
    codes = audit_codes_in_the_source()
    assert len(codes) >= 25, codes  # the scan found the app's writers, not nothing
    assert codes <= set(audit_actions.NAMES), codes - set(audit_actions.NAMES)
    assert audit_actions.name("ddi.delete") == "DDI deleted"
    assert audit_actions.name("x.unknown") == "x.unknown"  # an unknown code as it is
    assert [audit_actions.effect(c) for c in ("user.create", "webhook.delete", "ddi.link")] == [
        "created",
        "deleted",
        None,
    ]


def test_the_action_filter_offers_readable_names_and_finds_that_action_only(world):
    crud.create(
        OPERATOR, kinds.DDI, {"dialcode": "44", "number": "5", "virt_exten": "1", "company": "acme"}
    )
    crud.create(
        OPERATOR,
        kinds.DDI,
        {"dialcode": "44", "number": "6", "virt_exten": "1", "company": "globex"},
    )
    crud.delete_rows(OPERATOR, kinds.DDI, {"dialcode": "44", "number": "5", "company": "acme"})
    crud.delete_rows(OPERATOR, kinds.DDI, {"dialcode": "44", "number": "6", "company": "globex"})
    browser = world.factory.browser("root")
    page = soup(browser.get("/audit"))
    select = page.select_one("select#action")
    assert page.select_one("label[for=action]").get_text(strip=True) == "Action"
    options = [(o["value"], o.get_text(strip=True)) for o in select.select("option")]
    assert options[0] == ("", "Any action")
    assert dict(options[1:]) == audit_actions.NAMES  # one mapping, every known action
    assert [name for _, name in options[1:]] == sorted(audit_actions.NAMES.values(), key=str.lower)

    # The service: only that action, counted as such, in every reader's scope.
    found = audit.search(OPERATOR, action="ddi.delete")
    assert [(r.action, r.target) for r in found.rows] == [
        ("ddi.delete", "ddi 44:6"),
        ("ddi.delete", "ddi 44:5"),
    ]
    assert found.total == 2
    mine = audit.search(admin_of("acme"), action="ddi.delete")
    assert [r.target for r in mine.rows] == ["ddi 44:5"]
    assert audit.search(OPERATOR, action="ddi.delete", company="globex").total == 1
    assert audit.search(OPERATOR, action="ddi.update").total == 0
    with pytest.raises(Invalid) as caught:
        audit.search(OPERATOR, action="DROP TABLE")
    assert caught.value.fields == {"action": "not an action of the log"}

    # The page: the choice stays selected, rows by readable name, the CSV keeps the codes.
    response = browser.get("/audit?action=ddi.delete")
    assert response.status_code == 200
    assert [r[2] for r in audit_rows(response)] == ["DDI deleted", "DDI deleted"]
    assert soup(response).select_one("select#action option[selected]")["value"] == "ddi.delete"
    assert "action=ddi.delete" in soup(response).select_one("#audit-csv")["href"]
    rows = csv_rows(browser.get("/audit.csv?action=ddi.delete"))[1:]
    assert [r[3] for r in rows] == ["ddi.delete", "ddi.delete"]
    # A code the mapping does not name still filters, and the choice shows it.
    add_entries([audit.entry(OPERATOR, "legacy.thing", "thing")])
    response = browser.get("/audit?action=legacy.thing")
    assert [r[2] for r in audit_rows(response)] == ["legacy.thing"]
    assert soup(response).select_one("select#action option[selected]")["value"] == "legacy.thing"
    response = browser.get("/audit?action=nonsense")
    assert response.status_code == 400
    assert soup(response).select_one("#action-error").get_text() == "not an action of the log"


def test_the_action_filter_pages_through_one_action(world):
    start = datetime(2023, 5, 1)
    add_entries(
        [
            audit.entry(
                OPERATOR,
                "ddi.delete" if i % 3 else "ddi.create",
                f"ddi 44:{i}",
                at=start + timedelta(i),
            )
            for i in range(90)
        ]
    )
    expected = [f"ddi 44:{i}" for i in reversed(range(90)) if i % 3]
    seen, after = [], None
    while True:
        page = audit.search(OPERATOR, action="ddi.delete", after=after, per_page=25)
        seen += [r.target for r in page.rows]
        assert page.total == 60
        if not page.has_older:
            break
        after = page.rows[-1].id
    assert seen == expected


def suggested(browser, typed: str = "") -> list[str]:
    response = browser.get("/accounts/suggest", query_string={"q": typed})
    assert response.status_code == 200
    return [b["data-value"] for b in soup(response).select("[role=option][data-value]")]


def test_actor_suggestions_name_only_accounts_the_reader_may_know(world):
    factory = world.factory
    # A System-Admin: every account whose username contains the text, prefix matches first.
    assert suggested(factory.browser("root")) == sorted(
        ["root", "cadmin", "cadmin2", "globex_admin", "summary", "nobody"]
    )
    assert suggested(factory.browser("root"), "ADMIN") == ["cadmin", "cadmin2", "globex_admin"]
    assert suggested(factory.browser("root"), "2") == ["cadmin2"]
    # acme's Company-Admin: itself and acme's other Company-Admin; not globex's (though it
    # reports on acme), not the System-Admin, not accounts with no company of its.
    assert suggested(factory.browser("cadmin")) == ["cadmin", "cadmin2"]
    assert suggested(factory.browser("cadmin"), "glob") == []
    assert suggested(factory.browser("cadmin"), "root") == []
    assert suggested(factory.browser("globex_admin")) == ["globex_admin"]
    assert accounts.suggest_actors(admin_of("acme", "globex"), "") == [
        "cadmin",
        "cadmin2",
        "globex_admin",
    ]
    # Whoever may not read the log may not ask.
    for username in ("summary", "nobody"):
        assert factory.browser(username).get("/accounts/suggest?q=r").status_code == 403
    with pytest.raises(Forbidden):
        accounts.suggest_actors(Principal(username="x", via="ui"), "")
    # Nothing typed is a pattern: % and _ are literal.
    assert suggested(factory.browser("root"), "%") == []
    assert suggested(factory.browser("root"), "_") == ["globex_admin"]


def test_the_actor_field_is_a_picker_of_accounts_and_the_target_field_lists_its_forms(world):
    page = soup(world.factory.browser("cadmin").get("/audit"))
    actor = page.select_one("input#actor")
    assert actor["role"] == "combobox" and actor.has_attr("data-picker-input")
    assert actor["hx-get"] == "/accounts/suggest"
    assert page.select_one("#actor-suggestions")["aria-label"] == "Accounts matching the text typed"
    target = page.select_one("input#target")
    hint = page.select_one("#" + target["aria-describedby"].split()[0])
    text = hint.get_text(" ", strip=True)
    # The forms audit_query.targets reads, each with an example that finds its record.
    for example in ("+44 20 7123 4567", "44:2071234567", "acme/ana.kim", "ddi 44:2071234567"):
        assert example in text, example
    assert "ddi 44:2071234567" in audit_query.targets("+44 20 7123 4567")
    assert "user acme/ana.kim" in audit_query.targets("acme/ana.kim")
    assert {"account bob", "company acme"} <= set(audit_query.targets("bob")) | set(
        audit_query.targets("acme")
    )


def test_creations_and_deletions_read_differently_from_changes(world):
    values = {"dialcode": "44", "number": "77", "virt_exten": "1", "company": "acme"}
    crud.create(OPERATOR, kinds.DDI, values)
    crud.update(
        OPERATOR,
        kinds.DDI,
        {"dialcode": "44", "number": "77", "company": "acme"},
        {"virt_exten": "2"},
    )
    crud.delete_rows(OPERATOR, kinds.DDI, {"dialcode": "44", "number": "77", "company": "acme"})
    page = soup(world.factory.browser("root").get("/audit?target=44:77"))
    created, changed, deleted = (
        page.select_one(f"tr:has(td[data-label=Action] span:-soup-contains('{name}')) .changes")
        for name in ("DDI created", "DDI changed", "DDI deleted")
    )
    # In words first (not only by colour), then only the side that exists.
    assert "changes-created" in created["class"]
    assert created.select_one(".change-kind").get_text() == "Created"
    assert created.select(".now") and not created.select(".was")
    assert "Extension: 1" in created.get_text(" ", strip=True)
    assert "changes-deleted" in deleted["class"]
    assert deleted.select_one(".change-kind").get_text() == "Deleted"
    assert [d.get_text() for d in deleted.select("del.was")] == ["44", "77", "2", "acme"]
    assert not deleted.select(".now")
    assert not changed.select(".change-kind") and changed["class"] == ["changes"]
    assert changed.get_text(" ", strip=True) == "Extension: 1 → changed to 2"


def test_the_company_filter_is_left_out_for_an_admin_of_one_company(world):
    """It could not narrow anything; the address's `company` still works (a hidden field keeps
    it), and one the reader cannot pick brings the picker back with its message."""

    def company_inputs(response) -> list[tuple[str, str]]:
        form = soup(response).select_one("main form[role=search]")
        return [
            (i.get("type", "text"), i.get("value", "")) for i in form.select("input[name=company]")
        ]

    several = world.browser("cadmin2").get("/audit")
    assert [t for t, _ in company_inputs(several)] != ["hidden"] and company_inputs(several)
    one = world.browser("cadmin")
    assert company_inputs(one.get("/audit")) == []
    plain = audit_rows(one.get("/audit"))
    filtered = one.get("/audit?company=acme")
    assert filtered.status_code == 200
    assert company_inputs(filtered) == [("hidden", "acme")]
    assert audit_rows(filtered) == plain
    other = one.get("/audit?company=globex")
    assert other.status_code == 400
    assert [v for _, v in company_inputs(other)] == ["globex"]
