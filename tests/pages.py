"""Every page of the app in one table, for the checks that must hold on all of them: exactly
one h1 (tests/test_headings.py), and no axe-core violation (WCAG 2.2 A and AA, best
practices) at desktop and phone width, nor a page wider than a phone (tests/browser/test_axe.py).

A new page is one more line in PAGES. Paths are str.format templates: `{token}` (the
System-Admin's API token id), `{preview}` (an import preview of the System-Admin's),
`{webhook}` (a webhook with delivery attempts) and `{today}` (ISO date) are filled in by
`page_paths`, and `{stock_preview}` (a stock file's preview); the records they name are made by
`add_page_records`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from webapp.access import Principal
from webapp.database import utcnow, write_transaction
from webapp.extensions import db
from webapp.models import (
    STOCK_PREVIEW,
    Account,
    ApiToken,
    ImportPreview,
    Number,
    Webhook,
    WebhookAttempt,
)
from webapp.services import inventory
from webapp.services.billing import month_close
from webapp.services.events import webhooks
from webapp.services.imports import import_previews
from webapp.services.numbers import reserving, stock, stock_previews

from .factories import ACME, World, add_history

DIALCODE, NUMBER = "44", "2071000001"
PHONE_USER = "alice"
ACCOUNT = "cadmin"  # an account of the world, for the per-account admin pages
DDI = f"/ddis/{DIALCODE}/{NUMBER}"
FREE_PREFIX = "2079"  # numbers of the stock (available), for the free numbers' page
RESERVED = "2071000002"  # a number in the stock, reserved for ACME (its page's other fields)
USER = f"/users/{ACME}/{PHONE_USER}"

# A month the page records close (its close and reopen pages, its changes since), and an
# ended one left open.
CLOSED, OPEN = (2025, 9), (2025, 10)
CLOSED_LABEL, OPEN_LABEL = "2025-09", "2025-10"

# Signed in as the System-Admin: name -> path.
# fmt: off
PAGES: dict[str, str] = {
    "DDI list":                  "/ddis",
    "DDI list, filtered":        f"/ddis?company={ACME}&number=207",
    "DDI list, reserved":        "/ddis?state=reserved",
    "DDI list, available":       "/ddis?state=available",
    "DDI list, aging":           "/ddis?state=aging",
    "DDI list, all states":      f"/ddis?state=all&company={ACME}",
    "new DDI":                   "/ddis/new",
    "DDI page":                  DDI,
    "DDI page, reserved number": f"/ddis/{DIALCODE}/{RESERVED}",
    "edit DDI":                  f"{DDI}/edit",
    "link DDI":                  f"{DDI}/link",
    "delete DDI":                f"{DDI}/delete",
    "import DDIs":               "/ddis/import",
    "import preview":            "/ddis/import/{preview}",
    "stock numbers":             "/ddis/stock",
    "stock preview":             "/ddis/stock/file/{stock_preview}",
    "find free numbers":         "/ddis/free",
    "free numbers found":        f"/ddis/free?dialcode={DIALCODE}&prefix={FREE_PREFIX}&count=3",
    "phone users":               "/users",
    "phone user page":           USER,
    "new phone user":            "/users/new",
    "edit phone user":           f"{USER}/edit",
    "delete phone user":         f"{USER}/delete",
    "DDI counts, all companies": "/reports/ddis",
    "DDI counts, one company":   f"/reports/ddis?company={ACME}",
    "DDI counts, one day":       f"/reports/ddis/day?company={ACME}&date={{today}}",
    "user counts, all":          "/reports/users",
    "user counts, one company":  f"/reports/users?company={ACME}",
    "user counts, one day":      f"/reports/users/day?company={ACME}&date={{today}}",
    "DDI counts, closed month":  f"/reports/ddis?year={CLOSED[0]}&month={CLOSED[1]}",
    "months":                    "/reports/months",
    "close a month":             f"/reports/months/{OPEN_LABEL}/close",
    "reopen a month":            f"/reports/months/{CLOSED_LABEL}/reopen",
    "changes since a close":     f"/reports/months/{CLOSED_LABEL}/changes?kind=ddi",
    "companies":                 "/admin/companies",
    "rename company":            f"/admin/companies/{ACME}/rename",
    "company page":              f"/companies/{ACME}",
    "accounts":                  "/admin/accounts",
    "new account":               "/admin/accounts/new",
    "account grants":            f"/admin/accounts/{ACCOUNT}/grants",
    "reset password":            f"/admin/accounts/{ACCOUNT}/password",
    "disable account":           f"/admin/accounts/{ACCOUNT}/disable",
    "account's API tokens":      f"/admin/accounts/{ACCOUNT}/tokens",
    "reset second factors":      f"/admin/accounts/{ACCOUNT}/reset-mfa",
    "security":                  "/account/security",
    "confirm it is you":         "/account/confirm",
    "API tokens":                "/account/tokens",
    "revoke token":              "/account/tokens/{token}/revoke",
    "set up authenticator app":  "/account/security/totp",
    "passkeys":                  "/account/passkeys",
    "webhooks":                  "/admin/webhooks",
    "webhook page":              "/admin/webhooks/{webhook}",
    "delete webhook":            "/admin/webhooks/{webhook}/delete",
    "rotate webhook secret":     "/admin/webhooks/{webhook}/rotate-secret",
    "edit webhook":              "/admin/webhooks/{webhook}/edit",
    "audit log":                 "/audit",
    "audit log, filtered":       f"/audit?company={ACME}",
    "search":                    "/search",
    "search results":            "/search?q=a",  # acme (Acme Telecom) and alice
    "error page (404)":          "/no-such-page",
}
# fmt: on

# Pages as another role sees them, where it differs from the System-Admin's: name ->
# (username of the world, path). A System-Admin's /companies is /admin/companies (a redirect);
# a Company-Admin of one company (cadmin: acme) has no company filter on its lists and audit.
AS_OTHERS: dict[str, tuple[str, str]] = {
    "companies, Billing": ("summary", "/companies"),
    "DDI list, one company's admin": ("cadmin", "/ddis"),
    "DDI list, reserved, one company's admin": ("cadmin", "/ddis?state=reserved"),
    "audit log, one company's admin": ("cadmin", "/audit"),
    "search results, Billing": ("summary", "/search?q=e"),
}

# Signed out.
SIGNED_OUT: dict[str, str] = {
    "sign in": "/login",
    "API reference": "/rest/docs",  # public, like the document it renders (docs/api.md)
}

# Routed GET addresses that are no page (besides /rest/, /static/ and .csv downloads).
NOT_PAGES: dict[str, str] = {
    "/": "redirects to a page",
    "/healthz": "liveness probe, not HTML (tests/test_health.py)",
    "/readyz": "readiness probe for load balancers, not HTML (tests/test_health.py)",
    "/companies/suggest": "the company pickers' suggestion fragment (tests/test_pickers.py)",
    "/accounts/suggest": "the audit actor picker's suggestion fragment (test_audit_pages.py)",
    "/<any(ddis, users):plural>/bulk": "redirects to the list (tests/test_coming_back.py)",
    # Half-way signed in only: its h1 in tests/test_views_factors.py, axe-core in
    # tests/browser/test_totp_browser.py.
    "/login/verify": "the second step of signing in (after the password)",
    "/login/sso": "redirects to the identity provider (tests/test_oidc.py)",
    "/login/sso/callback": "the identity provider's answer (tests/test_oidc.py)",
}


def add_page_records(world: World) -> None:
    """The records the pages above name: a DDI and a phone user of ACME (through the real
    services, so they have history, daily peaks and audit entries)."""
    world.factory.ddi(DIALCODE, NUMBER, ACME, "100")
    world.factory.user(PHONE_USER, ACME, "200")
    add_numbers()
    stocked = {"dialcode": DIALCODE, "number": RESERVED, "description": "Reception <desk>"}
    stock.stock(Principal.cli(), {"values": [stocked]})
    reserving.reserve(
        Principal.cli(),
        {"scope": {"dialcode": DIALCODE, "number": RESERVED}, "values": {"company": ACME}},
    )
    root = db.session.scalar(select(Account).where(Account.username == "root"))
    assert root is not None
    # A preview that moves the DDI and creates one, so every section of the page shows.
    content = f"dialcode,number,virt_exten,company\n{DIALCODE},{NUMBER},100,globex\n1,2,3,acme\n"
    import_previews.create(Principal.from_account(root, "ui"), "page.csv", content.encode())
    # Stock numbers, and a stock file's preview naming one of them, so every section shows.
    block = {"dialcode": DIALCODE, "first": f"{FREE_PREFIX}000000", "count": 5}
    stock.stock(Principal.cli(), {"block": block})
    content = f"dialcode,number\n{DIALCODE},{FREE_PREFIX}000004\n{DIALCODE},{FREE_PREFIX}000005\n"
    stock_previews.preview_file(Principal.from_account(root, "ui"), "stock.csv", content.encode())
    # A closed month with a change since its close, so the changes table shows.
    month_close.close_month(Principal.cli(), month_close.MonthRequest(CLOSED[1], CLOSED[0]))
    add_history(("ddi", ACME, "44:99", datetime(2025, 9, 3), datetime(2025, 9, 4)))
    add_webhook()


def add_numbers() -> None:
    """Numbers out of service for the DDI list's states: two available (one with a
    description), one reserved for ACME, one aging after leaving it."""
    today = inventory.today()
    with write_transaction() as session:
        for number, state, held_for, previous, until, description in (
            ("2071230000", "available", None, None, None, "Reception"),
            ("2071230001", "available", None, None, None, ""),
            ("2071240000", "reserved", ACME, None, today + timedelta(days=30), "New office"),
            ("2071250000", "aging", None, ACME, today + timedelta(days=10), ""),
        ):
            session.add(
                Number(
                    dialcode=DIALCODE,
                    number=number,
                    state=state,
                    held_for=held_for,
                    previous_company=previous,
                    held_until=until,
                    description=description,
                )
            )


def add_webhook() -> int:
    """A webhook for ACME's DDI events with every kind of attempt on its page: a delivered
    one, a failed one (given up, so it has a Redeliver button) and one being retried."""
    hook, _ = webhooks.create(
        Principal.cli(),
        "https://93.184.215.14/telephony",  # a public address: the tests resolve no name
        ["ddi.created", "ddi.updated"],
        [ACME],
    )
    now = utcnow()
    with write_transaction() as session:
        stored = session.get(Webhook, hook.id)
        assert stored is not None
        stored.head_event, stored.head_attempts = 2, 2
        stored.next_attempt_at = now + timedelta(seconds=30)
        for event_id, status, error, outcome in (
            (1, 200, None, "delivered"),
            (1, None, "connection refused", "failed"),
            (2, 503, None, "retry"),
        ):
            session.add(
                WebhookAttempt(
                    webhook_id=hook.id,
                    event_id=event_id,
                    at=now,
                    status=status,
                    duration_ms=12,
                    error=error,
                    outcome=outcome,
                )
            )
    return hook.id


def page_paths(username: str = "root") -> dict[str, str]:
    """PAGES with their placeholders filled in for `username` (whose token is revoked)."""
    token = db.session.scalar(
        select(ApiToken.id).join(Account).where(Account.username == username).limit(1)
    )
    db.session.rollback()
    previews = dict(
        db.session.execute(
            select(ImportPreview.fingerprint == STOCK_PREVIEW, ImportPreview.id)
            .join(Account)
            .where(Account.username == username)
        ).all()
    )
    db.session.rollback()
    webhook = db.session.scalar(select(Webhook.id).order_by(Webhook.id).limit(1))
    db.session.rollback()
    values = {
        "token": token,
        "preview": previews.get(False),
        "stock_preview": previews.get(True),
        "webhook": webhook,
        "today": datetime.now(UTC).date().isoformat(),
    }
    return {name: path.format(**values) for name, path in PAGES.items()}
