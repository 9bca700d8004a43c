"""Bulk actions on /ddis and /users (docs/pages.md#bulk-actions): move or delete the rows
ticked, or all matching the filters, after a confirmation that states the count; all or
nothing, audited like single changes, and scoped by the account's grants."""

from __future__ import annotations

import html

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import func, select
from werkzeug.datastructures import MultiDict

from webapp.access import Principal
from webapp.errors import Conflict, Forbidden, Invalid
from webapp.extensions import db
from webapp.models import AuditEntry, Ddi, PhoneUser
from webapp.services.records import bulk, crud, kinds

from .factories import ACME, GLOBEX, INITECH, snapshot
from .invariants import assert_history_consistent
from .snapshots import kept

ROOT = Principal.cli("root-cli")
DDI_KIND = kinds.DDI


def companies_of() -> dict[str, str]:
    db.session.rollback()
    return {
        f"{d}:{n}": c
        for d, n, c in db.session.execute(select(Ddi.dialcode, Ddi.number, Ddi.company))
    }


@pytest.fixture
@kept
def world(world, factory):
    for i in range(6):
        factory.ddi("44", f"207000000{i}", ACME, f"10{i}")
    for i in range(3):
        factory.ddi("33", f"10000000{i}", GLOBEX, f"20{i}")
    factory.user("ana", ACME)
    factory.user("bob", ACME)
    factory.user("ana", GLOBEX)
    return world


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


# --- the service ----------------------------------------------------------------------------


def test_move_all_matching_the_filters(world):
    target = bulk.Target(filters={"company": ACME, "number": "2070000"})
    plan = bulk.preview(ROOT, DDI_KIND, target, "move", INITECH)
    assert plan.count == 6 and plan.by_company == [(ACME, 6)]
    assert plan.sample[0]["number"] == "2070000000"
    assert bulk.apply(ROOT, DDI_KIND, target, "move", plan.fingerprint, INITECH) == 6
    assert sum(c == INITECH for c in companies_of().values()) == 6
    assert_history_consistent()
    details = set(
        db.session.scalars(select(AuditEntry.detail).where(AuditEntry.action == "ddi.update"))
    )
    assert len(details) == 1 and next(iter(details)).startswith("bulk ")


def test_move_the_ticked_rows_and_leave_those_already_there(world):
    target = bulk.Target(keys=("44:2070000001", "33:100000000", "44:2070000002"))
    plan = bulk.preview(ROOT, DDI_KIND, target, "move", GLOBEX)
    assert plan.count == 2  # 33:100000000 is in globex already
    bulk.apply(ROOT, DDI_KIND, target, "move", plan.fingerprint, GLOBEX)
    moved = companies_of()
    assert moved["44:2070000001"] == moved["44:2070000002"] == GLOBEX
    assert moved["44:2070000000"] == ACME


def test_the_number_search_selects_too(world):
    target = bulk.Target(filters={"q": "+33"})
    plan = bulk.preview(ROOT, DDI_KIND, target, "delete")
    assert plan.count == 3
    assert bulk.apply(ROOT, DDI_KIND, target, "delete", plan.fingerprint) == 3
    assert not any(k.startswith("33:") for k in companies_of())
    assert_history_consistent()


def test_a_changed_selection_is_refused_with_the_new_count(world, factory):
    target = bulk.Target(filters={"company": ACME})
    plan = bulk.preview(ROOT, DDI_KIND, target, "delete")
    factory.ddi("44", "2070000099", ACME)
    before = snapshot()
    with pytest.raises(bulk.Changed) as changed:
        bulk.apply(ROOT, DDI_KIND, target, "delete", plan.fingerprint)
    assert changed.value.preview.count == plan.count + 1
    assert snapshot() == before


def test_a_selection_changed_to_other_records_of_the_same_count_is_refused(world, factory):
    """One record swapped for another between preview and apply: the count holds, the
    records do not, so nothing is changed."""
    target = bulk.Target(filters={"company": ACME})
    plan = bulk.preview(ROOT, DDI_KIND, target, "delete")
    factory.ddi("44", "2070000099", ACME)
    crud.delete_rows(ROOT, kinds.DDI, {"dialcode": "44", "number": "2070000000", "company": ACME})
    before = snapshot()
    with pytest.raises(bulk.Changed) as changed:
        bulk.apply(ROOT, DDI_KIND, target, "delete", plan.fingerprint)
    assert changed.value.preview.count == plan.count
    assert changed.value.preview.fingerprint != plan.fingerprint
    assert snapshot() == before


