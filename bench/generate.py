"""Generate a provider-sized data set: python -m bench.generate --ddis 1000000 --companies 10000

Skewed company sizes (a few large, many small), DDIs moved between companies, deleted and
re-created, phone users, and their history intervals over the last N months. Writes into
DATABASE_URL (default: bench.db in the current folder) after building the schema with the
app's migrations. The history indexes are dropped while loading and rebuilt afterwards.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import insert, text

from . import use_bench_database

BATCH = 20_000


def progress(label: str, done: int, total: int, started: float) -> None:
    width = 30
    filled = int(width * done / max(total, 1))
    rate = done / max(time.perf_counter() - started, 1e-9)
    bar = "#" * filled + "." * (width - filled)
    sys.stderr.write(f"\r{label:<14} [{bar}] {done:>10,}/{total:,} {rate:,.0f}/s")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def company_sizes(rng: random.Random, companies: int, total: int) -> list[int]:
    """Zipf-like: company i gets a share proportional to 1/(i+1)^0.9, at least 1."""
    weights = [1 / (i + 1) ** 0.9 for i in range(companies)]
    scale = total / sum(weights)
    sizes = [max(1, int(w * scale)) for w in weights]
    sizes[0] += total - sum(sizes)
    return sizes


def lifetimes(rng: random.Random, owner: int, start: datetime, now: datetime, companies: int):
    """One record's intervals [(company index, start, end or None)]."""
    span = (now - start).total_seconds()
    at = (
        start + timedelta(seconds=rng.uniform(0, span * 0.5))
        if rng.random() < 0.5
        else start - timedelta(days=rng.uniform(0, 400))
    )
    current = owner
    out = []
    while True:
        roll = rng.random()
        remaining = (now - at).total_seconds()
        if remaining <= 3600:
            break
        if roll < 0.35:  # moved to another company
            end = at + timedelta(seconds=rng.uniform(600, remaining))
            out.append((current, at, end))
            current = rng.randrange(companies) if rng.random() < 0.5 else owner
            at = end
        elif roll < 0.55:  # deleted, sometimes re-created
            end = at + timedelta(seconds=rng.uniform(600, remaining))
            out.append((current, at, end))
            if rng.random() < 0.5:
                return out
            at = end + timedelta(seconds=rng.uniform(0, 10 * 86400))
            if at >= now:
                return out
        else:
            break
    out.append((current, at, None))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ddis", type=int, default=10_000)
    parser.add_argument("--companies", type=int, default=100)
    parser.add_argument("--months", type=int, default=3)
    parser.add_argument("--users-per-ddi", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    use_bench_database()

    from flask_migrate import upgrade

    from webapp import create_app
    from webapp.access import Principal
    from webapp.extensions import db
    from webapp.models import Company, Ddi, HistoryInterval, PhoneUser
    from webapp.services.billing import rollups

    app = create_app()
    rng = random.Random(args.seed)
    now = datetime.now(UTC).replace(tzinfo=None, microsecond=0)
    start = now - timedelta(days=30 * args.months)
    with app.app_context():
        upgrade()
        engine = db.engine
        history_indexes = [ix for ix in HistoryInterval.__table__.indexes]
        with engine.begin() as conn:
            if conn.execute(text("SELECT count(*) FROM companies")).scalar():
                print("The database already holds data; use an empty one.", file=sys.stderr)
                return 1
            for ix in history_indexes:
                ix.drop(conn)
        names = [f"c{i:05d}" for i in range(args.companies)]
        with engine.begin() as conn:
            conn.execute(insert(Company), [{"id": n, "name": f"Company {n}"} for n in names])
        sizes = company_sizes(rng, args.companies, args.ddis)
        intervals = 0
        t0 = time.perf_counter()
        ddi_rows, history_rows, serial = [], [], 0

        def flush(conn, force=False):
            nonlocal ddi_rows, history_rows, intervals
            if ddi_rows and (force or len(ddi_rows) >= BATCH):
                conn.execute(insert(Ddi), ddi_rows)
                ddi_rows = []
            if history_rows and (force or len(history_rows) >= BATCH):
                conn.execute(insert(HistoryInterval), history_rows)
                intervals += len(history_rows)
                history_rows = []

        with engine.begin() as conn:
            for owner, size in enumerate(sizes):
                for _ in range(size):
                    serial += 1
                    key_dc, key_no = "44", f"{1000000000 + serial}"
                    life = lifetimes(rng, owner, start, now, args.companies)
                    for c, s, e in life:
                        history_rows.append(
                            {
                                "kind": "ddi",
                                "company": names[c],
                                "key": f"{key_dc}:{key_no}",
                                "start_at": s,
                                "end_at": e,
                                "source": "bench",
                            }
                        )
                    last_c, _, last_e = life[-1]
                    if last_e is None:
                        ddi_rows.append(
                            {
                                "dialcode": key_dc,
                                "number": key_no,
                                "number_reversed": key_no[::-1],
                                "virt_exten": str(100 + serial % 9000),
                                "company": names[last_c],
                            }
                        )
                    flush(conn)
                    if serial % 10_000 == 0:
                        progress("DDIs", serial, args.ddis, t0)
            flush(conn, force=True)
            progress("DDIs", args.ddis, args.ddis, t0)
            users = int(args.ddis * args.users_per_ddi)
            t1 = time.perf_counter()
            user_rows = []
            for n in range(users):
                owner = (
                    rng.choices(range(args.companies), weights=sizes)[0]
                    if n % 50 == 0
                    else (n * 7919) % args.companies
                )
                username = f"u{n}"
                life = lifetimes(rng, owner, start, now, 1)
                for _, s, e in life:
                    history_rows.append(
                        {
                            "kind": "user",
                            "company": names[owner],
                            "key": username,
                            "start_at": s,
                            "end_at": e,
                            "source": "bench",
                        }
                    )
                if life[-1][2] is None:
                    user_rows.append(
                        {
                            "company": names[owner],
                            "username": username,
                            "virt_exten": str(200 + n % 9000),
                        }
                    )
                if len(user_rows) >= BATCH:
                    conn.execute(insert(PhoneUser), user_rows)
                    user_rows = []
                flush(conn)
                if (n + 1) % 10_000 == 0:
                    progress("phone users", n + 1, users, t1)
            if user_rows:
                conn.execute(insert(PhoneUser), user_rows)
            flush(conn, force=True)
            progress("phone users", users, users, t1)
        t2 = time.perf_counter()
        print("building indexes…", file=sys.stderr)
        with engine.begin() as conn:
            # Every DDI is a number of the inventory, in service (as migration 0022 makes them).
            conn.execute(
                text(
                    "INSERT INTO numbers (dialcode, number, state, description) "
                    "SELECT dialcode, number, 'in_service', '' FROM ddis ORDER BY dialcode, number"
                )
            )
            for ix in history_indexes:
                ix.create(conn)
            conn.execute(text("ANALYZE"))  # fresh statistics, as a live database would have
        # The history was loaded directly, as an import would: build the reports' rollup.
        t3 = time.perf_counter()
        counts = rollups.build(Principal.cli("bench"))
        db.session.remove()
        if engine.dialect.name == "postgresql":
            # As autovacuum would have left a live database: hint bits set, the visibility map
            # filled (index-only scans), statistics fresh.
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text("VACUUM (ANALYZE)"))
        else:
            with engine.begin() as conn:
                conn.execute(text("ANALYZE"))
        print(
            f"report rollup: {sum(counts.values()):,} day rows in {time.perf_counter() - t3:.0f} s",
            file=sys.stderr,
        )
        print(
            f"{args.ddis:,} DDIs in {args.companies:,} companies, {users:,} phone users, "
            f"{intervals:,} history intervals; loaded in {t2 - t0:.0f} s, indexed in "
            f"{time.perf_counter() - t2:.0f} s",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
