"""The changes since a close with a late batch in the record (docs/month-close.md), on a scratch
copy of the data set: the page a closed month's report loads after itself.

python -m bench.close_changes --url URL [--quick]

On the copy it closes the last ended month, times the changes fragment
(`/reports/months/YYYY-MM/changes?kind=ddi`, as the report page asks for it, HX-Request set)
with nothing written since the close (the reference), then imports a late batch of history into
the closed month through the app's own import (`history_import.import_csv`, as
`flask history import` does): on two days of the month, three DDIs active all day for every
tenth company, so each of them has changed days. Then the same fragment again (the app figure):
what a provider sees the morning after a late CDR feed. Target: the page budget, 150 ms p95 of
server time (docs/pages.md), on the app figure; the ratio shows what a non-empty record costs.
Before timing, the fragment must name every company of the batch as changed (the run fails
otherwise). The copy is dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import date
from pathlib import Path

from .imports import _copy, _drop
from .scale import BUDGET_BYTES, BUDGET_MS, _client, p95
from .table import Result, render

DAYS = (3, 17)  # the days of the closed month the late batch falls on
PER_DAY = 3  # DDIs active all day, per company and day: each raises that day's peak
EVERY = 10  # every tenth company is in the batch


def _late_batch(app, year: int, month: int) -> int:
    """Import the late batch (module doc); the number of companies it touches."""
    from webapp.access import Principal
    from webapp.extensions import db
    from webapp.services.imports import history_import

    with app.app_context():
        ids = db.session.execute(db.text("SELECT id FROM companies ORDER BY id")).scalars().all()
        companies = ids[::EVERY]
        rows = ["kind,company,key,start,end"]
        for n, company in enumerate(companies):
            for day in DAYS:
                # Whole days: a company's level may climb all day, so only DDIs active all day
                # surely raise its peak. Numbers under 2998 are none the generator makes.
                start = f"{year:04d}-{month:02d}-{day:02d}T00:00:00Z"
                end = f"{year:04d}-{month:02d}-{day + 1:02d}T00:00:00Z"
                rows += [
                    f"ddi,{company},44:2998{n:05d}{day:02d}{i},{start},{end}"
                    for i in range(PER_DAY)
                ]
        history_import.import_csv(
            Principal.cli("cli:bench-close-changes"), "\n".join(rows) + "\n", source="late"
        )
        db.session.remove()
    return len(companies)


def close_changes_scenarios(database_url: str, label: str, quick: bool = False) -> list[Result]:
    """One row: the changes fragment p95 after the late batch, against before it (module doc)."""
    from webapp.extensions import db

    from .report import last_closed_month

    copy = _copy(database_url, "close_changes")
    client = None
    try:
        month, year = last_closed_month(date.today())
        client, _undo = _client(copy)  # signed in, the month closed; the copy is dropped
        path = f"/reports/months/{year:04d}-{month:02d}/changes?kind=ddi"
        headers = {"HX-Request": "true"}

        def timed() -> tuple[float, bytes]:
            times, body = [], b""
            for round_ in range(1 + (3 if quick else 20)):
                t = time.perf_counter()
                response = client.get(path, headers=headers)  # type: ignore[attr-defined]
                spent = time.perf_counter() - t
                assert response.status_code == 200, (path, response.status_code)
                body = response.data
                if round_:
                    times.append(spent)
            return p95(times), body

        before, _ = timed()
        touched = _late_batch(client.application, year, month)  # type: ignore[attr-defined]
        after, body = timed()
        counted = f"figures for {touched:,} compan"
        assert counted in body.decode(), "the changes fragment does not count the late batch"
        return [
            Result(
                label,
                f"changes since a close, late batch into {touched:,} companies "
                f"({touched * len(DAYS):,} changed days): changes?kind=ddi p95",
                after * 1000,
                before * 1000,
                "same fragment, nothing written since the close",
                "ms",
                absolute_target=BUDGET_MS,
                size=len(body),
                size_budget=BUDGET_BYTES,
            )
        ]
    finally:
        if client is not None:  # no connection may stay on the copy it drops
            with client.application.app_context():  # type: ignore[attr-defined]
                db.engine.dispose()
        _drop(copy)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the data set's database URL")
    parser.add_argument("--label", help="the database column (default: the URL's backend)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("SECRET_KEY", "bench-secret-key-not-secret")
    os.environ.setdefault(
        "INSTANCE_PATH", str(Path(__file__).resolve().parent.parent / "instance-bench")
    )
    label = args.label or args.url.split(":", 1)[0].split("+", 1)[0]
    print(render(close_changes_scenarios(args.url, label, args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
