"""The DDI import (docs/import.md): the engine, its three doors (CLI, API, page), the round
trip with the CSV download, and every bad file refused with nothing changed.

The exactness check is a property test: random stored DDIs, a random file of wanted states,
and the outcome compared with a plain dictionary computation of what the file asks for.
"""

from __future__ import annotations

import html
import random

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import select

from webapp.access import Principal
from webapp.errors import FileRejected, Forbidden, Invalid
from webapp.extensions import db
from webapp.models import AuditEntry, Ddi, ImportPreview
from webapp.services.imports import ddi_import
from webapp.services.records import crud, kinds

from .factories import ACME, GLOBEX, INITECH, snapshot
from .invariants import assert_history_consistent
from .snapshots import kept

HEADER = "dialcode,number,virt_exten,company"
ROOT_P = Principal.cli("importer")


def csv_bytes(*rows: str, header: str = HEADER, end: str = "\n") -> bytes:
    return "".join(line + end for line in (header, *rows)).encode()


def stored() -> dict[str, tuple[str, str]]:
    db.session.rollback()
    return {
        f"{d}:{n}": (e, c)
        for d, n, e, c in db.session.execute(
            select(Ddi.dialcode, Ddi.number, Ddi.virt_exten, Ddi.company)
        )
    }


def run_import(data: bytes, dry_run: bool = False) -> ddi_import.Plan:
    source = ddi_import.bytes_source(data)
    if dry_run:
        return ddi_import.plan(ROOT_P, source)
    return ddi_import.apply(ROOT_P, source)


@pytest.fixture
@kept
def world(world, factory):
    factory.ddi("44", "2070000001", ACME, "101")
    factory.ddi("44", "2070000002", ACME, "102")
    factory.ddi("44", "2070000003", GLOBEX, "103")
    return world


# --- the engine ------------------------------------------------------------------------------


def test_rows_are_created_updated_moved_or_left_alone(world):
    data = csv_bytes(
        "44,2070000001,101,acme",  # unchanged
        "44,2070000002,999,acme",  # extension changed
        "44,2070000003,103,initech",  # moved
        "33,100200300,7,globex",  # created
    )
    dry = run_import(data, dry_run=True)
    assert (dry.created, dry.updated, dry.moved, dry.unchanged) == (1, 2, 1, 1)
    assert dry.summary() == "created 1, updated 2 (1 moved), unchanged 1"
    assert stored()["44:2070000002"] == ("102", ACME)  # the dry run wrote nothing

    done = run_import(data)
    assert done.as_json() == {
        "created": 1,
        "updated": 2,
        "moved": 1,
        "unchanged": 1,
        "dry_run": False,
    }
    assert stored() == {
        "44:2070000001": ("101", ACME),
        "44:2070000002": ("999", ACME),
        "44:2070000003": ("103", INITECH),
        "33:100200300": ("7", GLOBEX),
    }
    assert_history_consistent()  # the move ended globex's interval and opened initech's
    entries = db.session.scalars(
        select(AuditEntry).where(AuditEntry.detail == f"import {done.import_id}")
    ).all()
    assert sorted((e.action, e.target, e.company, e.other_company) for e in entries) == [
        ("ddi.create", "ddi 33:100200300", GLOBEX, None),
        ("ddi.update", "ddi 44:2070000002", ACME, None),
        ("ddi.update", "ddi 44:2070000003", INITECH, GLOBEX),
    ]
    moved = next(e for e in entries if e.other_company)
    assert moved.before["company"] == GLOBEX and moved.after["company"] == INITECH

    again = run_import(data)  # the same file again: everything is as it says
    assert (again.created, again.updated, again.unchanged) == (0, 0, 4)


