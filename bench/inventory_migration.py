"""`python -m bench.inventory_migration`: the number inventory's migration (0022) changes no
report figure, checked on a whole data set.

On DATABASE_URL (a scratch copy: it is migrated down and up again), at the current schema:
every month of the history, both kinds, every company and every day of the report, read
through the report service; then the schema is taken back to 0021 (before the inventory) and
the same reports read again; then forward to the current schema and read a third time. The
three must be identical, figure for figure. Prints how many company-days it compared and how
long each pass took, and exits non-zero on the first difference.

The reports read only the history, which the migration does not touch; this checks that
nothing else they read (the rollup, closed months) moved either.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from datetime import date

from flask_migrate import downgrade, upgrade
from sqlalchemy import func, select

from webapp import create_app
from webapp.access import Principal
from webapp.extensions import db
from webapp.models import HistoryInterval
from webapp.services.billing import reports

BEFORE_INVENTORY = "0021"


def _months() -> list[tuple[int, int]]:
    first = db.session.scalar(select(func.min(HistoryInterval.start_at)))
    if first is None:
        return []
    today = date.today()
    months, (year, month) = [], (first.year, first.month)
    while (year, month) <= (today.year, today.month):
        months.append((year, month))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return months


def _fingerprint() -> tuple[str, int, float]:
    """A digest of every report figure of every month and kind, how many company-days it
    covers, and the seconds it took."""
    started = time.perf_counter()
    digest, days = hashlib.sha256(), 0
    root = Principal.cli("bench-inventory-migration")
    for year, month in _months():
        for kind in ("ddi", "user"):
            scope = reports.parse_scope({"month": month, "year": year})
            values = reports.report(root, kind, scope)
            digest.update(json.dumps([kind, year, month, values], sort_keys=True).encode())
            days += sum(len(entry["dates"]) for entry in values.values())
            db.session.rollback()
    return digest.hexdigest(), days, time.perf_counter() - started


def main() -> int:
    url = os.environ.get("DATABASE_URL")
    if not url:
        print("Set DATABASE_URL to a scratch copy of a data set.", file=sys.stderr)
        return 2
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "x" * 40})
    with app.app_context():
        upgrade()
        now, days, took = _fingerprint()
        print(f"current schema: {days:,} company-days in {took:.0f} s")
        db.session.remove()
        downgrade(revision=BEFORE_INVENTORY)
        before, _, took = _fingerprint()
        print(f"before the inventory ({BEFORE_INVENTORY}): {took:.0f} s")
        db.session.remove()
        upgrade()
        after, _, took = _fingerprint()
        print(f"after migrating again: {took:.0f} s")
    if len({now, before, after}) != 1:
        print("The reports differ across the migration.", file=sys.stderr)
        return 1
    print(f"identical: every figure of {days:,} company-days, before and after the migration")
    return 0


if __name__ == "__main__":
    sys.exit(main())
