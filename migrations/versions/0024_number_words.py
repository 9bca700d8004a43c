"""number words: the words of numbers' descriptions, for the number search (docs/pages.md)

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-02 08:00:00

`/ddis?q=london` finds numbers whose description has a word starting with "london". Each word
of each description is a row of `number_words` (word, dialcode, number), its key an index a
prefix is one range of, so a search never reads the descriptions. The words of the
descriptions stocked so far are added here; from now on every write of a description keeps
them (webapp/services/inventory.py).
"""

import re

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

# webapp.services.fields.words_of as of this revision (a migration keeps its own copy).
WORD = re.compile(r"[^\W_]+")
CHUNK = 5000


def upgrade():
    op.create_table(
        "number_words",
        sa.Column(
            "word",
            sa.String(length=200).with_variant(sa.String(length=200, collation="C"), "postgresql"),
            nullable=False,
        ),
        sa.Column("dialcode", sa.String(length=7), nullable=False),
        sa.Column("number", sa.String(length=15), nullable=False),
        sa.PrimaryKeyConstraint("word", "dialcode", "number", name=op.f("pk_number_words")),
    )
    op.create_index("ix_number_words_number", "number_words", ["dialcode", "number"])
    _backfill()


def _backfill():
    conn = op.get_bind()
    words = sa.table(
        "number_words", sa.column("word"), sa.column("dialcode"), sa.column("number")
    )
    described = conn.execute(
        sa.text("SELECT dialcode, number, description FROM numbers WHERE description <> ''")
    ).all()
    rows = [
        {"word": word, "dialcode": dialcode, "number": number}
        for dialcode, number, description in described
        for word in sorted(set(WORD.findall(description.lower())))
    ]
    for i in range(0, len(rows), CHUNK):
        conn.execute(words.insert(), rows[i : i + CHUNK])


def downgrade():
    op.drop_index("ix_number_words_number", table_name="number_words")
    op.drop_table("number_words")