def test_the_preview_shows_samples_and_the_billing_effect(world):
    data = csv_bytes(
        "44,2070000001,101,globex",
        "44,2070000002,102,globex",
        "33,1,5,initech",
        "44,2070000003,103,acme",  # globex -> acme: acme's count is -2 +1
        "33,2,5,globex",
    )
    plan = run_import(data, dry_run=True)
    assert [s.key for s in plan.samples["moved"]] == [
        "44:2070000001",
        "44:2070000002",
        "44:2070000003",
    ]
    assert plan.samples["moved"][0].before == {
        "dialcode": "44",
        "number": "2070000001",
        "virt_exten": "101",
        "company": ACME,
    }
    assert plan.samples["created"][0].before is None
    # Largest change first: globex +2 -1 +1, acme -2 +1, initech +1.
    assert ddi_import.billing_effect(plan) == [(GLOBEX, 1, 3), (ACME, 2, 1), (INITECH, 0, 1)]
    swap = run_import(csv_bytes("44,2070000001,101,globex", "44,2070000003,103,acme"), True)
    # A swap changes no count, and still shows both companies.
    assert ddi_import.billing_effect(swap) == [(ACME, 2, 2), (GLOBEX, 1, 1)]


def test_samples_stop_at_a_hundred_of_each_kind(world):
    rows = [f"55,{i},1,acme" for i in range(1, 151)]
    plan = run_import(csv_bytes(*rows), dry_run=True)
    assert plan.created == 150 and len(plan.samples["created"]) == ddi_import.SAMPLES


def test_bom_crlf_quotes_spaces_and_blank_lines_are_read_as_a_spreadsheet_writes_them(world):
    data = b"\xef\xbb\xbf" + csv_bytes(
        '"44","2070000001"," 555 ",acme', "", "44,2070000002,102,ACME".lower(), end="\r\n"
    )
    plan = run_import(data)
    assert (plan.updated, plan.unchanged) == (1, 1)
    assert stored()["44:2070000001"] == ("555", ACME)


def test_a_cell_the_download_neutralised_is_read_back_as_it_was(world, factory):
    factory.company("-dash")
    factory.ddi("44", "2070000009", "-dash", "9")
    # The CSV download writes a company starting with '-' as "'-dash" (views/downloads.py).
    plan = run_import(csv_bytes("44,2070000009,9,'-dash"))
    assert plan.unchanged == 1


def test_the_round_trip_through_the_download_changes_exactly_the_edited_rows(world):
    client = world.browser("root")
    exported = client.get("/ddis.csv").get_data()
    plan = run_import(exported, dry_run=True)
    assert (plan.created, plan.updated, plan.unchanged) == (0, 0, 3)

    lines = exported.decode().splitlines()
    edited = [lines[0], *(line.replace(",102,", ",202,") for line in lines[1:])]
    before = stored()
    done = run_import("\n".join(edited).encode())
    assert (done.updated, done.unchanged) == (1, 2)
    after = stored()
    assert {k for k in after if after[k] != before[k]} == {"44:2070000002"}

    # A filtered download imports back unchanged too.
    filtered = client.get("/ddis.csv?company=globex").get_data()
    assert run_import(filtered, dry_run=True).unchanged == 1


# --- bad files: a clear error naming the line, and nothing changed --------------------------

BAD_FILES = {
    "empty file": (b"", "line 1", "empty"),
    "no header": (b"44,2070000001,101,acme\n", "line 1", "header"),
    "wrong header": (b"number,dialcode,virt_exten,company\n44,1,1,acme\n", "line 1", "header"),
    "too few columns": (csv_bytes("44,2070000001,101"), "line 2", "expected 4 columns"),
    "too many columns": (csv_bytes("44,2070000001,101,acme,x"), "line 2", "found 5"),
    "letters in number": (csv_bytes("44,20700x0001,101,acme"), "line 2", "number"),
    "too many digits": (csv_bytes("4444444,12345678901,1,acme"), "line 2", "17 digits"),
    "formula in number": (csv_bytes("44,=1+2,101,acme"), "line 2", "number"),
    "formula in company": (csv_bytes('44,2070000001,101,"=HYPERLINK(""x"")"'), "line 2", "company"),
    "unknown company": (csv_bytes("44,2070000001,101,acme", "1,2,3,nope"), "line 3", "'nope'"),
    "a key twice": (
        csv_bytes("44,2070000001,101,acme", "33,1,1,acme", "44,2070000001,5,acme"),
        "line 4",
        "repeats line 2",
    ),
    "not UTF-8": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "line 1", "UTF-8"),
    "NUL byte": (csv_bytes("44,2070000001,1\x0001,acme"), "line 2", "virt_exten"),
    "unterminated quote": (csv_bytes('44,"2070000001,101,acme'), "line", "CSV"),
}


