"""What every page view shares: the acting principal, htmx detection, query links."""

from __future__ import annotations

from collections.abc import Mapping

from flask import request
from flask_login import current_user

from ..access import Principal


def principal() -> Principal:
    """The signed-in account as the services' Principal (pages are login_required)."""
    return Principal.from_account(current_user, via="ui")


def is_htmx() -> bool:
    """htmx asks for a fragment; a plain request (no JavaScript) gets the whole page, and so
    does htmx restoring a page from history (it replaces the whole body)."""
    return (
        request.headers.get("HX-Request") == "true"
        and request.headers.get("HX-History-Restore-Request") != "true"
    )


def page_args(args: Mapping[str, str], allowed: tuple[str, ...]) -> dict[str, str]:
    """The non-empty query parameters among `allowed`, e.g. to rebuild links."""
    return {k: args[k] for k in allowed if args.get(k)}
