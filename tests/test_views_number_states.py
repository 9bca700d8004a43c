"""/ddis by state (docs/pages.md, "State filter") and the bulk Reserve, Release and Retire
(docs/pages.md#bulk-actions), on the HTML each role gets: a System-Admin lists every state, a
Company-Admin in service and its own companies' reservations and nothing else, a billing
account nothing; the filters, paging, `back` and the CSV follow the state; bulk actions are all
or nothing, through the numbers' own services, and refused with a message on the list."""

from __future__ import annotations

import csv
import io
from datetime import date, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import select, update

from webapp.database import write_transaction
from webapp.extensions import db
from webapp.models import AuditEntry, Number
from webapp.services import inventory
from webapp.services.numbers import answers

from .factories import ACME, GLOBEX, snapshot
from .list_cells import number_info, table_rows
from .snapshots import kept
from .test_numbers_reserve import stock

AVAILABLE = [f"207123000{i}" for i in range(4)]
ACME_RESERVED, GLOBEX_RESERVED, ENDED = "2071240000", "2071240001", "2071240002"
AGING = "2071250000"
IN_SERVICE = "2071000001"
ESCAPED = "Reception <b>desk</b> & co"


@pytest.fixture
def on(app) -> date:
    with app.app_context():
        return inventory.today()


@pytest.fixture
@kept
def world(world, factory, on):
    factory.ddi("44", IN_SERVICE, ACME, "100")
    factory.ddi("44", "2072000001", GLOBEX, "101")
    with write_transaction() as session:  # an in-service DDI's description (wt-desc sets it)
        session.execute(
            update(Number).where(Number.number == IN_SERVICE).values(description="Main line")
        )
    stock(AVAILABLE[0], description=ESCAPED)
    stock(*AVAILABLE[1:])
    stock(ACME_RESERVED, state="reserved", held_for=ACME, held_until=on + timedelta(days=10))
    stock(GLOBEX_RESERVED, state="reserved", held_for=GLOBEX, held_until=on + timedelta(days=3))
    stock(ENDED, state="reserved", held_for=ACME, held_until=on - timedelta(days=1))
    stock(AGING, state="aging", previous_company=GLOBEX, held_until=on + timedelta(days=5))
    return world


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def numbers_of(page: BeautifulSoup) -> list[str]:
    return [row[1] for row in table_rows(page)]


def listed(client, **query) -> BeautifulSoup:
    response = client.get("/ddis", query_string=query)
    assert response.status_code == 200, response.get_data(as_text=True)
    return soup(response)


def state_of(number: str) -> str | None:
    db.session.rollback()
    row = db.session.scalars(select(Number).where(Number.number == number)).one_or_none()
    return None if row is None else inventory.state_of(row, inventory.today())


# --- the list by state ------------------------------------------------------------------------


def test_a_system_admin_lists_each_state(world, on):
    client = world.browser("root")
    page = listed(client, state="available")
    assert numbers_of(page) == [*AVAILABLE, ENDED]  # a reservation past its day is available
    info = number_info(page)
    assert {i["State"] for i in info} == {"available"} and {i["Held until"] for i in info} == {""}
    # The description is shown as text, never as markup.
    cell = page.select("td.description")[0]
    assert cell.get_text() == ESCAPED and cell.find("b") is None

    page = listed(client, state="reserved")
    assert numbers_of(page) == [ACME_RESERVED, GLOBEX_RESERVED]
    assert [r[2:] for r in table_rows(page)] == [("", ACME), ("", GLOBEX)]  # no extension
    assert [i["Held until"] for i in number_info(page)] == [
        str(on + timedelta(days=10)),
        str(on + timedelta(days=3)),
    ]
    page = listed(client, state="aging")
    assert numbers_of(page) == [AGING]
    assert number_info(page)[0]["Held until"] == str(on + timedelta(days=5))
    page = listed(client, state="all")
    assert len(numbers_of(page)) == 2 + 4 + 3 + 1
    assert [i["State"] for i in number_info(page)][:1] == ["in service"]
    # The headers of a list in another state do not sort: it is in number order.
    assert page.select("#rows th a") == []


