"""The description search of /ddis (`q` with a letter; record_query.parse_search, docs/pages.md):
each word of q matches the start of a word of the number's description, case-insensitively,
all of them; against a brute-force filter, with the filters, a Company-Admin's scope, keyset
paging both ways, the page itself, and the plans: number_words' key range drives the search on
SQLite and PostgreSQL, so no description is read."""

from __future__ import annotations

import random
import re

import pytest
from sqlalchemy import event

from webapp.access import Principal
from webapp.errors import Invalid
from webapp.extensions import db
from webapp.services.records import crud, kinds, listing, record_query

from .factories import OPERATOR, World
from .list_cells import table_rows
from .test_number_search import ACME, GLOBEX, INITECH, key_of, soup, walk_both_ways

ROOT = OPERATOR
ACME_ADMIN = Principal(username="a", via="cli", admin_of=frozenset({ACME}))
FIELDS = ("dialcode", "number", "virt_exten", "company")
ROWS = [  # dialcode, number, virt_exten, company, description
    ("44", "2071234567", "130", ACME, "Sales floor, London office"),
    ("44", "2079994567", "1017", GLOBEX, "LONDON reception"),
    ("44", "2070000001", "201", ACME, "Londonderry sales"),
    ("353", "14567", "7", ACME, "Dublin: floor 3, sales"),
    ("1", "5551234", "130", INITECH, "Night line (sales)"),
    ("1", "4444", "00", ACME, ""),
    ("33", "144556677", "5", GLOBEX, "Île-de-France, Société Générale"),
]


def words(description: str) -> list[str]:
    return re.findall(r"[^\W_]+", description.lower())


def brute(rows, q: str) -> list[tuple[str, ...]]:
    """The contract, as plainly as it can be said: every word of q starts some word of the
    description (ignoring case); in key order."""
    wanted = words(q)
    hits = [r for r in rows if all(any(w.startswith(x) for w in words(r[4])) for x in wanted)]
    return sorted((r[:4] for r in hits), key=lambda r: (r[0], r[1]))


def create(rows) -> None:
    values = [dict(zip((*FIELDS, "description"), r, strict=True)) for r in rows]
    crud.create(OPERATOR, kinds.DDI, values)


@pytest.fixture
def rows(factory) -> list[tuple[str, ...]]:
    for company in (ACME, GLOBEX, INITECH):
        factory.company(company)
    create(ROWS)
    return ROWS


def found(principal, q, filters=None, **kw) -> list[str]:
    page = listing.page(principal, kinds.DDI, filters or {}, q=q, per_page=100, **kw)
    return [f"{r['dialcode']}:{r['number']}" for r in page.rows]


# --- parsing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "parsed"),
    [
        ("london", ("", ("london",))),
        ("  Sales   FLOOR ", ("", ("floor", "sales"))),
        ("floor 3", ("", ("3", "floor"))),
        ("sales, sales", ("", ("sales",))),
        ("+44 20 7123", ("4420 7123".replace(" ", ""), ())),
        ("", ("", ())),
        (None, ("", ())),
    ],
)
def test_a_letter_makes_q_a_description_search(typed, parsed):
    assert record_query.parse_search(typed) == parsed


@pytest.mark.parametrize("typed", ["a b c d e f", "x" * 101, "44/20", "#"])
def test_too_many_words_too_long_or_neither_words_nor_a_number_is_a_field_error(typed):
    with pytest.raises(Invalid) as caught:
        record_query.parse_search(typed)
    assert set(caught.value.fields) == {"q"}


# --- matching ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ("london", ["44:2070000001", "44:2071234567", "44:2079994567"]),
        ("LONDON", ["44:2070000001", "44:2071234567", "44:2079994567"]),
        ("lond", ["44:2070000001", "44:2071234567", "44:2079994567"]),
        ("ondon", []),  # the start of a word, not the middle
        ("sales floor", ["353:14567", "44:2071234567"]),
        ("floor sales", ["353:14567", "44:2071234567"]),
        ("london sales", ["44:2070000001", "44:2071234567"]),
        ("floor 3", ["353:14567"]),
        ("île soc", ["33:144556677"]),
        ("ÎLE", ["33:144556677"]),
        ("night-line", ["1:5551234"]),
        ("zzz", []),
    ],
)
def test_q_matches_the_starts_of_the_descriptions_words(rows, q, expected):
    assert found(ROOT, q) == expected
    assert found(ROOT, q) == [f"{r[0]}:{r[1]}" for r in brute(rows, q)]


