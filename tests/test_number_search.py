"""The DDI number search (`/ddis?q=`, record_query.parse_q and its branches) and the numeric
extension order of the list pages (listing, models.extension_order): matching against a
brute-force filter, with the company filter and a Company-Admin's scope, keyset paging both
ways, the CSV, and migration 0005's backfill of existing rows."""

from __future__ import annotations

import csv
import io
import os
import random
from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, inspect, text

from webapp import create_app
from webapp.access import Principal
from webapp.errors import Invalid
from webapp.extensions import db
from webapp.services.records import crud, kinds, listing, record_query

from .databases import postgres_database
from .factories import OPERATOR, World
from .list_cells import table_rows

ACME, GLOBEX, INITECH = "acme", "globex", "initech"
ROOT = OPERATOR
ACME_ADMIN = Principal(username="a", via="cli", admin_of=frozenset({ACME}))
TWO_ADMIN = Principal(username="b", via="cli", admin_of=frozenset({ACME, INITECH}))
FIELDS = ("dialcode", "number", "virt_exten", "company")
ROWS = [  # dialcode, number, virt_exten, company
    ("44", "2071234567", "130", ACME),
    ("44", "2079994567", "1017", GLOBEX),
    ("4", "42071234567", "007", INITECH),  # 4 + 42071234567: also +44 20 7123 4567
    ("353", "14567", "7", ACME),  # ends with 4567
    ("4420", "7", "201", INITECH),  # a longer dialcode starting with 44
    ("44", "3207000000", "0", ACME),  # holds 207 and 44, neither at the start nor at the end
    ("1", "5551234", "130", GLOBEX),
    ("1", "4444", "00", ACME),
]


def brute(rows, digits: str) -> list[tuple[str, ...]]:
    """The contract, as plainly as it can be said: dialcode followed by number starts with the
    digits, or the number ends with them; in key order."""
    hits = [r for r in rows if (r[0] + r[1]).startswith(digits) or r[1].endswith(digits)]
    return sorted(hits, key=lambda r: (r[0], r[1]))


def as_tuples(page: listing.Listing) -> list[tuple[str, ...]]:
    return [tuple(r[f] for f in FIELDS) for r in page.rows]


@pytest.fixture
def rows(factory) -> list[tuple[str, ...]]:
    for company in (ACME, GLOBEX, INITECH):
        factory.company(company)
    crud.create(OPERATOR, kinds.DDI, [dict(zip(FIELDS, r, strict=True)) for r in ROWS])
    return ROWS


# --- normalising ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("typed", "digits"),
    [
        ("+44 20 7123 4567", "442071234567"),
        ("(020) 7123-4567", "02071234567"),
        ("+44.20.7123.4567", "442071234567"),
        ("4567", "4567"),
        ("  ", ""),
        ("+ - . ( )", ""),
        ("", ""),
        (None, ""),
    ],
)
def test_q_drops_what_people_write_around_digits(typed, digits):
    assert record_query.parse_q(typed) == digits


@pytest.mark.parametrize(
    "typed", ["44a", "44/20", "+44 20 #1", "\u0664\u0664", "4\u00b2", "x" * 101]
)
def test_q_with_anything_else_is_a_field_error(typed):
    with pytest.raises(Invalid) as caught:
        record_query.parse_q(typed)
    assert set(caught.value.fields) == {"q"}


# --- matching ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ("+44 20 7123 4567", ["4:42071234567", "44:2071234567"]),
        ("442071234567", ["4:42071234567", "44:2071234567"]),
        ("4567", ["353:14567", "4:42071234567", "44:2071234567", "44:2079994567"]),
        ("+44 20", ["4:42071234567", "44:2071234567", "44:2079994567", "4420:7"]),
        ("44", ["1:4444", "4:42071234567", "44:2071234567", "44:2079994567", "44:3207000000",
                "4420:7"]),
        ("353", ["353:14567"]),
        ("3207", []),  # the number's own start, without its dialcode: no
        ("1234567", ["4:42071234567", "44:2071234567"]),
        ("9" * 18, []),
    ],
)  # fmt: skip
def test_q_matches_the_start_of_dialcode_and_number_or_the_end_of_the_number(rows, q, expected):
    page = listing.page(ROOT, kinds.DDI, {}, q=q, per_page=100)
    assert [f"{r['dialcode']}:{r['number']}" for r in page.rows] == expected
    assert page.total == len(expected)
    assert as_tuples(page) == brute(rows, record_query.parse_q(q))


