"""Real-browser tests: pytest-playwright driving the system's Chromium (never a downloaded one).

The browser is BROWSER_EXECUTABLE (default /usr/bin/chromium, Debian's package). Where it is
missing every test here is skipped with a reason saying how to enable them, so the suite still
passes on a machine without Chromium.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

HERE = Path(__file__).parent
CHROMIUM = os.environ.get("BROWSER_EXECUTABLE", "/usr/bin/chromium")
PASSWORD = "correct horse battery"
VIEWPORT = {"width": 1280, "height": 800}

# htmx swaps and the threaded test server answer in milliseconds, but CI machines can be slow.
expect.set_options(timeout=10_000)


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK):
        return None
    return (
        f"Chromium not found at {CHROMIUM}: install it (apt-get install chromium) or point "
        "BROWSER_EXECUTABLE at a Chromium binary to run the browser tests"
    )


def pytest_collection_modifyitems(config, items):
    why = chromium_missing()
    if why is None:
        return
    if os.environ.get("REQUIRE_BROWSER") == "1":  # CI: a missing browser is a failure
        raise pytest.UsageError(f"REQUIRE_BROWSER=1 but {why}")
    skip = pytest.mark.skip(reason=why)
    for item in items:  # this hook sees the whole session's items: mark only ours
        if HERE in Path(item.path).parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "headless": True,
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-quic",
        ],
    }


@pytest.fixture(scope="session")
def base_url():
    """Each test has its own live_server URL; this also replaces pytest-playwright's fallback
    fixture, whose instance-method form pytest warns about."""
    return None


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": VIEWPORT, "locale": "en-GB"}


def wait_for_htmx(page: Page) -> None:
    """htmx loads with `defer` and takes over links once the document is ready. A click before
    that is a plain link (what a user without JavaScript gets), so a test of the htmx
    behaviour waits for it, above all on a loaded machine."""
    page.wait_for_function("() => window.htmx !== undefined && document.readyState === 'complete'")


def wait_for_settled(page: Page) -> None:
    """htmx has finished its requests, swaps and settling: a swapped-in form field takes its
    behaviour (its own hx-get, static/picker.js's listeners) as the swap settles, so text typed
    into it before that starts no suggestion request. A user types that fast only in a test."""
    page.wait_for_function(
        "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"
    )


@pytest.fixture
def sign_in(live_server: str, page: Page):
    """sign_in(username): through the real /login form, then wait for the page it leads to.

    Requesting live_server before page closes the browser before the server stops."""

    def _sign_in(username: str, password: str = PASSWORD) -> None:
        page.goto(f"{live_server}/login")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_text(f"Signed in as {username}.")).to_be_visible()
        wait_for_htmx(page)

    return _sign_in