def test_q_combines_with_the_filters_and_the_principals_companies(rows):
    assert found(ROOT, "london", {"company": ACME}) == ["44:2070000001", "44:2071234567"]
    assert found(ROOT, "sales", {"virt_exten": "13"}) == ["1:5551234", "44:2071234567"]
    assert found(ACME_ADMIN, "london") == ["44:2070000001", "44:2071234567"]
    assert found(ACME_ADMIN, "london", {"company": GLOBEX}) == []


def test_a_changed_description_is_found_by_its_new_words_only(rows):
    scope = {"dialcode": "44", "number": "2079994567", "company": GLOBEX}
    crud.update(ROOT, kinds.DDI, scope, {"description": "Paris desk"})
    assert "44:2079994567" not in found(ROOT, "london")
    assert found(ROOT, "paris") == ["44:2079994567"]
    crud.delete_rows(ROOT, kinds.DDI, scope)
    assert found(ROOT, "paris") == []  # out of service: not on the list of DDIs


@pytest.mark.parametrize("sort", [None, "virt_exten", "company"])
@pytest.mark.parametrize("sort_branch", [0, listing.SORT_BRANCH])  # index order / sorted range
def test_paging_through_description_results_both_ways(factory, sort, sort_branch, monkeypatch):
    monkeypatch.setattr(listing, "SORT_BRANCH", sort_branch)
    for company in (ACME, GLOBEX):
        factory.company(company)
    rng = random.Random(7)
    vocabulary = ["sales", "salt", "floor", "london", "lobby", "fax", "Support", "night"]
    rows = {}
    while len(rows) < 40:
        key = (rng.choice(["44", "1", "353"]), str(rng.randrange(10**6)))
        said = " ".join(rng.sample(vocabulary, rng.randrange(0, 4)))
        rows[key] = (*key, rng.choice(["1", "01", "20", "3"]), rng.choice([ACME, GLOBEX]), said)
    create(rows.values())
    for q in ("sal", "london", "s l"):
        for descending in (False, True) if sort else (False,):
            expected = sorted(brute(rows.values(), q), key=key_of(sort), reverse=descending)
            assert expected, q
            walk_both_ways(ROOT, {}, q, sort, descending, 3, expected)
            mine = [r for r in expected if r[3] == ACME]
            walk_both_ways(ROOT, {"company": ACME}, q, sort, descending, 4, mine)
            walk_both_ways(ACME_ADMIN, {}, q, sort, descending, 5, mine)


# --- the page ----------------------------------------------------------------------------


@pytest.fixture
def page_world(factory, rows) -> World:
    return World.build(factory, {}, {"root": "root", "cadmin": "cadmin"})


def test_the_list_page_finds_numbers_by_their_descriptions_words(page_world, rows):
    client = page_world.browser("root")
    response = client.get("/ddis", query_string={"q": "Sales Floor"})
    assert response.status_code == 200
    assert [r[:2] for r in table_rows(soup(response))] == [("353", "14567"), ("44", "2071234567")]
    mine = page_world.browser("cadmin").get("/ddis", query_string={"q": "london"})
    assert len(table_rows(soup(mine))) == 2


def test_too_many_words_answer_400_on_the_page(page_world, rows):
    response = page_world.browser("root").get("/ddis", query_string={"q": "a b c d e f"})
    assert response.status_code == 400
    assert "at most 5 words" in soup(response).select_one(".error").get_text()


# --- the plans: number_words' key range, never a scan -------------------------------------


def statements(principal, q, **kw) -> list[tuple[str, object]]:
    """The statements a listing page runs, with their parameters."""
    seen: list[tuple[str, object]] = []

    def keep(_conn, _cursor, statement, parameters, _context, _many):
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append((statement, parameters))

    engine = db.engine
    event.listen(engine, "before_cursor_execute", keep)
    try:
        listing.page(principal, kinds.DDI, {}, q=q, per_page=2, **kw)
    finally:
        event.remove(engine, "before_cursor_execute", keep)
    return seen