def test_q_combines_with_the_filters_and_the_principals_companies(rows):
    def keys(principal, filters, q, **kw):
        page = listing.page(principal, kinds.DDI, filters, q=q, per_page=100, **kw)
        return [f"{r['dialcode']}:{r['number']}" for r in page.rows]

    assert keys(ROOT, {"company": ACME}, "4567") == ["353:14567", "44:2071234567"]
    assert keys(ROOT, {"company": GLOBEX}, "4567") == ["44:2079994567"]
    assert keys(ROOT, {"dialcode": "44"}, "44") == ["44:2071234567", "44:2079994567",
                                                    "44:3207000000", "4420:7"]  # fmt: skip
    assert keys(ROOT, {"virt_exten": "1"}, "4567") == ["44:2071234567", "44:2079994567"]
    assert keys(ACME_ADMIN, {}, "44") == ["1:4444", "44:2071234567", "44:3207000000"]
    assert keys(ACME_ADMIN, {"company": GLOBEX}, "4567") == []  # outside its grants
    assert keys(TWO_ADMIN, {}, "+44 20") == ["4:42071234567", "44:2071234567", "4420:7"]
    assert keys(TWO_ADMIN, {}, "44", sort="virt_exten") == [
        "44:3207000000",  # 0
        "1:4444",  # 00: the same number, and after 0 as text
        "4:42071234567",  # 007
        "44:2071234567",  # 130
        "4420:7",  # 201
    ]
    # Not a search: the API read and the phone users have none.
    with pytest.raises(Invalid):
        listing.page(ROOT, kinds.PHONE_USER, {}, q="44")


def walk_both_ways(principal, filters, q, sort, descending, per_page, expected):
    """Next from the first page to the end and Previous from the last page to the start, by
    the pages' cursors: every row once, in order, with positions that add up."""
    args = {"q": q, "sort": sort, "descending": descending, "per_page": per_page}
    seen, page = [], listing.page(principal, kinds.DDI, filters, **args)
    while True:
        assert page.total == len(expected) and page.start == len(seen) + 1
        seen += as_tuples(page)
        if not page.has_next:
            break
        page = listing.page(principal, kinds.DDI, filters, after=page.last, **args)
    assert seen == expected
    back, page = [], listing.page(principal, kinds.DDI, filters, last=True, **args)
    while True:
        back = as_tuples(page) + back
        assert page.start == len(expected) - len(back) + 1
        if not page.has_prev:
            break
        page = listing.page(principal, kinds.DDI, filters, before=page.first, **args)
    assert back == expected


def key_of(sort: str | None):
    order = ([sort] if sort else []) + [f for f in ("dialcode", "number") if f != sort]
    index = {f: i for i, f in enumerate(FIELDS)}

    def key(r):
        return [(int(r[2]), r[2]) if f == "virt_exten" else r[index[f]] for f in order]

    return key


@pytest.mark.parametrize("sort", [None, "virt_exten", "company", "number"])
@pytest.mark.parametrize("sort_branch", [0, listing.SORT_BRANCH])  # index order / sorted range
def test_paging_through_q_results_both_ways(factory, sort, sort_branch, monkeypatch):
    monkeypatch.setattr(listing, "SORT_BRANCH", sort_branch)
    for company in (ACME, GLOBEX):
        factory.company(company)
    rng = random.Random(12)
    rows = {}
    while len(rows) < 40:  # every branch: 4+4…, 44+…, 442+…, 4420…, and …44 at the end
        dialcode = rng.choice(["4", "44", "442", "4420", "1", "353"])
        number = (
            rng.choice(["4", "42", "2", "9"])
            + str(rng.randrange(1000))
            + rng.choice(["", "44", "0"])
        )
        rows[(dialcode, number)] = (dialcode, number, rng.choice(["1", "01", "20", "3"]),
                                    rng.choice([ACME, GLOBEX]))  # fmt: skip
    crud.create(OPERATOR, kinds.DDI, [dict(zip(FIELDS, r, strict=True)) for r in rows.values()])
    for q in ("44", "+44 2", "4"):
        for descending in (False, True) if sort else (False,):
            expected = sorted(brute(rows.values(), record_query.parse_q(q)), key=key_of(sort),
                              reverse=descending)  # fmt: skip
            assert expected, q
            walk_both_ways(ROOT, {}, q, sort, descending, 3, expected)
            mine = [r for r in expected if r[3] == ACME]
            walk_both_ways(ROOT, {"company": ACME}, q, sort, descending, 4, mine)
            admin = Principal(username="a", via="cli", admin_of=frozenset({ACME}))
            walk_both_ways(admin, {}, q, sort, descending, 5, mine)


