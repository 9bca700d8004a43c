"""rollup days slots: a day's sums over every company in a few rows, one per writer slot

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-02 20:00:00

Every writer of a kind added its change to the day's one rollup_days row and held that row's
lock until it committed: on PostgreSQL two API writes, whatever their companies, ran one after
the other (two clients made no more DDIs a second than one). A slot in the key lets writers on
different connections add to different rows of the same day; readers sum a day's rows. The
existing rows become slot 0, which the full rebuild and SQLite (one writer at a time) keep using.
"""

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("rollup_days") as batch:
        batch.add_column(sa.Column("slot", sa.SmallInteger(), nullable=False, server_default="0"))
        batch.drop_constraint("pk_rollup_days", type_="primary")
        batch.create_primary_key("pk_rollup_days", ["kind", "day", "slot"])


def downgrade():
    # The slots of a day summed into slot 0, then the one-row-per-day key again.
    op.execute(
        "UPDATE rollup_days SET rise = (SELECT sum(r.rise) FROM rollup_days r "
        "WHERE r.kind = rollup_days.kind AND r.day = rollup_days.day), "
        "change = (SELECT sum(r.change) FROM rollup_days r "
        "WHERE r.kind = rollup_days.kind AND r.day = rollup_days.day) WHERE slot = 0"
    )
    op.execute(
        "INSERT INTO rollup_days (kind, day, slot, rise, change) "
        "SELECT kind, day, 0, sum(rise), sum(change) FROM rollup_days r GROUP BY kind, day "
        "HAVING min(slot) > 0"
    )
    op.execute("DELETE FROM rollup_days WHERE slot > 0")
    with op.batch_alter_table("rollup_days") as batch:
        batch.drop_constraint("pk_rollup_days", type_="primary")
        batch.create_primary_key("pk_rollup_days", ["kind", "day"])
        batch.drop_column("slot")
