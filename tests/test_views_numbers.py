"""The number inventory's pages (webapp/views/numbers.py): /ddis/stock (a block or a CSV file
added to the stock after a preview) and /ddis/free (find free numbers, then reserve or
allocate them). System-Admin only; every refusal re-renders its form and writes nothing."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import select

from webapp.access import Principal
from webapp.extensions import db
from webapp.models import AuditEntry, Ddi, ImportPreview, Number
from webapp.services import inventory
from webapp.services.imports import ddi_import
from webapp.services.numbers import free, reserving, stock, stock_previews

from .factories import ACME, GLOBEX, snapshot

ROOT_P = Principal.cli("cli:test")


def page(answer) -> BeautifulSoup:
    return BeautifulSoup(answer.get_data(as_text=True), "html.parser")


def text(soup: BeautifulSoup, selector: str) -> str:
    found = soup.select_one(selector)
    assert found is not None, selector
    return " ".join(found.get_text(" ", strip=True).split())


def numbers() -> dict[str, tuple[str, str | None, str]]:
    """Every number of the inventory: key -> (stored state, held for, description)."""
    db.session.rollback()
    rows = db.session.execute(
        select(Number.dialcode, Number.number, Number.state, Number.held_for, Number.description)
    )
    return {f"{d}:{n}": (s, h, desc) for d, n, s, h, desc in rows}


def stock_block(dialcode: str, first: str, count: int) -> None:
    stock.stock(ROOT_P, {"block": {"dialcode": dialcode, "first": first, "count": count}})


def upload(client, data: bytes, filename: str = "numbers.csv", token: str | None = None):
    return client.post(
        "/ddis/stock/file",
        data={"csrf_token": token or client.csrf, "file": (io.BytesIO(data), filename)},
        content_type="multipart/form-data",
    )


# --- who may ----------------------------------------------------------------------------------


@pytest.mark.parametrize("username", ["cadmin", "summary", "reporter", "nobody"])
def test_pages_are_for_system_admins_only(world, username):
    client = world.browser(username)
    for path in ("/ddis/stock", "/ddis/free", "/ddis/free?dialcode=44&prefix=2&count=1"):
        assert client.get(path).status_code == 403, path
    before = snapshot()
    block = {"csrf_token": client.csrf, "dialcode": "44", "first": "2070000000", "count": "3"}
    assert client.post("/ddis/stock/block", data=block).status_code == 403
    assert client.post("/ddis/stock/block/apply", data=block).status_code == 403
    assert upload(client, b"dialcode,number\n44,1\n").status_code == 403
    sent = {"csrf_token": client.csrf, "dialcode": "44", "prefix": "207", "count": "1"}
    reserve = {**sent, "company": ACME}
    assert client.post("/ddis/free/reserve", data=reserve).status_code == 403
    allocate = {**sent, "company": ACME, "virt_exten": "100"}
    assert client.post("/ddis/free/allocate", data=allocate).status_code == 403
    assert snapshot() == before and numbers() == {}
    home = client.get("/account/tokens").get_data(as_text=True)
    assert 'href="/ddis/free"' not in home and 'href="/ddis/stock"' not in home


def test_a_system_admin_has_the_menu_entry_and_both_pages(world):
    client = world.browser("root")
    nav = page(client.get("/ddis")).select_one("nav[aria-label=Main]")
    assert nav is not None and nav.select_one('a[href="/ddis/free"]').get_text() == "Numbers"
    free = page(client.get("/ddis/free"))
    assert text(free, "h1") == "Find free numbers"
    assert free.select_one('.pagehead a[href="/ddis/stock"]') is not None
    assert free.select_one('nav a[aria-current="page"]').get_text() == "Numbers"
    stock_page = page(client.get("/ddis/stock"))
    assert text(stock_page, "h1") == "Add numbers to the stock"
    # Both POST forms carry the CSRF token; the search is a GET form and needs none.
    for form in stock_page.select("form[method=post]"):
        assert form.select_one("input[name=csrf_token]") is not None


# --- /ddis/stock: a block ---------------------------------------------------------------------


def test_block_preview_then_apply_stocks_it_and_links_the_list(world):
    client = world.browser("root")
    block = {"csrf_token": client.csrf, "dialcode": "44", "first": "0099", "count": "3"}
    shown = client.post("/ddis/stock/block", data=block)
    assert shown.status_code == 200
    preview = page(shown)
    assert text(preview, "#stock-count") == "3"
    assert text(preview, "#stock-lowest") == "+44 0099"
    assert text(preview, "#stock-highest") == "+44 0101"
    assert text(preview, "#stock-existing-count") == "0"
    assert numbers() == {}  # a preview writes nothing
    form = preview.select_one("form[action='/ddis/stock/block/apply']")
    hidden = {i["name"]: i["value"] for i in form.select("input[type=hidden]")}
    assert hidden.pop("csrf_token")  # signed with the time: not the same text as client.csrf
    assert hidden == {"dialcode": "44", "first": "0099", "count": "3"}
    hidden["csrf_token"] = client.csrf

    done = client.post("/ddis/stock/block/apply", data=hidden)
    assert done.status_code == 303 and done.headers["Location"] == "/ddis/stock"
    assert numbers() == {
        "44:0099": ("available", None, ""),
        "44:0100": ("available", None, ""),
        "44:0101": ("available", None, ""),
    }
    after = page(client.get("/ddis/stock"))
    note = after.select_one("#stocked")
    assert " ".join(note.get_text(" ", strip=True).split()).startswith("Stocked 3 numbers.")
    # The numbers share no digit but the dialcode: 0099 and 0101 start alike only with "0".
    assert note.a["href"] == "/ddis?state=available&dialcode=44&number=0"
    assert client.get("/ddis/stock").get_data(as_text=True).count("Stocked 3") == 0  # once
    entries = db.session.scalars(select(AuditEntry.action)).all()
    assert entries.count("number.stock") == 3


def test_block_link_names_the_shared_prefix(world):
    client = world.browser("root")
    block = {"csrf_token": client.csrf, "dialcode": "44", "first": "2071230000", "count": "100"}
    assert client.post("/ddis/stock/block/apply", data=block).status_code == 303
    note = page(client.get("/ddis/stock")).select_one("#stocked")
    assert "Stocked 100 numbers." in note.get_text()
    assert note.a["href"] == "/ddis?state=available&dialcode=44&number=20712300"


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"dialcode": "4x"}, "dialcode", "must be 1 to 7 digits"),
        ({"first": ""}, "first", "must be 1 to 15 digits"),
        ({"count": "0"}, "count", "from 1 to 10,000"),
        ({"count": "10001"}, "count", "from 1 to 10,000"),
        ({"count": "ten"}, "count", "whole number"),
        ({"first": "9998", "count": "3"}, "count", "runs past 9999"),
    ],
)
def test_bad_block_is_refused_with_a_field_message(world, fields, field, words):
    client = world.browser("root")
    block = {"csrf_token": client.csrf, "dialcode": "44", "first": "2070000000", "count": "3"}
    before = snapshot()
    for path in ("/ddis/stock/block", "/ddis/stock/block/apply"):
        answer = client.post(path, data={**block, **fields})
        assert answer.status_code == 400, path
        form = page(answer)
        box = form.select_one(f"#{field}")
        assert box["aria-invalid"] == "true" and box["aria-describedby"] == f"{field}-error"
        assert words in text(form, f"#{field}-error")
    assert snapshot() == before and numbers() == {}


def test_block_with_an_existing_number_shows_it_and_offers_no_apply(world, factory):
    stock_block("44", "2070000002", 1)
    factory.ddi("44", "2070000004", ACME)  # in service: in the inventory too
    client = world.browser("root")
    block = {"csrf_token": client.csrf, "dialcode": "44", "first": "2070000000", "count": "5"}
    preview = page(client.post("/ddis/stock/block", data=block))
    assert text(preview, "#stock-existing-count") == "2"
    assert "nothing can be stocked" in text(preview, "#stock-refused")
    listed = [text(row, "td") for row in preview.select("#stock-existing tbody tr")]
    assert listed == ["+44 2070000002", "+44 2070000004"]
    assert preview.select_one("#apply-stock") is None
    before = numbers()
    refused = client.post("/ddis/stock/block/apply", data=block)
    assert refused.status_code == 409
    assert "already in the inventory" in text(page(refused), "#preview-message")
    assert numbers() == before


def test_a_number_stocked_meanwhile_refuses_the_apply_and_writes_nothing(world):
    client = world.browser("root")
    block = {"csrf_token": client.csrf, "dialcode": "44", "first": "2070000000", "count": "5"}
    preview = page(client.post("/ddis/stock/block", data=block))
    assert preview.select_one("#apply-stock") is not None
    stock_block("44", "2070000003", 1)  # someone else, between preview and apply
    before = snapshot()
    answer = client.post("/ddis/stock/block/apply", data=block)
    assert answer.status_code == 409
    shown = page(answer)
    assert "+44 2070000003 is already in the inventory" in text(shown, "#preview-message")
    assert text(shown, "#stock-existing-count") == "1"  # the preview as of now
    assert snapshot() == before and list(numbers()) == ["44:2070000003"]


def test_block_apply_without_csrf_writes_nothing(world):
    client = world.browser("root")
    block = {"csrf_token": "forged", "dialcode": "44", "first": "2070000000", "count": "2"}
    assert client.post("/ddis/stock/block", data=block).status_code == 400
    assert client.post("/ddis/stock/block/apply", data=block).status_code == 400
    assert numbers() == {}


# --- /ddis/stock: a file ----------------------------------------------------------------------


def test_file_preview_then_apply(world):
    client = world.browser("root")
    data = b"dialcode,number,description\n44,2071230001,Reception\n44,2071230000,\n33,100,\n"
    shown = upload(client, data, "mine.csv")
    assert shown.status_code == 303
    preview_id = db.session.scalar(select(ImportPreview.id))
    assert shown.headers["Location"] == f"/ddis/stock/file/{preview_id}"
    preview = page(client.get(shown.headers["Location"]))
    assert text(preview, "h1") == "Stock preview: mine.csv"
    assert text(preview, "#stock-count") == "3"
    assert text(preview, "#stock-lowest") == "+33 100"
    assert text(preview, "#stock-highest") == "+44 2071230001"
    assert numbers() == {}
    # The import's page does not take a stock file for a DDI import.
    assert client.get(f"/ddis/import/{preview_id}").status_code == 404
    done = client.post(f"/ddis/stock/file/{preview_id}", data={"csrf_token": client.csrf})
    assert done.status_code == 303 and done.headers["Location"] == "/ddis/stock"
    assert numbers()["44:2071230001"] == ("available", None, "Reception")
    assert len(numbers()) == 3
    assert db.session.scalar(select(ImportPreview.id)) is None  # not kept once applied
    note = page(client.get("/ddis/stock")).select_one("#stocked")
    assert "Stocked 3 numbers." in note.get_text()
    assert note.a["href"] == "/ddis?state=available"  # two dialcodes: no narrower list


def test_file_with_bad_lines_lists_them_and_keeps_nothing(world):
    client = world.browser("root")
    data = b"dialcode,number\n44,2071230000\n44,20712x\n44,2071230000\n4,5,6\n"
    before = snapshot()
    answer = upload(client, data)
    assert answer.status_code == 400
    form = page(answer)
    assert form.select_one("#file")["aria-invalid"] == "true"
    assert text(form, "#file-error") == "The file has 3 problems; nothing was imported."
    listed = [li.get_text(strip=True) for li in form.select("#file-problems li")]
    assert listed == [
        "line 3: number '20712x' must be 1 to 15 digits",
        "line 4: +44 2071230000 repeats line 2",
        "line 5: expected 2 columns, found 3",
    ]
    assert snapshot() == before and db.session.scalar(select(ImportPreview.id)) is None


def test_file_with_an_existing_number_names_its_line(world):
    stock_block("44", "2071230001", 1)
    client = world.browser("root")
    shown = upload(client, b"dialcode,number\n44,2071230000\n44,2071230001\n")
    preview = page(client.get(shown.headers["Location"]))
    assert [text(r, "td") for r in preview.select("#stock-existing tbody tr")] == ["3"]
    assert "+44 2071230001" in text(preview, "#stock-existing")
    assert preview.select_one("#apply-stock") is None
    preview_id = db.session.scalar(select(ImportPreview.id))
    before = numbers()
    refused = client.post(f"/ddis/stock/file/{preview_id}", data={"csrf_token": client.csrf})
    assert refused.status_code == 409 and numbers() == before
    shown = page(refused)
    assert text(shown, "#preview-message") == (
        "The number +44 2071230001 is already in the inventory; nothing was stocked."
    )
    assert text(shown, "#stock-existing-count") == "1"


@pytest.mark.parametrize(
    ("data", "words"),
    [(b"", "empty"), (b"\x89PNG\r\n\x1a\n\x00", "not UTF-8"), (b"a,b\n1,2\n", "header")],
)
def test_bad_file_is_refused_on_the_form(world, data, words):
    client = world.browser("root")
    answer = upload(client, data)
    assert answer.status_code == 400 and words in text(page(answer), "#file-error")
    assert numbers() == {} and db.session.scalar(select(ImportPreview.id)) is None


def test_file_upload_limits_are_the_imports(world, monkeypatch):
    assert stock_previews.MAX_BYTES == ddi_import.MAX_BYTES
    monkeypatch.setattr(stock_previews, "MAX_BYTES", 1000)
    client = world.browser("root")
    rows = "".join(f"44,{2071230000 + i}\n" for i in range(200))
    answer = upload(client, f"dialcode,number\n{rows}".encode())
    assert answer.status_code == 413 and "larger than" in text(page(answer), "#file-error")
    missing = client.post("/ddis/stock/file", data={"csrf_token": client.csrf})
    assert missing.status_code == 400 and "Choose a CSV file" in missing.get_data(as_text=True)
    assert upload(client, b"dialcode,number\n44,1\n", token="forged").status_code == 400
    assert numbers() == {} and db.session.scalar(select(ImportPreview.id)) is None


def test_file_previews_are_their_own_accounts(world):
    upload(world.browser("root"), b"dialcode,number\n44,1\n")
    preview_id = db.session.scalar(select(ImportPreview.id))
    world.add("root2", "root")
    other = world.browser("root2")
    assert other.get(f"/ddis/stock/file/{preview_id}").status_code == 404
    answer = other.post(f"/ddis/stock/file/{preview_id}", data={"csrf_token": other.csrf})
    assert answer.status_code == 404 and numbers() == {}


# --- /ddis/free -------------------------------------------------------------------------------


def find(client, dialcode="44", prefix="2071", count="3"):
    return client.get(f"/ddis/free?dialcode={dialcode}&prefix={prefix}&count={count}")


@pytest.fixture
def stocked(world):
    stock_block("44", "2071000000", 10)  # 2071000000 .. 2071000009
    stock_block("44", "2072000000", 5)  # another prefix
    return world


def test_find_counts_and_lists_the_lowest(stocked):
    client = stocked.browser("root")
    shown = find(client, count="3")
    assert shown.status_code == 200
    found = page(shown)
    assert text(found, "#found-head") == "Available: 10"
    assert "10 numbers starting +44 2071 are available" in text(found, "#found-summary")
    listed = [li.get_text() for li in found.select("#free-numbers li")]
    assert listed == ["+44 2071000000", "+44 2071000001", "+44 2071000002"]
    assert found.select_one("#reserve-form") and found.select_one("#allocate-form")
    hidden = {i["name"]: i["value"] for i in found.select("#reserve-form input[type=hidden]")}
    assert hidden.pop("csrf_token")
    assert hidden == {"dialcode": "44", "prefix": "2071", "count": "3"}
    until = found.select_one("#until")["value"]
    assert until == (inventory.today() + timedelta(days=reserving.DEFAULT_DAYS)).isoformat()


def test_find_leaves_out_held_numbers_and_counts_expired_holds(stocked):
    reserving.reserve(
        ROOT_P, {"scope": {"dialcode": "44", "number": "2071000000"}, "values": {"company": ACME}}
    )
    found = page(find(stocked.browser("root"), count="2"))
    assert text(found, "#found-head") == "Available: 9"
    assert [li.get_text() for li in found.select("#free-numbers li")] == [
        "+44 2071000001",
        "+44 2071000002",
    ]


def test_find_not_enough_says_how_many_and_offers_no_action(stocked):
    found = page(find(stocked.browser("root"), prefix="2072", count="8"))
    assert "only 5 are available" in text(found, "#not-enough")
    assert found.select_one("#reserve-form") is None and found.select_one("#allocate-form") is None


@pytest.mark.parametrize(
    ("query", "field", "words"),
    [
        ({"dialcode": "x"}, "dialcode", "must be 1 to 7 digits"),
        ({"prefix": ""}, "prefix", "must be 1 to 15 digits"),
        ({"prefix": "1234567890123456"}, "prefix", "must be 1 to 15 digits"),
        ({"dialcode": "4444", "prefix": "12345678901234"}, "prefix", "at most 17 digits"),
        ({"count": "0"}, "count", "from 1 to 10,000"),
        ({"count": "many"}, "count", "from 1 to 10,000"),
    ],
)
def test_find_bad_input_is_a_field_message(stocked, query, field, words):
    client = stocked.browser("root")
    args = {"dialcode": "44", "prefix": "2071", "count": "3", **query}
    answer = find(client, **args)
    assert answer.status_code == 400
    form = page(answer)
    assert form.select_one(f"#{field}")["aria-invalid"] == "true"
    assert words in text(form, f"#{field}-error")
    assert form.select_one("#found") is None


def test_reserve_happy_path(stocked):
    client = stocked.browser("root")
    until = (inventory.today() + timedelta(days=10)).isoformat()
    sent = {"csrf_token": client.csrf, "dialcode": "44", "prefix": "2071", "count": "3"}
    done = client.post("/ddis/free/reserve", data={**sent, "company": "ACME", "until": until})
    assert done.status_code == 303
    assert done.headers["Location"] == "/ddis/free?dialcode=44&prefix=2071&count=3"
    held = {k: v[:2] for k, v in numbers().items() if v[0] == "reserved"}
    assert held == {f"44:207100000{i}": ("reserved", ACME) for i in range(3)}
    after = page(client.get(done.headers["Location"]))
    assert (
        text(after, ".flash-success")
        == f"Reserved 3 numbers (+44 2071000000 to +44 2071000002) for acme through {until}."
    )
    assert text(after, "#found-head") == "Available: 7"


def test_allocate_happy_path(stocked):
    client = stocked.browser("root")
    sent = {"csrf_token": client.csrf, "dialcode": "44", "prefix": "2071", "count": "2"}
    done = client.post(
        "/ddis/free/allocate", data={**sent, "company": GLOBEX, "virt_exten": "0099"}
    )
    assert done.status_code == 303
    db.session.rollback()
    ddis = db.session.execute(select(Ddi.number, Ddi.virt_exten, Ddi.company)).all()
    assert sorted(ddis) == [("2071000000", "0099", GLOBEX), ("2071000001", "0100", GLOBEX)]
    message = text(page(client.get(done.headers["Location"])), ".flash-success")
    assert message == (
        "Allocated 2 numbers (+44 2071000000 to +44 2071000001) to globex, extensions from 0099."
    )


@pytest.mark.parametrize("action", ["reserve", "allocate"])
def test_not_enough_numbers_is_a_form_message_and_nothing_changes(stocked, action):
    client = stocked.browser("root")
    sent = {"csrf_token": client.csrf, "dialcode": "44", "prefix": "2072", "count": "6"}
    extra = {"company": ACME, "virt_exten": "100"} if action == "allocate" else {"company": ACME}
    before = snapshot()
    stored = numbers()
    answer = client.post(f"/ddis/free/{action}", data={**sent, **extra})
    assert answer.status_code == 409
    shown = page(answer)
    message = text(shown, f"#{action}-form .form-error")
    assert "Only 5 numbers" in message and "nothing was" in message
    assert text(shown, "#found-head") == "Available: 5"
    assert snapshot() == before and numbers() == stored


@pytest.mark.parametrize(
    ("action", "fields", "field", "words"),
    [
        ("reserve", {"company": ""}, "reserve-company", "required"),
        ("reserve", {"company": "nope"}, "reserve-company", "unknown company"),
        ("reserve", {"company": ACME, "until": "2020-01-01"}, "until", "before today"),
        ("reserve", {"company": ACME, "until": "soon"}, "until", "YYYY-MM-DD"),
        ("allocate", {"company": "", "virt_exten": "100"}, "allocate-company", "required"),
        ("allocate", {"company": ACME, "virt_exten": "x1"}, "virt_exten", "1 to 10 digits"),
        ("allocate", {"company": ACME, "virt_exten": ""}, "virt_exten", ""),
    ],
)
def test_bad_action_input_is_a_field_message_and_nothing_changes(
    stocked, action, fields, field, words
):
    client = stocked.browser("root")
    sent = {"csrf_token": client.csrf, "dialcode": "44", "prefix": "2071", "count": "2"}
    before, stored = snapshot(), numbers()
    answer = client.post(f"/ddis/free/{action}", data={**sent, **fields})
    assert answer.status_code == 400
    shown = page(answer)
    box = shown.select_one(f"#{field}")
    assert box["aria-invalid"] == "true"
    errors = " ".join(p.get_text() for p in shown.select(f"#{action}-form .error"))
    assert words in errors
    assert snapshot() == before and numbers() == stored


def test_actions_need_the_csrf_token_and_a_valid_search(stocked):
    client = stocked.browser("root")
    sent = {"dialcode": "44", "prefix": "2071", "count": "2", "company": ACME}
    before, stored = snapshot(), numbers()
    forged = client.post("/ddis/free/reserve", data={**sent, "csrf_token": "forged"})
    assert forged.status_code == 400  # the app's CSRF check, before the view
    edited = client.post(
        "/ddis/free/reserve", data={**sent, "csrf_token": client.csrf, "count": "0"}
    )
    assert edited.status_code == 400
    assert "from 1 to 10,000" in text(page(edited), "#count-error")
    assert snapshot() == before and numbers() == stored


def test_with_htmx_the_count_follows_the_fields(stocked):
    """The search form reloads only the results region as the fields change (hx-select), and
    the count line is what static/app.js reads out; a wrong field leaves a note there."""
    client = stocked.browser("root")
    form = page(client.get("/ddis/free")).select_one("#find-form")
    assert form["hx-target"] == "#free-results" and form["hx-select"] == "#free-results"
    assert form["hx-trigger"].startswith("input") and form["method"] == "get"
    headers = {"HX-Request": "true"}
    region = page(find(client, count="4")).select_one("#free-results")
    assert "10 numbers" in text(region, "[data-announce]")
    swapped = client.get("/ddis/free?dialcode=44&prefix=2071&count=", headers=headers)
    assert swapped.status_code == 400
    region = page(swapped).select_one("#free-results")
    assert region.select_one("#found") is None and region.select_one("#fix-fields") is not None


def test_find_counts_a_large_stock_only_so_far(stocked, monkeypatch):
    """Counting stops at free.AT_MOST (past it the page says "more than"), so the page costs
    the same whatever the stock's size."""
    monkeypatch.setattr(free, "AT_MOST", 4)
    found = page(find(stocked.browser("root"), count="2"))
    assert text(found, "#found-head") == "Available: more than 4"
    assert text(found, "#found-summary").startswith("More than 4 numbers starting +44 2071")
    assert len(found.select("#free-numbers li")) == 2
