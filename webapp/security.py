"""Response headers every answer carries, and the sign-in failure limits (docs/api.md#limits)."""

from __future__ import annotations

import re

from flask import Flask, Response, current_app, request
from flask_login import current_user
from limits import parse

from .extensions import limiter

# No inline script or style anywhere: htmx and app.css come from static/, and htmx is told
# not to inject its indicator <style> (base.html).
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; object-src 'none'; base-uri 'self'; "
    "frame-ancestors 'none'"
)
# Keeps an answer out of every cache (Pragma for HTTP/1.0 ones): pages that show a secret once
# send both; add_headers sets the Cache-Control one on every answer that may hold company data.
NO_STORE: dict[str, str] = {"Cache-Control": "no-store", "Pragma": "no-cache"}


# The headers every answer carries unless its view set its own, in the order they are added.
FIXED_HEADERS: tuple[tuple[str, str], ...] = (
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
)
FRAME_HEADER = ("X-Frame-Options", "DENY")
HSTS = ("Strict-Transport-Security", "max-age=31536000; includeSubDomains")


def add_headers(response: Response) -> Response:
    """The security headers (FIXED_HEADERS, X-Frame-Options, HSTS under HTTPS), Vary on
    HX-Request, and no-store on what may hold company data. Each header is looked for once in
    the few the view set, instead of a search per header through werkzeug's Headers."""
    headers = response.headers
    present = {name.lower() for name, _value in headers.items()}
    for name, value in FIXED_HEADERS:
        if name.lower() not in present:
            headers.add(name, value)
    static = request.endpoint == "static"
    # One address answers a fragment to htmx and a whole page otherwise.
    if not static:
        add_vary(response, "HX-Request")
    if "x-frame-options" not in present:
        headers.add(*FRAME_HEADER)
    # Pages of a signed-in account and every API answer may hold company data: no cache keeps
    # them (a shared computer's back button, a proxy). Static files stay cacheable.
    if not static and (request.path.startswith("/rest/") or current_user.is_authenticated):
        headers["Cache-Control"] = NO_STORE["Cache-Control"]
    if current_app.config.get("HTTPS") and "strict-transport-security" not in present:
        headers.add(*HSTS)
    return response


# A Vary header of plain tokens (werkzeug's token characters) and commas, as this app writes it.
_HEADER_WORD = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_PLAIN_VARY = re.compile(rf"{_HEADER_WORD}(?:[ \t]*,[ \t]*{_HEADER_WORD})*")


def add_vary(response: Response, value: str) -> None:
    """Add `value` (a token) to the response's Vary header, exactly as response.vary.add
    does, without building werkzeug's header set and its update callback (a second value came
    to a twentieth of an API read's own time): absent, the header becomes `value`; a plain list
    of tokens not holding it (case-insensitively) is written back `, `-separated with it last;
    anything else goes through response.vary."""
    headers = response.headers
    current = headers.get("Vary")
    if current is None:
        headers["Vary"] = value
    elif _PLAIN_VARY.fullmatch(current):
        values = [v.strip() for v in current.split(",")]
        if value.lower() not in {v.lower() for v in values}:
            headers["Vary"] = ", ".join([*values, value])
    else:
        response.vary.add(value)


def register(app: Flask) -> None:
    app.after_request(add_headers)


def _sign_in_limits(username: str) -> list[tuple[str, str, str]]:
    """(limit, *key) pairs a failed sign-in counts against: this account from this address,
    and this address over all accounts. Never the account alone: failures from one address
    must not lock the account's owner out from another (SECURITY.md). The address is the
    client's own behind trusted proxies (TRUSTED_PROXY_COUNT)."""
    address = request.remote_addr or "?"
    config = current_app.config
    return [
        (config["SIGN_IN_LIMIT"], "sign-in-account", f"{username.lower()}@{address}"),
        (config["SIGN_IN_ADDRESS_LIMIT"], "sign-in-address", address),
    ]


def sign_in_blocked(username: str) -> bool:
    """Whether this account from this address, or this address, has used up its failures."""
    return any(
        not limiter.limiter.test(parse(limit), *key) for limit, *key in _sign_in_limits(username)
    )


def record_sign_in_failure(username: str) -> None:
    """Count a failed sign-in against the account at this address and against the address
    (shared storage, so several workers count together when RATELIMIT_STORAGE_URI points at
    Redis)."""
    for limit, *key in _sign_in_limits(username):
        limiter.limiter.hit(parse(limit), *key)
