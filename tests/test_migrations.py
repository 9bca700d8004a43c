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
