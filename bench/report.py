"""Report scenarios: readDDICount / readUserCount for every company for the last closed month.

The app figure is the whole API call in process (token check, rollup read, JSON encoding of
every company's 28-31 days); the reference is WINDOW_SQL, the best hand-written from-scratch
SQL, run directly on the same database. The app's own from-scratch query (what reports did
before the rollup, and still do while it is not built) is the "before" row. Every figure is
the median of repeated runs after a warm-up, app and reference interleaved, and the numbers
are checked to be identical before anything is timed.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from datetime import date

from sqlalchemy import text

from .reference import window_reference_query
from .table import Result

PATHS = {"ddi": "/rest/call/readDDICount", "user": "/rest/call/readUserCount"}
DAY_KEYS = {"ddi": "billableDDIDaysForMonth", "user": "billableUserDaysForMonth"}


def last_closed_month(today: date) -> tuple[int, int]:
    return (today.month - 1 or 12), today.year - (today.month == 1)


def _interleaved(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: statistics.median(ts) for name, ts in times.items()}


def _app(database_url: str):
    from webapp import create_app, freeze_startup_objects

    app = create_app({"SQLALCHEMY_DATABASE_URI": database_url, "API_RATE_LIMIT": "1000000/minute"})
    freeze_startup_objects()  # as each gunicorn worker does once its app is built (wsgi.py)
    return app


def _token(app) -> str:
    from webapp.access import Principal
    from webapp.errors import ServiceError
    from webapp.services.identity import accounts, api_tokens

    operator = Principal.cli("bench")
    with contextlib.suppress(ServiceError):  # made by an earlier run
        accounts.create(operator, "bench-report", None, system_admin=True)
    return api_tokens.create(operator, "bench-report", "make bench")


def interval_count(session, kind: str, period) -> int:
    return session.execute(
        text(
            "SELECT count(*) FROM history_intervals WHERE kind = :k AND start_at < :e "
            "AND (end_at IS NULL OR end_at > :s)"
        ),
        {"k": kind, "s": period.start, "e": period.end},
    ).scalar()


def report_scenarios(
    database_url: str, label: str, repeat: int = 3, today: date | None = None
) -> list[Result]:
    """Per kind: the app's report call vs WINDOW_SQL, and the from-scratch query vs the same."""
    from webapp.extensions import db
    from webapp.services.billing import periods, reports, rollups

    app = _app(database_url)
    results = []
    with app.app_context():
        token = _token(app)
        client = app.test_client()
        headers = {"Authorization": f"Bearer {token}"}
        tz = periods.zone(app.config["REPORT_TIMEZONE"])
        today = today or periods.today_in(tz)
        month, year = last_closed_month(today)
        period = periods.resolve(month, year, tz, today)
        body = {"type": "cdr", "scope": {"month": month, "year": year}}
        for kind in ("ddi", "user"):
            assert rollups.built_zone(db.session, kind) == tz.key, "run `flask history rollup`"
            touching = interval_count(db.session, kind, period)
            db.session.remove()

            def call(kind=kind):
                response = client.post(PATHS[kind], json=body, headers=headers)
                assert response.status_code == 200, response.get_data(as_text=True)[:300]
                return response.get_json()["values"]

            def reference(kind=kind):
                rows = db.session.execute(window_reference_query(kind, period)).all()
                db.session.remove()
                return {(c, int(d)): int(p) for c, d, p in rows if p}

            def scratch(kind=kind):
                peaks = reports.scratch_peaks(kind, period, None)
                db.session.remove()
                return peaks

            # Same numbers, or the timings compare nothing.
            ref = reference()
            assert scratch() == ref, "from-scratch query disagrees with the reference"
            values = call()
            totals: dict[str, int] = {}
            for (company, _), peak in ref.items():
                totals[company] = totals.get(company, 0) + peak
            for company, entry in values.items():
                assert entry[DAY_KEYS[kind]] == totals.get(company, 0), (kind, company)
            times = _interleaved({"app": call, "ref": reference, "scratch": scratch}, repeat)
            name = f"report {kind}, {len(values):,} companies, {year}-{month:02d}"
            where = f"{touching:,} intervals"
            results += [
                Result(
                    label,
                    f"{name} ({where}): API call, rollup",
                    times["app"],
                    times["ref"],
                    "window SQL",
                    "s",
                    target=0.25,
                ),
                Result(
                    label,
                    f"{name}: before, the from-scratch query",
                    times["scratch"],
                    times["ref"],
                    "window SQL",
                    "s",
                ),
            ]
        db.engine.dispose()
    return results


def growth_scenarios(
    urls: list[tuple[int, str]], label: str, repeat: int = 3, today: date | None = None
) -> list[Result]:
    """The report API call at 1x, 2x, 4x the intervals, each step against the 1x figure, with
    a target of no more than the growth in intervals (linear). The from-scratch reference at
    full size is in the report rows; it is not repeated here (it would add minutes)."""
    from webapp.extensions import db
    from webapp.services.billing import periods

    figures = []
    for factor, url in urls:
        app = _app(url)
        with app.app_context():
            token = _token(app)
            client = app.test_client()
            tz = periods.zone(app.config["REPORT_TIMEZONE"])
            day = today or periods.today_in(tz)
            month, year = last_closed_month(day)
            period = periods.resolve(month, year, tz, day)
            count = interval_count(db.session, "ddi", period)
            db.session.remove()
            headers = {"Authorization": f"Bearer {token}"}
            body = {"type": "cdr", "scope": {"month": month, "year": year}}

            def call(client=client, headers=headers, body=body):
                response = client.post(PATHS["ddi"], json=body, headers=headers)
                assert response.status_code == 200
                return response

            times = _interleaved({"app": call}, repeat)
            db.engine.dispose()
        figures.append((factor, count, times["app"]))
    _, base_count, base_app = figures[0]
    results = [
        Result(
            label,
            f"growth: report ddi at 1x ({base_count:,} intervals)",
            base_app,
            None,
            "",
            "s",
        )
    ]
    for factor, count, app_time in figures[1:]:
        grown = count / base_count
        results.append(
            Result(
                label,
                f"growth: report ddi at {factor}x ({count:,} intervals, {grown:.1f}x)",
                app_time,
                base_app,
                "app at 1x",
                "s",
                target=grown,
            )
        )
    return results
