"""The screenshot of /account/security for docs/security.md and the README: an account with an
authenticator app, two passkeys, its recovery codes and two sessions, at 1280 and 390 px.

python -m bench.screenshot_security [--out docs/screenshots]

Needs no bench data: it migrates a fresh SQLite database in a temporary folder, makes the
account through the command line, serves the app under gunicorn (bench/http.py) and sets the
factors up through the pages in Debian's Chromium — the authenticator app with a code computed
by pyotp from the key the page shows, the passkeys with Chromium's virtual authenticator (at
http://localhost, a host name as WebAuthn wants).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pyotp

from .http import app_env, gunicorn_server, running

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
USERNAME, PASSWORD = "maria.admin", "a long bench password"
AUTHENTICATOR = {
    "protocol": "ctap2",
    "transport": "internal",
    "hasResidentKey": True,
    "hasUserVerification": True,
    "isUserVerified": True,
}


def _flask(env: dict[str, str], *args: str, stdin: str | None = None) -> None:
    command = [sys.executable, "-m", "flask", "--app", "app", *args]
    subprocess.run(command, env=env, input=stdin, text=True, check=True, capture_output=True)


def _sign_in(page, base: str) -> None:
    page.goto(f"{base}/login")
    page.get_by_label("Username").fill(USERNAME)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state("load")


def _set_up(page, base: str) -> None:
    """An authenticator app and two passkeys, through the pages."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    page.goto(f"{base}/account/security")
    for name in ("Laptop", "YubiKey 5C"):
        # Each passkey on an authenticator of its own: one holds at most one of an account's.
        transport = "internal" if name == "Laptop" else "usb"
        options = {**AUTHENTICATOR, "transport": transport}
        cdp.send("WebAuthn.addVirtualAuthenticator", {"options": options})
        page.get_by_label("Name of the new passkey").fill(name)
        page.get_by_role("button", name="Add a passkey").click()
        continue_link = page.get_by_role("link", name="Continue")
        page.wait_for_timeout(1500)
        if continue_link.count():  # the first factor shows the recovery codes once
            continue_link.click()
        page.wait_for_load_state("load")
    page.goto(f"{base}/account/security/totp")
    secret = page.locator("#totp-secret").inner_text().replace(" ", "")
    page.get_by_label("Code from the app").fill(pyotp.TOTP(secret).now())
    page.get_by_role("button", name="Set up the app").click()
    page.wait_for_load_state("load")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        env = app_env(f"sqlite:///{tmp}/security.db", Path(tmp))
        _flask(env, "db", "upgrade")
        _flask(
            env,
            "accounts",
            "create",
            USERNAME,
            "--system-admin",
            "--password-stdin",
            stdin=PASSWORD + "\n",
        )
        app = gunicorn_server("app", "app:app", env, Path(tmp))
        with running([app]), sync_playwright() as p:
            base = app.base.replace("127.0.0.1", "localhost")
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
            other = browser.new_context(
                user_agent="Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit"
                "/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1"
            )
            _sign_in(other.new_page(), base)  # a second session, on a phone
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            _sign_in(page, base)
            _set_up(page, base)
            page.goto(f"{base}/account/security")
            page.screenshot(path=args.out / "account-security.png", full_page=True)
            page.set_viewport_size({"width": 390, "height": 844})
            page.screenshot(path=args.out / "account-security-phone.png")
            browser.close()
    print(args.out / "account-security.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