@pytest.mark.parametrize("name", BAD_FILES)
def test_a_bad_file_is_refused_with_its_line_and_changes_nothing(world, name):
    data, line, words = BAD_FILES[name]
    before = snapshot()
    with pytest.raises(Invalid) as refused:
        run_import(data)
    assert refused.value.message.startswith(line), refused.value.message
    assert words in refused.value.message, refused.value.message
    assert "nothing was imported" in refused.value.message
    assert snapshot() == before


def test_a_bad_row_after_a_million_good_ones_would_still_write_nothing(world):
    """The refusal comes after earlier chunks were planned and locked: still nothing written."""
    rows = [f"66,{i},1,acme" for i in range(1, 2001)] + ["66,bad,1,acme"]
    before = snapshot()
    with pytest.raises(Invalid, match="line 2002"):
        run_import(csv_bytes(*rows))
    assert snapshot() == before


# A file with two problems on one line and problems on several lines: every one is reported, in
# line order, each naming its line and field.
MANY_PROBLEMS = csv_bytes(
    "44,2070000001,101,acme",  # line 2: good
    "44,20x0000009,101,nope",  # line 3: the number and the company
    "33,1,1,acme",  # line 4: good
    "44,2070000001,5,globex",  # line 5: repeats line 2
    "1,2,abc,initech",  # line 6: the extension
)
MANY_LISTED = [
    "line 3: number '20x0000009' must be 1 to 15 digits",
    "line 3: company 'nope' does not exist",
    "line 5: DDI 44:2070000001 repeats line 2",
    "line 6: virt_exten 'abc' must be 1 to 10 digits",
]
MANY_FIELDS = {
    "line 3": "number '20x0000009' must be 1 to 15 digits; company 'nope' does not exist",
    "line 5": "DDI 44:2070000001 repeats line 2",
    "line 6": "virt_exten 'abc' must be 1 to 10 digits",
}
MANY_MESSAGE = "The file has 4 problems; nothing was imported."
# 150 rows naming a company that does not exist: lines 2 to 151.
TOO_MANY = csv_bytes(*(f"44,{n},1,nope" for n in range(1, 151)))


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_rejected_file_names_every_problem_in_line_order(world, dry_run):
    before = snapshot()
    with pytest.raises(FileRejected) as refused:
        run_import(MANY_PROBLEMS, dry_run=dry_run)
    assert refused.value.message == MANY_MESSAGE
    assert refused.value.problems == MANY_LISTED
    assert refused.value.fields == MANY_FIELDS and list(refused.value.fields) == list(MANY_FIELDS)
    assert snapshot() == before


def test_a_rejected_file_lists_a_hundred_problems_and_counts_the_rest(world):
    before = snapshot()
    with pytest.raises(FileRejected) as refused:
        run_import(TOO_MANY)
    problems = refused.value.problems
    assert refused.value.total == 150 and len(problems) == 101
    assert problems[:100] == [f"line {n + 1}: company 'nope' does not exist" for n in range(1, 101)]
    assert problems[100] == "and 50 more"
    assert refused.value.fields["more"] == "and 50 more"
    assert refused.value.message == "The file has 150 problems; nothing was imported."
    assert snapshot() == before