def test_the_default_is_todays_list_with_descriptions(world):
    client = world.browser("root")
    page = listed(client)
    assert numbers_of(page) == [IN_SERVICE, "2072000001"]
    headings = [th.get_text(" ", strip=True) for th in page.select("#rows thead th")]
    assert "State" not in headings and "Description" in headings
    assert [i["Description"] for i in number_info(page)] == ["Main line", ""]
    assert "of 2" in page.select_one("#count").get_text()  # still counted
    options = [o["value"] for o in page.select("#filter-state option")]
    assert options == ["in_service", "reserved", "available", "aging", "all"]


def test_company_filter_for_reserved_is_the_reservations_company(world):
    client = world.browser("root")
    assert numbers_of(listed(client, state="reserved", company=ACME)) == [ACME_RESERVED]
    # Stock and aging numbers belong to no company.
    assert numbers_of(listed(client, state="available", company=ACME)) == []
    assert numbers_of(listed(client, state="all", company=ACME)) == [IN_SERVICE, ACME_RESERVED]


def test_filters_and_the_number_search_with_a_state(world):
    client = world.browser("root")
    assert numbers_of(listed(client, state="available", number="20712300")) == AVAILABLE
    assert numbers_of(listed(client, state="available", dialcode="44", number="2071230001")) == [
        AVAILABLE[1]
    ]
    assert numbers_of(listed(client, state="available", q="+44 20712 3000 2")) == [AVAILABLE[2]]
    assert numbers_of(listed(client, state="available", q="4420712400")) == [ENDED]
    assert numbers_of(listed(client, state="available", dialcode="1")) == []
    refused = client.get("/ddis", query_string={"state": "available", "virt_exten": "1"})
    assert refused.status_code == 400
    assert "only numbers in service" in soup(refused).select_one("#rows .error").get_text()
    # A description search is the in-service list's: in another state a 400 that says so.
    worded = client.get("/ddis", query_string={"state": "available", "q": "reception"})
    assert worded.status_code == 400
    assert "on the list in service only" in soup(worded).select_one("#rows .error").get_text()


def test_a_company_admin_sees_only_its_reservations(world):
    client = world.browser("cadmin")
    page = listed(client, state="reserved")
    assert numbers_of(page) == [ACME_RESERVED]
    options = [o["value"] for o in page.select("#filter-state option")]
    assert options == ["in_service", "reserved"]
    # No bulk actions on numbers for it; its reservation links to its page, which it may open.
    assert page.select_one("#bulk") is None
    link = page.select_one(f"a[href='/ddis/44/{ACME_RESERVED}']")
    assert link is not None and client.get(link["href"]).status_code == 200
    text = page.get_text()
    assert GLOBEX_RESERVED not in text and ENDED not in text
    for state in ("available", "aging", "all", "bogus"):
        response = client.get("/ddis", query_string={"state": state})
        assert response.status_code == 400, state
        body = response.get_data(as_text=True)
        assert "State must be one of: in service, reserved" in body or "state: must be" in body
        assert table_rows(soup(response)) == []
        for number in (*AVAILABLE, AGING, GLOBEX_RESERVED, ENDED):
            assert number not in body
    # Another company's filter is the picker's message, as on the DDI list: nothing shown.
    other = client.get("/ddis", query_string={"state": "reserved", "company": GLOBEX})
    assert other.status_code == 400 and table_rows(soup(other)) == []
    assert GLOBEX_RESERVED not in other.get_data(as_text=True)
    csv_refused = client.get("/ddis.csv", query_string={"state": "available"})
    assert csv_refused.status_code == 400 and AVAILABLE[0] not in csv_refused.get_data(True)


