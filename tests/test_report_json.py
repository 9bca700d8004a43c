"""The report API's answer written as text (services/billing/report_json.py) is byte for byte
what jsonify writes for reports.answer's dict: the encoder on random entries, the API on a
known history (open month, closed month, a choice of companies, GET), and debug mode's
indented answer (docs/reports.md#the-answer)."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webapp.access import Principal
from webapp.services.billing import month_close, report_json, reports

from .factories import World, add_history
from .snapshots import kept

KINDS = ("ddi", "user")
PATHS = {"ddi": "/rest/call/readDDICount", "user": "/rest/call/readUserCount"}
MONTH, YEAR = 10, 2025
# Names JSON must escape (a company's name is printable): quotes, backslashes, non-ASCII (an
# astral one: a surrogate pair with ensure_ascii), and '%' (the template's own). The encoder's
# test below adds control characters.
NAMES = {
    "acme": 'Acme "Telecom" \\ Ltd',
    "globex": "Globex Sàrl 100% ☎",
    "initech": "Initech 😀 %s %d",
}


def dumps(value: Any, ensure_ascii: bool = True) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=ensure_ascii)


def entry(keys: tuple[str, str], name: str, labels: list[str], values: list[int]) -> dict:
    """reports._entry's shape, written out here."""
    total = sum(values)
    return {
        "name": name,
        "days": len(labels),
        "dates": dict(zip(labels, values, strict=True)),
        keys[0]: reports._per_day(total, len(labels)),
        keys[1]: total,
    }


text_st = st.text(st.characters(codec="utf-8"), max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    days=st.sampled_from([0, 1, 28, 29, 30, 31]),
    companies=st.lists(st.tuples(text_st, text_st), max_size=6, unique_by=lambda c: c[0]),
    values=st.data(),
    head=st.sampled_from(
        [
            {},
            {"result": "success", "period": {"year": 2026, "month": 2, "closed": False}},
            {
                "result": "success",
                "period": {
                    "year": 2026,
                    "month": 2,
                    "closed": True,
                    "version": 3,
                    "closed_at": "2026-03-01T08:00:00Z",
                    "closed_by": 'cli:ö"p',
                },
            },
        ]
    ),
    ensure_ascii=st.booleans(),
    kind=st.sampled_from(KINDS),
)
def test_the_text_is_json_dumps_of_the_dict(days, companies, values, head, ensure_ascii, kind):
    labels = [(date(2026, 1, 1) + timedelta(days=i)).isoformat() for i in range(days)]
    keys = reports.ANSWER_KEYS[kind]
    rows = [
        (company, name, values.draw(st.lists(st.integers(0, 10**7), min_size=days, max_size=days)))
        for company, name in companies
    ]
    text = report_json.answer_text(
        head, labels, keys, rows, reports._per_day, ensure_ascii=ensure_ascii
    )
    expected = {**head, "values": {c: entry(keys, n, labels, v) for c, n, v in rows}}
    assert text == dumps(expected, ensure_ascii)


def test_a_wrong_number_of_days_is_an_error():
    keys = reports.ANSWER_KEYS["ddi"]
    with pytest.raises(TypeError):
        report_json.answer_text({}, ["2026-01-01"], keys, [("a", "A", [1, 2])], reports._per_day)


@pytest.mark.parametrize("total", [*range(0, 400), 10**6 + 1, 2**40 + 17, 10**12 - 1])
def test_the_per_day_figure_as_written(total):
    """float's repr is what json.dumps writes; the rounding is half-up to 4 places."""
    for days in (1, 7, 28, 29, 30, 31):
        exact = (Decimal(total) / Decimal(days)).quantize(Decimal("0.0001"), ROUND_HALF_UP)
        assert reports._per_day(total, days) == float(exact)
    assert reports._per_day(total, 0) == 0


# --- the API ---------------------------------------------------------------------------------


@pytest.fixture
def world_companies() -> dict[str, str]:
    return dict(NAMES)


@pytest.fixture
@kept
def world(world: World) -> World:
    """Figures in October 2025: acme's record all month, globex's from noon on the 16th to
    November, a second one of globex's for a day; initech nothing."""
    rows = []
    for kind in KINDS:
        rows += [
            (kind, "acme", f"{kind}-1", datetime(2025, 9, 1), None),
            (kind, "globex", f"{kind}-2", datetime(2025, 10, 16, 12), datetime(2025, 11, 2)),
            (kind, "globex", f"{kind}-3", datetime(2025, 10, 20), datetime(2025, 10, 21)),
            (kind, "acme", f"{kind}-4", datetime(2025, 10, 31, 23), None),
        ]
    add_history(*rows)
    return world


def jsonify_text(kind: str, scope: dict[str, Any]) -> bytes:
    """What jsonify wrote for the answer's dict."""
    answer = reports.answer(Principal.cli(), kind, reports.parse_scope(scope))
    return (dumps({"result": "success", **answer}) + "\n").encode()


SCOPES = [
    {"month": MONTH, "year": YEAR},
    {"company": ["initech", "globex", "nobody"], "month": MONTH, "year": YEAR},
    {"month": 9, "year": YEAR},
    {},  # the current month, to date
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("scope", SCOPES)
def test_the_api_answers_what_jsonify_wrote(world, kind, scope):
    headers = world.caller("root").headers
    posted = world.client.post(PATHS[kind], json={"type": "cdr", "scope": scope}, headers=headers)
    assert posted.status_code == 200
    assert posted.mimetype == "application/json"
    assert posted.get_data() == jsonify_text(kind, scope)
    query = {k: v for k, v in scope.items()}
    got = world.client.get(PATHS[kind], query_string=query, headers=headers)
    assert got.get_data() == posted.get_data()


@pytest.mark.parametrize("kind", KINDS)
def test_a_closed_month_answers_what_jsonify_wrote(world, kind):
    month_close.close_month(Principal.cli(), month_close.MonthRequest(MONTH, YEAR))
    scope = {"month": MONTH, "year": YEAR}
    response = world.client.post(
        PATHS[kind], json={"type": "cdr", "scope": scope}, headers=world.caller("root").headers
    )
    assert response.status_code == 200
    assert response.get_json()["period"]["closed"] is True
    assert response.get_data() == jsonify_text(kind, scope)


def test_debug_mode_indents_the_same_answer(world, app):
    """Flask's debug mode writes JSON indented: the dicts, through jsonify."""
    scope = {"month": MONTH, "year": YEAR}
    headers = world.caller("root").headers
    compact = world.client.post(PATHS["ddi"], json={"type": "cdr", "scope": scope}, headers=headers)
    app.debug = True
    try:
        indented = world.client.post(
            PATHS["ddi"], json={"type": "cdr", "scope": scope}, headers=headers
        )
    finally:
        app.debug = False
    assert b'\n  "result": "success"' in indented.get_data()
    assert indented.get_json() == compact.get_json()
