"""The CSV writing of every download (webapp/views/downloads.py) and the audit CSV, as sped up
for big downloads: the same bytes as the plain way (a csv.writer row by row, each cell through
`neutralise`; strftime; the text of each FieldChange; each entry read through the ORM, its
JSON decoded by SQLAlchemy, as `shown` redacts it for the reader)."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from webapp.access import Principal
from webapp.database import write_transaction
from webapp.extensions import db
from webapp.models import AuditEntry
from webapp.services.history import audit, audit_export
from webapp.views import downloads
from webapp.views.audit import CSV_COLUMNS
from webapp.views.audit_values import changes, changes_text

from .factories import OPERATOR

CELLS = ["plain", "=1+1", "+44", "-3", "@SUM(A1)", "\tx", "\rx", "", "a,b", 'say "hi"', "é → ü"]


def plain(header, rows) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    for row in rows:
        writer.writerow([downloads.neutralise(cell) for cell in row])
    return out.getvalue()


def written(rows) -> str:
    """The rows as csv.writer writes them, each cell neutralised: the long way."""
    out = io.StringIO()
    csv.writer(out).writerows([downloads.neutralise(cell) for cell in row] for row in rows)
    return out.getvalue()


# Cells of what makes csv.writer quote or neutralise act, and what does not.
SOME_CELL = st.text(alphabet=",\"\r\n=+-@\t' aé→\x00;:", max_size=6)
ROWS = st.lists(st.lists(SOME_CELL, min_size=1, max_size=5), min_size=1, max_size=8)


@pytest.mark.slow  # 3,000 examples, about 10 s
@pytest.mark.database_independent
@settings(max_examples=3000, deadline=None)
@given(ROWS)
def test_a_chunk_written_plainly_is_what_csv_writer_writes(rows):
    """downloads._plain_text, the short way, either declines or writes the same text."""
    text = downloads._plain_text(rows)
    assert text is None or text == written(rows)


@pytest.mark.database_independent
@given(st.lists(st.lists(st.text(alphabet="ab é→;:", max_size=6), min_size=2, max_size=5),
                min_size=1, max_size=8))  # fmt: skip
def test_a_chunk_that_needs_nothing_is_written_plainly(rows):
    assert downloads._plain_text(rows) == written(rows)


@pytest.mark.database_independent
@pytest.mark.parametrize("count", [0, 1, downloads.FLUSH_ROWS, 2 * downloads.FLUSH_ROWS + 7])
def test_the_download_is_the_plain_csv_of_its_rows(app, count):
    rows = [[CELLS[(n + i) % len(CELLS)] for i in range(4)] for n in range(count)]
    header = ("a", "=b", "c", "d")
    with app.test_request_context("/"):
        response = downloads.csv_download("x.csv", header, iter(rows))
        body = b"".join(part.encode() for part in response.response)
    assert body.decode() == plain(header, rows)
    assert response.headers["Content-Disposition"] == "attachment; filename=x.csv"


@pytest.mark.database_independent
@pytest.mark.parametrize(
    "at",
    [
        datetime(2026, 12, 2, 15, 4, 5),
        datetime(2026, 12, 2, 15, 4, 5, 123456),
        datetime(1999, 1, 1),
        datetime(999, 3, 4, 5, 6, 7),  # strftime's year is not padded here
    ],
)
def test_the_audit_instant_is_strftimes(at):
    assert audit_export.instant_text(at) == at.strftime("%Y-%m-%d %H:%M:%S")


@pytest.mark.database_independent
@pytest.mark.parametrize(
    ("before", "after"),
    [
        (None, None),
        ({}, {}),
        (None, {"company": "acme", "key": "44:1", "virt_exten": "100"}),
        ({"company": "acme", "virt_exten": "100"}, None),
        ({"virt_exten": "100", "company": "acme"}, {"virt_exten": "101", "company": "acme"}),
        ({"x": None, "flag": True}, {"x": 3, "flag": False, "new_field": ["a", "b"]}),
        ({"admin_of": []}, {"admin_of": ["acme", "globex"], "grants": {"a_b": 1}}),
        ({}, None),
        (None, {}),
    ],
)
def test_the_changes_text_is_the_text_of_the_changes(before, after):
    assert changes_text(before, after) == "; ".join(c.text() for c in changes(before, after))


# --- the audit CSV, whole, against the plain way ---------------------------------------------


@pytest.fixture
def world_accounts() -> dict[str, str]:
    # cadmin: acme; globex_admin: globex (the other side of the moves between them).
    return {"root": "root", "cadmin": "cadmin", "globex_admin": "cadmin_reporter"}


# The readers' grants (factories.ROLES), as the plain way reads the log for them.
READERS = {
    "root": Principal(username="root", via="ui", system_admin=True),
    "cadmin": Principal(username="cadmin", via="ui", admin_of=frozenset({"acme"})),
    "globex_admin": Principal(
        username="globex_admin",
        via="ui",
        admin_of=frozenset({"globex"}),
        reporting_for=frozenset({"acme"}),
    ),
}
NESTED = {"grants": {"a_b": [1, {"deep": None}], "é": True}, "rows": [True, False, None, 2.5]}


def varied_log() -> None:
    """Creations, deletions, updates and moves (both ways between acme and globex), entries of
    no company, at shared instants; values unicode, formula-like, nested, None, booleans,
    lists, big and small numbers."""
    start = datetime(2025, 3, 4, 5, 6, 7, 891011)
    acme_user = {"company": "acme", "key": "ana", "name": 'Zoë 😀 "q", x', "max_rows": 2**70}
    entries = [
        audit.entry(OPERATOR, "user.create", "user acme/ana", company="acme", after=acme_user),
        audit.entry(
            OPERATOR,
            "user.update",
            "user acme/ana",
            company="acme",
            before={**acme_user, "flag": True, "admin_of": [], "x": None, "f": 0.1},
            after={**acme_user, "flag": False, "admin_of": ["acme", "=globex"], "x": 3, **NESTED},
            detail="=HYPERLINK(1)",
        ),
        audit.entry(
            OPERATOR,
            "user.move",
            "user globex/ana",
            company="globex",
            other_company="acme",
            before=acme_user,
            after={**acme_user, "company": "globex", "virt_exten": "-1"},
        ),
        audit.entry(
            OPERATOR,
            "ddi.move",
            "ddi 44:2071234567",
            company="acme",
            other_company="globex",
            before={"company": "globex", "key": "44:2071234567", "virt_exten": "+44"},
            after={"company": "acme", "key": "44:2071234567", "virt_exten": "@SUM(1)"},
            detail="\tx, \r\ny",
        ),
        audit.entry(OPERATOR, "ddi.delete", "ddi 44:1", company="globex", before={"k": "\u2192"}),
        audit.entry(OPERATOR, "account.create", "account bob", after={"system_admin": True}),
        audit.entry(OPERATOR, "account.sign-in", "account bob", detail="signed in"),
        audit.entry(OPERATOR, "x.empty", "=x", company="acme", before={}, after={}),
        audit.entry(OPERATOR, "x.lists", "-y", after={"l": [], "m": {}, "n": [[1, 2], "a"]}),
        audit.entry(OPERATOR, "x.numbers", "n", after={"a": -0.0, "b": 1e300, "c": -(2**80)}),
    ]
    for i, entry in enumerate(entries):
        entry["at"] = start + timedelta(seconds=i // 3)  # ties, ordered by id
    # The instant's text cut from SQLite's stored text (audit_export._instant_texts), and the
    # long way round where it cannot be: microseconds, and a year before 1000.
    entries[0]["at"] = start.replace(microsecond=999_999)
    entries[1]["at"] = datetime(999, 12, 31, 23, 59, 58, 5)
    with write_transaction() as session:
        audit.record(session, entries)


def plain_audit_csv(reader: Principal, **filters: str) -> str:
    """The audit CSV the plain way: every entry read through the ORM (SQLAlchemy's JSON type),
    `shown` for the reader, strftime, each FieldChange's text, a csv.writer."""
    conditions = audit.filter_conditions(reader, **{f: filters.get(f) for f in audit_filters()})
    db.session.rollback()
    found = db.session.scalars(
        select(AuditEntry).where(*conditions).order_by(AuditEntry.at.desc(), AuditEntry.id.desc())
    )
    scope = reader.auditable_companies()
    rows = []
    for entry in (audit.shown(row, scope) for row in found):
        text = "; ".join(c.text() for c in changes(entry.before, entry.after))
        at = entry.at.strftime("%Y-%m-%d %H:%M:%S")
        cells = [at, entry.actor, entry.via, entry.action, entry.target, entry.company_text]
        rows.append([*cells, text, entry.detail or ""])
    return plain(CSV_COLUMNS, rows)


def audit_filters() -> tuple[str, ...]:
    return ("actor", "target", "company", "date_from", "date_to", "action")


@pytest.mark.parametrize(
    "query",
    ["", "company=acme", "company=globex", "action=user.move", "target=ana", "date_to=2025-03-04"],
)
def test_the_audit_csv_is_the_plain_csv_of_the_log_for_every_reader(world, query):
    varied_log()
    for username in ("root", "cadmin", "globex_admin"):
        response = world.browser(username).get(f"/audit.csv?{query}")
        if response.status_code == 400:  # a company the reader may not pick: no download
            assert username != "root"
            continue
        assert response.status_code == 200, (username, query)
        filters = dict(part.split("=") for part in query.split("&") if part)
        expected = plain_audit_csv(READERS[username], **filters)
        assert response.get_data() == expected.encode(), (username, query)
        if not query:  # the whole log: a move's side in each reader's view, and more
            assert expected.count("\n") > 5, username


@pytest.mark.database_independent
@pytest.mark.parametrize(
    "text",
    [
        None,
        "null",
        '{"a": 1, "b": 2, "a": 3}',
        "[" * 300 + "]" * 300,  # deeper than pydantic_core goes: json.loads reads it
        '{"n": 123456789012345678901234567890, "f": 0.1, "e": 1e400, "z": -0.0, "x": NaN}',
        '{"s": "\\u00e9\\ud83d\\ude00", "lone": "\\ud800", "nested": [{"a": [true, null]}]}',
    ],
)
def test_the_audit_export_decodes_json_as_json_loads(text):
    expected = None if text is None else json.loads(text)
    assert repr(audit_export._json(text)) == repr(expected)