# --- numeric extension order ---------------------------------------------------------------------
EXTENSIONS = ["130", "1017", "007", "7", "07", "0", "00", "201", "130", "9999999999", "1065"]


@pytest.mark.parametrize("descending", [False, True])
def test_extensions_sort_numerically_with_ties_by_text_then_key(factory, descending):
    factory.company(ACME)
    factory.company(GLOBEX)
    rows = [
        ("44", f"20{i:03d}", ext, ACME if i % 3 else GLOBEX) for i, ext in enumerate(EXTENSIONS)
    ]
    crud.create(OPERATOR, kinds.DDI, [dict(zip(FIELDS, r, strict=True)) for r in rows])
    expected = sorted(rows, key=key_of("virt_exten"), reverse=descending)
    if not descending:
        assert [r[2] for r in expected] == [
            "0", "00", "007", "07", "7", "130", "130", "201", "1017", "1065", "9999999999",
        ]  # fmt: skip
    walk_both_ways(ROOT, {}, None, "virt_exten", descending, 3, expected)
    mine = [r for r in expected if r[3] == ACME]
    walk_both_ways(ACME_ADMIN, {}, None, "virt_exten", descending, 2, mine)
    walk_both_ways(ROOT, {"company": ACME}, None, "virt_exten", descending, 4, mine)


def test_phone_users_sort_numerically_too(factory):
    factory.company(ACME)
    for i, ext in enumerate(EXTENSIONS):
        factory.user(f"u{i}", ACME, ext)
    page = listing.page(ROOT, kinds.PHONE_USER, {}, sort="virt_exten", per_page=100)
    got = [(r["virt_exten"], r["username"]) for r in page.rows]
    assert got == sorted(got, key=lambda r: (int(r[0]), r[0], r[1]))
    tail = listing.page(ACME_ADMIN, kinds.PHONE_USER, {}, sort="virt_exten", last=True, per_page=3)
    assert [(r["virt_exten"], r["username"]) for r in tail.rows] == got[-3:]


# --- the page and its CSV ------------------------------------------------------------------------
def csv_rows(response) -> list[list[str]]:
    assert response.status_code == 200
    return list(csv.reader(io.StringIO(response.get_data(as_text=True))))


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


@pytest.fixture
def page_world(factory, rows, monkeypatch) -> World:
    from webapp.views import records as record_views

    monkeypatch.setattr(record_views, "PER_PAGE", 2)
    world = World.build(factory, {}, {"root": "root", "cadmin": "cadmin"})
    return world


def test_the_list_page_searches_and_keeps_q_in_every_link(page_world, rows):
    client = page_world.browser("root")
    response = client.get("/ddis", query_string={"q": "+44 20"})
    assert response.status_code == 200
    page = soup(response)
    field = page.find("input", attrs={"id": "filter-q"})  # the top bar's box is a q too
    assert field["value"] == "+44 20" and field["name"] == "q"
    assert page.find("label", attrs={"for": "filter-q"}).get_text(strip=True) == "Number"
    assert page.find("input", attrs={"name": "number"}) is None  # the search replaces it
    expected = brute(rows, "4420")
    assert table_rows(page) == expected[:2]
    links = {a["rel"][0]: parse_qs(urlsplit(a["href"]).query) for a in page.select("a[rel]")}
    assert links["next"]["q"] == ["+44 20"] and links["last"]["q"] == ["+44 20"]
    assert parse_qs(urlsplit(page.find(id="csv-link")["href"]).query)["q"] == ["+44 20"]
    second = soup(client.get(page.find("a", rel="next")["href"]))
    assert table_rows(second) == expected[2:4]
    _, *data = csv_rows(client.get("/ddis.csv", query_string={"q": "+44 20"}))
    assert [tuple(r) for r in data] == expected
    sorted_csv = client.get("/ddis.csv", query_string={"q": "44", "sort": "virt_exten"})
    _, *data = csv_rows(sorted_csv)
    assert [tuple(r) for r in data] == sorted(brute(rows, "44"), key=key_of("virt_exten"))
    # The old prefix filter still works, and is shown when an address names it.
    old = soup(client.get("/ddis", query_string={"number": "207"}))
    assert old.find("input", attrs={"name": "number"})["value"] == "207"
    assert {r[1] for r in table_rows(old)} == {"2071234567", "2079994567"}


