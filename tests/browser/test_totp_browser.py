"""An authenticator app in a real browser: an account sets one up by reading the key off the
page and computing the code with pyotp (as a phone's app would from the QR code), keeps its
recovery codes, signs out, and signs in again with its password and then a code; then with a
recovery code. axe-core finds no violation on the enrolment page (with a refused code), the
recovery codes, the app's page or the second step (with a refused code), at desktop and phone
width, and none of them is wider than a phone."""

from __future__ import annotations

import time

import pyotp
import pytest
from playwright.sync_api import Page, expect

from webapp.services.identity.factors import DRIFT, STEP

from .conftest import PASSWORD, wait_for_htmx
from .test_axe import WIDTHS, too_wide, violations

pytestmark = pytest.mark.slow  # a real browser


def problems(page: Page) -> list[str]:
    found = []
    for width, size in WIDTHS.items():
        page.set_viewport_size(size)
        found += [f"{width} {v}" for v in violations(page) + too_wide(page)]
    page.set_viewport_size(WIDTHS["1280px"])
    return found


def password_step(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}/login")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1, name="Second step")).to_be_visible()


def a_new_code(totp: pyotp.TOTP, used: list[int]) -> str:
    """A code the app accepts now and has not accepted before: the current step's, or the
    step after the last one used (the app accepts DRIFT steps either side of now, each step's
    code once and only a later step after it). Waits for the clock only when the next unused
    step is beyond the drift: not for a test's two codes, which cost it 30 s of waiting when
    it waited for the next step instead."""
    while True:
        now = int(time.time() // STEP)
        step = max(now, used[-1] + 1) if used else now
        if step <= now + DRIFT:
            used.append(step)
            return totp.at(step * STEP)
        time.sleep(1)  # the clock must turn to the next step; nothing else makes it


def test_enrol_then_sign_in_with_password_and_code(factory, live_server, page, sign_in):
    factory.account("alice")
    sign_in("alice")
    found: dict[str, list[str]] = {}
    page.goto(f"{live_server}/account/security/totp")
    expect(page.get_by_role("img", name="QR code for the authenticator app")).to_be_visible()
    secret = page.locator("#totp-secret").inner_text().replace(" ", "")
    totp = pyotp.TOTP(secret)
    used: list[int] = []

    page.get_by_label("Code from the app").fill("000000" if totp.now() != "000000" else "111111")
    page.get_by_role("button", name="Set up the app").click()
    expect(page.locator("#code-error")).to_be_visible()
    found["enrolment, a wrong code"] = problems(page)

    page.get_by_label("Code from the app").fill(a_new_code(totp, used))
    page.get_by_role("button", name="Set up the app").click()
    expect(page.get_by_role("heading", level=1, name="Authenticator app added")).to_be_visible()
    codes = page.locator("ol.recovery-codes li").all_inner_texts()
    assert len(codes) == 10
    found["recovery codes"] = problems(page)

    page.goto(f"{live_server}/account/security/totp")
    expect(page.get_by_text("10 of 10 recovery codes left.")).to_be_visible()
    found["authenticator app set up"] = problems(page)

    wait_for_htmx(page)
    page.get_by_role("button", name="Sign out").click()
    password_step(page, live_server, "alice")
    page.get_by_label("Code").fill("12345")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("That code is not right")).to_be_visible()
    found["second step, a wrong code"] = problems(page)

    page.get_by_label("Code").fill(a_new_code(totp, used))
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("Signed in as alice.")).to_be_visible()

    wait_for_htmx(page)
    page.get_by_role("button", name="Sign out").click()
    password_step(page, live_server, "alice")
    page.get_by_label("Code").fill(codes[0])
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("9 recovery codes left")).to_be_visible()

    assert not any(found.values()), found
