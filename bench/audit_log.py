"""The audit log of the bench data set: one entry per change the history records.

bench.generate loads the history directly (as an import would), so the data set has the
history of about 3 million changes and, without this, an audit log of a handful of rows: the
audit pages would be measured on a log no provider has. `fill` writes what the app would have
written for those changes, in one INSERT ... SELECT on the database: a create at each interval's
start within the generated months (`ddi.create` / `user.create`, with the record's company in
`after`) and a delete at each end (`ddi.delete` / `user.delete`, with it in `before`), by one of
a few operator accounts, through the API. Moves then show as a delete and a create at one
instant (the app writes one `update` entry with both companies; the page cost is the same).

`python -m bench.audit_log` fills DATABASE_URL's log unless it was filled before (an entry by
an operator account is there); bench.run does it for every data set it generates or keeps.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime, timedelta

from sqlalchemy import Engine, text

from . import use_bench_database

ACTORS = 7  # operator accounts the entries are spread over: api-operator-0 .. -6


def fill(engine: Engine, months: int = 3) -> int:
    """Write the audit entries of the history's changes of the last `months` months (the
    generated window: bench.generate's --months) and of every end; returns how many."""
    dialect = engine.dialect.name
    # An entry names its record as the app does: 'ddi 44:2071234567', 'user c00042/u17'.
    target = "CASE WHEN kind = 'ddi' THEN 'ddi ' || key ELSE 'user ' || company || '/' || key END"
    # The history ids spread the entries over the operators.
    actor = f"'api-operator-' || CAST(id % {ACTORS} AS VARCHAR(8))"
    if dialect == "postgresql":
        record = "CAST(json_build_object('company', company, 'key', key) AS JSON)"
    else:
        record = "json_object('company', company, 'key', key)"
    columns = "at, actor, via, action, target, company, other_company, before, after, detail"
    # Every piece is a constant of this module: no value from outside is formatted in.
    statements = [
        f"""INSERT INTO audit_log ({columns})
            SELECT start_at, {actor}, 'api', kind || '.create', {target}, company, NULL,
                   NULL, {record}, NULL
            FROM history_intervals WHERE start_at >= :since""",  # noqa: S608
        f"""INSERT INTO audit_log ({columns})
            SELECT end_at, {actor}, 'api', kind || '.delete', {target}, company, NULL,
                   {record}, NULL, NULL
            FROM history_intervals WHERE end_at IS NOT NULL""",  # noqa: S608
    ]
    written = 0
    with engine.begin() as conn:
        latest = conn.execute(text("SELECT max(start_at) FROM history_intervals")).scalar()
        if latest is None:
            return 0
        if isinstance(latest, str):  # SQLite answers an aggregate of datetimes as text
            latest = datetime.fromisoformat(latest)
        since = latest - timedelta(days=30 * months)
        for statement in statements:
            written += conn.execute(text(statement), {"since": since}).rowcount or 0
        conn.execute(text("ANALYZE"))
    if dialect == "postgresql":
        # As autovacuum would have left a live log: hint bits set and the visibility map
        # filled, so the first page to read an old range does not pay for 3 million fresh rows.
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM (ANALYZE) audit_log"))
    return written


def filled(engine: Engine) -> bool:
    with engine.connect() as conn:
        query = text("SELECT 1 FROM audit_log WHERE actor = 'api-operator-0' LIMIT 1")
        return conn.execute(query).first() is not None


def main() -> int:
    use_bench_database()
    from webapp import create_app
    from webapp.extensions import db

    app = create_app()
    with app.app_context():
        if filled(db.engine):
            print("the audit log is already filled", file=sys.stderr)
            return 0
        started = time.perf_counter()
        written = fill(db.engine)
        print(
            f"audit log: {written:,} entries in {time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