def plan(statement: str, parameters) -> str:
    connection = db.session.connection()
    if db.engine.dialect.name == "sqlite":
        rows = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters).all()
        return "\n".join(str(r[-1]) for r in rows)
    # The tables are tiny here: make the planner show the index plans it takes at size.
    connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
    rows = connection.exec_driver_sql("EXPLAIN " + statement, parameters).all()
    return "\n".join(str(r[0]) for r in rows)


@pytest.mark.parametrize("principal", [ROOT, ACME_ADMIN], ids=["root", "company-admin"])
@pytest.mark.parametrize("q", ["london", "sales floor"])
def test_a_description_search_reads_number_words_by_its_key_range(rows, principal, q):
    # Enough rows that a scan would be a choice, and statistics that say so.
    create([("7", f"{i:08}", "1", ACME, f"filler {i}") for i in range(500)])
    with db.engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE")
    checked = [s for s in statements(principal, q) if "number_words" in s[0]]
    checked += [s for s in statements(principal, q, last=True) if "number_words" in s[0]]
    assert checked
    sqlite = db.engine.dialect.name == "sqlite"
    for statement, parameters in checked:
        shown = plan(statement, parameters)
        if sqlite:
            range_read = r"SEARCH number_words USING (COVERING )?INDEX \S+ \(word>\? AND word<\?\)"
            assert re.search(range_read, shown), shown
            assert not re.search(r"\bSCAN (ddis|number_words|numbers)\b", shown), shown
            continue
        assert "Index Cond: (((word)::text >=" in shown and "pk_number_words" in shown, shown
        assert "Seq Scan" not in shown, shown
        lines = shown.splitlines()
        for i, line in enumerate(lines):
            if re.search(r"Scan (using \S+ )?on ddis\b", line):
                # ddis is read by the keys the words give, never walked whole.
                found_by = lines[i + 1].strip()
                assert found_by.startswith("Index Cond") and "number_words." in found_by, shown
    db.session.rollback()


def test_a_record_matches_the_list_only_if_the_search_finds_it(rows):
    from webapp.services.records import landing

    london = {"dialcode": "44", "number": "2071234567"}
    dublin = {"dialcode": "353", "number": "14567"}
    assert landing.matches(ROOT, kinds.DDI, {"q": "london"}, london)
    assert not landing.matches(ROOT, kinds.DDI, {"q": "london"}, dublin)
    assert landing.matches(ROOT, kinds.DDI, {"q": "+353"}, dublin)
    assert not landing.matches(ROOT, kinds.DDI, {"q": "+353"}, london)


# --- migration 0024 ------------------------------------------------------------------------


@pytest.fixture
def spare_database_url(tmp_path):
    """An empty database of its own, beside the run's."""
    import os

    from .databases import postgres_database

    pg_url = os.environ.get("TEST_DATABASE_URL", "").strip()
    if not pg_url:
        yield f"sqlite:///{tmp_path / 'migration.db'}"
        return
    with postgres_database(pg_url, "telephony_migration") as url:
        yield url


def test_migration_0024_adds_the_words_of_the_descriptions_stocked_before_it(
    migrated, test_config, spare_database_url
):
    from flask_migrate import downgrade, upgrade
    from sqlalchemy import inspect, text

    from webapp import create_app

    app = create_app({**test_config, "SQLALCHEMY_DATABASE_URI": spare_database_url})
    with app.app_context():
        upgrade(revision="0023")
        with db.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO numbers (dialcode, number, state, description) "
                    "VALUES ('44', :number, 'available', :description)"
                ),
                [
                    {"number": "1", "description": "Sales floor, SALES desk"},
                    {"number": "2", "description": ""},
                    {"number": "3", "description": "Île-de-France 2"},
                ],
            )
        upgrade()
        with db.engine.connect() as conn:
            stored = conn.execute(text("SELECT word, number FROM number_words")).all()
            indexes = {ix["name"] for ix in inspect(conn).get_indexes("number_words")}
        assert sorted(stored) == sorted(
            [("desk", "1"), ("floor", "1"), ("sales", "1"), ("2", "3"), ("de", "3"),
             ("france", "3"), ("île", "3")]
        )  # fmt: skip
        assert "ix_number_words_number" in indexes
        downgrade(revision="0023")
        with db.engine.connect() as conn:
            assert "number_words" not in inspect(conn).get_table_names()
        upgrade()
        db.engine.dispose()
