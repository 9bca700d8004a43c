"""The docs' screenshots at a provider's size: the pages on the bench data set, in Chromium.

python -m bench.screenshots [--out docs/screenshots]   (DATABASE_URL as for the other bench
commands; Debian's /usr/bin/chromium through the playwright package, as the browser tests)

It serves the app as the page scenario does (gunicorn, bench/http.py), signs in through /login
as the bench System-Admin (bench/pages.py makes and resets it: run that first, on a copy), and
takes: the report for every company (totals row and the first companies by billable total),
the largest company's page, its calendar of last month at 1280 and 390 px, a day's drill-down
of it (in the calendar's panel at 1280 px, and as a page at 390 px), the company picker's
suggestions on the DDI list, the audit log filtered by a number as people write it, a DDI's
page, Find free numbers on the stock bench/pages.py adds, the top bar's search at desktop and
phone width (`search_shots`), the preview of an import (a customer's numbers moved, a block
ported in, extensions changed; previewed, never applied), and a closed month's report with the
changes since its close: it closes the last ended month and backfills a late batch of history
into it (`_late_batch`), so run it on a copy.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from datetime import date, timedelta
from pathlib import Path

from . import use_bench_database
from .http import PASSWORD, SYSADMIN, app_env, gunicorn_server, running

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"


def _sample(database_url: str) -> bytes:
    """An import file as a provider's day brings: 300 of one customer's DDIs moved to another,
    a block of 200 new numbers ported in for a third, 100 extensions changed."""
    from sqlalchemy import create_engine, text

    engine = create_engine(database_url)
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT dialcode, number, virt_exten, company FROM ddis WHERE company = 'c00003' "
                "ORDER BY dialcode, number LIMIT 400"
            )
        ).all()
    engine.dispose()
    lines = ["dialcode,number,virt_exten,company"]
    lines += [f"{d},{n},{e},c00004" for d, n, e, _ in rows[:300]]
    lines += [f"{d},{n},{int(e) + 1},{c}" for d, n, e, c in rows[300:]]
    lines += [f"44,20{7_200_000 + i:08d},{300 + i},c00005" for i in range(200)]
    return ("\n".join(lines) + "\n").encode()


def _close_and_backfill(database_url: str) -> tuple[int, int]:
    """Close the last ended month (unless closed) and import a late batch of history into it:
    three companies' DDIs on a few days, as a late CDR feed brings. Returns (year, month)."""
    from webapp import create_app
    from webapp.access import Principal
    from webapp.extensions import db
    from webapp.services.billing import closed_figures, month_close, periods
    from webapp.services.imports import history_import

    from .report import last_closed_month

    app = create_app(
        {"SQLALCHEMY_DATABASE_URI": database_url, "SECRET_KEY": "bench-secret-key-not-secret"}
    )
    operator = Principal.cli("cli:bench-screenshots")
    with app.app_context():
        today = periods.today_in(periods.zone(app.config["REPORT_TIMEZONE"]))
        month, year = last_closed_month(today)
        latest = closed_figures.latest(db.session(), year, month)
        if latest is None or not latest.closed:
            month_close.close_month(operator, month_close.MonthRequest(month, year))
        rows = ["kind,company,key,start,end"]
        for n, (company, day, count) in enumerate(
            [("c00001", 3, 40), ("c00001", 4, 40), ("c00002", 12, 7), ("c00007", 27, 15)]
        ):
            # Whole days: a large company's level climbs all day, so only DDIs active all day
            # surely raise its peak.
            start = f"{year:04d}-{month:02d}-{day:02d}T00:00:00Z"
            end = f"{year:04d}-{month:02d}-{day + 1:02d}T00:00:00Z"
            rows += [f"ddi,{company},44:2999{n:02d}{i:05d},{start},{end}" for i in range(count)]
        history_import.import_csv(operator, "\n".join(rows) + "\n", source="late-cdrs.csv")
        db.session.remove()
    return year, month


PHONE = {"width": 390, "height": 844}
SEARCHED = "4042"  # a number's last digits: more than 20 DDIs, and the company c04042


def search_shots(page, out: Path) -> None:
    """The top bar's search typed at desktop width, its results then at phone width."""
    desktop = page.viewport_size
    page.get_by_role("search", name="Site search").get_by_role("searchbox").fill(SEARCHED)
    page.keyboard.press("Enter")
    page.wait_for_load_state("load")
    page.screenshot(path=out / "search.png", full_page=True)
    page.set_viewport_size(PHONE)
    page.reload()
    page.screenshot(path=out / "search-phone.png")
    page.set_viewport_size(desktop)


