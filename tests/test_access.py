"""Principal, without HTTP or a database: which companies each role may see, pick, report on
and audit, and whose password and tokens it may manage."""

from __future__ import annotations

import pytest
from sqlalchemy import Column, MetaData, String, Table, create_engine, select, true

from webapp.access import CompanyScope, Principal, sole_company, within
from webapp.errors import Forbidden

ACME, GLOBEX, INITECH = "acme", "globex", "initech"
EVERY = None  # a scope of None: every company

ROLES: dict[str, Principal] = {
    "system_admin": Principal(username="root", via="ui", account_id=1, system_admin=True),
    "company_admin": Principal(
        username="boss", via="ui", account_id=2, admin_of=frozenset({ACME, INITECH})
    ),
    "billing_summary": Principal(username="sum", via="ui", account_id=3, billing_summary=True),
    "billing_for_some": Principal(
        username="clerk", via="ui", account_id=4, reporting_for=frozenset({ACME, GLOBEX})
    ),
    "admin_and_billing": Principal(
        username="both",
        via="ui",
        account_id=5,
        admin_of=frozenset({ACME}),
        reporting_for=frozenset({GLOBEX}),
    ),
    "plain": Principal(username="nobody", via="ui", account_id=6),
    "cli": Principal.cli(),
}

# role: (visible, pickable, reportable, auditable)
SCOPES: dict[str, tuple[CompanyScope, CompanyScope, CompanyScope, CompanyScope]] = {
    "system_admin": (EVERY, EVERY, EVERY, EVERY),
    "company_admin": (
        frozenset({ACME, INITECH}),
        frozenset({ACME, INITECH}),
        frozenset(),
        frozenset({ACME, INITECH}),
    ),
    "billing_summary": (EVERY, frozenset(), EVERY, frozenset()),
    "billing_for_some": (
        frozenset({ACME, GLOBEX}),
        frozenset(),
        frozenset({ACME, GLOBEX}),
        frozenset(),
    ),
    "admin_and_billing": (
        frozenset({ACME, GLOBEX}),
        frozenset({ACME}),
        frozenset({GLOBEX}),
        frozenset({ACME}),
    ),
    "plain": (frozenset(), frozenset(), frozenset(), frozenset()),
    "cli": (EVERY, EVERY, EVERY, EVERY),
}


@pytest.mark.parametrize("role", sorted(SCOPES))
def test_company_scopes_of_each_role(role):
    principal = ROLES[role]
    assert (
        principal.visible_companies(),
        principal.pickable_companies(),
        principal.reportable_companies(),
        principal.auditable_companies(),
    ) == SCOPES[role]


@pytest.mark.parametrize("role", sorted(SCOPES))
def test_may_report_on_follows_the_report_scope(role):
    principal = ROLES[role]
    scope = principal.reportable_companies()
    for company in ("acme", "globex", "initech", "elsewhere"):
        assert principal.may_report_on(company) == (scope is None or company in scope)


@pytest.mark.parametrize("role", sorted(SCOPES))
def test_every_narrower_scope_lies_within_the_visible_one(role):
    principal = ROLES[role]
    visible = principal.visible_companies()
    for scope in (principal.pickable_companies(), principal.reportable_companies()):
        if visible is not None:
            assert scope is not None and scope <= visible


@pytest.mark.parametrize(
    ("role", "may_report", "may_audit"),
    [
        ("system_admin", True, True),
        ("company_admin", False, True),
        ("billing_summary", True, False),
        ("billing_for_some", True, False),
        ("admin_and_billing", True, True),
        ("plain", False, False),
        ("cli", True, True),
    ],
)
def test_report_and_audit_permission(role, may_report, may_audit):
    principal = ROLES[role]
    assert (principal.may_report, principal.may_audit) == (may_report, may_audit)
    for allowed, require in (
        (may_report, principal.require_report),
        (may_audit, principal.require_audit),
    ):
        if allowed:
            require()
        else:
            with pytest.raises(Forbidden):
                require()


@pytest.mark.parametrize("role", sorted(SCOPES))
def test_may_manage_account_only_its_own_unless_system_admin(role):
    principal = ROLES[role]
    everyone = principal.system_admin
    assert principal.may_manage_account(account_id=principal.account_id or 99) is True
    assert principal.may_manage_account(username=principal.username) is True
    assert principal.may_manage_account(account_id=42) is everyone
    assert principal.may_manage_account(username="someone-else") is everyone
    if everyone:
        principal.require_manage_account("change another account's password", username="x")
    else:
        with pytest.raises(Forbidden) as raised:
            principal.require_manage_account("see another account's tokens", account_id=42)
        assert str(raised.value) == "Only a System-Admin may see another account's tokens."


def test_may_manage_account_wants_exactly_one_name():
    principal = ROLES["plain"]
    with pytest.raises(TypeError):
        principal.may_manage_account()
    with pytest.raises(TypeError):
        principal.may_manage_account(account_id=6, username="nobody")


def test_an_account_without_id_manages_no_account_by_id():
    principal = Principal(username="ghost", via="api")
    assert principal.may_manage_account(account_id=1) is False
    assert principal.may_manage_account(username="ghost") is True


def test_within_turns_a_scope_into_a_condition():
    """Run on an in-memory SQLite table: None keeps every row, a scope exactly its companies,
    an empty scope none."""
    table = Table("t", MetaData(), Column("company", String, primary_key=True))
    engine = create_engine("sqlite://")
    table.metadata.create_all(engine)
    with engine.begin() as connection:
        connection.execute(table.insert(), [{"company": c} for c in (ACME, GLOBEX, INITECH)])
        for scope, expected in (
            (EVERY, [ACME, GLOBEX, INITECH]),
            (frozenset({GLOBEX, ACME, "nonexistent"}), [ACME, GLOBEX]),
            (frozenset(), []),
        ):
            query = select(table.c.company).where(within(table.c.company, scope))
            assert list(connection.scalars(query.order_by(table.c.company))) == expected
    assert within(table.c.company, EVERY).compare(true())


def test_sole_company_names_the_one_company_of_a_scope():
    assert sole_company(frozenset({"acme"})) == "acme"
    assert sole_company(None) is None  # every company
    assert sole_company(frozenset()) is None
    assert sole_company(frozenset({"acme", "globex"})) is None
    cadmin = Principal(username="c", via="ui", admin_of=frozenset({"acme"}))
    assert sole_company(cadmin.pickable_companies()) == "acme"
    assert sole_company(Principal.cli().pickable_companies()) is None