def test_problems_across_chunks_are_all_named_with_the_lines_they_repeat(world):
    """Problems in the first chunk and past it (a repeat of a row of the first chunk, an
    unknown company named again): all reported, and nothing of the good chunks written."""
    rows = [f"66,{i},1,acme" for i in range(1, ddi_import.CHUNK + 1)]
    rows[4] = "66,5,1,nope"  # line 6
    rows += ["66,3,2,acme", "66,x,1,nope"]  # lines 2002 and 2003
    before = snapshot()
    with pytest.raises(FileRejected) as refused:
        run_import(csv_bytes(*rows))
    assert refused.value.problems == [
        "line 6: company 'nope' does not exist",
        "line 2002: DDI 66:3 repeats line 4",
        "line 2003: number 'x' must be 1 to 15 digits",
        "line 2003: company 'nope' does not exist",
    ]
    assert snapshot() == before


def test_only_a_system_admin_imports(world):
    cadmin = Principal(username="cadmin", via="api", admin_of=frozenset({ACME}))
    with pytest.raises(Forbidden):
        ddi_import.plan(cadmin, ddi_import.bytes_source(csv_bytes("44,2070000001,1,acme")))


def test_apply_refuses_a_plan_that_changed_since_the_preview(world, factory):
    data = csv_bytes("44,2070000001,555,acme")
    preview = run_import(data, dry_run=True)
    crud.update(ROOT_P, kinds.DDI, {"company": ACME, "number": "2070000001"}, {"virt_exten": "777"})
    before = snapshot()
    with pytest.raises(ddi_import.Stale) as stale:
        ddi_import.apply(ROOT_P, ddi_import.bytes_source(data), expected=preview.fingerprint)
    assert snapshot() == before
    assert stale.value.plan.samples["updated"][0].before["virt_exten"] == "777"
    done = ddi_import.apply(
        ROOT_P, ddi_import.bytes_source(data), expected=stale.value.plan.fingerprint
    )
    assert done.updated == 1 and stored()["44:2070000001"] == ("555", ACME)


def test_random_files_reach_exactly_the_states_they_list(world, factory):
    """Random stored DDIs and random files: afterwards every listed DDI is as its row says,
    every other DDI is untouched, the counts match a plain computation, and the history and
    rollup agree with the records."""
    rng = random.Random(1311)
    companies = [ACME, GLOBEX, INITECH]
    for round_ in range(4):
        current = stored()
        keys = list(current) + [f"7{round_}:{n}" for n in rng.sample(range(10**6), 30)]
        listed = rng.sample(keys, rng.randint(1, len(keys)))
        wanted = {
            k: (str(rng.choice([101, 102, 103, 500 + round_])), rng.choice(companies))
            for k in listed
        }
        rows = [f"{k.replace(':', ',')},{e},{c}" for k, (e, c) in wanted.items()]
        expect_created = sum(k not in current for k in wanted)
        expect_moved = sum(k in current and current[k][1] != c for k, (_, c) in wanted.items())
        expect_updated = sum(k in current and current[k] != v for k, v in wanted.items())
        done = run_import(csv_bytes(*rows))
        assert (done.created, done.updated, done.moved) == (
            expect_created,
            expect_updated,
            expect_moved,
        )
        assert stored() == {**current, **wanted}
        assert_history_consistent()


# --- the API ---------------------------------------------------------------------------------


def post_csv(world, caller, data: bytes, query: str = "", content_type: str = "text/csv"):
    headers = {**(caller.headers if caller else {}), "Content-Type": content_type}
    return world.client.post(f"/rest/ops/import/{query}", data=data, headers=headers)


