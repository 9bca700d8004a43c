"""What every page view shares: the acting principal, htmx detection, query links."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from flask import request, url_for

from ..access import Principal
from ..request_auth import page_principal


def principal() -> Principal:
    """The signed-in account as the services' Principal (pages are login_required): the one
    worked out on the primary before a replica serves the page (request_auth.replica_reads)."""
    return page_principal()


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


MAX_BACK = 2000  # a list address longer than this is not one of ours


def list_back(endpoint: str, raw: str | None, params: tuple[str, ...]) -> str:
    """The address of the list `endpoint` that a form's `back` (`raw`) names, rebuilt from
    that list's `params` alone, so a form comes back to the list as it was shown (its search,
    sort, page). Anything else (another path or host, a scheme, other parameters, a fragment)
    is the plain list: never an open redirect. The list itself checks the values."""
    plain = url_for(endpoint)
    if not raw or len(raw) > MAX_BACK or not raw.isprintable() or "\\" in raw:
        return plain
    parts = urlsplit(raw)
    if parts.scheme or parts.netloc or parts.fragment or parts.path != plain:
        return plain
    try:
        pairs = parse_qsl(parts.query, strict_parsing=bool(parts.query))
    except ValueError:
        return plain
    if any(k not in params for k, _ in pairs):
        return plain
    kept: dict[str, Any] = dict(pairs)
    return url_for(endpoint, **kept)


def list_here(endpoint: str, args: Mapping[str, str], number: int) -> dict[str, str]:
    """`{"back": <the list endpoint's address with args, on page number>}` for the links of
    its rows, or {} on its plain first page (which every form falls back to anyway)."""
    state: dict[str, Any] = {**args, **({"page": str(number)} if number > 1 else {})}
    here = url_for(endpoint, **state)
    return {"back": here} if here != url_for(endpoint) else {}
