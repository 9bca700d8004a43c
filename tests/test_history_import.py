"""`flask --app app history import PATH.csv` (docs/cli.md#history-import).

Mostly through the service, which the command calls; a few command runs (the `flask` fixture)
check what a script sees: the exit status, one line on stderr naming the line at fault, nothing
written.
Every rejected file is checked with `snapshot()`: nothing at all changed.
"""

from __future__ import annotations

import re
import subprocess
from datetime import UTC, date, datetime, timedelta

import pytest
from sqlalchemy import select

from webapp.access import Principal
from webapp.database import utcnow
from webapp.errors import FileRejected, Invalid
from webapp.extensions import db
from webapp.models import AuditEntry, HistoryInterval
from webapp.services.billing import reports
from webapp.services.imports.history_import import import_csv

from .factories import Factory, snapshot
from .waiting import wait_until

HEADER = "kind,company,key,start,end"
DDI_ROW = "ddi,acme,44:2071234567,2025-10-01T00:00:00Z,2025-10-11T00:00:00Z"
USER_ROW = "user,acme,ana,2025-10-05T10:00:00+00:00,2025-10-05T11:00:00+00:00"


# --- helpers ---------------------------------------------------------------------------------


def csv_text(*rows: str, header: str = HEADER) -> str:
    return "".join(line + "\n" for line in (header, *rows))


def run(content: str):
    return import_csv(Principal.cli(), content)


def intervals() -> list[tuple]:
    db.session.rollback()
    h = HistoryInterval
    query = select(h.kind, h.company, h.key, h.start_at, h.end_at, h.source).order_by(
        h.kind, h.key, h.start_at
    )
    return [tuple(r) for r in db.session.execute(query)]


def audit_actions() -> list[str]:
    db.session.rollback()
    return list(db.session.scalars(select(AuditEntry.action).order_by(AuditEntry.id)))


def names_line(message: str, line: int) -> bool:
    return re.search(rf"\bline {line}\b", message, re.IGNORECASE) is not None


def assert_rejected(content: str, line: int) -> str:
    """The file is refused naming `line`, and nothing at all is written."""
    before = snapshot()
    with pytest.raises(Invalid) as caught:
        run(content)
    message = caught.value.message
    assert names_line(message, line), message
    assert snapshot() == before
    return message


def iso(moment: datetime) -> str:
    """A naive UTC datetime as ISO 8601 with an explicit offset."""
    return moment.replace(tzinfo=UTC).isoformat()


@pytest.fixture
def companies(factory: Factory) -> Factory:
    factory.company("acme")
    factory.company("globex")
    return factory


def assert_one_line_error(result: subprocess.CompletedProcess, *words: str) -> str:
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# --- a good file -----------------------------------------------------------------------------


def test_good_file_writes_import_intervals_and_one_audit_entry(companies):
    content = csv_text(
        DDI_ROW,
        USER_ROW,
        "user,globex,ana,2025-10-05T10:30:00Z,2025-10-06T00:00:00Z",
    )
    before = snapshot()
    result = run(content)
    assert result.rows == 3 and result.written == 3
    assert intervals() == [
        (
            "ddi",
            "acme",
            "44:2071234567",
            datetime(2025, 10, 1),
            datetime(2025, 10, 11),
            "import",
        ),
        ("user", "acme", "ana", datetime(2025, 10, 5, 10), datetime(2025, 10, 5, 11), "import"),
        (
            "user",
            "globex",
            "ana",
            datetime(2025, 10, 5, 10, 30),
            datetime(2025, 10, 6),
            "import",
        ),
    ]
    after = snapshot()
    assert after["history"] == before["history"] + 3
    assert after["open_history"] == before["open_history"]
    assert after["ddis"] == before["ddis"] and after["users"] == before["users"]
    assert after["audit"] == before["audit"] + 1
    assert audit_actions()[-1] == "history.import"


def test_same_file_twice_writes_nothing_new(companies):
    content = csv_text(DDI_ROW, USER_ROW, "ddi,globex,44:1,2025-09-01T00:00:00Z,2025-09-02T00:00Z")
    first = run(content)
    assert first.written == 3
    written = intervals()
    second = run(content)
    assert second.written == 0
    assert intervals() == written


