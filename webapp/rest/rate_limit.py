"""The API's request limit (docs/api.md#limits): API_RATE_LIMIT per caller (request_auth.
rate_limit_key: the token, else the session's account, else the address) over every /rest/
endpoint together; over it, 429 `rate_limited`.

Counted by the limiter's own strategy (fixed window) in its storage (RATELIMIT_STORAGE_URI:
each process alone with memory://, every worker together with redis://), under the key
flask-limiter's shared limit used (`<key>/api`), so the counts are those it kept. Only its
per-request machinery is left out (`init_app` binds it without its request hooks): looking
on every request for decorator limits, exemptions and meta limits the app does not have cost
about a fifth of an API read. What it did, this does, at the same point of the request (first
of the app's before_request functions but CSRF's): every limit of the setting hit in order,
stopping at the first refused; the X-RateLimit-Limit, -Remaining and -Reset headers and
Retry-After (until the window resets) on every answer of a counted request, of the refused
limit or else the first.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any

from flask import Flask, Response, current_app, request
from limits import RateLimitItem, parse_many
from limits.strategies import FixedWindowRateLimiter, RateLimiter
from werkzeug.exceptions import TooManyRequests

from ..extensions import ProcessCounters, limiter
from ..request_auth import rate_limit_key

SCOPE = "api"  # the shared limit's scope: one bucket per caller for the whole API
# Where a counted request keeps its headers' values for after_request: the WSGI environ lives
# exactly as long as the request (`g` as long as the app context, which tests share).
WINDOW_KEY = "telephony.rate_limit"


@lru_cache(maxsize=8)
def limits_of(setting: str) -> tuple[RateLimitItem, ...]:
    """The limits of an API_RATE_LIMIT value (checked at start, config.parse_rate_limit), in
    flask-limiter's order; parsed once per value, not on every request."""
    return tuple(sorted(parse_many(setting)))


def init_app(app: Flask) -> None:
    """Bind the limiter (its storage and strategy, which the sign-in limits use too) to `app`
    without the request hooks flask-limiter installs, and install this module's instead."""
    hooks: list[dict[Any, list[Any]]] = [
        app.before_request_funcs,
        app.after_request_funcs,
        app.teardown_request_funcs,
    ]
    kept = [{name: list(funcs) for name, funcs in hook.items()} for hook in hooks]
    limiter.init_app(app)
    for hook, funcs in zip(hooks, kept, strict=True):
        hook.clear()
        hook.update(funcs)
    app.before_request(count_request)
    app.after_request(add_limit_headers)


def count_request() -> None:
    """Count a request to an API endpoint against each limit; TooManyRequests (429) at the
    first refused. A store that cannot be reached raises limits' StorageError: an outage
    (rest/errors.py). Other requests (the pages, an unknown /rest/ address) are not counted."""
    if request.blueprint != "rest" or not limiter.enabled:
        return
    strategy, key = limiter.limiter, rate_limit_key()
    shown: tuple[RateLimitItem, tuple[float, int] | None] | None = None
    refused = False
    for item in limits_of(current_app.config["API_RATE_LIMIT"]):
        refused, window = _hit(strategy, item, key)
        if shown is None or refused:
            shown = (item, window)
        if refused:
            break
    if shown is None:
        return
    item, window = shown
    reset, remaining = window or strategy.get_window_stats(item, key, SCOPE)
    request.environ[WINDOW_KEY] = (item.amount, remaining, int(reset + 1))
    if refused:
        raise TooManyRequests()


def _hit(
    strategy: RateLimiter, item: RateLimitItem, key: str
) -> tuple[bool, tuple[float, int] | None]:
    """strategy.hit: whether the limit refuses this request, and, from the memory:// counters
    with the fixed-window strategy (the default), the window's (reset, remaining) as
    get_window_stats would give them, learnt from the same call instead of two more lookups
    of the counter. None there for another store, whose get_window_stats is asked."""
    storage = strategy.storage
    if type(strategy) is FixedWindowRateLimiter and isinstance(storage, ProcessCounters):
        count, expires = storage.incr_window(item.key_for(key, SCOPE), item.get_expiry())
        return count > item.amount, (expires, max(0, item.amount - count))
    return not strategy.hit(item, key, SCOPE), None


def add_limit_headers(response: Response) -> Response:
    """The counted limit's headers. Retry-After: when the window resets, unless the answer
    carries its own (a database outage's 503, a service's 429), which tells when to retry."""
    window = request.environ.get(WINDOW_KEY)
    if window is not None:
        amount, remaining, reset_at = window
        headers = response.headers
        headers.add("X-RateLimit-Limit", str(amount))
        headers.add("X-RateLimit-Remaining", str(remaining))
        headers.add("X-RateLimit-Reset", str(reset_at))
        if "Retry-After" not in headers:
            headers["Retry-After"] = str(int(reset_at - time.time()))
    return response