def test_a_record_edited_since_the_preview_is_refused(world):
    target = bulk.Target(filters={"company": ACME})
    plan = bulk.preview(ROOT, DDI_KIND, target, "move", GLOBEX)
    scope = {"dialcode": "44", "number": "2070000001", "company": ACME}
    crud.update(ROOT, kinds.DDI, scope, {"virt_exten": "999"})
    before = snapshot()
    with pytest.raises(bulk.Changed):
        bulk.apply(ROOT, DDI_KIND, target, "move", plan.fingerprint, GLOBEX)
    assert snapshot() == before


def test_a_company_admin_moves_only_between_its_own_companies(world):
    two = Principal(username="two", via="ui", admin_of=frozenset({ACME, GLOBEX}))
    everything = bulk.Target(filters={})
    plan = bulk.preview(two, DDI_KIND, everything, "move", GLOBEX)
    assert plan.count == 6  # acme's; globex's stay; nothing of initech's is seen
    with pytest.raises(Forbidden):
        bulk.preview(two, DDI_KIND, everything, "move", INITECH)
    with pytest.raises(Forbidden):
        bulk.preview(two, DDI_KIND, everything, "delete")
    bulk.apply(two, DDI_KIND, everything, "move", plan.fingerprint, GLOBEX)
    assert set(companies_of().values()) == {GLOBEX}


def test_ticked_rows_of_another_company_are_not_seen(world):
    one = Principal(username="one", via="ui", admin_of=frozenset({ACME, INITECH}))
    target = bulk.Target(keys=("33:100000000", "44:2070000000"))
    assert bulk.preview(one, DDI_KIND, target, "move", INITECH).count == 1


def test_moving_phone_users_onto_a_taken_username_changes_nothing(world):
    before = snapshot()
    target = bulk.Target(filters={"company": ACME})
    plan = bulk.preview(ROOT, bulk_kind_users(), target, "move", GLOBEX)
    with pytest.raises(Conflict):
        bulk.apply(ROOT, bulk_kind_users(), target, "move", plan.fingerprint, GLOBEX)
    assert snapshot() == before


def bulk_kind_users():

    return kinds.PHONE_USER


@pytest.mark.parametrize(
    ("target", "action", "company", "field"),
    [
        (bulk.Target(keys=()), "move", GLOBEX, "key"),
        (bulk.Target(filters={}), "paint", None, "action"),
        (bulk.Target(filters={}), "move", None, "company"),
        (bulk.Target(filters={}), "move", "nope", "company"),
    ],
)
def test_bad_requests_are_refused(world, target, action, company, field):
    with pytest.raises(Invalid) as refused:
        bulk.preview(ROOT, DDI_KIND, target, action, company)
    assert field in refused.value.fields


def test_too_many_records_at_once(world, monkeypatch):
    monkeypatch.setattr(bulk, "MAX_RECORDS", 5)
    with pytest.raises(Invalid, match="at most 5 records"):
        bulk.preview(ROOT, DDI_KIND, bulk.Target(filters={}), "delete")


# --- the pages -------------------------------------------------------------------------------


def hidden_fields(page) -> MultiDict:
    """The confirmation form's hidden fields, repeated names (ticked keys) included."""
    return MultiDict([(i["name"], i.get("value")) for i in page.select("form input[type=hidden]")])


def post(client, path, **data):
    return client.post(path, data={"csrf_token": client.csrf, **data})


def test_the_list_offers_the_bulk_form_to_those_who_may(world):
    page = soup(world.browser("root").get("/ddis"))
    assert page.select_one("form#bulk") is not None
    assert len(page.select("input[type=checkbox][form=bulk]")) == 9
    assert page.select_one("#bulk input[name=action][value=delete]") is not None
    assert soup(world.browser("cadmin").get("/ddis")).select_one("form#bulk") is None  # one company