def test_a_company_admin_searches_only_its_companies(page_world, rows):
    client = page_world.browser("cadmin")
    _, *data = csv_rows(client.get("/ddis.csv", query_string={"q": "44"}))
    assert [tuple(r) for r in data] == [r for r in brute(rows, "44") if r[3] == ACME]


# (A q with a letter searches the descriptions' words: tests/test_description_search.py.)
@pytest.mark.parametrize("q", ["44/20", "+44 (20) #", "\u0664\u0664"])
def test_a_bad_q_answers_400_naming_the_number_field(page_world, q):
    client = page_world.browser("root")
    for htmx in (False, True):
        headers = {"HX-Request": "true"} if htmx else {}
        response = client.get("/ddis", query_string={"q": q}, headers=headers)
        assert response.status_code == 400
        message = soup(response).select_one(".error").get_text()
        assert message.startswith("Number: must be digits")
        assert table_rows(soup(response)) == []
    assert client.get("/ddis", query_string={"q": " + "}).status_code == 200  # no search


def test_extensions_sort_numerically_on_the_page_and_in_the_csv(page_world, rows):
    client = page_world.browser("root")
    expected = sorted(rows, key=key_of("virt_exten"), reverse=True)
    _, *data = csv_rows(client.get("/ddis.csv", query_string={"sort": "virt_exten", "dir": "desc"}))
    assert [tuple(r) for r in data] == expected
    url, seen = "/ddis?sort=virt_exten&dir=desc", []
    while url:
        page = soup(client.get(url))
        seen += table_rows(page)
        link = page.find("a", rel="next")
        url = link["href"] if link else None
    assert seen == expected


# --- property: random DDIs, random searches ---------------------------------------------------
def random_ddis(seed: int) -> list[tuple[str, ...]]:
    rng = random.Random(seed)
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    while len(out) < 120:
        dialcode = rng.choice(["1", "4", "44", "441", "4412", "353", "3", "1234567"])
        length = rng.randint(1, 17 - len(dialcode) if len(dialcode) > 2 else 12)
        number = "".join(rng.choice("0124") for _ in range(length))
        out[(dialcode, number)] = (dialcode, number, str(rng.randrange(300)),
                                   rng.choice([ACME, GLOBEX, INITECH]))  # fmt: skip
    return list(out.values())


SEPARATORS = st.sampled_from(["", "", "", " ", "+", "-", ".", "(", ")"])


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "sort_branch"), [(1, listing.SORT_BRANCH), (2, 0)])
def test_q_agrees_with_a_brute_force_filter(factory, seed, sort_branch, monkeypatch):
    monkeypatch.setattr(listing, "SORT_BRANCH", sort_branch)
    for company in (ACME, GLOBEX, INITECH):
        factory.company(company)
    rows = random_ddis(seed)
    crud.create(OPERATOR, kinds.DDI, [dict(zip(FIELDS, r, strict=True)) for r in rows])

    def typed(digits: str, seps: list[str]) -> str:
        return "".join(s + d for s, d in zip(seps, digits, strict=False)) + "".join(
            seps[len(digits) :]
        )

    pieces = st.sampled_from(rows).flatmap(
        lambda r: st.sampled_from(
            [(r[0] + r[1])[:k] for k in range(1, len(r[0] + r[1]) + 1)]
            + [r[1][-k:] for k in range(1, len(r[1]) + 1)]
        )
    )
    digits = st.one_of(pieces, st.text("01234", min_size=1, max_size=8))
    who = st.sampled_from([(ROOT, {}), (ROOT, {"company": GLOBEX}), (TWO_ADMIN, {}),
                           (ACME_ADMIN, {}), (TWO_ADMIN, {"company": INITECH})])  # fmt: skip

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(digits=digits, seps=st.lists(SEPARATORS, min_size=20, max_size=20), who=who,
           sort=st.sampled_from([None, "virt_exten", "company"]))  # fmt: skip
    def check(digits, seps, who, sort):
        principal, filters = who
        q = typed(digits, seps)
        assert record_query.parse_q(q) == digits
        companies = principal.pickable_companies()
        mine = [
            r
            for r in brute(rows, digits)
            if (companies is None or r[3] in companies)
            and ("company" not in filters or r[3] == filters["company"])
        ]
        expected = sorted(mine, key=key_of(sort))
        page = listing.page(principal, kinds.DDI, filters, q=q, sort=sort, per_page=7)
        assert page.total == len(expected)
        assert as_tuples(page) == expected[:7]
        if len(expected) > 7:
            last = listing.page(principal, kinds.DDI, filters, q=q, sort=sort, per_page=7,
                                last=True)  # fmt: skip
            assert as_tuples(last) == expected[-7:]
            after = listing.page(principal, kinds.DDI, filters, q=q, sort=sort, per_page=7,
                                 after=page.last)  # fmt: skip
            assert as_tuples(after) == expected[7:14] and after.start == 8

    check()