def test_api_dry_run_then_apply(world):
    data = csv_bytes("44,2070000001,555,globex", "33,1,1,acme")
    dry = post_csv(world, world.root, data, "?dry_run=1")
    assert dry.status_code == 200
    assert dry.get_json() == {
        "result": "success",
        "created": 1,
        "updated": 1,
        "moved": 1,
        "unchanged": 0,
        "dry_run": True,
    }
    assert "33:1" not in stored()
    done = post_csv(world, world.root, data)
    assert done.get_json()["dry_run"] is False and stored()["33:1"] == ("1", ACME)


def test_api_bad_row_is_a_400_naming_the_line(world):
    before = snapshot()
    answer = post_csv(world, world.root, csv_bytes("44,2070000001,1,acme", "1,2,3,nope"))
    assert answer.status_code == 400
    error = answer.get_json()["error"]
    assert error["code"] == "bad_request"
    assert error["fields"] == {"line 3": "company 'nope' does not exist"}
    assert snapshot() == before


def test_api_rejected_file_names_every_problem_in_fields(world):
    before = snapshot()
    answer = post_csv(world, world.root, MANY_PROBLEMS)
    assert answer.status_code == 400
    error = answer.get_json()["error"]
    assert error == {"code": "bad_request", "message": MANY_MESSAGE, "fields": MANY_FIELDS}
    assert list(error["fields"]) == list(MANY_FIELDS)  # in line order
    dry = post_csv(world, world.root, TOO_MANY, "?dry_run=1")
    assert dry.status_code == 400
    fields = dry.get_json()["error"]["fields"]
    assert list(fields) == [f"line {n}" for n in range(2, 102)] + ["more"]
    assert fields["more"] == "and 50 more"
    assert snapshot() == before


@pytest.mark.parametrize(
    ("who", "status", "code"),
    [(None, 401, "unauthorized"), ("cadmin", 403, "forbidden"), ("summary", 403, "forbidden")],
)
def test_api_only_a_system_admin_imports(world, who, status, code):
    caller = world.caller(who) if who else None
    answer = post_csv(world, caller, csv_bytes("33,1,1,acme"))
    assert answer.status_code == status and answer.get_json()["error"]["code"] == code
    assert "33:1" not in stored()


def test_api_refuses_other_media_types_bad_flags_and_oversized_bodies(world, monkeypatch):
    data = csv_bytes("33,1,1,acme")
    wrong_type = post_csv(world, world.root, data, content_type="application/json")
    assert wrong_type.status_code == 415
    assert wrong_type.get_json()["error"]["code"] == "unsupported_media_type"
    flag = post_csv(world, world.root, data, "?dry_run=maybe")
    assert flag.status_code == 400 and flag.get_json()["error"]["fields"] == {
        "dry_run": "must be 1 or 0"
    }
    monkeypatch.setattr(ddi_import, "MAX_BYTES", 20)
    big = post_csv(world, world.root, data)
    assert big.status_code == 413 and big.get_json()["error"]["code"] == "too_large"
    assert "33:1" not in stored()


def test_api_takes_bodies_larger_than_the_json_limit(world):
    rows = [f"8,{1000000 + i},1,acme" for i in range(70_000)]  # 1.2 MB: over 1 MiB
    data = csv_bytes(*rows)
    assert len(data) > 1024 * 1024
    answer = post_csv(world, world.root, data, "?dry_run=1")
    assert answer.status_code == 200 and answer.get_json()["created"] == 70_000


def test_api_with_a_session_cookie_needs_the_csrf_header(world):
    client = world.browser("root")
    data = csv_bytes("33,1,1,acme")
    refused = client.post("/rest/ops/import/", data=data, content_type="text/csv")
    assert refused.status_code == 403
    accepted = client.post(
        "/rest/ops/import/",
        data=data,
        content_type="text/csv",
        headers={"X-CSRFToken": client.csrf},
    )
    assert accepted.status_code == 200 and stored()["33:1"] == ("1", ACME)


# --- the page --------------------------------------------------------------------------------