@pytest.mark.parametrize("plural", ["ddis", "users"])
def test_each_rows_tick_comes_first_labelled_by_the_row(world, plural):
    """The tick is the first cell of every row (reached before the row's links), named for
    screen readers by the record; the header holds "Tick all on this page", hidden until
    static/app.js shows it (without JavaScript it could do nothing)."""
    page = soup(world.browser("root").get(f"/{plural}"))
    rows = page.select("#rows tbody tr")
    assert rows
    for tr in rows:
        first = tr.find("td")
        box = first.find("input", type="checkbox")
        assert "tick-cell" in first["class"] and box is not None, tr
        # Named as the page writes the record ("+44 2071234567"); it posts the key.
        key_field = tr.find_all("td")[1].get_text(strip=True)
        if plural == "ddis":
            assert box["aria-label"] == f"Tick {key_field}"
            assert "+" + box["value"].replace(":", " ") == key_field
        else:
            assert box["aria-label"] == f"Tick {box['value']}"
            assert key_field and key_field in box["value"].split("/")
        assert box["form"] == "bulk"
    header = page.select("#rows thead th")
    tick_all = header[0].find("input", id="tick-all")
    # Named by the words of its label (shown as a line of their own at phone width).
    label = tick_all.find_parent("label")
    assert label.get_text(strip=True) == "Tick all on this page" and tick_all.has_attr("hidden")
    assert len(header) == len(rows[0].find_all("td"))


def test_the_bulk_bar_offers_all_matching_only_on_a_filtered_list(world):
    """Unfiltered, the bar changes the rows ticked only (the CSS folds it away until one is);
    filtered, it also offers all N matching, and shows."""
    client = world.browser("root")
    plain = soup(client.get("/ddis")).select_one("form#bulk")
    assert "filtered" not in plain["class"]
    assert plain.select_one("input[name=scope][value=all]") is None
    assert plain.select_one("input[type=hidden][name=scope]")["value"] == "selected"
    assert "all 9" not in plain.get_text()
    filtered = soup(client.get("/ddis?company=acme")).select_one("form#bulk")
    assert "filtered" in filtered["class"]
    assert "all 6 matching the filters" in filtered.get_text(" ", strip=True)
    # Its fields are in a fold, closed in the HTML (app.css opens it but at phone width), and
    # open after a refusal, where its message and the values to correct are.
    fold = filtered.select_one("details.bulk-fold")
    assert fold.select_one("input[name=scope][value=all]") is not None
    assert not fold.has_attr("open")
    answer = post(
        client,
        "/ddis/bulk",
        scope="selected",
        action="move",
        f_company=ACME,
        back="/ddis?company=acme",
    )  # nothing ticked
    assert answer.status_code == 400
    refused = soup(answer)
    assert refused.select_one("form#bulk details.bulk-fold").has_attr("open")


def test_page_confirm_then_apply_a_move_of_all_matching(world):
    client = world.browser("root")
    shown = post(
        client, "/ddis/bulk", scope="all", f_company=ACME, action="move", to_company=INITECH
    )
    assert shown.status_code == 200
    page = soup(shown)
    assert page.h1.get_text(" ", strip=True) == "Move 6 DDIs to initech?"
    assert companies_of()["44:2070000000"] == ACME  # nothing yet
    form = {i["name"]: i.get("value") for i in page.select("form input[type=hidden]")}
    done = client.post("/ddis/bulk/apply", data=form)
    assert done.status_code == 303 and "company=acme" in done.headers["Location"]
    assert sum(c == INITECH for c in companies_of().values()) == 6
    listing = client.get(done.headers["Location"]).get_data(as_text=True)
    assert "Moved 6 DDIs to initech." in listing


def test_page_delete_of_ticked_rows_states_the_count(world):
    client = world.browser("root")
    data = {
        "csrf_token": client.csrf,
        "scope": "selected",
        "action": "delete",
        "key": ["44:2070000000", "44:2070000001"],
    }
    page = soup(client.post("/ddis/bulk", data=data))
    assert page.h1.get_text(" ", strip=True) == "Delete 2 DDIs?"
    form = page.select_one("form[action='/ddis/bulk/apply']")
    done = client.post("/ddis/bulk/apply", data=hidden_fields(form))
    assert done.status_code == 303 and "44:2070000000" not in companies_of()


