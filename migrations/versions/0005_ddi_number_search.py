"""ddi number search and numeric extension order

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 17:30:00

- ddis.number_reversed: the number's digits reversed, so a search by the end of the number
  ("4567") is an index range (a prefix of the reversed digits), for every company and for one.
  Existing rows are filled in batches of ids; SQLite has no reverse(), so the migration
  registers one on its connection.
- The list pages sort extensions numerically (130 before 1017): the (company, extension)
  indexes are replaced by indexes on the same expressions the queries order by
  (models.extension_order: the extension left-padded with zeros to 10 characters, then as
  typed), one per company and one across companies (a System-Admin's list).
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

BATCH = 50_000


def _extension_order(column: str) -> list:
    # As webapp.models.extension_order builds it, on a column named by text.
    padded = f"substr('0000000000' || {column}, length({column}) + 1)"
    return [sa.text(padded), sa.text(column)]


def _backfill() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        raw = bind.connection.driver_connection
        raw.create_function("reverse", 1, lambda s: None if s is None else s[::-1])
    low, high = bind.execute(sa.text("SELECT min(id), max(id) FROM ddis")).one()
    if low is None:
        return
    for start in range(low, high + 1, BATCH):
        bind.execute(
            sa.text(
                "UPDATE ddis SET number_reversed = reverse(number) WHERE id >= :a AND id < :b"
            ),
            {"a": start, "b": start + BATCH},
        )


def upgrade():
    with op.batch_alter_table("ddis", schema=None) as batch_op:
        batch_op.add_column(sa.Column("number_reversed", sa.String(length=15), nullable=True))
    _backfill()
    with op.batch_alter_table("ddis", schema=None) as batch_op:
        batch_op.alter_column(
            "number_reversed", existing_type=sa.String(length=15), nullable=False
        )
        batch_op.create_index(
            "ix_ddis_number_reversed", ["number_reversed", "dialcode", "number"], unique=False
        )
        batch_op.create_index(
            "ix_ddis_company_number_reversed",
            ["company", "number_reversed", "dialcode", "number"],
            unique=False,
        )
        batch_op.drop_index("ix_ddis_company_virt_exten")
    op.create_index(
        "ix_ddis_virt_exten_numeric",
        "ddis",
        [*_extension_order("virt_exten"), sa.text("dialcode"), sa.text("number")],
        unique=False,
    )
    op.create_index(
        "ix_ddis_company_virt_exten_numeric",
        "ddis",
        [sa.text("company"), *_extension_order("virt_exten"), sa.text("dialcode"), sa.text("number")],
        unique=False,
    )
    with op.batch_alter_table("phone_users", schema=None) as batch_op:
        batch_op.drop_index("ix_phone_users_company_virt_exten")
    op.create_index(
        "ix_phone_users_virt_exten_numeric",
        "phone_users",
        [*_extension_order("virt_exten"), sa.text("company"), sa.text("username")],
        unique=False,
    )
    op.create_index(
        "ix_phone_users_company_virt_exten_numeric",
        "phone_users",
        [sa.text("company"), *_extension_order("virt_exten"), sa.text("username")],
        unique=False,
    )


    # Fresh statistics for the new column and indexes, so the planner weighs them (SQLite keeps
    # none for an index until ANALYZE; PostgreSQL would wait for autovacuum).
    op.execute("ANALYZE ddis")
    op.execute("ANALYZE phone_users")


def downgrade():
    op.drop_index("ix_phone_users_company_virt_exten_numeric", table_name="phone_users")
    op.drop_index("ix_phone_users_virt_exten_numeric", table_name="phone_users")
    with op.batch_alter_table("phone_users", schema=None) as batch_op:
        batch_op.create_index(
            "ix_phone_users_company_virt_exten", ["company", "virt_exten", "username"], unique=False
        )
    op.drop_index("ix_ddis_company_virt_exten_numeric", table_name="ddis")
    op.drop_index("ix_ddis_virt_exten_numeric", table_name="ddis")
    with op.batch_alter_table("ddis", schema=None) as batch_op:
        batch_op.create_index(
            "ix_ddis_company_virt_exten",
            ["company", "virt_exten", "dialcode", "number"],
            unique=False,
        )
        batch_op.drop_index("ix_ddis_company_number_reversed")
        batch_op.drop_index("ix_ddis_number_reversed")
        batch_op.drop_column("number_reversed")
