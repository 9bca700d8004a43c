"""Month close scenarios (docs/month-close.md): closing the last ended month, a closed month's
report, and readAdjustments, every figure through the API in process (Flask's test client,
as bench/report.py), on the full data set.

python -m bench.month_close --url URL [--repeat 3]

Targets:

- closing a month of the data set takes at most 5 s (absolute). Its reference is the open
  month's two reports, readDDICount then readUserCount for every company: the same reads a
  close makes (both kinds, every company, from the rollup), so the ratio shows what storing
  the figures costs beyond reading them (and what a close saves by not encoding JSON). Context
  only: no ratio target.
- a closed month's readDDICount, every company, is no slower than the same month's while open
  (ratio <= 1.0).
- readAdjustments, every company, is no slower than the report (ratio <= 1.0). The reference is
  the open month's readDDICount alone, as the target states it, although readAdjustments covers
  both kinds: it reads both kinds' rollup and both kinds' stored figures (about twice a
  report's reads) but answers only what differs, `{}` here, so it encodes almost no JSON.
  Comparing it with both reports (ddi + user) would halve the bar the target sets; that sum is
  the close row's reference, for whoever wants to compare.

The month's state is toggled between the timed calls, so "interleaved" is per round: each of
`repeat` rounds (after one untimed warm-up round, which also checks the numbers) times the
open month's ddi and user reports, then the close, then the closed month's ddi report and
readAdjustments, and reopens the month untimed. Figures are medians over the rounds.

Before anything is timed: the closed month's reports answer exactly the open month's values,
both kinds, and readAdjustments answers no values. At the end every month_closes row the run
made is deleted with its closed_figures, a close it found and reopened is restored, and
the month.close / month.reopen audit entries it wrote are deleted, so later runs and the other
scenarios see the data set as it was.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from sqlalchemy import text
from werkzeug.test import TestResponse as Response

from .report import PATHS, _app, _token, last_closed_month
from .table import Result, render

REOPEN_REASON = "bench: month close scenario"
AUDIT_ACTIONS = ("month.close", "month.reopen")


def _state(db) -> tuple[dict[int, tuple[Any, Any, Any]], int]:
    """({month_closes id: (reopened_at, reopened_by, reopen_reason)}, highest audit_log id)."""
    rows = db.session.execute(
        text("SELECT id, reopened_at, reopened_by, reopen_reason FROM month_closes")
    ).all()
    last_audit = db.session.execute(text("SELECT coalesce(max(id), 0) FROM audit_log")).scalar()
    db.session.remove()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}, int(last_audit)


def _restore(db, before: dict[int, tuple[Any, Any, Any]], last_audit: int, actor: str) -> int:
    """Undo the run's closes and reopenings; the number of month_closes rows deleted."""
    ids = [r for (r,) in db.session.execute(text("SELECT id FROM month_closes")).all()]
    made = [i for i in ids if i not in before]
    for close_id in made:  # its figures first (no foreign key: migration 0031)
        db.session.execute(text("DELETE FROM closed_figures WHERE close_id = :i"), {"i": close_id})
        db.session.execute(text("DELETE FROM month_closes WHERE id = :i"), {"i": close_id})
    for close_id, (at, by, reason) in before.items():
        db.session.execute(
            text(
                "UPDATE month_closes SET reopened_at = :at, reopened_by = :by, "
                "reopen_reason = :reason WHERE id = :i"
            ),
            {"at": at, "by": by, "reason": reason, "i": close_id},
        )
    db.session.execute(
        text(
            "DELETE FROM audit_log WHERE id > :last AND actor = :actor "
            "AND action IN ('month.close', 'month.reopen')"
        ),
        {"last": last_audit, "actor": actor},
    )
    db.session.commit()
    left = db.session.execute(
        text(
            "SELECT count(*) FROM closed_figures "
            "WHERE close_id NOT IN (SELECT id FROM month_closes)"
        )
    ).scalar()
    db.session.remove()
    assert left == 0, "closed_figures rows outlived their close"
    return len(made)