def test_offsets_are_converted_to_utc(companies):
    run(
        csv_text(
            "ddi,acme,44:1,2025-10-01T05:30:00+05:30,2025-10-01T12:00:00-04:00",
            "user,acme,ana,2025-10-01T00:00:00.250+01:00,2025-10-01T01:00:00Z",
        )
    )
    assert [(r[3], r[4]) for r in intervals()] == [
        (datetime(2025, 10, 1, 0, 0), datetime(2025, 10, 1, 16, 0)),
        (datetime(2025, 9, 30, 23, 0, 0, 250000), datetime(2025, 10, 1, 1, 0)),
    ]


def test_blank_lines_are_ignored_but_counted_in_line_numbers(companies):
    assert run(csv_text("", DDI_ROW, "", "   ", USER_ROW, "")).written == 2
    # Line 1 header, 2 and 3 blank, 4 good, 5 blank, 6 bad.
    content = csv_text("", "", "ddi,acme,44:5,2025-01-01T00:00Z,2025-01-02T00:00Z", "", "x")
    assert_rejected(content, 6)


def test_back_to_back_rows_of_one_key_are_allowed(companies):
    content = csv_text(
        "ddi,acme,44:1,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "ddi,globex,44:1,2025-10-02T00:00:00Z,2025-10-03T00:00:00Z",
        "ddi,globex,44:1,2025-10-03T00:00:00Z,2025-10-04T00:00:00Z",
        "user,acme,ana,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "user,acme,ana,2025-10-02T00:00:00Z,2025-10-03T00:00:00Z",
    )
    assert run(content).written == 5


def test_one_username_in_two_companies_may_overlap(companies):
    content = csv_text(
        "user,acme,ana,2025-10-01T00:00:00Z,2025-10-10T00:00:00Z",
        "user,globex,ana,2025-10-05T00:00:00Z,2025-10-15T00:00:00Z",
    )
    assert run(content).written == 2


def test_report_for_the_backfilled_month_shows_the_imported_peaks(companies):
    run(
        csv_text(
            "ddi,acme,44:1,2025-10-01T00:00:00Z,2025-10-03T00:00:00Z",
            "ddi,acme,44:2,2025-10-02T17:30:00+05:30,2025-10-04T00:00:00Z",
            "ddi,globex,44:1,2025-10-03T00:00:00Z,2025-10-03T06:00:00Z",
            "user,acme,ana,2025-10-05T10:00:00Z,2025-10-05T11:00:00Z",
            "user,acme,bob,2025-10-05T10:59:00Z,2025-10-05T12:00:00Z",
            "user,globex,ana,2025-10-05T10:00:00Z,2025-10-05T11:00:00Z",
        )
    )
    scope = reports.parse_scope({"month": 10, "year": 2025})
    today = date(2026, 11, 22)
    ddi = reports.report(Principal.cli(), "ddi", scope, today=today)
    user = reports.report(Principal.cli(), "user", scope, today=today)
    assert set(ddi) == set(user) == {"acme", "globex"}

    def counts(values, company):
        dates = values[company]["dates"]
        assert len(dates) == 31
        return {d: v for d, v in dates.items() if v}

    # 44:2 starts 12:00 UTC on the 2nd; 44:1 ends at midnight starting the 3rd.
    assert counts(ddi, "acme") == {"2025-10-01": 1, "2025-10-02": 2, "2025-10-03": 1}
    assert counts(ddi, "globex") == {"2025-10-03": 1}
    assert ddi["acme"]["billableDDIDaysForMonth"] == 4
    assert ddi["acme"]["billableDDIDaysPerDay"] == 0.129  # 4 / 31 = 0.12903…
    assert counts(user, "acme") == {"2025-10-05": 2}
    assert counts(user, "globex") == {"2025-10-05": 1}
    assert user["acme"]["billableUserDaysForMonth"] == 2


# --- bad files: the line at fault, nothing written -------------------------------------------

GOOD = "ddi,acme,44:1,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z"  # line 2 in every case below


