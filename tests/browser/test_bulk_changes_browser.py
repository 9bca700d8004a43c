"""Bulk changes in a real browser. The DDI import page: upload, preview, confirm; a change made
by someone else between the preview and the confirmation; a file over the size limit refused
before it is sent (static/upload.js) and, without JavaScript, by the server. The lists' bulk
form: ticked rows moved, then all rows matching a filter deleted."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from webapp.access import Principal
from webapp.services.imports import ddi_import
from webapp.services.records import crud, kinds

from ..test_ddi_import import stored

pytestmark = pytest.mark.slow  # a real browser

ADMIN = {"system_admin": True}
HEADER = "dialcode,number,virt_exten,company\n"


@pytest.fixture
def ready(factory):
    factory.company("acme")
    factory.company("globex")
    factory.account("boss", **ADMIN)
    factory.ddi("44", "2070000001", "acme", "101")
    factory.ddi("44", "2070000002", "acme", "102")


def choose(page: Page, live_server: str, content: str, name: str = "ddis.csv") -> None:
    page.goto(f"{live_server}/ddis/import")
    page.get_by_label("CSV file").set_input_files(
        files=[{"name": name, "mimeType": "text/csv", "buffer": content.encode()}]
    )


def test_preview_then_confirm(ready, page: Page, live_server, sign_in):
    sign_in("boss")
    page.get_by_role("link", name="Import").click()
    expect(page.get_by_role("heading", name="Import DDIs")).to_be_visible()
    choose(page, live_server, HEADER + "44,2070000001,101,globex\n33,1,7,acme\n")
    page.get_by_role("button", name="Preview the import").click()

    expect(page.get_by_role("heading", name="Import preview: ddis.csv")).to_be_visible()
    expect(page.locator("#count-created")).to_have_text("1")
    expect(page.locator("#count-moved")).to_have_text("1")
    effect = page.locator("#billing-effect")
    expect(effect.get_by_role("row", name="acme 2 2 0")).to_be_visible()  # -1 +1
    expect(effect.get_by_role("row", name="globex 0 1 +1")).to_be_visible()
    expect(page.locator("#samples-moved")).to_contain_text("101 · acme")
    assert "33:1" not in stored()

    page.get_by_role("button", name="Apply 2 changes").click()
    expect(page.get_by_role("status")).to_contain_text("created 1, updated 1 (1 moved)")
    assert stored()["33:1"] == ("7", "acme")
    assert stored()["44:2070000001"] == ("101", "globex")


def test_a_change_by_someone_else_between_preview_and_confirm(
    ready, page: Page, live_server, sign_in
):
    sign_in("boss")
    choose(page, live_server, HEADER + "44,2070000002,555,acme\n")
    page.get_by_role("button", name="Preview the import").click()
    expect(page.locator("#samples-updated")).to_contain_text("102 · acme")

    # Someone else changes the same DDI while the preview is on screen.
    crud.update(
        Principal.cli("other"),
        kinds.DDI,
        {"company": "acme", "number": "2070000002"},
        {"virt_exten": "777"},
    )

    page.get_by_role("button", name="Apply 1 change").click()
    expect(page.get_by_role("alert")).to_contain_text("changed since this preview")
    expect(page.locator("#samples-updated")).to_contain_text("777 · acme")
    assert stored()["44:2070000002"] == ("777", "acme")  # nothing was applied

    page.get_by_role("button", name="Apply 1 change").click()
    expect(page.get_by_role("status")).to_contain_text("updated 1")
    assert stored()["44:2070000002"] == ("555", "acme")


def test_a_bad_row_is_shown_on_the_form(ready, page: Page, live_server, sign_in):
    sign_in("boss")
    choose(page, live_server, HEADER + "44,2070000001,101,acme\n44,2070000001,102,acme\n")
    page.get_by_role("button", name="Preview the import").click()
    expect(page.locator("#file-error")).to_have_text(
        "line 3: DDI +44 2070000001 repeats line 2; nothing was imported."
    )
    expect(page.get_by_label("CSV file")).to_be_focused()


def test_every_problem_of_a_bad_file_is_listed_under_the_message(
    ready, page: Page, live_server, sign_in
):
    sign_in("boss")
    choose(page, live_server, HEADER + "44,20x,101,nope\n44,2070000009,1,acme\n1,2,abc,acme\n")
    page.get_by_role("button", name="Preview the import").click()
    expect(page.locator("#file-error")).to_have_text(
        "The file has 3 problems; nothing was imported."
    )
    expect(page.locator("#file-problems li")).to_have_text(
        [
            "line 2: number '20x' must be 1 to 15 digits",
            "line 2: company 'nope' does not exist",
            "line 4: virt_exten 'abc' must be 1 to 10 digits",
        ]
    )
    expect(page.get_by_label("CSV file")).to_be_focused()


def test_a_file_over_the_limit_is_refused_before_and_without_javascript(
    ready, page: Page, live_server, sign_in, monkeypatch, browser
):
    monkeypatch.setattr(ddi_import, "MAX_BYTES", 2000)
    sign_in("boss")
    big = HEADER + "".join(f"9,{i},1,acme\n" for i in range(1000))
    choose(page, live_server, big)
    page.get_by_role("button", name="Preview the import").click()
    expect(page.get_by_role("alert")).to_contain_text("larger than")
    expect(page).to_have_url(f"{live_server}/ddis/import")

    # Without JavaScript the server refuses it with the same words, and the page says so.
    context = browser.new_context(java_script_enabled=False)
    plain = context.new_page()
    plain.goto(f"{live_server}/login")
    plain.get_by_label("Username").fill("boss")
    plain.get_by_label("Password").fill("correct horse battery")
    plain.get_by_role("button", name="Sign in").click()
    choose(plain, live_server, big)
    plain.get_by_role("button", name="Preview the import").click()
    expect(plain.locator("#file-error")).to_contain_text("larger than")
    context.close()
    assert "9:1" not in stored()


def test_bulk_move_of_ticked_rows_then_all_matching(ready, page: Page, live_server, sign_in):
    """The list's bulk form: tick two rows, move them; then all matching a filter, delete."""
    sign_in("boss")
    page.goto(f"{live_server}/ddis")
    page.get_by_label("Tick +44 2070000001").check()
    page.get_by_label("Tick +44 2070000002").check()
    page.get_by_label("Move them to").fill("globex")
    page.get_by_role("button", name="Continue…").click()
    expect(page.get_by_role("heading", name="Move 2 DDIs to globex?")).to_be_visible()
    assert stored()["44:2070000001"] == ("101", "acme")  # nothing yet
    page.get_by_role("button", name="Move 2 DDIs").click()
    expect(page.get_by_role("status")).to_contain_text("Moved 2 DDIs to globex.")
    assert stored()["44:2070000002"] == ("102", "globex")

    page.goto(f"{live_server}/ddis?company=globex")
    page.get_by_label("all 2 matching the filters").check()
    page.get_by_label("delete them").check()
    page.get_by_role("button", name="Continue…").click()
    expect(page.get_by_role("heading", name="Delete 2 DDIs?")).to_be_visible()
    page.get_by_role("button", name="Delete 2 DDIs").click()
    expect(page.get_by_role("status")).to_contain_text("Deleted 2 DDIs.")
    assert stored() == {}