def _calendar(page, base: str, out: Path) -> None:
    """The largest company's calendar for last month: totals, the comparison with the month
    before, then the weeks; the first screen at 1280 px and at 390 px."""
    last = date.today().replace(day=1) - timedelta(days=1)
    page.goto(f"{base}/reports/ddis?company=c00000&year={last.year}&month={last.month}")
    page.screenshot(path=out / "company-calendar.png", full_page=True)
    desktop = page.viewport_size
    page.set_viewport_size(PHONE)
    page.reload()
    page.screenshot(path=out / "company-calendar-phone.png")
    page.set_viewport_size(desktop)


def _day_drill_down(page, base: str, out: Path) -> None:
    """The largest company's 12th of last month opened from its calendar (1280 px, the panel),
    then the same day as a page at 390 px: the first screen of each."""
    last = date.today().replace(day=1) - timedelta(days=1)
    day = last.replace(day=12).isoformat()
    page.goto(f"{base}/reports/ddis?company=c00000&year={last.year}&month={last.month}")
    page.wait_for_function("() => window.htmx !== undefined && document.readyState === 'complete'")
    page.locator(f"td[data-date='{day}'] a.day").click()
    page.locator("#day-summary").wait_for()
    # The panel's first screen (its two lists run to 200 rows).
    page.locator("#panel").evaluate("panel => panel.scrollIntoView()")
    page.screenshot(path=out / "report-day.png")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{base}/reports/ddis/day?company=c00000&date={day}")
    page.screenshot(path=out / "report-day-phone.png")
    page.set_viewport_size({"width": 1280, "height": 860})


def _free_numbers(page, base: str, out: Path) -> None:
    """Find free numbers on the stock bench/pages.py adds (a million from 44 2071000000 on):
    twenty London numbers of 20712, with the Reserve and Allocate forms below them."""
    page.goto(f"{base}/ddis/free?dialcode=44&prefix=20712&count=20")
    page.screenshot(path=out / "free-numbers.png", full_page=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args(argv)
    database_url = use_bench_database()
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as logs:
        env = app_env(database_url, Path(logs))
        app = gunicorn_server("app", "app:app", env, Path(logs))
        with running([app]), sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.goto(f"{app.base}/login")
            page.get_by_label("Username").fill(SYSADMIN)
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_load_state("load")

            page.goto(f"{app.base}/reports/ddis")
            page.screenshot(path=args.out / "report-every-company.png")

            page.goto(f"{app.base}/companies/c00000")
            page.screenshot(path=args.out / "company-page.png", full_page=True)

            _calendar(page, app.base, args.out)
            _day_drill_down(page, app.base, args.out)

            page.goto(f"{app.base}/ddis")
            picker = page.get_by_role("combobox", name="Company")
            picker.press_sequentially("c0004", delay=80)
            page.get_by_role("listbox").get_by_role("option").first.wait_for()
            page.screenshot(path=args.out / "company-picker.png")

            page.goto(f"{app.base}/audit")
            page.get_by_label("Target").press_sequentially("+44 100 000 0042", delay=40)
            page.wait_for_function(
                "document.querySelector('#audit-rows .count').textContent.includes('entr')"
            )
            page.wait_for_timeout(800)  # the last keystroke's answer
            page.screenshot(path=args.out / "audit-by-number.png")

            page.goto(f"{app.base}/ddis/44/1000000001")
            page.screenshot(path=args.out / "ddi-page.png", full_page=True)
            _free_numbers(page, app.base, args.out)
            search_shots(page, args.out)

            page.goto(f"{app.base}/ddis/import")
            upload = {
                "name": "port-in.csv",
                "mimeType": "text/csv",
                "buffer": _sample(database_url),
            }
            page.get_by_label("CSV file").set_input_files(files=[upload])
            page.get_by_role("button", name="Preview the import").click()
            page.wait_for_load_state("load")
            page.screenshot(path=args.out / "import-preview.png")

            year, month = _close_and_backfill(database_url)
            page.goto(f"{app.base}/reports/ddis?year={year}&month={month}")
            page.locator("#changes-table").wait_for()
            page.locator("#month-state").scroll_into_view_if_needed()
            page.locator("#month-state").screenshot(path=args.out / "month-closed.png")

            page.goto(f"{app.base}/rest/docs")
            page.screenshot(path=args.out / "api-docs.png")
            browser.close()
    for name in sorted(os.listdir(args.out)):
        print(args.out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
