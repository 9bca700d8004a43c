"""The report page's controls (docs/pages.md, "The report's controls"): one company chooser,
folded once a report is shown; an Add or a Remove answered in place for htmx (the report region,
the address pushed, one line to announce, the focus on the chosen companies) and by a redirect
to the report's own address without JavaScript; the contract's query parameters unchanged.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup

from .factories import ACME, GLOBEX, INITECH

OCT = {"month": "10", "year": "2026"}
HTMX = {"HX-Request": "true", "HX-Target": "report"}
PAGES = ("/reports/ddis", "/reports/users")


@pytest.fixture
def world_accounts() -> dict[str, str]:
    return {"root": "root", "summary": "summary", "reporter2": "reporter2"}


def soup(response, status: int = 200) -> BeautifulSoup:
    assert response.status_code == status, response.get_data(as_text=True)[:800]
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def chosen(page: BeautifulSoup) -> list[str]:
    return [i["value"] for i in page.select("#company-chosen input[name=company]")]


def controls_open(page: BeautifulSoup) -> bool:
    return page.select_one("details.report-controls").has_attr("open")


@pytest.mark.parametrize("path", PAGES)
def test_add_in_place_answers_the_region_with_focus_and_a_line(world, path):
    client = world.browser("root")
    query = {"company": ACME, "add_company": "GLOBEX", "add": "company", **OCT}
    response = client.get(path, query_string=query, headers=HTMX)
    page = soup(response)
    # The region alone: no page around it, no h1.
    assert page.select("html, body, h1") == []
    assert (
        response.headers["HX-Push-Url"] == f"{path}?company=acme&company=globex&month=10&year=2026"
    )
    assert page.select_one("[data-announce]").get_text() == "Added globex: 2 companies chosen."
    focus = page.select("[data-focus]")
    assert [f["id"] for f in focus] == ["company-chosen"]
    assert focus[0]["tabindex"] == "-1"
    assert chosen(page) == [ACME, GLOBEX]
    assert controls_open(page)
    assert page.select_one("tr[data-totals] th").get_text() == "All 2 companies"
    # The links in the region follow the new choice.
    csv = parse_qs(urlsplit(page.select_one("a[href*='.csv']")["href"]).query)
    assert csv["company"] == [ACME, GLOBEX]
    # Its buttons swap the region again, with the form's values.
    remove = page.select_one("button[name=remove][value='company:acme']")
    assert remove["hx-get"] == path and remove["hx-target"] == "#report"
    assert remove["hx-include"] == "closest form"
    assert not remove.has_attr("data-chooser")  # the focus is the server's to say


@pytest.mark.parametrize("path", PAGES)
def test_remove_in_place(world, path):
    client = world.browser("root")
    query = {"company": [ACME, GLOBEX, INITECH], "remove": "company:globex", **OCT}
    response = client.get(path, query_string=query, headers=HTMX)
    page = soup(response)
    assert (
        response.headers["HX-Push-Url"] == f"{path}?company=acme&company=initech&month=10&year=2026"
    )
    assert page.select_one("[data-announce]").get_text() == "Removed globex: 2 companies chosen."
    assert chosen(page) == [ACME, INITECH]
    # Down to one: its calendar; to none: every company.
    query = {"company": [ACME, INITECH], "remove": "company:initech", **OCT}
    page = soup(client.get(path, query_string=query, headers=HTMX))
    assert page.select_one("[data-announce]").get_text() == "Removed initech: 1 company chosen."
    assert page.select_one("table.calendar[data-company=acme]") is not None
    query = {"company": ACME, "remove": "company:acme", **OCT}
    page = soup(client.get(path, query_string=query, headers=HTMX))
    line = page.select_one("[data-announce]").get_text()
    assert line == "Removed acme: no company chosen: every company."
    assert page.select_one("tr[data-totals]") is not None


def test_add_in_place_of_an_unknown_company_is_the_region_with_the_message(world):
    client = world.browser("reporter2")
    query = {"company": ACME, "add_company": GLOBEX, "add": "company", **OCT}
    response = client.get("/reports/ddis", query_string=query, headers=HTMX)
    page = soup(response, 400)
    assert "HX-Push-Url" not in response.headers
    assert page.select_one("#add_company")["aria-invalid"] == "true"
    assert page.select_one("#add_company-error").get_text() == "unknown company"
    assert chosen(page) == [ACME]
    assert controls_open(page)
    assert page.select("[data-announce], table.matrix, table.calendar") == []


def test_an_add_already_chosen_and_an_empty_add_say_so(world):
    client = world.browser("root")
    query = {"company": [ACME, GLOBEX], "add_company": "Acme", "add": "company", **OCT}
    page = soup(client.get("/reports/ddis", query_string=query, headers=HTMX))
    assert (
        page.select_one("[data-announce]").get_text()
        == "acme was chosen already: 2 companies chosen."
    )
    query = {"company": [ACME, GLOBEX], "add_company": "", "add": "company", **OCT}
    page = soup(client.get("/reports/ddis", query_string=query, headers=HTMX))
    assert page.select_one("[data-announce]").get_text() == "No company added: 2 companies chosen."


@pytest.mark.parametrize("path", PAGES)
def test_without_javascript_add_and_remove_redirect_and_keep_the_controls_open(world, path):
    client = world.browser("summary")
    query = {"company": ACME, "add_company": "initech", "add": "company", **OCT}
    response = client.get(path, query_string=query)
    assert response.status_code == 302
    url = response.headers["Location"]
    assert url == f"{path}?company=acme&company=initech&month=10&year=2026"
    page = soup(client.get(url))
    assert "Added initech: 2 companies chosen." in page.select_one("#flashes").get_text()
    assert controls_open(page)
    assert page.select_one("#add_company").has_attr("autofocus")
    assert page.select("[data-announce], [data-focus]") == []
    # Once: the same address again is the report with its controls folded.
    page = soup(client.get(url))
    assert not controls_open(page)
    assert not page.select_one("#add_company").has_attr("autofocus")
    response = client.get(url + "&remove=company:acme")
    assert response.headers["Location"] == f"{path}?company=initech&month=10&year=2026"
    page = soup(client.get(response.headers["Location"]))
    assert "Removed acme: 1 company chosen." in page.select_one("#flashes").get_text()
    # Show (no Add or Remove pressed): the report, folded, nothing said.
    response = client.get(path, query_string={"company": ACME, "add_company": "", **OCT})
    page = soup(client.get(response.headers["Location"]))
    assert page.select("#flashes .flash") == []
    assert not controls_open(page)


def test_another_htmx_target_is_not_answered_in_place(world):
    """Only the report region's own swap is answered with the region; any other htmx request
    of the form (none is made by the page) gets the redirect like a plain one."""
    client = world.browser("root")
    query = {"company": ACME, "add_company": "globex", "add": "company", **OCT}
    headers = {"HX-Request": "true", "HX-Target": "main"}
    response = client.get("/reports/ddis", query_string=query, headers=headers)
    assert response.status_code == 302


@pytest.mark.parametrize("path", PAGES)
def test_controls_fold_once_a_report_is_shown(world, path):
    client = world.browser("root")
    page = soup(client.get(path, query_string={"company": [ACME, GLOBEX, INITECH], **OCT}))
    controls = page.select_one("details.report-controls")
    assert not controls_open(page)
    summary = controls.select_one("summary")
    assert summary.select_one("[data-summary]").get_text() == "October 2026 · 3 companies"
    assert "Change…" in summary.get_text()
    # One company chooser: one picker, and the ranking's filter apart, named for what it does.
    assert [i["id"] for i in page.select("input[data-picker-input]")] == ["add_company"]
    assert page.select_one("label[for=add_company]").get_text() == "Add a company"
    assert "Find a company" not in page.get_text()
    filter_form = page.select_one("form.report-filter")
    assert filter_form["aria-label"] == "Filter the ranking"
    assert page.select_one("label[for=report-filter]").get_text() == "Filter the ranking"
    assert filter_form.find_parent(class_="ranking-head") is not None
    assert controls.select_one("form.report-filter") is None
    # The summary names what is shown: every company, one company.
    page = soup(client.get(path, query_string=OCT))
    assert page.select_one("[data-summary]").get_text() == "October 2026 · every company"
    page = soup(client.get(path, query_string={"company": ACME, **OCT}))
    assert page.select_one("[data-summary]").get_text() == "October 2026 · acme"
    assert not controls_open(page)
    # Nothing to show, or a problem to correct: open.
    page = soup(client.get(path, query_string={"month": "13"}), 400)
    assert controls_open(page)


@pytest.mark.parametrize("path", PAGES)
def test_the_contract_parameters_still_choose(world, path):
    client = world.browser("root")
    query = {"company": [GLOBEX, ACME, INITECH], "filter": "TELE", "page": "1", **OCT}
    page = soup(client.get(path, query_string=query))
    rows = [tr["data-company"] for tr in page.select("tbody tr[data-company]")]
    assert rows == [ACME]  # its name, Acme Telecom, holds "tele" (any case)
    assert chosen(page) == [GLOBEX, ACME, INITECH]
    assert page.select_one("select[name=month] option[selected]")["value"] == "10"
    assert page.select_one("input[name=year]")["value"] == "2026"
    hidden = page.select("form.report-filter input[type=hidden][name=company]")
    assert [i["value"] for i in hidden] == [GLOBEX, ACME, INITECH]
    assert page.select_one("input[name=filter]")["value"] == "TELE"
    # A page past the end: the last.
    page = soup(client.get(path, query_string={**OCT, "page": "9"}))
    assert page.select("tbody tr[data-company]")
