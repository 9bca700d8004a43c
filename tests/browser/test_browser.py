"""The pages in a real browser: sign in, the DDI list (filter as you type, edit, link, paging,
a Company-Admin's view), the monthly calendar with its drill-down, and the docs' screenshots.

Every test makes its own data with `factory`, signs in through the /login form and asserts on
what the page shows, letting expect() wait for htmx instead of sleeping.
"""

from __future__ import annotations

import calendar
import os
import random
import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import update

from webapp.database import write_transaction
from webapp.models import HistoryInterval

from ..factories import rollup_rebuilt
from .conftest import PASSWORD, VIEWPORT, wait_for_htmx

pytestmark = pytest.mark.slow  # a real browser

ADMIN = {"system_admin": True}


def pick(page: Page, field, typed: str, company: str) -> None:
    """Type into a company picker and choose `company` among its suggestions."""
    field.fill(typed)
    page.get_by_role("option", name=re.compile(rf"^{re.escape(company)}\b")).click()
    expect(field).to_have_value(company)


def rows(page: Page):
    return page.locator("#rows tbody tr")


def row(page: Page, number: str):
    """The row of the DDI whose number part is `number` (its Number cell: "+44 2071234567")."""
    shown = re.compile(rf"^\+[0-9]+ {number}$")
    return rows(page).filter(has=page.get_by_role("cell", name=shown))


def showing(first: int, last: int, total: int) -> str:
    """The list's count line, 'Showing 1 to 50 of 120' written with an en dash."""
    return f"Showing {first}\N{EN DASH}{last} of {total}"


def count(page: Page):
    return page.locator("#count")


def mark_document(page: Page) -> None:
    """Tag the loaded document: the tag survives an htmx swap but not a page load."""
    wait_for_htmx(page)
    page.evaluate("window.__sameDocument = true")


def same_document(page: Page) -> bool:
    return page.evaluate("window.__sameDocument === true")


