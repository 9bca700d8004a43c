"""Month close in the pages (docs/month-close.md): the report page's state, Close after
a confirmation, Reopen with a reason, the changes since the close, the months page, and a
closed month's CSV and company page holding the closed figures.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import func, select

from webapp.access import Principal
from webapp.extensions import db
from webapp.models import MonthClose
from webapp.services import company_overview
from webapp.services.billing import reports

from .factories import ACME, GLOBEX, INITECH, add_history, csrf_from
from .snapshots import kept

OCT = {"month": 10, "year": 2025}
LABEL = "2025-10"


@pytest.fixture
@kept
def world(world):
    add_history(
        ("ddi", ACME, "44:1", datetime(2025, 10, 1), datetime(2025, 10, 11)),
        ("ddi", GLOBEX, "44:2", datetime(2025, 9, 20), None),
        ("user", ACME, "ana", datetime(2025, 9, 1), None),
    )
    return world


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def state_of(browser, kind: str = "ddis", **query) -> BeautifulSoup:
    response = browser.get(f"/reports/{kind}", query_string=query or OCT)
    assert response.status_code == 200
    panel = soup(response).find(id="month-state")
    assert panel is not None
    return panel


def closes() -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(MonthClose))


def close_through_page(browser) -> object:
    page = browser.get(
        f"/reports/months/{LABEL}/close", query_string={"back": "/reports/ddis?month=10&year=2025"}
    )
    assert page.status_code == 200
    token = csrf_from(page.get_data(as_text=True))
    return browser.post(
        f"/reports/months/{LABEL}/close",
        data={"csrf_token": token, "back": "/reports/ddis?month=10&year=2025"},
    )


def backfill() -> None:
    add_history(("ddi", INITECH, "44:9", datetime(2025, 10, 3), datetime(2025, 10, 6)))


@pytest.mark.parametrize("username", ["root", "summary"])
def test_a_past_open_month_offers_close_to_who_may(world, username):
    panel = state_of(world.browser(username))
    assert panel.h2.get_text(strip=True) == "Open"
    link = panel.find("a", string="Close this month…")
    assert link is not None and f"/reports/months/{LABEL}/close" in link["href"]


def test_a_reader_of_granted_companies_sees_the_state_but_no_close(world):
    panel = state_of(world.browser("reporter"))
    assert panel.h2.get_text(strip=True) == "Open"
    assert panel.find("a", string="Close this month…") is None


def test_the_running_month_cannot_be_closed(world):
    panel = state_of(
        world.browser("root"), month=datetime.now(UTC).month, year=datetime.now(UTC).year
    )
    assert "Open, to date" in panel.get_text()
    assert panel.find("a", string="Close this month…") is None


def test_close_after_confirmation_then_reopen_with_a_reason(world):
    root = world.browser("root")
    response = close_through_page(root)
    assert response.status_code == 302
    assert response.headers["Location"] == "/reports/ddis?month=10&year=2025"
    followed = root.get(response.headers["Location"])
    page = soup(followed)
    assert "October 2025 is closed (version 1)." in page.find(id="flashes").get_text()
    panel = page.find(id="month-state")
    assert "Closed" in panel.h2.get_text() and "version 1" in panel.h2.get_text()
    assert "by root" in panel.get_text()
    reopen = panel.find("a", string="Reopen…")
    assert reopen is not None
    # The changes since the close load after the page (htmx), or by following the link.
    assert panel.find(id="month-changes")["hx-get"].startswith(f"/reports/months/{LABEL}/changes")
    # Reopen: an empty reason is refused beside the field, and nothing changes.
    form = root.get(reopen["href"])
    assert form.status_code == 200
    token = csrf_from(form.get_data(as_text=True))
    refused = root.post(
        f"/reports/months/{LABEL}/reopen", data={"csrf_token": token, "reason": "  "}
    )
    assert refused.status_code == 400
    field = soup(refused).find(id="reason-error")
    assert field is not None and field.get_text().startswith("Say why the month is reopened")
    assert "Closed" in state_of(root).h2.get_text()
    done = root.post(
        f"/reports/months/{LABEL}/reopen",
        data={
            "csrf_token": token,
            "reason": "<b>late CDRs</b>",
            "back": "/reports/ddis?month=10&year=2025",
        },
    )
    assert done.status_code == 302
    panel = state_of(root)
    assert panel.h2.get_text(strip=True) == "Open"
    assert "<b>late CDRs</b>" in panel.find("q").get_text()  # shown as text, escaped
    assert panel.find("b") is None
    # Closed again: version 2.
    assert close_through_page(root).status_code == 302
    assert "version 2" in state_of(root).h2.get_text()


def test_a_billing_summary_closes_but_may_not_reopen(world):
    summary = world.browser("summary")
    assert close_through_page(summary).status_code == 302
    panel = state_of(summary)
    assert panel.find("a", string="Reopen…") is None
    assert summary.get(f"/reports/months/{LABEL}/reopen").status_code == 403
    token = summary.csrf
    assert (
        summary.post(
            f"/reports/months/{LABEL}/reopen", data={"csrf_token": token, "reason": "x"}
        ).status_code
        == 403
    )
    assert "Closed" in state_of(summary).h2.get_text()


@pytest.mark.parametrize("username", ["reporter", "cadmin", "nobody"])
def test_who_may_not_close_gets_403_and_nothing_changes(world, username):
    browser = world.browser(username)
    assert browser.get(f"/reports/months/{LABEL}/close").status_code == 403
    assert (
        browser.post(
            f"/reports/months/{LABEL}/close", data={"csrf_token": browser.csrf}
        ).status_code
        == 403
    )
    assert closes() == 0


def test_a_close_without_its_csrf_token_changes_nothing(world):
    root = world.browser("root")
    assert root.post(f"/reports/months/{LABEL}/close", data={}).status_code == 400
    assert closes() == 0


def test_closing_twice_or_the_running_month_says_why(world):
    root = world.browser("root")
    close_through_page(root)
    again = root.post(f"/reports/months/{LABEL}/close", data={"csrf_token": root.csrf})
    assert again.status_code == 409
    assert "already closed" in soup(again).find(id="close-error").get_text()
    now = datetime.now(UTC)
    running = f"{now.year:04d}-{now.month:02d}"
    refused = root.post(f"/reports/months/{running}/close", data={"csrf_token": root.csrf})
    assert refused.status_code == 400
    assert "has not ended" in soup(refused).find(id="close-error").get_text()
    assert root.get("/reports/months/2025-13/close").status_code == 400
    assert root.get("/reports/months/october/close").status_code == 400
    assert closes() == 1


def test_changes_since_the_close_fragment_and_page(world):
    root = world.browser("root")
    close_through_page(root)
    url = f"/reports/months/{LABEL}/changes?kind=ddi"
    none = root.get(url, headers={"HX-Request": "true"})
    assert none.status_code == 200 and soup(none).find(id="no-changes") is not None
    backfill()
    fragment = root.get(url, headers={"HX-Request": "true"})
    page = soup(fragment)
    assert page.find("html") is None  # a fragment
    rows = page.find(id="changes-table").tbody.find_all("tr")
    assert len(rows) == 1
    cells = [td.get_text(" ", strip=True) for td in rows[0].find_all("td")]
    assert cells[0] == f"Initech {INITECH}"  # its name, linked to its month
    links = rows[0].find_all("a")
    assert links[0]["href"].startswith("/reports/ddis?company=initech")
    assert links[1]["href"] == "/reports/ddis/day?company=initech&date=2025-10-03"
    assert "2025-10-03: 0 → 1" in cells[1] and "2025-10-05: 0 → 1" in cells[1]
    assert cells[2:] == ["0", "3"]
    full = root.get(url)
    assert soup(full).find("h1") is not None and soup(full).find(id="changes-table") is not None
    # The phone-user figures did not change: said so.
    users = soup(
        root.get(f"/reports/months/{LABEL}/changes?kind=user", headers={"HX-Request": "true"})
    )
    assert users.find(id="no-changes") is not None
    # A reader of Acme only sees no change (Initech is not theirs).
    reporter = world.browser("reporter")
    mine = soup(reporter.get(url, headers={"HX-Request": "true"}))
    assert mine.find(id="no-changes") is not None and INITECH not in mine.get_text()
    assert world.browser("cadmin").get(url).status_code == 403


def test_changes_of_an_open_month_is_409(world):
    assert world.browser("root").get(f"/reports/months/{LABEL}/changes").status_code == 409


def test_a_closed_months_csv_and_company_page_hold_the_closed_figures(world):
    root = world.browser("root")
    close_through_page(root)
    backfill()
    rows = list(
        csv.reader(
            io.StringIO(root.get("/reports/ddis.csv", query_string=OCT).get_data(as_text=True))
        )
    )
    by_company = {r[0]: r for r in rows[1:]}
    assert by_company[INITECH][-2] == "0"  # closed: the backfill shows only as a change
    assert by_company[ACME][-2] == "10"
    assert rows[0][2] == "2025-10-01"
    # The company page's months: October closed (stored figures), November open (history).
    add_history(("ddi", INITECH, "44:10", datetime(2025, 11, 2), datetime(2025, 11, 4)))
    billing = company_overview.billing_of(INITECH, today=date(2025, 11, 20))
    totals = {(m.year, m.month): m.ddi_days for m in billing.months}
    assert totals[(2025, 10)] == 0 and totals[(2025, 11)] == 2
    assert (
        reports.report(Principal.cli(), "ddi", reports.parse_scope(OCT))[INITECH][
            "billableDDIDaysForMonth"
        ]
        == 0
    )


def test_the_months_page_lists_states(world):
    root = world.browser("root")
    close_through_page(root)
    page = soup(root.get("/reports/months"))
    row = page.find(id=f"month-{LABEL}")
    assert row is not None and "Closed" in row.get_text() and "version 1" in row.get_text()
    changes = [a for a in row.find_all("a") if "/changes" in a["href"]]
    assert [a["href"] for a in changes] == [
        f"/reports/months/{LABEL}/changes?kind=ddi",
        f"/reports/months/{LABEL}/changes?kind=user",
    ]
    # Each name begins with the word it shows (WCAG 2.5.3, label in name).
    assert [" ".join(a.get_text().split()) for a in changes] == [
        "DDIs changed since the close of October 2025",
        "phone users changed since the close of October 2025",
    ]
    assert not any(a.has_attr("aria-label") for a in changes)
    now = datetime.now(UTC)
    current = page.find(id=f"month-{now.year:04d}-{now.month:02d}")
    assert current is not None and "Open, to date" in current.get_text()
    listed = page.find(id="months").tbody.find_all("tr")
    # The running month and the last twelve, and October 2025 if it is older than those.
    older = (now.year * 12 + now.month) - (2025 * 12 + 10) > 12
    assert len(listed) == 13 + older
    assert world.browser("reporter").get("/reports/months").status_code == 200
    assert world.browser("cadmin").get("/reports/months").status_code == 403
    # An older closed month is listed too.
    world.client.post(
        "/rest/call/closeMonth",
        json={"type": "cdr", "scope": {"month": 1, "year": 2020}},
        headers=world.root.headers,
    )
    again = soup(root.get("/reports/months"))
    assert again.find(id="month-2020-01") is not None
    assert len(again.find(id="months").tbody.find_all("tr")) == 14 + older


def test_a_closed_days_page_shows_the_stored_figure_beside_the_peak_now(world):
    root = world.browser("root")
    url = "/reports/ddis/day"
    query = {"company": INITECH, "date": "2025-10-04"}
    assert soup(root.get(url, query_string=query)).find(id="closed-day") is None  # open
    close_through_page(root)
    note = soup(root.get(url, query_string=query)).find(id="closed-day")
    assert "version 1" in note.get_text() and note.strong.get_text() == "0"
    assert "change since the close" not in note.get_text()
    backfill()
    note = soup(root.get(url, query_string=query)).find(id="closed-day")
    assert note.strong.get_text() == "0" and "change since the close" in note.get_text()
    peak = soup(root.get(url, query_string=query)).find(attrs={"data-peak": True})
    assert peak.get_text() == "1"


def test_a_month_that_cannot_be_closed_or_reopened_says_so_without_a_button(world):
    root = world.browser("root")
    now = datetime.now(UTC)
    for label, status, words in (
        (f"{now.year:04d}-{now.month:02d}", 400, "has not ended"),
        (f"{now.year + 1:04d}-01", 400, "in the future"),
    ):
        page = root.get(f"/reports/months/{label}/close")
        assert page.status_code == status
        assert words in soup(page).find(id="close-error").get_text()
        assert soup(page).find(id="close-confirm") is None
    # An open month has nothing to reopen.
    page = root.get(f"/reports/months/{LABEL}/reopen")
    assert page.status_code == 409 and soup(page).find(id="reopen-error") is not None
    assert soup(page).find(id="reopen-confirm") is None
    close_through_page(root)
    page = root.get(f"/reports/months/{LABEL}/close")
    assert (
        page.status_code == 409 and "already closed" in soup(page).find(id="close-error").get_text()
    )
    assert soup(page).find(id="close-confirm") is None
    assert soup(root.get(f"/reports/months/{LABEL}/reopen")).find(id="reopen-confirm") is not None
