"""The Alembic migrations build exactly the schema the models describe."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from webapp.extensions import db


def test_models_and_migrations_agree(app):
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), db.metadata)
    assert diff == [], f"models changed without a migration: {diff}"
