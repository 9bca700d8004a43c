"""One way of writing a number on every page (docs/pages.md#one-way-of-writing-a-number): a
DDI reads "+44 2071234567" wherever a page shows it, never as the stored key "44:2071234567"
or "DDI 44 2071234567"; the CSV downloads keep the split key."""

from __future__ import annotations

import csv
import io
import re

import pytest
from bs4 import BeautifulSoup

from webapp import wording

from .pages import DIALCODE, NUMBER, PAGES, add_page_records, page_paths
from .snapshots import kept

SHOWN = f"+{DIALCODE} {NUMBER}"
# The old forms: a stored key (not a time of day: its second part is at least 3 digits) and
# "DDI 44 2071234567".
OLD_FORMS = re.compile(r"(?<![\d:])\d{1,7}:\d{3,}(?![\d:])|\bDDI \d+ \d+")
# The reports pages are another part's (their day drill-down names records as it will).
CHECKED = [name for name, path in PAGES.items() if not path.startswith("/reports")]


@pytest.fixture
@kept
def world(world):
    add_page_records(world)
    return world


def visible_text(html: str) -> str:
    """What a reader reads: the text, not the attributes (links and ticks carry the key), nor
    the examples of what a field takes (`<code>`: the audit target field takes the key too)."""
    page = BeautifulSoup(html, "html.parser")
    for hidden in page(["script", "style", "code"]):
        hidden.decompose()
    return page.get_text(" ")


@pytest.mark.parametrize("name", CHECKED)
def test_no_page_writes_a_number_another_way(world, name):
    path = page_paths()[name]
    html = world.browser("root").get(path).get_data(as_text=True)
    text = visible_text(html)
    assert not OLD_FORMS.findall(text), (path, OLD_FORMS.findall(text))


@pytest.mark.parametrize(
    "name", ["DDI list", "DDI page", "edit DDI", "link DDI", "delete DDI", "import preview"]
)
def test_the_pages_that_show_the_ddi_write_it_one_way(world, name):
    html = world.browser("root").get(page_paths()[name]).get_data(as_text=True)
    assert SHOWN in visible_text(html)


def test_the_audit_log_and_the_messages_write_it_one_way(world):
    browser = world.browser("root")
    audit = visible_text(browser.get("/audit").get_data(as_text=True))
    assert SHOWN in audit and not OLD_FORMS.findall(audit)
    saved = browser.post(
        f"/ddis/{DIALCODE}/{NUMBER}/edit",
        data={"csrf_token": browser.csrf, "virt_exten": "101", "company": "acme"},
    )
    assert saved.status_code == 302
    listed = visible_text(browser.get("/ddis").get_data(as_text=True))
    assert f"Saved DDI {SHOWN}." in listed and "Just saved" in listed
    confirm = browser.post(
        "/ddis/bulk",
        data={
            "csrf_token": browser.csrf,
            "scope": "selected",
            "action": "move",
            "to_company": "globex",
            "key": f"{DIALCODE}:{NUMBER}",
        },
    )
    shown = visible_text(confirm.get_data(as_text=True))
    assert confirm.status_code == 200 and SHOWN in shown and not OLD_FORMS.findall(shown)


def test_the_csv_downloads_keep_the_split_key(world):
    browser = world.browser("root")
    ddis = list(csv.reader(io.StringIO(browser.get("/ddis.csv").get_data(as_text=True))))
    assert ddis[0] == ["dialcode", "number", "virt_exten", "company"]
    assert [DIALCODE, NUMBER] in [row[:2] for row in ddis[1:]]
    audit = browser.get("/audit.csv").get_data(as_text=True)
    assert f"ddi {DIALCODE}:{NUMBER}" in audit and SHOWN not in audit


def test_the_wording():
    assert wording.ddi_number("44", "2071234567") == "+44 2071234567"
    assert wording.ddi_key_number("4420:71234567") == "+4420 71234567"
    assert wording.ddi_key_number("acme/ana.kim") == "acme/ana.kim"
    assert wording.audit_target("ddi 44:2071234567") == "+44 2071234567"
    assert wording.audit_target("user acme/ana.kim") == "user acme/ana.kim"
    assert wording.audit_target("ddi x:1") == "ddi x:1"