def upload(client, data: bytes, filename: str = "ddis.csv", token: str | None = None):
    import io

    return client.post(
        "/ddis/import",
        data={"csrf_token": token or client.csrf, "file": (io.BytesIO(data), filename)},
        content_type="multipart/form-data",
    )


def test_page_upload_preview_confirm(world):
    client = world.browser("root")
    assert client.get("/ddis/import").status_code == 200
    shown = upload(client, csv_bytes("44,2070000001,101,globex", "33,1,1,acme"))
    assert shown.status_code == 200
    page = shown.get_data(as_text=True)
    assert "Apply 2 changes" in page and "+44 2070000001" in page and "+33 1" in page
    assert "33:1" not in stored()  # a preview writes no DDI
    preview_id = db.session.scalar(select(ImportPreview.id))
    done = client.post(f"/ddis/import/{preview_id}", data={"csrf_token": client.csrf})
    assert done.status_code == 303 and done.headers["Location"].endswith("/ddis")
    assert stored()["44:2070000001"] == ("101", GLOBEX) and stored()["33:1"] == ("1", ACME)
    assert db.session.scalar(select(ImportPreview.id)) is None  # the file is not kept
    assert "created 1, updated 1 (1 moved)" in client.get("/ddis").get_data(as_text=True)


def test_page_confirm_after_someone_else_changed_a_ddi_previews_again(world):
    client = world.browser("root")
    upload(client, csv_bytes("44,2070000001,555,acme"))
    preview_id = db.session.scalar(select(ImportPreview.id))
    crud.update(ROOT_P, kinds.DDI, {"company": ACME, "number": "2070000001"}, {"virt_exten": "777"})
    again = client.post(f"/ddis/import/{preview_id}", data={"csrf_token": client.csrf})
    assert again.status_code == 409
    page = again.get_data(as_text=True)
    assert "changed since this preview" in page and "777" in page
    assert stored()["44:2070000001"] == ("777", ACME)
    done = client.post(f"/ddis/import/{preview_id}", data={"csrf_token": client.csrf})
    assert done.status_code == 303 and stored()["44:2070000001"] == ("555", ACME)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (csv_bytes("44,2070000001,101,nope"), "line 2: company 'nope' does not exist"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "not UTF-8 text"),
        (b"", "empty"),
    ],
)
def test_page_bad_file_is_shown_on_the_form(world, data, words):
    client = world.browser("root")
    before = snapshot()
    answer = upload(client, data)
    assert answer.status_code == 400
    assert words in html.unescape(answer.get_data(as_text=True))
    assert snapshot() == before and db.session.scalar(select(ImportPreview.id)) is None


def test_page_rejected_file_lists_every_problem(world):
    client = world.browser("root")
    before = snapshot()
    answer = upload(client, MANY_PROBLEMS)
    assert answer.status_code == 400
    page = BeautifulSoup(answer.get_data(as_text=True), "html.parser")
    assert page.select_one("#file-error").get_text(strip=True) == MANY_MESSAGE
    listed = [li.get_text(strip=True) for li in page.select("#file-problems li")]
    # The page writes the repeated DDI as pages write a number; the service's words keep the key.
    assert listed == [p.replace("DDI 44:2070000001", "DDI +44 2070000001") for p in MANY_LISTED]
    capped = BeautifulSoup(upload(client, TOO_MANY).get_data(as_text=True), "html.parser")
    listed = [li.get_text(strip=True) for li in capped.select("#file-problems li")]
    assert len(listed) == 101 and listed[0] == "line 2: company 'nope' does not exist"
    assert listed[-1] == "and 50 more"
    assert snapshot() == before and db.session.scalar(select(ImportPreview.id)) is None


def test_page_too_large_upload_is_refused_with_a_message(world, monkeypatch):
    monkeypatch.setattr(ddi_import, "MAX_BYTES", 1000)
    client = world.browser("root")
    answer = upload(client, csv_bytes(*[f"9,{i},1,acme" for i in range(500)]))
    assert answer.status_code == 413
    assert "larger than" in answer.get_data(as_text=True)
    assert db.session.scalar(select(ImportPreview.id)) is None


