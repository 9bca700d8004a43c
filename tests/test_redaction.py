"""One redaction rule (access.redact): nothing of a company the reader may not see appears on
any surface that shows changes — the change feed, a webhook's payloads, the audit page, its
CSV, a DDI's page — over random histories of creates, moves, extension changes and deletes.

"Nothing" is checked literally: each company's identifier and name, and every extension a
record held while it was in that company (each extension is given once, so it belongs to
the companies that held it), are searched for in what each reader receives. The same
searches over a System-Admin's view find them, so the check is not vacuous.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webapp.access import Principal, redact
from webapp.errors import ServiceError
from webapp.extensions import db
from webapp.services.events import delivery, feed, journal, webhooks
from webapp.services.history import audit, audit_export
from webapp.services.records import crud, ddis, kinds

from .factories import OPERATOR
from .test_delivery import running_receiver

receiver = pytest.fixture(running_receiver, name="receiver")
pytestmark = pytest.mark.usefixtures("allow_loopback_webhooks")

COMPANIES = {"zqa": "Zqa Holdings", "zqb": "Zqb Partners", "zqc": "Zqc Networks"}
# Company-Admins, and what each may see.
READERS = {"ra": {"zqa"}, "rab": {"zqa", "zqb"}, "rc": {"zqc"}}
DIALCODE = "44"
_numbers = itertools.count(1_000_000)
_extens = itertools.count(1)


def fresh_exten() -> str:
    """An extension no other step uses: 7 digits, found only where it was given."""
    return f"7{next(_extens):06d}"


@dataclass
class History:
    """What a run of steps did: which companies held each extension, and where the DDI and
    the phone user are now."""

    number: str
    username: str
    holders: dict[str, set[str]] = field(default_factory=dict)
    ddi: tuple[str, str] | None = None  # (company, extension)
    user: tuple[str, str] | None = None

    def held(self, exten: str, company: str) -> None:
        self.holders.setdefault(exten, set()).add(company)


def apply_ddi(h: History, step: tuple) -> None:
    op, company, new_exten = step
    key = {"dialcode": DIALCODE, "number": h.number}
    if op == "delete":
        if h.ddi is not None:
            crud.delete_rows(OPERATOR, kinds.DDI, {"company": h.ddi[0], **key})
            h.ddi = None
        return
    if h.ddi is None:
        exten = fresh_exten()
        crud.create(OPERATOR, kinds.DDI, {**key, "virt_exten": exten, "company": company})
    else:
        # Moving without a new extension keeps it: then both companies held it.
        same = company == h.ddi[0]
        exten = fresh_exten() if new_exten or same else h.ddi[1]
        ddis.link(OPERATOR, key, {"virt_exten": exten, "company": company})
    h.ddi = (company, exten)
    h.held(exten, company)


def apply_user(h: History, step: tuple) -> None:
    op, company, new_exten = step
    if op == "delete":
        if h.user is not None:
            crud.delete_rows(
                OPERATOR, kinds.PHONE_USER, {"company": h.user[0], "username": h.username}
            )
            h.user = None
        return
    if h.user is None:
        exten = fresh_exten()
        crud.create(
            OPERATOR,
            kinds.PHONE_USER,
            {"username": h.username, "virt_exten": exten, "company": company},
        )
    else:
        same = company == h.user[0]
        exten = fresh_exten() if new_exten or same else h.user[1]
        crud.update(
            OPERATOR,
            kinds.PHONE_USER,
            {"company": h.user[0], "username": h.username},
            {"company": company, "virt_exten": exten},
        )
    h.user = (company, exten)
    h.held(exten, company)


STEP = st.tuples(
    st.sampled_from(["ddi", "user"]),
    st.sampled_from(["put", "put", "put", "delete"]),
    st.sampled_from(sorted(COMPANIES)),
    st.booleans(),
)


def secrets_of(h: History, visible: set[str] | None) -> list[re.Pattern[str]]:
    """What a reader of `visible` (None: every company) must not receive."""
    if visible is None:
        return []
    hidden = set(COMPANIES) - visible
    words = [*hidden, *(COMPANIES[c] for c in hidden)]
    words += [e for e, holders in h.holders.items() if not holders & visible]
    return [re.compile(rf"(?<![\w-]){re.escape(w)}(?![\w-])", re.IGNORECASE) for w in words]


def found(patterns: list[re.Pattern[str]], text: str) -> list[str]:
    return [p.pattern for p in patterns if p.search(text)]


@pytest.fixture
def readers(factory):
    for company, name in COMPANIES.items():
        factory.company(company, name)
    callers = {u: factory.account(u, admin_of=sorted(c)) for u, c in READERS.items()}
    browsers = {u: factory.browser(u) for u in READERS}
    return callers, browsers


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(STEP, min_size=1, max_size=7))
def test_nothing_of_an_invisible_company_appears_anywhere(app, factory, readers, receiver, steps):
    callers, browsers = readers
    db.session.rollback()
    # One webhook per reader, filtered to its companies, and one for every company.
    hooks = {
        u: webhooks.create(OPERATOR, receiver.url(f"/{u}"), companies=sorted(c))[0].id
        for u, c in READERS.items()
    }
    hooks["all"] = webhooks.create(OPERATOR, receiver.url("/all"))[0].id
    start = len(receiver.requests)
    first_new = journal.newest()
    db.session.rollback()

    h = History(number=str(next(_numbers)), username=f"u{next(_numbers)}")
    for kind, op, company, new_exten in steps:
        try:
            (apply_ddi if kind == "ddi" else apply_user)(h, (op, company, new_exten))
        except ServiceError:  # e.g. a phone user's move onto a taken name: nothing changed
            db.session.rollback()
    delivery.Worker(db.engine).run(once=True)
    payloads: dict[str, str] = {}
    for r in receiver.requests[start:]:
        payloads.setdefault(r.path.lstrip("/"), "")
        payloads[r.path.lstrip("/")] += r.body.decode() + "\n"

    for u, visible in READERS.items():
        hidden = secrets_of(h, visible)
        feed = factory.client.post(
            "/rest/events/read",
            json={"after": first_new, "limit": 1000},
            headers=callers[u].headers,
        )
        assert feed.status_code == 200
        surfaces = {
            "feed": json.dumps(feed.json),
            "webhook": payloads.get(u, ""),
            "audit page": browsers[u].get("/audit").get_data(as_text=True),
            "audit.csv": browsers[u].get("/audit.csv").get_data(as_text=True),
        }
        if h.ddi is not None and h.ddi[0] in visible:
            page = browsers[u].get(f"/ddis/{DIALCODE}/{h.number}")
            assert page.status_code == 200
            surfaces["DDI page"] = page.get_data(as_text=True)
        for surface, text in surfaces.items():
            assert not found(hidden, text), (u, surface, found(hidden, text), steps)
        # Not vacuous: what the reader may see of this history is there.
        mine = [e for e, holders in h.holders.items() if holders & visible]
        for exten in mine:
            assert exten in surfaces["feed"] and exten in surfaces["webhook"], (u, exten)
    # And the webhook for every company receives every company's values.
    assert all(exten in payloads.get("all", "") for exten in h.holders)
    db.session.rollback()
    for hook_id in hooks.values():
        webhooks.delete_webhook(OPERATOR, hook_id)


# --- the rule itself ---------------------------------------------------------------------------


def test_the_rule_drops_a_hidden_side_as_a_whole_and_names_no_hidden_company():
    before = {"virt_exten": "1", "company": "umbrella"}
    after = {"virt_exten": "2", "company": "acme"}
    target = "user acme/ana"
    everyone = redact(None, "acme", "umbrella", before, after, target)
    assert (everyone.company, everyone.other_company) == ("acme", "umbrella")
    assert everyone.company_text == "acme (from umbrella)"

    acme = redact(frozenset({"acme"}), "acme", "umbrella", before, after, target)
    assert (acme.before, acme.after, acme.other_company) == (None, after, None)
    assert acme.company_text == "acme (from another company)"
    assert acme.target == target

    umbrella = redact(frozenset({"umbrella"}), "acme", "umbrella", before, after, target)
    assert (umbrella.before, umbrella.after, umbrella.company) == (before, None, None)
    assert umbrella.company_text == "another company (from umbrella)"
    assert umbrella.target == "user umbrella/ana"  # where this reader last saw it

    neither = redact(frozenset({"globex"}), "acme", "umbrella", before, after, target)
    assert (neither.before, neither.after, neither.company, neither.other_company) == (
        None,
        None,
        None,
        None,
    )
    assert "acme" not in (neither.target or "") and "umbrella" not in neither.company_text
    # A change within one company: both sides, or neither.
    stay = redact(frozenset({"acme"}), "acme", None, after, {**after, "virt_exten": "3"})
    assert stay.before == after and stay.company_text == "acme"


def test_a_webhook_with_a_company_filter_receives_what_that_companys_admin_reads(
    app, factory, receiver
):
    for company, name in COMPANIES.items():
        factory.company(company, name)
    webhooks.create(OPERATOR, receiver.url("/zqa"), companies=["zqa"])
    factory.ddi(DIALCODE, "5550001", "zqb", "7999001")
    ddis.link(
        OPERATOR,
        {"dialcode": DIALCODE, "number": "5550001"},
        {"virt_exten": "7999002", "company": "zqa"},
    )
    delivery.Worker(db.engine).run(once=True)
    bodies = [json.loads(r.body) for r in receiver.requests if r.path == "/zqa"]
    assert len(bodies) == 1
    event = bodies[0]
    assert event["company"] == "zqa" and event["before"] is None
    assert event["after"]["virt_exten"] == "7999002"
    reader = Principal(username="r", via="api", admin_of=frozenset({"zqa"}))
    db.session.rollback()
    read = feed.read(reader, feed.Query(after=event["id"] - 1, limit=1))
    assert read.values == [event]


def test_the_audit_filters_do_not_find_a_move_by_the_company_it_went_to(app, factory, readers):
    """A filter naming a company the reader may not see finds nothing, though the move
    filed under it is about the reader's company too: finding it would say where it went."""
    _, browsers = readers
    crud.create(
        OPERATOR, kinds.PHONE_USER, {"username": "ana", "virt_exten": "7", "company": "zqa"}
    )
    crud.update(
        OPERATOR, kinds.PHONE_USER, {"company": "zqa", "username": "ana"}, {"company": "zqb"}
    )
    db.session.rollback()
    mine = Principal(username="r", via="ui", admin_of=frozenset({"zqa"}))
    moved = {"user.update"}
    assert {r.action for r in audit.search(mine).rows} >= moved  # the move is in its audit
    for filters in (
        {"target": "zqb/ana"},
        {"target": "user zqb/ana"},
        {"target": "USER ZQB/ANA"},
        {"company": "zqb"},
    ):
        assert audit.search(mine, **filters).rows == [], filters
        assert list(audit_export.export(mine, **filters)) == [], filters
        assert {r.action for r in audit.search(OPERATOR, **filters).rows} >= moved, filters
    page = browsers["ra"].get("/audit?target=zqb/ana").get_data(as_text=True)
    assert "No entries match." in page and "zqb" not in page.replace("zqb/ana", "")
    csv_text = browsers["ra"].get("/audit.csv?target=zqb/ana").get_data(as_text=True)
    assert csv_text.count("\n") == 1  # the header alone