# --- migration 0005 ------------------------------------------------------------------------------
@pytest.fixture
def spare_database_url(tmp_path):
    """An empty database of its own, beside the run's."""
    pg_url = os.environ.get("TEST_DATABASE_URL", "").strip()
    if not pg_url:
        yield f"sqlite:///{tmp_path / 'migration.db'}"
        return
    with postgres_database(pg_url, "telephony_migration") as url:
        yield url


def _old_rows(ids: list[int]) -> None:
    """DDIs as a database at migration 0004 holds them (no reversed number)."""
    with db.engine.begin() as conn:
        conn.execute(
            text("INSERT INTO companies (id, name, created_at) VALUES ('acme', 'Acme', :at)"),
            {"at": "2026-01-01 00:00:00"},
        )
        conn.execute(
            text(
                "INSERT INTO ddis (id, dialcode, number, virt_exten, company) "
                "VALUES (:id, '44', :number, '100', 'acme')"
            ),
            [{"id": i, "number": f"20{i:07d}"} for i in ids],
        )


@pytest.mark.slow
def test_bench_brings_a_kept_data_set_to_the_current_schema(
    migrated, test_config, tmp_path, monkeypatch
):
    """make bench keeps its data sets between runs: one made by older code is upgraded
    before any scenario reads it (bench.run.ensure_data)."""
    from flask_migrate import upgrade

    from bench.run import ensure_data

    url = f"sqlite:///{tmp_path / 'kept.db'}"
    app = create_app({**test_config, "SQLALCHEMY_DATABASE_URI": url})
    with app.app_context():
        upgrade(revision="0004")
        _old_rows([1, 2])
        db.engine.dispose()
    monkeypatch.setenv("SECRET_KEY", "bench-secret-key-not-secret")
    ensure_data(url, 10, 1)  # holds data: not generated again, only upgraded
    engine = create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() != "0004"
        stored = conn.execute(text("SELECT number, number_reversed FROM ddis")).all()
        assert sorted(stored) == [("200000001", "100000002"), ("200000002", "200000002")]
    engine.dispose()


# SQLite's reflection skips (and warns about) the indexes on expressions; see test_migrations.
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_migration_0005_fills_the_reversed_number_of_existing_rows(
    migrated, test_config, spare_database_url
):
    from flask_migrate import downgrade, upgrade

    app = create_app({**test_config, "SQLALCHEMY_DATABASE_URI": spare_database_url})
    ids = [1, 2, 3, 50_000, 50_001, 120_000]  # across the migration's batches of ids
    with app.app_context():
        upgrade(revision="0004")
        _old_rows(ids)
        upgrade()
        with db.engine.connect() as conn:
            stored = conn.execute(text("SELECT number, number_reversed FROM ddis")).all()
            indexes = {ix["name"] for ix in inspect(conn).get_indexes("ddis")}
        assert sorted(stored) == sorted((f"20{i:07d}", f"20{i:07d}"[::-1]) for i in ids)
        assert {"ix_ddis_number_reversed", "ix_ddis_company_number_reversed"} <= indexes
        assert "ix_ddis_company_virt_exten" not in indexes
        downgrade(revision="0004")
        with db.engine.connect() as conn:
            columns = {c["name"] for c in inspect(conn).get_columns("ddis")}
            assert "number_reversed" not in columns
            assert conn.execute(text("SELECT count(*) FROM ddis")).scalar() == len(ids)
        upgrade()
        db.engine.dispose()