# --- sign in ----------------------------------------------------------------------------------
def test_sign_in_wrong_password_then_right(live_server, factory, page):
    factory.account("root", **ADMIN)
    page.goto(f"{live_server}/ddis")
    expect(page).to_have_url(re.compile(r"/login\?next=(%2F|/)ddis$"))
    expect(page.get_by_text("Please sign in to open that page.")).to_be_visible()

    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("Unknown username or wrong password.")
    expect(page).to_have_url(re.compile(r"/login"))
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()

    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{live_server}/ddis")
    expect(page.get_by_role("status")).to_have_text("Signed in as root.")
    expect(page.get_by_role("heading", name="DDIs", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


# --- DDI list ---------------------------------------------------------------------------------
def test_filter_by_typing_narrows_rows_in_place_and_pushes_url(live_server, factory, page, sign_in):
    factory.account("root", **ADMIN)
    factory.company("acme")
    for n in range(1, 6):
        factory.ddi("44", f"207100000{n}", "acme", f"10{n}")
    for n in range(1, 4):
        factory.ddi("44", f"161200000{n}", "acme", f"20{n}")
    sign_in("root")
    expect(count(page)).to_contain_text(showing(1, 8, 8))
    expect(rows(page)).to_have_count(8)
    mark_document(page)

    # The number search: typed as people write numbers, dialcode first.
    page.get_by_label("Number").press_sequentially("+44 1612")
    expect(rows(page)).to_have_count(3)
    expect(count(page)).to_contain_text(showing(1, 3, 3))
    for n in range(1, 4):
        expect(row(page, f"161200000{n}")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"/ddis\?.*q=%2B44(\+|%20)1612"))
    assert same_document(page), "typing in the filter reloaded the page instead of swapping rows"

    page.reload()
    assert not same_document(page)
    expect(page.get_by_label("Number")).to_have_value("+44 1612")
    expect(rows(page)).to_have_count(3)
    expect(count(page)).to_contain_text(showing(1, 3, 3))

    page.get_by_label("Number").fill("0003")  # the end of the number
    expect(count(page)).to_contain_text(showing(1, 2, 2))
    expect(row(page, "2071000003")).to_have_count(1)
    expect(row(page, "1612000003")).to_have_count(1)

    page.get_by_label("Number").fill("99")
    expect(count(page)).to_contain_text("Nothing matches these filters")
    expect(rows(page)).to_have_count(0)


def test_edit_inline_shows_field_error_then_saves(live_server, factory, page, sign_in):
    factory.account("root", **ADMIN)
    factory.company("acme")
    factory.ddi("44", "2071000001", "acme", "100")
    factory.ddi("44", "2071000002", "acme", "101")
    sign_in("root")
    mark_document(page)

    row(page, "2071000002").get_by_role("link", name="Edit").click()
    panel = page.locator("#panel")
    expect(panel.get_by_role("heading")).to_have_text("Edit DDI +44 2071000002")
    expect(panel.get_by_label("Number")).to_have_value("2071000002")
    expect(panel.get_by_label("Number")).not_to_be_editable()
    extension = panel.get_by_label("Extension")
    expect(extension).to_have_value("101")
    assert same_document(page), "Edit opened a new page instead of the inline panel"

    extension.fill("12a")
    panel.get_by_role("button", name="Save").click()
    error = panel.locator("#virt_exten-error")
    expect(error).to_have_text("must be 1 to 10 digits")
    expect(panel.get_by_label("Extension")).to_have_attribute("aria-invalid", "true")
    expect(panel.get_by_label("Extension")).to_have_value("12a")
    # Cells: the tick, number, extension, company, actions.
    expect(row(page, "2071000002").get_by_role("cell").nth(2)).to_have_text("101")

    panel.get_by_label("Extension").fill("345")
    panel.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text("Saved DDI +44 2071000002.")
    expect(row(page, "2071000002").get_by_role("cell").nth(2)).to_have_text("345")
    expect(row(page, "2071000001").get_by_role("cell").nth(2)).to_have_text("100")
    expect(page.locator("#panel form")).to_have_count(0)


def test_edit_moves_a_ddi_and_link_points_it_at_an_extension(live_server, factory, page, sign_in):
    factory.account("root", **ADMIN)
    factory.company("acme", "Acme Telecom")
    factory.company("globex", "Globex Corporation")
    factory.ddi("44", "2071000001", "acme", "100")
    factory.ddi("44", "2071000002", "acme", "101")
    factory.ddi("44", "2072000001", "globex", "300")
    sign_in("root")

    row(page, "2071000001").get_by_role("link", name="Edit").click()
    panel = page.locator("#panel")
    expect(panel.get_by_role("heading")).to_have_text("Edit DDI +44 2071000001")
    panel.get_by_label("Extension").fill("555")
    pick(page, panel.get_by_label("Company"), "glob", "globex")
    panel.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text("Saved DDI +44 2071000001.")

    mark_document(page)
    pick(page, page.locator("#filter-company"), "GLO", "globex")
    expect(count(page)).to_contain_text(showing(1, 2, 2))
    expect(rows(page)).to_have_count(2)
    expect(row(page, "2071000001").get_by_role("cell")).to_have_text(
        ["", "+44 2071000001", "555", "Globex Corporation (globex)", "", re.compile("Edit")]
    )
    expect(row(page, "2071000002")).to_have_count(0)
    expect(page).to_have_url(re.compile(r"company=globex"))
    assert same_document(page)

    # Link: the extension alone, in the company it is in, and the form says so.
    row(page, "2071000001").get_by_role("link", name="Link").click()
    expect(panel.get_by_role("heading")).to_have_text("Link DDI +44 2071000001")
    expect(panel.locator("#link-intro")).to_contain_text("in its company, globex")
    expect(panel.get_by_label("Company")).to_have_count(0)
    panel.get_by_label("Extension").fill("777")
    panel.get_by_role("button", name="Link").click()
    expect(page.get_by_role("status")).to_have_text("Linked DDI +44 2071000001 to extension 777.")
    expect(page).to_have_url(re.compile(r"company=globex"))
    expect(row(page, "2071000001").get_by_role("cell").nth(2)).to_have_text("777")

    pick(page, page.locator("#filter-company"), "acme", "acme")
    expect(count(page)).to_contain_text(showing(1, 1, 1))
    expect(rows(page).first.get_by_role("cell").nth(1)).to_have_text("+44 2071000002")


def test_page_through_120_ddis(live_server, factory, page, sign_in):
    factory.account("root", **ADMIN)
    factory.company("acme")
    for n in range(1, 121):
        factory.ddi("44", f"2070000{n:03d}", "acme", str(1000 + n))
    sign_in("root")
    pager = page.get_by_role("navigation", name="Pages")
    first_number = rows(page).first.get_by_role("cell").nth(1)  # after the tick

    expect(count(page)).to_contain_text(showing(1, 50, 120))
    expect(first_number).to_have_text("+44 2070000001")
    expect(rows(page)).to_have_count(50)
    expect(pager.get_by_role("link", name="Previous")).to_have_count(0)
    mark_document(page)

    pager.get_by_role("link", name="Next").click()
    expect(count(page)).to_contain_text(showing(51, 100, 120))
    expect(first_number).to_have_text("+44 2070000051")
    expect(page).to_have_url(re.compile(r"[?&]after=44&after=2070000050"))

    pager.get_by_role("link", name="Next").click()
    expect(count(page)).to_contain_text(showing(101, 120, 120))
    expect(first_number).to_have_text("+44 2070000101")
    expect(rows(page)).to_have_count(20)
    expect(pager.get_by_role("link", name="Next")).to_have_count(0)
    expect(pager.get_by_role("link", name="Last")).to_have_count(0)
    assert same_document(page), "paging reloaded the page instead of swapping rows"

    pager.get_by_role("link", name="Previous").click()
    expect(count(page)).to_contain_text(showing(51, 100, 120))
    page.reload()
    expect(count(page)).to_contain_text(showing(51, 100, 120))
    expect(first_number).to_have_text("+44 2070000051")

    # Last is the last fifty rows, First the first fifty; the address says where you are.
    mark_document(page)
    pager.get_by_role("link", name="Last").click()
    expect(count(page)).to_contain_text(showing(71, 120, 120))
    expect(first_number).to_have_text("+44 2070000071")
    expect(page).to_have_url(re.compile(r"[?&]last=1"))
    pager.get_by_role("link", name="First").click()
    expect(count(page)).to_contain_text(showing(1, 50, 120))
    expect(page).to_have_url(f"{live_server}/ddis")
    assert same_document(page)


def test_company_admin_sees_only_its_company(live_server, factory, page, sign_in):
    factory.company("acme")
    factory.company("globex")
    factory.account("acme-admin", admin_of=["acme"])
    factory.ddi("44", "2071000001", "acme", "100")
    factory.ddi("44", "2071000002", "acme", "101")
    factory.ddi("44", "2072000001", "globex", "300")
    factory.ddi("44", "2072000002", "globex", "301")
    factory.ddi("44", "2072000003", "globex", "302")
    sign_in("acme-admin")

    expect(page).to_have_url(f"{live_server}/ddis")
    expect(count(page)).to_contain_text(showing(1, 2, 2))
    expect(rows(page)).to_have_count(2)
    # The company cell names the company with its identifier (docs/pages.md, links).
    expect(page.locator("#rows tbody td:nth-child(3)")).to_have_text(["Acme (acme)"] * 2)
    expect(page.locator("#rows")).not_to_contain_text("globex")
    expect(page.locator("#rows")).not_to_contain_text("2072000001")
    expect(page.get_by_role("link", name="New DDI")).to_have_count(0)
    expect(rows(page).get_by_role("link", name="Delete")).to_have_count(0)
    # One company: no company filter, it could not narrow anything (docs/pages.md).
    expect(page.locator("#filter-company")).to_have_count(0)

    page.goto(f"{live_server}/ddis?company=globex")  # as if it did not exist
    expect(page.locator("#filter-company-error")).to_have_text("unknown company")
    expect(rows(page)).to_have_count(0)
    expect(page.locator("#main")).not_to_contain_text("2072000001")


# --- monthly calendar and drill-down ----------------------------------------------------------
def add_history(*intervals: tuple[str, str, datetime, datetime | None]) -> None:
    """History rows (company, 'dialcode:number', start, end) as naive UTC datetimes."""
    with write_transaction() as session:
        session.add_all(
            HistoryInterval(kind="ddi", company=c, key=k, start_at=s, end_at=e, source="import")
            for c, k, s, e in intervals
        )
        rollup_rebuilt(session)


def test_monthly_calendar_and_day_drill_down(app, live_server, factory, page, sign_in):
    app.config["REPORT_TIMEZONE"] = "UTC"  # days as in the history rows, whatever the env says
    factory.account("root", **ADMIN)
    factory.company("acme", "Acme Telecom")
    factory.company("globex", "Globex Corporation")
    add_history(
        ("acme", "44:2071000001", datetime(2025, 3, 10, 9), datetime(2025, 3, 12)),
        ("acme", "44:2071000002", datetime(2025, 3, 11, 8), datetime(2025, 3, 11, 17)),
        ("acme", "44:2071000003", datetime(2025, 3, 11, 13, 30), datetime(2025, 3, 20)),
        # Another company's DDIs, active the same day, count only for that company.
        ("globex", "44:2072000001", datetime(2025, 3, 1), None),
        ("globex", "44:2072000002", datetime(2025, 3, 11, 12), datetime(2025, 3, 11, 14)),
    )
    sign_in("root")

    page.goto(f"{live_server}/reports/ddis?company=acme&month=3&year=2025")
    expect(page.get_by_role("heading", level=1)).to_have_text("DDI counts March 2025")
    cal = page.locator("table.calendar")
    expect(cal.locator("thead th")).to_have_text(["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"])
    expect(cal.locator("tbody tr")).to_have_count(6)  # 1 March 2025 is a Saturday
    expect(cal.locator("tbody tr").first.locator("td").nth(5)).to_contain_text("1")

    def day(n: int):
        return cal.locator(f'td[data-date="2025-03-{n:02d}"]')

    expect(day(9).locator(".peak")).to_have_text("0")
    expect(day(10).locator(".peak")).to_have_text("1")
    expect(day(11).locator(".peak")).to_have_text("3")
    expect(day(11).locator(".daynum")).to_have_text("11")
    expect(day(12).locator(".peak")).to_have_text("1")
    expect(day(19).locator(".peak")).to_have_text("1")
    expect(day(20).locator(".peak")).to_have_text("0")
    # 1 + 3 + 8 * 1 = 12 billable DDI-days; 12 / 31 = 0.387, to one decimal on the page
    expect(page.locator('[data-total="for-month"]')).to_have_text("12")
    expect(page.locator('[data-total="per-day"]')).to_have_text("0.4")
    expect(page.locator(".totals")).to_contain_text("Billable DDI-days")
    expect(page.locator(".totals")).to_contain_text("Per day, average over 31 days")

    mark_document(page)
    day(11).get_by_role("link").click()
    panel = page.locator("#panel")
    expect(panel.locator("#day-detail-title")).to_have_text(
        "Acme Telecom acme · Tuesday 11 March 2025"
    )
    # The summary first (docs/reports.md, "A day's drill-down"), then the changes in time
    # order, then what was active all day; numbers written +44 2071000001.
    expect(panel.locator("[data-at-start]")).to_have_text("1")
    expect(panel.locator("[data-added]")).to_have_text("2")
    expect(panel.locator("[data-removed]")).to_have_text("1")
    expect(panel.locator("[data-at-end]")).to_have_text("2")
    expect(panel.locator("[data-peak]")).to_have_text("3")
    expect(panel.locator("[data-peak-at]")).to_have_text("13:30:00")
    changes = panel.locator("table.day-changes tbody tr")
    expect(changes.locator("td:first-child")).to_have_text(["08:00:00", "13:30:00", "17:00:00"])
    expect(changes.locator("td:nth-child(2)")).to_have_text(["added", "added", "removed"])
    expect(changes.locator("td:nth-child(3)")).to_have_text(
        ["+44 2071000002", "+44 2071000003", "+44 2071000002"]
    )
    active = panel.locator("table.day-records tbody tr")
    expect(active.locator("td:first-child")).to_have_text(["+44 2071000001"])
    expect(panel).not_to_contain_text("2072000001")
    assert same_document(page), "the drill-down opened a new page instead of the panel"

    day(15).get_by_role("link").click()
    expect(panel.locator("#day-detail-title")).to_contain_text("Saturday 15 March 2025")
    expect(panel.locator("[data-peak]")).to_have_text("1")
    expect(panel.locator("[data-peak-at]")).to_have_text("00:00:00")
    expect(active.locator("td:first-child")).to_have_text(["+44 2071000003"])

    page.get_by_role("link", name="Next month").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("DDI counts April 2025")
    expect(page.locator('[data-total="for-month"]')).to_have_text("0")


# --- The docs' screenshots --------------------------------------------------------------------
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
PHONE = {"width": 390, "height": 844}

# (company, name, [(number, extension)]): numbers from Ofcom's ranges reserved for drama.
SHOWCASE = [
    ("acme", "Acme Telecom Ltd", [(f"20794600{n:02d}", f"2{n:02d}") for n in range(10, 24)]),
    ("globex", "Globex Corporation", [(f"16149600{n:02d}", f"4{n:02d}") for n in range(40, 49)]),
    ("initech", "Initech", [(f"11349600{n:02d}", f"31{n % 10}") for n in range(70, 75)]),
    ("umbrella", "Umbrella Health", [("1314960101", "900"), ("1314960102", "901")]),
]


def screenshot_path(tmp_path: Path, name: str) -> Path:
    """docs/screenshots/ when UPDATE_SCREENSHOTS=1 (for the docs), else the test's tmp_path."""
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        return SCREENSHOTS / name
    return tmp_path / name


def previous_month(today: date) -> tuple[int, int]:
    first = today.replace(day=1) - timedelta(days=1)
    return first.year, first.month


def showcase_data(factory, year: int, month: int) -> None:
    """A few companies, 30 DDIs, and a month of acme history with additions, removals and
    short-lived numbers, so the calendar's peaks vary as they would in real life."""
    rng = random.Random(20260301)
    factory.account("admin", **ADMIN)
    for company, name, numbers in SHOWCASE:
        factory.company(company, name)
        for number, extension in numbers:
            factory.ddi("44", number, company, extension)
    start = datetime(year, month, 1)
    days = calendar.monthrange(year, month)[1]
    with write_transaction() as session:
        # The DDIs made above opened their history now; say they have been there for a while,
        # and that four of acme's arrived during the month.
        for company, _, numbers in SHOWCASE:
            for i, (number, _) in enumerate(numbers):
                if company == "acme" and i >= 10:
                    since = start + timedelta(days=5 + 6 * (i - 10), hours=9 + i % 3, minutes=15)
                else:
                    since = start - timedelta(days=rng.randint(20, 400), hours=rng.randint(0, 9))
                session.execute(
                    update(HistoryInterval)
                    .where(HistoryInterval.key == f"44:{number}", HistoryInterval.end_at.is_(None))
                    .values(start_at=since)
                )
        # Three DDIs that acme gave up during the month, and temporary numbers on busy days.
        for i, day in enumerate((8, 15, 23)):
            session.add(
                HistoryInterval(
                    kind="ddi",
                    company="acme",
                    key=f"44:20794609{i:02d}",
                    start_at=start - timedelta(days=90),
                    end_at=start + timedelta(days=day, hours=17),
                    source="live",
                )
            )
        for day in range(days):
            if (start + timedelta(days=day)).weekday() < 5 and rng.random() < 0.45:
                for j in range(rng.randint(1, 3)):
                    opened = start + timedelta(days=day, hours=rng.randint(8, 14))
                    session.add(
                        HistoryInterval(
                            kind="ddi",
                            company="acme",
                            key=f"44:207946095{j}",
                            start_at=opened,
                            end_at=opened + timedelta(hours=rng.randint(1, 4)),
                            source="live",
                        )
                    )
        rollup_rebuilt(session)


def test_readme_screenshots(app, live_server, factory, page, sign_in, tmp_path):
    app.config["REPORT_TIMEZONE"] = "UTC"
    year, month = previous_month(datetime.now(UTC).date())
    showcase_data(factory, year, month)
    sign_in("admin")
    page.set_viewport_size(VIEWPORT)

    page.goto(f"{live_server}/ddis?company=acme")
    expect(count(page)).to_contain_text(showing(1, 14, 14))
    expect(rows(page)).to_have_count(14)
    page.screenshot(path=screenshot_path(tmp_path, "ddi-list.png"), full_page=True)

    page.set_viewport_size(PHONE)
    page.reload()
    expect(rows(page)).to_have_count(14)
    page.screenshot(path=screenshot_path(tmp_path, "ddi-list-phone.png"), full_page=True)

    page.set_viewport_size(VIEWPORT)
    page.goto(f"{live_server}/reports/ddis?company=acme&month={month}&year={year}")
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"{calendar.month_name[month]}")
    busiest = max(
        page.locator("table.calendar a.day").all(),
        key=lambda cell: int(cell.locator(".peak").inner_text()),
    )
    busiest.click()
    expect(page.locator("#panel table.day-records tbody tr").first).to_be_visible()
    page.screenshot(path=screenshot_path(tmp_path, "monthly-calendar.png"), full_page=True)