@pytest.mark.parametrize(
    "row",
    [
        # column count
        "ddi,acme,44:9,2025-10-01T00:00:00Z",
        "ddi,acme,44:9,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z,extra",
        "ddi",
        # kind
        "DDI,acme,44:9,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "phone,acme,ana,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        ",acme,44:9,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        # company
        "ddi,nope,44:9,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "user,Acme,ana,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "user,,ana,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        # DDI key
        "ddi,acme,442071234567,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "ddi,acme,44:20712a4567,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "ddi,acme,ab:2071234567,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "ddi,acme,1234567:12345678901,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "ddi,acme,12345678:1,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "ddi,acme,44:1234567890123456,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "ddi,acme,:2071234567,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "ddi,acme,44:,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "ddi,acme,44:1:2,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "ddi,acme,,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        # username
        "user,acme,Ana,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "user,acme,an a,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "user,acme,ana!,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "user,acme,,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "user,acme," + "a" * 65 + ",2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        # timestamps without an offset
        "ddi,acme,44:9,2025-10-01T00:00:00,2025-10-02T00:00:00Z",
        "ddi,acme,44:9,2025-10-01T00:00:00Z,2025-10-02T00:00:00",
        "ddi,acme,44:9,2025-10-01,2025-10-02T00:00:00Z",
        # unparseable timestamps
        "ddi,acme,44:9,yesterday,2025-10-02T00:00:00Z",
        "ddi,acme,44:9,2025-10-01T00:00:00Z,soon",
        "ddi,acme,44:9,2025-13-01T00:00:00Z,2025-10-02T00:00:00Z",
        "ddi,acme,44:9,2025-10-32T00:00:00Z,2025-11-02T00:00:00Z",
        "ddi,acme,44:9,2025-10-01T25:00:00Z,2025-10-02T00:00:00Z",
        "ddi,acme,44:9,,2025-10-02T00:00:00Z",
        "ddi,acme,44:9,2025-10-01T00:00:00Z,",
        "ddi,acme,44:9,2025-10-01T00:00:00+25:00,2025-10-02T00:00:00Z",
        # end not later than start
        "ddi,acme,44:9,2025-10-01T00:00:00Z,2025-10-01T00:00:00Z",
        "ddi,acme,44:9,2025-10-01T02:00:00+02:00,2025-10-01T00:00:00Z",
        "ddi,acme,44:9,2025-10-02T00:00:00Z,2025-10-01T00:00:00Z",
        # end in the future
        "ddi,acme,44:9,2025-10-01T00:00:00Z,2999-01-01T00:00:00Z",
        # overlaps the row on line 2: same DDI, same or other company (one company at a time)
        "ddi,acme,44:1,2025-10-01T23:59:59Z,2025-10-03T00:00:00Z",
        "ddi,globex,44:1,2025-10-01T12:00:00Z,2025-10-01T13:00:00Z",
        "ddi,globex,44:1,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
        "ddi,acme,44:1,2025-10-01T00:00:00Z,2025-10-02T00:00:00Z",
    ],
)
def test_bad_row_rejects_the_file_naming_its_line(companies, row):
    assert_rejected(csv_text(GOOD, row), 3)


@pytest.mark.parametrize(
    "first",
    [
        "user,acme,ana,2025-10-01T00:00:00Z,2025-10-03T00:00:00Z",
        "user,acme,ana,2025-10-02T00:00:00Z,2025-10-02T00:00:01Z",
    ],
)
def test_overlapping_rows_of_one_phone_user_in_one_company(companies, first):
    content = csv_text(first, "user,acme,ana,2025-10-02T00:00:00Z,2025-10-04T00:00:00Z")
    assert_rejected(content, 3)


def test_end_just_in_the_future_is_refused(companies):
    soon = utcnow() + timedelta(minutes=5)
    row = f"ddi,acme,44:9,2025-10-01T00:00:00Z,{iso(soon)}"
    assert_rejected(csv_text(GOOD, row), 3)


@pytest.mark.parametrize(
    "header",
    [
        "kind,company,key,begin,end",
        "kind,company,key,start",
        "kind,company,key,start,end,extra",
        "company,kind,key,start,end",
        GOOD,
        "",
    ],
)
def test_wrong_header_is_line_one(companies, header):
    assert_rejected(csv_text(GOOD, header=header), 1)


def test_empty_file_is_refused(companies):
    assert_rejected("", 1)


def test_bad_row_after_many_good_rows_writes_nothing(companies):
    good = [f"ddi,acme,44:{n},2025-10-01T00:00:00Z,2025-10-02T00:00:00Z" for n in range(1, 301)] + [
        f"user,globex,u{n},2025-09-01T00:00:00Z,2025-09-30T00:00:00Z" for n in range(200)
    ]
    assert_rejected(csv_text(*good, "ddi,acme,44:1,2025-10-01T12:00:00Z,2025-10-03T00:00:00Z"), 502)
    assert_rejected(csv_text(*good, "ddi,nope,44:999,2025-10-01T00:00Z,2025-10-02T00:00Z"), 502)
    assert run(csv_text(*good)).written == 500