def test_a_bulk_form_refused_keeps_the_lists_address_and_marks_only_the_field_at_fault(
    ready, page: Page, live_server, sign_in
):
    """Continue with nothing ticked (a valid company chosen): the list again with the message on
    a line of its own above the bar's controls, no field marked red, and the address bar shows
    the list's address as shown, not /ddis/bulk: a reload is a GET of the list (no re-POST)."""
    sign_in("boss")
    listed = f"{live_server}/ddis?company=acme"
    page.goto(listed)
    page.get_by_label("move them", exact=True).check()
    page.get_by_label("Move them to").fill("globex")
    page.get_by_role("button", name="Continue…").click()
    message = page.locator("#bulk-error")
    expect(message).to_have_text("Tick the DDIs to change first.")
    expect(message).to_be_focused()
    shown = page.locator("form#bulk").get_attribute("data-list-url")
    assert shown is not None and shown.startswith("/ddis?")
    expect(page).to_have_url(f"{live_server}{shown}")
    expect(page.locator("form#bulk .has-error")).to_have_count(0)
    expect(page.get_by_label("Move them to")).to_have_attribute("aria-invalid", "false")
    red = page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--danger')")
    border = page.get_by_label("Move them to").evaluate("e => getComputedStyle(e).borderTopColor")
    assert red.strip() and border != red.strip()
    bar = page.locator("form#bulk").bounding_box()
    said = message.bounding_box()
    go = page.get_by_role("button", name="Continue…").bounding_box()
    scope = page.locator("form#bulk fieldset.bulk-scope").bounding_box()
    assert bar and said and go and scope
    assert said["width"] > 0.9 * (bar["width"] - 28)  # a line of its own
    assert said["y"] + said["height"] <= scope["y"]  # above the controls
    assert go["y"] < scope["y"] + scope["height"]  # Continue on the controls' line, not below

    methods: list[str] = []
    page.on("request", lambda r: methods.append(r.method) if r.url.endswith(shown) else None)
    page.reload()
    assert methods == ["GET"]
    expect(page.locator("#bulk-error")).to_have_count(0)
    expect(page).to_have_url(f"{live_server}{shown}")