def test_page_apply_after_the_selection_changed_shows_the_new_count(world, factory):
    client = world.browser("root")
    page = soup(post(client, "/ddis/bulk", scope="all", f_company=GLOBEX, action="delete"))
    factory.ddi("33", "100000009", GLOBEX)
    again = client.post("/ddis/bulk/apply", data=hidden_fields(page))
    assert again.status_code == 409
    assert "it is 4 records now" in html.unescape(again.get_data(as_text=True))
    assert sum(c == GLOBEX for c in companies_of().values()) == 4


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"scope": "selected", "action": "move", "to_company": GLOBEX}, "Tick the DDIs"),
        ({"scope": "all", "action": "move", "to_company": "nope"}, "unknown company"),
        ({"scope": "all", "action": "move", "to_company": ""}, "required"),
    ],
)
def test_page_bad_bulk_form_says_why(world, data, words):
    answer = post(world.browser("root"), "/ddis/bulk", **data)
    assert answer.status_code == 400 and words in answer.get_data(as_text=True)


@pytest.mark.parametrize("path", ["/ddis/bulk", "/ddis/bulk/apply"])
def test_page_nothing_ticked_and_no_company_shows_both_only_the_company_marked(world, path):
    """Without JavaScript nothing stops the form before it is sent: both problems at once,
    the bar's own above its controls, the company's beside the company picker, which alone is
    marked at fault (the valid action radios and the rest are not)."""
    data = {"scope": "selected", "action": "move", "to_company": ""}
    if path.endswith("apply"):
        data["expected"] = "x"
    answer = post(world.browser("root"), path, **data)
    assert answer.status_code == 400
    bar = soup(answer).select_one("form#bulk")
    assert bar.select_one("#bulk-error").get_text() == "Tick the DDIs to change first."
    company = bar.select_one("#bulk-company-error").get_text()
    assert company == "Company to move them to: required."
    marked = bar.select(".has-error")
    assert len(marked) == 1 and marked[0].select_one("#bulk-company") is not None
    assert bar.select_one("#bulk-company")["aria-invalid"] == "true"
    # The bar's message comes first, on its own line (static/app.css: .bulk-message).
    assert "bulk-message" in bar.select_one("#bulk-error")["class"]
    assert bar.find("p") is bar.select_one("#bulk-error")


def test_page_a_company_alone_at_fault_is_the_only_message(world):
    answer = post(
        world.browser("root"),
        "/ddis/bulk",
        scope="all",
        f_company=GLOBEX,
        action="move",
        to_company="nope",
    )
    bar = soup(answer).select_one("form#bulk")
    assert bar.select_one("#bulk-error") is None
    assert "unknown company" in bar.select_one("#bulk-company-error").get_text()


def test_page_refuses_without_csrf_and_to_company_admins_deleting(world):
    client = world.browser("root")
    forged = client.post(
        "/ddis/bulk/apply",
        data={"csrf_token": "x", "scope": "all", "action": "delete", "expected": "9"},
    )
    assert forged.status_code == 400 and len(companies_of()) == 9
    world.add("two", "cadmin")
    two = world.browser("cadmin")
    refused = post(two, "/ddis/bulk", scope="all", action="delete")
    assert refused.status_code == 403


def test_users_bulk_move(world):
    client = world.browser("root")
    page = soup(
        post(
            client,
            "/users/bulk",
            scope="selected",
            key="acme/bob",
            action="move",
            to_company=INITECH,
        )
    )
    assert page.h1.get_text(" ", strip=True) == "Move 1 phone user to initech?"
    assert client.post("/users/bulk/apply", data=hidden_fields(page)).status_code == 303
    db.session.rollback()
    assert (
        db.session.scalar(select(PhoneUser.company).where(PhoneUser.username == "bob")) == INITECH
    )
    assert (
        db.session.scalar(
            select(func.count()).select_from(AuditEntry).where(AuditEntry.action == "user.update")
        )
        == 1
    )