# A file with three problems on one line and problems on several lines (line 2 is GOOD).
MANY_PROBLEMS = csv_text(
    GOOD,
    "ddi,nope,44:x,yesterday,2025-10-02T00:00:00Z",
    "user,acme,ana,2025-10-02T00:00:00Z,2025-10-01T00:00:00Z",
    "ddi,acme,44:1,2025-10-01T12:00:00Z,2025-10-03T00:00:00Z",
    "ddi,acme,44:2,2025-10-01T00:00:00Z,2999-01-01T00:00:00Z",
)
MANY_LISTED = [
    "line 3: company 'nope' does not exist",
    "line 3: key '44:x' is not dialcode:number",
    "line 3: start 'yesterday' is not an ISO 8601 timestamp",
    "line 4: end must be later than start",
    "line 5: overlaps line 2 for the same DDI",
    "line 6: end is in the future",
]
# 150 rows naming a company that does not exist: lines 2 to 151.
TOO_MANY = csv_text(
    *(f"ddi,nope,44:{n},2025-10-01T00:00:00Z,2025-10-02T00:00:00Z" for n in range(1, 151))
)


def test_a_rejected_file_names_every_problem_in_line_order(companies):
    before = snapshot()
    with pytest.raises(FileRejected) as refused:
        run(MANY_PROBLEMS)
    assert refused.value.message == "The file has 6 problems; nothing was imported."
    assert refused.value.problems == MANY_LISTED
    assert list(refused.value.fields) == ["line 3", "line 4", "line 5", "line 6"]
    assert refused.value.fields["line 3"] == (
        "company 'nope' does not exist; key '44:x' is not dialcode:number; "
        "start 'yesterday' is not an ISO 8601 timestamp"
    )
    assert snapshot() == before


def test_a_rejected_file_lists_a_hundred_problems_and_counts_the_rest(companies):
    before = snapshot()
    with pytest.raises(FileRejected) as refused:
        run(TOO_MANY)
    problems = refused.value.problems
    assert refused.value.total == 150 and len(problems) == 101
    assert problems[:100] == [f"line {n}: company 'nope' does not exist" for n in range(2, 102)]
    assert problems[100] == "and 50 more"
    assert refused.value.message == "The file has 150 problems; nothing was imported."
    assert snapshot() == before


def test_overlaps_within_the_file_are_each_named(companies):
    """A long interval, a short one inside it, and a third after the short one but still
    inside the long one: both later rows overlap the long one."""
    content = csv_text(
        "ddi,acme,44:5,2025-10-01T00:00:00Z,2025-10-10T00:00:00Z",
        "ddi,acme,44:5,2025-10-02T00:00:00Z,2025-10-03T00:00:00Z",
        "ddi,acme,44:5,2025-10-04T00:00:00Z,2025-10-05T00:00:00Z",
        "ddi,acme,44:5,2025-10-02T00:00:00Z,2025-10-03T00:00:00Z",
    )
    with pytest.raises(FileRejected) as refused:
        run(content)
    assert refused.value.problems == [
        "line 3: overlaps line 2 for the same DDI",
        "line 4: overlaps line 2 for the same DDI",
        "line 5: repeats line 3",
    ]


# --- against recorded history ----------------------------------------------------------------


def _open_start(kind: str, key: str) -> datetime:
    db.session.rollback()
    return db.session.scalar(
        select(HistoryInterval.start_at).where(
            HistoryInterval.kind == kind,
            HistoryInterval.key == key,
            HistoryInterval.end_at.is_(None),
        )
    )


def _wait_past(moment: datetime) -> None:
    past = moment + timedelta(milliseconds=5)
    wait_until(lambda: utcnow() > past, 5, f"the clock past {past}", interval=0.005)


def test_row_overlapping_a_live_ddi_is_refused(companies):
    companies.ddi("44", "2071234567", "acme")
    created = _open_start("ddi", "44:2071234567")
    end = created + timedelta(milliseconds=1)
    _wait_past(end)
    earlier = created - timedelta(days=2)
    # Ending before the DDI was created: fine, in any company.
    fine = csv_text(
        f"ddi,globex,44:2071234567,{iso(earlier)},{iso(created - timedelta(days=1))}",
        f"ddi,acme,44:2071234567,{iso(created - timedelta(days=1))},{iso(created)}",
    )
    # Ending after it was created: it would be in two places (or twice in one) at once.
    for company in ("globex", "acme"):
        row = f"ddi,{company},44:2071234567,{iso(created - timedelta(hours=1))},{iso(end)}"
        assert_rejected(csv_text(GOOD, row), 3)
    assert run(fine).written == 2


