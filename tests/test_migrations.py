"""The Alembic migrations build exactly the schema the models describe, and go back down."""

import contextlib
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from webapp.extensions import db

from .commands import Ran


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
    with its own frozen copy of the derivation, and 0030 rollup_latest from rollup_months: they
    must give what the app keeps."""
    import importlib.util
    import random
    from datetime import datetime, timedelta
    from pathlib import Path

    from sqlalchemy import delete, text

    from webapp.database import write_transaction
    from webapp.models import RollupDay, RollupLatest, RollupMonth

    from .factories import add_history
    from .invariants import _rollup_rows

    rng = random.Random(9)
    for company in ("alpha", "beta", "gamma", "delta"):
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
    # Migration 0030 fills rollup_latest from those rollup_months, and 0032 adds level 0 for
    # every company without one ("delta" never held anything).
    backfills = []
    for name in ("0030_rollup_latest", "0032_rollup_latest_every_company"):
        path = Path(__file__).parent.parent / f"migrations/versions/{name}.py"
        spec = importlib.util.spec_from_file_location(f"migration_{name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        backfills.append(module.BACKFILL)
    assert ("ddi", "delta", None, 0) in kept["rollup_latest"], "no company without levels"
    assert any(row[2] is not None for row in kept["rollup_latest"]), "no levels to compare"
    with write_transaction() as session:
        session.execute(delete(RollupLatest))
        for backfill in backfills:
            session.execute(text(backfill))
    assert _rollup_rows() == kept


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based")
def test_downgrade_then_upgrade_round_trips_and_db_check_sees_no_drift(tmp_path, test_config):
    """The rollback procedure of docs/upgrade.md on a scratch database, through the real
    command line: `db check` finds no drift on a fresh database; `db downgrade` (one revision)
    keeps the rows the older schema has; `db check` then says the database is not up to date;
    `db upgrade` brings it back and `db check` agrees again. Then every migration's downgrade
    runs, down to an empty database and up again, to the models' schema."""
    from flask_migrate import downgrade, upgrade
    from sqlalchemy import create_engine, text

    from webapp import create_app

    from .conftest import PG_URL
    from .databases import postgres_database
    from .test_backup import run_cli

    script = ScriptDirectory(str(Path(__file__).parent.parent / "migrations"))
    head = script.get_current_head()
    assert head is not None
    previous = script.get_revision(head).down_revision
    instance = tmp_path / "instance"

    with contextlib.ExitStack() as stack:
        if PG_URL:
            url = stack.enter_context(postgres_database(PG_URL, "telephony_migrate"))
        else:
            url = f"sqlite:///{tmp_path / 'scratch.db'}"

        def flask(*args: str) -> Ran:
            return run_cli(url, *args, instance=instance)

        def revision() -> str:
            engine = create_engine(url)
            try:
                with engine.connect() as conn:
                    return conn.scalar(text("SELECT version_num FROM alembic_version"))
            finally:
                engine.dispose()

        def companies() -> list[tuple]:
            engine = create_engine(url)
            try:
                with engine.connect() as conn:
                    return [tuple(r) for r in conn.execute(text("SELECT id, name FROM companies"))]
            finally:
                engine.dispose()

        assert flask("db", "upgrade").returncode == 0
        assert flask("companies", "create", "acme", "--name", "Acme").returncode == 0
        checked = flask("db", "check")
        assert checked.returncode == 0, checked.stderr
        assert "No new upgrade operations detected" in checked.stdout + checked.stderr

        done = flask("db", "downgrade")
        assert done.returncode == 0, done.stderr
        assert revision() == previous
        assert companies() == [("acme", "Acme")]
        checked = flask("db", "check")
        assert checked.returncode == 1 and "not up to date" in checked.stderr

        assert flask("db", "upgrade").returncode == 0
        assert revision() == head
        assert companies() == [("acme", "Acme")]
        checked = flask("db", "check")
        assert checked.returncode == 0, checked.stderr

        app = create_app({**test_config, "SQLALCHEMY_DATABASE_URI": url})
        with app.app_context():
            downgrade(revision="base")
            upgrade()
            with db.engine.connect() as conn:
                diff = compare_metadata(MigrationContext.configure(conn), db.metadata)
            db.engine.dispose()
        assert diff == []


@pytest.mark.slow
def test_0015_encrypts_clear_secrets_in_place_and_downgrade_decrypts_them(tmp_path):
    """A webhook with a clear secret (as 0014 stored it): `db upgrade` seals it, in place, so
    the app signs with the same secret and a SQLite backup holds it nowhere (nor its freed
    pages); `db downgrade` gives it back in clear; up again, sealed again."""
    from sqlalchemy import create_engine, text

    from webapp import create_app
    from webapp.services.events import webhooks

    from .conftest import PG_URL
    from .databases import postgres_database
    from .test_backup import SECRET, run_cli

    clear = webhooks.new_secret()
    instance = tmp_path / "instance"
    with contextlib.ExitStack() as stack:
        if PG_URL:
            url = stack.enter_context(postgres_database(PG_URL, "telephony_secrets"))
        else:
            url = f"sqlite:///{tmp_path / 'scratch.db'}"

        def flask(*args: str) -> Ran:
            done = run_cli(url, *args, instance=instance)
            assert done.returncode == 0, (args, done.stderr)
            return done

        def sql(statement: str, **values: str) -> list[tuple]:
            engine = create_engine(url)
            try:
                with engine.begin() as conn:
                    result = conn.execute(text(statement), values)
                    return [tuple(r) for r in result] if result.returns_rows else []
            finally:
                engine.dispose()

        flask("db", "upgrade", "0014")
        sql(
            "INSERT INTO webhooks (id, url, secret, created_at, created_by, cursor, "
            "head_attempts) VALUES (7, 'http://127.0.0.1:9/h', :secret, "
            "'2026-11-01 00:00:00', 'test', 0, 0)",
            secret=clear,
        )
        flask("db", "upgrade")
        [(sealed, previous)] = sql("SELECT secret_sealed, previous_secret_sealed FROM webhooks")
        assert "whsec_" not in sealed and previous is None
        app = create_app({"SECRET_KEY": SECRET, "SQLALCHEMY_DATABASE_URI": url})
        with app.app_context():
            hook = db.session.get(webhooks.Webhook, 7)
            assert webhooks.signing_secrets(hook, webhooks.utcnow()) == [clear]
            db.session.remove()
            db.engine.dispose()
        if not PG_URL:
            target = tmp_path / "backup.db"
            flask("db", "backup", str(target))
            data = target.read_bytes()
            assert b"whsec_" not in data
            assert clear.removeprefix("whsec_").encode() not in data

        flask("db", "downgrade", "0014")
        assert sql("SELECT id, secret FROM webhooks") == [(7, clear)]
        flask("db", "upgrade")
        [(again,)] = sql("SELECT secret_sealed FROM webhooks")
        assert "whsec_" not in again and again != sealed  # sealed anew: a fresh IV