def test_page_upload_without_csrf_or_file_is_refused(world):
    client = world.browser("root")
    assert upload(client, csv_bytes("33,1,1,acme"), token="forged").status_code == 400
    missing = client.post("/ddis/import", data={"csrf_token": client.csrf})
    assert missing.status_code == 400 and "Choose a CSV file" in missing.get_data(as_text=True)
    assert "33:1" not in stored()


def test_page_is_for_system_admins_only_and_previews_are_their_own(world, factory):
    assert world.browser("cadmin").get("/ddis/import").status_code == 403
    assert 'href="/ddis/import"' not in world.browser("cadmin").get("/ddis").get_data(as_text=True)
    assert 'href="/ddis/import"' in world.browser("root").get("/ddis").get_data(as_text=True)
    upload(world.browser("root"), csv_bytes("33,1,1,acme"))
    preview_id = db.session.scalar(select(ImportPreview.id))
    world.add("root2", "root")
    other = world.browser("root2")
    assert other.get(f"/ddis/import/{preview_id}").status_code == 404
    answer = other.post(f"/ddis/import/{preview_id}", data={"csrf_token": other.csrf})
    assert answer.status_code == 404 and "33:1" not in stored()


# --- the command line ------------------------------------------------------------------------


def test_cli_dry_run_apply_and_a_bad_file(world, flask, tmp_path):
    good = tmp_path / "good.csv"
    good.write_bytes(csv_bytes("44,2070000001,555,acme", "33,1,1,globex"))
    dry = flask("ddis", "import", str(good), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.strip() == "dry run: created 1, updated 1 (0 moved), unchanged 0"
    assert "33:1" not in stored()
    done = flask("ddis", "import", str(good))
    assert done.stdout.strip() == "created 1, updated 1 (0 moved), unchanged 0"
    assert stored()["33:1"] == ("1", GLOBEX)

    bad = tmp_path / "bad.csv"
    bad.write_bytes(csv_bytes("44,2070000001,1,acme", "44,2070000001,2,acme"))
    before = snapshot()
    refused = flask("ddis", "import", str(bad))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert lines == ["Error: line 3: DDI 44:2070000001 repeats line 2; nothing was imported."]
    assert snapshot() == before
    missing = flask("ddis", "import", str(tmp_path / "nope.csv"))
    assert missing.returncode == 1 and "no such file" in missing.stderr


def test_cli_rejected_file_prints_every_problem(world, flask, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_bytes(MANY_PROBLEMS)
    before = snapshot()
    refused = flask("ddis", "import", str(bad))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.splitlines() == [f"Error: {MANY_MESSAGE}", *MANY_LISTED]
    assert refused.stdout == ""
    bad.write_bytes(TOO_MANY)
    capped = flask("ddis", "import", str(bad), "--dry-run")
    assert capped.returncode == 1
    lines = capped.stderr.splitlines()
    assert lines[0] == "Error: The file has 150 problems; nothing was imported."
    assert len(lines) == 102 and lines[-1] == "and 50 more"
    assert snapshot() == before


@pytest.mark.slow
def test_page_refuses_a_real_100_mb_upload_with_a_message(world):
    """The size check as it happens, with a file over the real limit: a message on the form
    (no 500, no reset connection), nothing kept, nothing imported."""
    client = world.browser("root")
    row = b"44,2070000001,101,acme\n"
    data = HEADER.encode() + b"\n" + row * (100 * 1024 * 1024 // len(row))
    assert len(data) > 100 * 1000 * 1000
    answer = upload(client, data, "huge.csv")
    assert answer.status_code == 413
    assert "larger than 64 MiB" in answer.get_data(as_text=True)
    assert db.session.scalar(select(ImportPreview.id)) is None
