"""The Alembic migrations build exactly the schema the models describe."""

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from webapp.extensions import db


# SQLite's reflection cannot read an index on expressions (the numeric extension order's,
# models.extension_order) and says so; Alembic leaves such indexes out of the comparison there
# and compares them on PostgreSQL.
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_models_and_migrations_agree(app):
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), db.metadata)
    assert diff == [], f"models changed without a migration: {diff}"


def test_the_sums_migration_derives_what_the_rollup_keeps(app, factory):
    """Migration 0009 fills rollup_days and rollup_months from the daily_peaks already there
    with its own frozen copy of the derivation: it must give what the app keeps."""
    import importlib.util
    import random
    from datetime import datetime, timedelta
    from pathlib import Path

    from sqlalchemy import delete

    from webapp.database import write_transaction
    from webapp.models import RollupDay, RollupMonth

    from .factories import add_history
    from .invariants import _rollup_rows

    rng = random.Random(9)
    for company in ("alpha", "beta", "gamma"):
        factory.company(company)
    rows = []
    for i in range(120):
        start = datetime(2026, 8, 1) + timedelta(hours=rng.randrange(24 * 100))
        end = start + timedelta(hours=rng.randrange(1, 24 * 40)) if rng.random() < 0.8 else None
        kind = rng.choice(["ddi", "user"])
        rows.append((kind, rng.choice(["alpha", "beta", "gamma"]), f"k{i}", start, end))
    add_history(*rows)
    kept = _rollup_rows()
    assert kept["rollup_months"], "the history gave no sums to compare"
    path = Path(__file__).parent.parent / "migrations/versions/0009_rollup_sums.py"
    spec = importlib.util.spec_from_file_location("migration_0009", path)
    assert spec is not None and spec.loader is not None
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)
    with write_transaction() as session:
        session.execute(delete(RollupDay))
        session.execute(delete(RollupMonth))
        migration._derive(session.connection())
    assert _rollup_rows() == kept