def month_close_scenarios(database_url: str, label: str, repeat: int = 3) -> list[Result]:
    """Close, closed report and readAdjustments rows for the last ended month (module doc)."""
    from webapp.extensions import db
    from webapp.services.billing import periods, rollups

    app = _app(database_url)
    with app.app_context():
        token = _token(app)
        tz = periods.zone(app.config["REPORT_TIMEZONE"])
        for kind in ("ddi", "user"):
            assert rollups.built_zone(db.session(), kind) == tz.key, "run `flask history rollup`"
        month, year = last_closed_month(periods.today_in(tz))
        companies = db.session.execute(text("SELECT count(*) FROM companies")).scalar_one()
        before, last_audit = _state(db)
    # No app context held across the calls: each request has its own, and its own session,
    # as it would when served.
    client = app.test_client()
    headers = {"Authorization": f"Bearer {token}"}
    scope = {"month": month, "year": year}
    body = {"type": "cdr", "scope": scope}

    # What is timed is the app's answer alone, not the client's parsing of it: a parsed report
    # of every company is millions of objects, and holding the open month's two of them (to
    # compare with the closed month's) made every later request's garbage collection pass over
    # them, slowing the report timed after them by half (bench/README.md).
    def post(path: str, payload: dict[str, Any]) -> Response:
        response = client.post(path, json=payload, headers=headers)
        assert response.status_code == 200, (path, response.get_data(as_text=True)[:300])
        return response

    def report(kind: str, closed: bool) -> Response:
        response = post(PATHS[kind], body)
        # The period comes first in a report answer: whether the month is closed, unparsed.
        period = f'"closed":{"true" if closed else "false"}'.encode()
        assert period in response.get_data()[:200], response.get_data()[:200]
        return response

    def values(response: Response) -> dict[str, Any]:
        return response.get_json()["values"]

    def close() -> None:
        post("/rest/call/closeMonth", body)

    def reopen() -> None:
        post("/rest/call/reopenMonth", {**body, "reason": REOPEN_REASON})

    def adjustments() -> Response:
        return post("/rest/call/readAdjustments", body)

    times: dict[str, list[float]] = {
        "open ddi": [],
        "open user": [],
        "close": [],
        "closed ddi": [],
        "adjustments": [],
    }

    def timed(name: str, fn):
        t = time.perf_counter()
        value = fn()
        times[name].append(time.perf_counter() - t)
        return value

    try:
        # An interrupted earlier run, or someone's close.
        if post(PATHS["ddi"], body).get_json()["period"]["closed"]:
            reopen()
        for round_ in range(repeat + 1):
            open_ddi = timed("open ddi", lambda: report("ddi", False))
            open_user = timed("open user", lambda: report("user", False))
            timed("close", close)
            closed_ddi = timed("closed ddi", lambda: report("ddi", True))
            found = timed("adjustments", adjustments)
            if round_ == 0:  # the warm-up: same numbers, or the timings compare nothing
                opened = values(open_ddi)
                assert len(opened) == companies, (len(opened), companies)
                assert values(closed_ddi) == opened, "closed ddi report differs from the open one"
                del opened
                closed_user = values(report("user", True))
                assert closed_user == values(open_user), "closed user report differs"
                del closed_user
                adjusted = values(found)
                assert adjusted == {}, f"readAdjustments after the close: {list(adjusted)[:5]}"
                for series in times.values():
                    series.clear()
            del open_ddi, open_user, closed_ddi, found
            reopen()
    finally:
        with app.app_context():
            _restore(db, before, last_audit, "bench-report")
            db.engine.dispose()

    med = {name: statistics.median(series) for name, series in times.items()}
    reports_pair = statistics.median(
        d + u for d, u in zip(times["open ddi"], times["open user"], strict=True)
    )
    when = f"{year}-{month:02d}"
    return [
        Result(
            label,
            f"month close, {companies:,} companies, {when}: close",
            med["close"],
            reports_pair,
            "open month's ddi + user reports, API: the reads a close makes",
            "s",
            absolute_target=5.0,
        ),
        Result(
            label,
            f"closed month's report, all companies ({companies:,}): readDDICount",
            med["closed ddi"],
            med["open ddi"],
            "same month open, readDDICount",
            "s",
            target=1.0,
        ),
        Result(
            label,
            f"readAdjustments, all companies ({companies:,}), both kinds",
            med["adjustments"],
            med["open ddi"],
            "open month's readDDICount (ddi only)",
            "s",
            target=1.0,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the data set's database URL")
    parser.add_argument("--label", help="the database column (default: the URL's backend)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ.setdefault("SECRET_KEY", "bench-secret-key-not-secret")
    os.environ.setdefault(
        "INSTANCE_PATH", str(Path(__file__).resolve().parent.parent / "instance-bench")
    )
    label = args.label or args.url.split(":", 1)[0].split("+", 1)[0]
    print(render(month_close_scenarios(args.url, label, args.repeat)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