def test_row_overlapping_a_live_phone_user_is_refused_only_in_its_company(companies):
    companies.user("ana", "acme")
    created = _open_start("user", "ana")
    end = created + timedelta(milliseconds=1)
    _wait_past(end)
    row = f"user,acme,ana,{iso(created - timedelta(hours=1))},{iso(end)}"
    assert_rejected(csv_text(GOOD, row), 3)
    other = f"user,globex,ana,{iso(created - timedelta(hours=1))},{iso(end)}"
    assert run(csv_text(GOOD, other)).written == 2


def test_row_overlapping_a_previously_imported_interval_is_refused(companies):
    run(csv_text(GOOD, USER_ROW))
    written = intervals()
    for row in (
        "ddi,globex,44:1,2025-10-01T12:00:00Z,2025-10-05T00:00:00Z",
        "ddi,acme,44:1,2025-09-30T00:00:00Z,2025-10-01T00:00:01Z",
        "user,acme,ana,2025-10-05T10:59:59Z,2025-10-05T12:00:00Z",
    ):
        assert_rejected(csv_text("ddi,acme,44:7,2025-01-01T00:00Z,2025-01-02T00:00Z", row), 3)
    assert intervals() == written
    # Back to back with the imported one is fine.
    assert run(csv_text("ddi,globex,44:1,2025-10-02T00:00:00Z,2025-10-05T00:00:00Z")).written == 1


# --- the command itself ----------------------------------------------------------------------


def test_command_imports_and_prints_a_summary(companies, flask, tmp_path):
    path = tmp_path / "legacy.csv"
    path.write_text(csv_text(GOOD, USER_ROW), encoding="utf-8")
    result = flask("history", "import", str(path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    assert "2" in lines[0]
    assert "Traceback" not in result.stderr
    assert [r[5] for r in intervals()] == ["import", "import"]
    assert audit_actions().count("history.import") == 1


def test_command_counts_agree_with_their_nouns(companies, flask, tmp_path):
    """One interval is "1 interval", in the command's line and in its audit entry."""
    path = tmp_path / "one.csv"
    path.write_text(csv_text(USER_ROW), encoding="utf-8")
    first = flask("history", "import", str(path))
    assert first.stdout == "Imported 1 interval from one.csv (0 already recorded).\n"
    again = flask("history", "import", str(path))
    assert again.stdout == "Imported 0 intervals from one.csv (1 already recorded).\n"
    db.session.rollback()
    first_entry = db.session.scalar(
        select(AuditEntry.detail)
        .where(AuditEntry.action == "history.import")
        .order_by(AuditEntry.id)
        .limit(1)
    )
    assert first_entry == "1 row, 1 written, 0 already recorded"


def test_command_with_a_utf8_bom_and_crlf_works(companies, flask, tmp_path):
    path = tmp_path / "legacy.csv"
    path.write_bytes(b"\xef\xbb\xbf" + csv_text(GOOD, USER_ROW).replace("\n", "\r\n").encode())
    result = flask("history", "import", str(path))
    assert result.returncode == 0, result.stderr
    assert len(intervals()) == 2


def test_command_refuses_a_bad_file_in_one_line(companies, flask, tmp_path):
    path = tmp_path / "legacy.csv"
    path.write_text(
        csv_text(GOOD, USER_ROW, "ddi,acme,44:2,2025-10-02T00:00:00Z,2025-10-01T00:00:00Z")
    )
    before = snapshot()
    line = assert_one_line_error(flask("history", "import", str(path)))
    assert names_line(line, 4), line
    assert snapshot() == before


def test_command_prints_every_problem_of_a_rejected_file(companies, flask, tmp_path):
    path = tmp_path / "legacy.csv"
    path.write_text(MANY_PROBLEMS)
    before = snapshot()
    result = flask("history", "import", str(path))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        "Error: The file has 6 problems; nothing was imported.",
        *MANY_LISTED,
    ]
    path.write_text(TOO_MANY)
    capped = flask("history", "import", str(path))
    lines = capped.stderr.splitlines()
    assert capped.returncode == 1 and len(lines) == 102 and lines[-1] == "and 50 more"
    assert snapshot() == before


def test_command_with_a_missing_file_says_so_in_one_line(companies, flask, tmp_path):
    before = snapshot()
    assert_one_line_error(flask("history", "import", str(tmp_path / "nope.csv")), "nope.csv")
    assert snapshot() == before