@pytest.mark.parametrize("role", ["summary", "reporter", "nobody"])
def test_billing_accounts_get_the_list_as_today(world, role):
    client = world.browser(role)
    assert client.get("/ddis").status_code == client.get("/ddis?state=reserved").status_code
    assert client.get("/ddis?state=reserved").status_code == 403


def test_paging_forward_in_number_order(world):
    stock(*(f"30000{i:05d}" for i in range(60)), dialcode="49")
    client = world.browser("root")
    first = listed(client, state="available", dialcode="49")
    assert numbers_of(first) == [f"30000{i:05d}" for i in range(50)]
    assert "more follow" in first.select_one("#count").get_text()
    rels = {a["rel"][0]: a["href"] for a in first.select("nav.pager a[rel]")}
    assert set(rels) == {"next"}
    query = parse_qs(urlsplit(rels["next"]).query)
    assert query["state"] == ["available"] and query["after"] == ["49", "3000000049"]
    second = soup(client.get(rels["next"]))
    assert numbers_of(second) == [f"30000{i:05d}" for i in range(50, 60)]
    rels = {a["rel"][0]: a["href"] for a in second.select("nav.pager a[rel]")}
    assert set(rels) == {"first"}
    # htmx swaps the rows alone, in the same state.
    fragment = client.get(rels["first"], headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and soup(fragment).find("h1") is None
    assert len(numbers_of(soup(fragment))) == 50


def test_the_csv_follows_the_state(world, on):
    client = world.browser("root")
    page = listed(client, state="reserved", company=ACME)
    href = page.select_one("#csv-link")["href"]
    assert parse_qs(urlsplit(href).query)["state"] == ["reserved"]
    header, *rows = list(csv.reader(io.StringIO(client.get(href).get_data(as_text=True))))
    assert header == list(answers.FIELDS)
    assert rows == [
        ["44", ACME_RESERVED, "reserved", ACME, "", "", str(on + timedelta(days=10)), "", ""]
    ]
    # In service, the CSV is as it always was.
    header, *rows = list(csv.reader(io.StringIO(client.get("/ddis.csv").get_data(as_text=True))))
    assert header == ["dialcode", "number", "virt_exten", "company"] and len(rows) == 2


def test_the_state_is_part_of_the_list_state_carried_by_back(world):
    client = world.browser("root")
    page = listed(client, state="all", company=ACME)
    edit = page.select_one("#rows td.actions a")["href"]  # the in-service row's Edit
    back = parse_qs(urlsplit(edit).query)["back"][0]
    assert parse_qs(urlsplit(back).query) == {"state": ["all"], "company": [ACME]}
    done = client.post(
        f"/ddis/44/{IN_SERVICE}/edit",
        data={"csrf_token": client.csrf, "virt_exten": "555", "company": ACME, "back": back},
    )
    assert done.status_code == 302
    assert parse_qs(urlsplit(done.headers["Location"]).query)["state"] == ["all"]


# --- bulk actions on numbers ------------------------------------------------------------------


def confirm_form(page: BeautifulSoup) -> dict[str, list[str]]:
    form = page.select_one("form[action='/ddis/bulk/apply']")
    data: dict[str, list[str]] = {}
    for field in form.select("input[name]"):
        data.setdefault(field["name"], []).append(field.get("value", ""))
    return data


def bulk(client, **data):
    return client.post("/ddis/bulk", data={"csrf_token": client.csrf, **data})


def test_bulk_reserve_the_ticked_numbers(world, on):
    client = world.browser("root")
    page = listed(client, state="available")
    bar = page.select_one("#bulk")
    assert [i["value"] for i in bar.select("input[name=action]")] == ["reserve", "retire"]
    assert bar.select_one("#bulk-until")["value"] == str(on + timedelta(days=30))
    until = str(on + timedelta(days=7))
    back = bar.select_one("input[name=back]")["value"]
    confirm = bulk(
        client,
        scope="selected",
        action="reserve",
        key=[f"44:{AVAILABLE[0]}", f"44:{AVAILABLE[1]}"],
        to_company=ACME,
        until=until,
        f_state="available",
        back=back,
    )
    assert confirm.status_code == 200, confirm.get_data(as_text=True)
    assert soup(confirm).h1.get_text(strip=True) == "Reserve 2 numbers for acme?"
    assert state_of(AVAILABLE[0]) == "available"  # nothing yet
    done = client.post("/ddis/bulk/apply", data=confirm_form(soup(confirm)))
    assert done.status_code == 303
    assert parse_qs(urlsplit(done.headers["Location"]).query)["state"] == ["available"]
    assert state_of(AVAILABLE[0]) == state_of(AVAILABLE[1]) == "reserved"
    db.session.rollback()
    held = db.session.scalars(select(Number).where(Number.number == AVAILABLE[0])).one()
    assert (held.held_for, str(held.held_until)) == (ACME, until)
    entries = db.session.scalars(select(AuditEntry).where(AuditEntry.action == "number.reserve"))
    assert len(list(entries)) == 2
    assert "Reserved 2 numbers for acme." in client.get(done.headers["Location"]).get_data(True)


def test_bulk_reserve_refusals_change_nothing(world, on):
    client = world.browser("root")
    before = snapshot()
    common = {"scope": "selected", "action": "reserve", "f_state": "available"}
    back = "/ddis?state=available"
    # A ticked number that is not available (any more).
    refused = bulk(
        client,
        key=[f"44:{AVAILABLE[0]}", f"44:{ACME_RESERVED}"],
        to_company=GLOBEX,
        back=back,
        **common,
    )
    assert refused.status_code == 400
    message = soup(refused).select_one("#bulk-error").get_text()
    assert f"44:{ACME_RESERVED}" in message and "cannot be reserved" in message
    # Ticks are kept on the list shown again.
    assert soup(refused).select_one(f"input.tick[value='44:{AVAILABLE[0]}']").has_attr("checked")
    # A day too far, and no company.
    far = str(on + timedelta(days=400))
    refused = bulk(
        client, key=f"44:{AVAILABLE[0]}", to_company=ACME, until=far, back=back, **common
    )
    message = soup(refused).select_one("#bulk-error").text
    assert refused.status_code == 400 and message == "Held until: at most 365 days ahead."
    refused = bulk(
        client, key=f"44:{AVAILABLE[0]}", to_company=ACME, until="31/12", back=back, **common
    )
    message = soup(refused).select_one("#bulk-error").text
    assert message == "Held until: must be a date written YYYY-MM-DD."
    refused = bulk(client, key=f"44:{AVAILABLE[0]}", to_company="", back=back, **common)
    assert refused.status_code == 400 and "Company to reserve them for" in refused.get_data(True)
    # Taken by someone else between the confirmation and the confirm: nothing reserved.
    confirm = bulk(
        client,
        key=[f"44:{AVAILABLE[0]}", f"44:{AVAILABLE[1]}"],
        to_company=ACME,
        back=back,
        **common,
    )
    assert confirm.status_code == 200
    with write_transaction() as session:
        session.execute(
            update(Number)
            .where(Number.number == AVAILABLE[1])
            .values(state="reserved", held_for=GLOBEX, held_until=on)
        )
    taken = client.post("/ddis/bulk/apply", data=confirm_form(soup(confirm)))
    assert taken.status_code == 400
    assert "cannot be reserved" in soup(taken).select_one("#bulk-error").get_text()
    assert state_of(AVAILABLE[0]) == "available"
    assert snapshot()["audit"] == before["audit"]


def test_bulk_release_all_matching(world):
    client = world.browser("root")
    page = listed(client, state="reserved", company=ACME)
    bar = page.select_one("#bulk")
    assert [i["value"] for i in bar.select("input[name=action]")] == ["release"]
    confirm = bulk(
        client,
        scope="all",
        action="release",
        f_state="reserved",
        f_company=ACME,
        back=bar.select_one("input[name=back]")["value"],
    )
    assert confirm.status_code == 200
    assert soup(confirm).h1.get_text(strip=True) == "Release 1 number?"
    done = client.post("/ddis/bulk/apply", data=confirm_form(soup(confirm)))
    assert done.status_code == 303
    assert state_of(ACME_RESERVED) == "available" and state_of(GLOBEX_RESERVED) == "reserved"


def test_bulk_retire_aging_needs_a_reason(world):
    client = world.browser("root")
    page = listed(client, state="aging")
    assert page.select_one("#bulk-reason") is not None
    before = snapshot()
    data = {"scope": "selected", "action": "retire", "f_state": "aging", "key": f"44:{AGING}"}
    refused = bulk(client, back="/ddis?state=aging", **data)
    message = soup(refused).select_one("#bulk-error").text
    assert refused.status_code == 400 and message == "Why they are retired while aging: required."
    assert state_of(AGING) == "aging" and snapshot() == before
    confirm = bulk(client, back="/ddis?state=aging", reason="returned to the carrier", **data)
    assert confirm.status_code == 200
    done = client.post("/ddis/bulk/apply", data=confirm_form(soup(confirm)))
    assert done.status_code == 303
    assert state_of(AGING) is None
    db.session.rollback()
    entry = db.session.scalars(select(AuditEntry).where(AuditEntry.action == "number.retire")).one()
    assert entry.detail == "returned to the carrier"


def test_bulk_retire_available_and_refuse_reserved(world):
    client = world.browser("root")
    data = {
        "scope": "selected",
        "action": "retire",
        "f_state": "available",
        "back": "/ddis?state=available",
    }
    refused = bulk(client, key=[f"44:{AVAILABLE[3]}", f"44:{GLOBEX_RESERVED}"], **data)
    assert refused.status_code == 400 and state_of(AVAILABLE[3]) == "available"
    confirm = bulk(client, key=f"44:{AVAILABLE[3]}", **data)
    done = client.post("/ddis/bulk/apply", data=confirm_form(soup(confirm)))
    assert done.status_code == 303 and state_of(AVAILABLE[3]) is None


def test_a_company_admin_may_not_act_on_numbers(world):
    client = world.browser("cadmin2")
    before = snapshot()
    data = {"scope": "selected", "f_state": "reserved", "key": f"44:{ACME_RESERVED}"}
    assert bulk(client, action="release", **data).status_code == 403
    assert bulk(client, action="reserve", to_company=ACME, **data).status_code == 403
    assert state_of(ACME_RESERVED) == "reserved" and snapshot() == before


def test_a_changed_selection_is_confirmed_again(world, on):
    """All matching: a number reserved for the company between the confirmation and its
    button changes the selection (even if each number is still releasable): nothing is
    released, and the confirmation shows the new count."""
    client = world.browser("root")
    data = {"scope": "all", "action": "release", "f_state": "reserved", "f_company": ACME}
    confirm = bulk(client, back=f"/ddis?state=reserved&company={ACME}", **data)
    assert soup(confirm).h1.get_text(strip=True) == "Release 1 number?"
    stock("2071240009", state="reserved", held_for=ACME, held_until=on)
    again = client.post("/ddis/bulk/apply", data=confirm_form(soup(confirm)))
    assert again.status_code == 409
    assert soup(again).h1.get_text(strip=True) == "Release 2 numbers?"
    assert "selection changed" in soup(again).select_one("#bulk-error").get_text()
    assert state_of(ACME_RESERVED) == "reserved"
    done = client.post("/ddis/bulk/apply", data=confirm_form(soup(again)))
    assert done.status_code == 303
    assert state_of(ACME_RESERVED) == state_of("2071240009") == "available"
