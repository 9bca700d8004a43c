"""The audit log's actions as a reader names them: 'ddi.delete' is "DDI deleted".

The one mapping of the codes the services write (records/kinds.py, identity, companies,
billing, imports, events, the demo commands) to words: the audit page's Action column, its
action filter's choices and the filter's check read it. A code missing here (written by an
older or newer version) shows as its code and still filters.
"""

from __future__ import annotations

import re

NAMES: dict[str, str] = {
    "ddi.create": "DDI created",
    "ddi.update": "DDI changed",
    "ddi.link": "DDI linked to an extension",
    "ddi.delete": "DDI deleted",
    "number.stock": "Number stocked",
    "number.reserve": "Number reserved",
    "number.release": "Number released",
    "number.retire": "Number retired",
    "user.create": "Phone user created",
    "user.update": "Phone user changed",
    "user.delete": "Phone user deleted",
    "company.create": "Company created",
    "company.rename": "Company renamed",
    "account.create": "Account created",
    "account.grants": "Account's grants changed",
    "account.password": "Account's password reset",
    "account.disable": "Account disabled",
    "account.enable": "Account enabled",
    "account.sign_in": "Signed in",
    "account.second_factor_failed": "Second factor refused",
    "account.recovery_code_used": "Recovery code used",
    "account.factor_added": "Second factor added",
    "account.factor_removed": "Second factor removed",
    "account.session_ended": "Session ended",
    "account.confirmed": "Identity confirmed",
    "account.mfa_reset": "Second factors reset",
    "token.create": "API token created",
    "token.revoke": "API token revoked",
    "webhook.create": "Webhook created",
    "webhook.update": "Webhook changed",
    "webhook.pause": "Webhook paused",
    "webhook.resume": "Webhook resumed",
    "webhook.test": "Webhook sent a test event",
    "webhook.rotate-secret": "Webhook secret rotated",
    "webhook.redeliver": "Webhook event redelivered",
    "webhook.delete": "Webhook deleted",
    "month.close": "Month closed",
    "month.reopen": "Month reopened",
    "history.import": "History imported",
    "history.rollup": "Report rollup rebuilt",
    "demo.seed": "Demo data seeded",
    "demo.load": "Demo data loaded",
}

# What an action code looks like: a word, a dot, a word (the filter refuses anything else);
# the sign-in actions' words hold underscores (account.session_ended).
CODE = re.compile(r"[a-z]{1,20}\.[a-z_-]{1,30}")


def name(code: str) -> str:
    """The readable name of an action code; an unknown code as it is."""
    return NAMES.get(code, code)


def is_code(text: str) -> bool:
    """Whether `text` has the shape of an action code (known or not)."""
    return CODE.fullmatch(text) is not None


def effect(code: str) -> str | None:
    """'created' for an action that creates its target, 'deleted' for one that deletes it, None
    for any other (a change, a link, a rename...). Said by the code, not by which of before and
    after an entry holds: a move seen from a company the reader may not see has no before."""
    verb = code.rpartition(".")[2]
    return {"create": "created", "delete": "deleted"}.get(verb)
