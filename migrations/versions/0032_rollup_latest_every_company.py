"""rollup latest for every company: a level-0 row for each company that never held a record

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-03 23:00:00

The companies list sorted by a count (the DDIs or phone users each company holds now) joined
every company with rollup_latest, because a company that never held a record of the kind had
no row there: PostgreSQL's hash join of 100,000 companies and the sort of all of them took
160-190 ms, over the page budget (bench/README.md). With a row for every company and kind whose
rollup is built (level 0 and no month when the company has no rollup_months row), every order
of the list is one range of ix_rollup_latest_level. Companies created from now on get theirs
with the company (services/companies.py); the rollup's rebuild writes every company's.
"""

import sqlalchemy as sa
from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

# Every company without a row gets level 0, for each kind whose rollup is built (rollup_state):
# where it is not built, rollup_latest is empty and the count orders are not offered.
# tests/test_migrations.py runs it.
BACKFILL = """
INSERT INTO rollup_latest (kind, company, month, level)
SELECT s.kind, c.id, NULL, 0
FROM rollup_state AS s CROSS JOIN companies AS c
WHERE NOT EXISTS (
  SELECT 1 FROM rollup_latest AS l WHERE l.kind = s.kind AND l.company = c.id
)
"""


def upgrade():
    with op.batch_alter_table("rollup_latest") as batch:
        batch.alter_column("month", existing_type=sa.Date(), nullable=True)
    op.execute(BACKFILL)


def downgrade():
    op.execute("DELETE FROM rollup_latest WHERE month IS NULL")
    with op.batch_alter_table("rollup_latest") as batch:
        batch.alter_column("month", existing_type=sa.Date(), nullable=False)
