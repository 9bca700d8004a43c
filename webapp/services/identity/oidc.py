"""Single sign-on with an OpenID provider (docs/security.md#single-sign-on): the authorization
code flow with PKCE (S256), and the ID token checked before anyone is signed in.

Authlib does the protocol: discovery (OIDC_ISSUER/.well-known/openid-configuration), the
authorization URL with state, nonce and code challenge, the code exchange, and the ID token's
signature against the issuer's published keys (JWKS, fetched again once when a token names a
key id it does not hold: the provider rotated its keys). Authlib checks the issuer and the
nonce, but the audience only when asked: `_claims_options` asks for both, exactly.

Nothing here talks to the provider until a sign-in starts: the sign-in page renders without
it, so password sign-in works while the provider is down. What discovery and the keys said
is kept per process for CACHE_FOR, then fetched again.

The browser's half of the flow (state, nonce and verifier kept in the session cookie between
the two requests) is views/sso.py; the account the provider vouched for is found here, and
never created. (Authlib ships no type information: its imports are untyped for mypy.)
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import requests
from authlib.integrations.base_client.errors import OAuthError  # type: ignore[import-untyped]
from authlib.integrations.flask_client.apps import FlaskOAuth2App  # type: ignore[import-untyped]
from authlib.integrations.flask_client.integration import (  # type: ignore[import-untyped]
    FlaskIntegration,
)
from flask import current_app
from joserfc.errors import JoseError
from sqlalchemy import select

from ...access import Principal
from ...database import write_transaction
from ...extensions import db
from ...models import Account
from ..history import audit
from . import signin

log = logging.getLogger(__name__)

TIMEOUT = 5  # seconds for each call to the provider (discovery, keys, code exchange)
CACHE_FOR = 300  # seconds discovery and the published keys are kept per process
LEEWAY = 60  # seconds of clock difference allowed with the provider (exp, iat, auth_time)
SCOPE = "openid profile email"
ACTOR_PREFIX = "sso:"  # the audit actor of a refused sign-in: no account acted


class SignOnProblem(Exception):
    """Single sign-on did not sign anyone in; `message` says why to the person trying."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Unreachable(SignOnProblem):
    """The provider did not answer, or answered with something that is no OpenID answer."""

    status = 502


class Rejected(SignOnProblem):
    """The provider's answer was an error, or could not be verified."""


class Refused(SignOnProblem):
    """The provider vouched for someone this app does not let in."""

    status = 403


UNREACHABLE = (
    "The identity provider could not be reached; try again later or sign in with your password."
)
# What discovery must name for a sign-in to go through.
ENDPOINTS = ("authorization_endpoint", "token_endpoint", "jwks_uri")


@dataclass(frozen=True)
class Start:
    """A sign-in begun: where to send the browser, and what the callback must be given back."""

    url: str
    state: str
    nonce: str
    verifier: str


_lock = threading.Lock()
_clients: dict[tuple[str, str, str], tuple[float, FlaskOAuth2App]] = {}


def configured() -> bool:
    """Whether single sign-on is set up (check_config guarantees all three parts or none)."""
    return bool(current_app.config.get("OIDC_ISSUER"))


def _client() -> FlaskOAuth2App:
    """The Authlib client of the configured provider, made again after CACHE_FOR so discovery
    and the keys are fetched again (a new client has neither)."""
    config = current_app.config
    key = (config["OIDC_ISSUER"], config["OIDC_CLIENT_ID"], config["OIDC_CLIENT_SECRET"])
    now = time.monotonic()
    with _lock:
        made = _clients.get(key)
        if made is None or now - made[0] > CACHE_FOR:
            _clients.clear()  # one provider at a time: an old configuration's client goes
            made = (now, _new_client(*key))
            _clients[key] = made
    return made[1]


def _new_client(issuer: str, client_id: str, secret: str) -> FlaskOAuth2App:
    return FlaskOAuth2App(
        FlaskIntegration("oidc"),
        name="oidc",
        client_id=client_id,
        client_secret=secret,
        server_metadata_url=f"{issuer}/.well-known/openid-configuration",
        client_kwargs={
            "scope": SCOPE,
            "code_challenge_method": "S256",
            "default_timeout": TIMEOUT,
        },
    )


def _metadata(client: FlaskOAuth2App) -> dict[str, Any]:
    """The provider's discovery document; Unreachable if it cannot be had or names another
    issuer than the configured one (OpenID Connect Discovery §4.3)."""
    try:
        metadata: dict[str, Any] = client.load_server_metadata()
    except (requests.RequestException, ValueError) as exc:
        log.warning("OIDC discovery failed: %s", type(exc).__name__)
        raise Unreachable(UNREACHABLE) from None
    issuer = str(metadata.get("issuer") or "")
    if issuer.rstrip("/") != current_app.config["OIDC_ISSUER"]:
        log.error("OIDC discovery names issuer %r, not the configured one", issuer)
        raise Unreachable(UNREACHABLE)
    if missing := [name for name in ENDPOINTS if not metadata.get(name)]:
        log.error("OIDC discovery names no %s", ", ".join(missing))
        raise Unreachable(UNREACHABLE)
    return metadata


def begin(redirect_uri: str, *, again: bool = False) -> Start:
    """Start a sign-in: the provider's authorization URL for `redirect_uri` with a new state,
    nonce and PKCE verifier. `again`: the provider must ask the person to sign in again
    (prompt=login, max_age=0), to confirm before a sensitive action. Unreachable when the
    provider's discovery cannot be had."""
    client = _client()
    _metadata(client)
    extra: dict[str, Any] = {"prompt": "login", "max_age": 0} if again else {}
    made = client.create_authorization_url(redirect_uri, **extra)
    return Start(made["url"], made["state"], made["nonce"], made["code_verifier"])


def identify(code: str, redirect_uri: str, nonce: str, verifier: str) -> dict[str, Any]:
    """The claims of the ID token the provider gives for `code`, once its signature (against
    the published keys), issuer, audience (this client), expiry and nonce were checked.
    Unreachable when the provider cannot be reached; Rejected when it refuses the code or its
    answer fails a check."""
    client = _client()
    metadata = _metadata(client)
    try:
        token = client.fetch_access_token(
            redirect_uri=redirect_uri, code=code, code_verifier=verifier
        )
        if "id_token" not in token:
            raise Rejected("The identity provider's answer holds no ID token.")
        claims = client.parse_id_token(
            token, nonce=nonce, claims_options=_claims_options(metadata), leeway=LEEWAY
        )
    except (requests.RequestException, RuntimeError) as exc:
        log.warning("OIDC code exchange or key fetch failed: %s", type(exc).__name__)
        raise Unreachable(UNREACHABLE) from None
    except OAuthError as exc:
        log.warning("OIDC token endpoint refused the code: %s", exc.error)
        raise Rejected("The identity provider did not accept this sign-in; start again.") from None
    except JoseError as exc:
        # The reason (bad signature, wrong audience, expired...) goes to the log, not the token.
        log.warning("OIDC ID token refused: %s %s", type(exc).__name__, exc.error)
        raise Rejected("The identity provider's answer could not be verified.") from None
    return dict(claims)


def _claims_options(metadata: dict[str, Any]) -> dict[str, Any]:
    """What the ID token must say: issued by the discovered issuer, for this client. Authlib
    checks the issuer only with this option, and the audience only with this option."""
    return {
        "iss": {"essential": True, "value": metadata["issuer"]},
        "aud": {"essential": True, "value": current_app.config["OIDC_CLIENT_ID"]},
    }


def provider_error(error: str, description: str | None) -> Rejected:
    """What to tell someone the provider sent back with an error instead of a code."""
    log.info("OIDC provider answered %s: %s", error[:60], (description or "")[:200])
    if error == "access_denied":
        return Rejected("The sign-in was cancelled or refused at the identity provider.")
    return Rejected(f"The identity provider could not sign you in ({error[:60]}).")


def username(claims: dict[str, Any]) -> str:
    """The username the provider vouched for: the claim OIDC_USERNAME_CLAIM; Rejected when the
    token does not carry it."""
    claim = current_app.config["OIDC_USERNAME_CLAIM"]
    value = claims.get(claim)
    if not isinstance(value, str) or not value.strip():
        log.warning("OIDC ID token has no %r claim", claim)
        raise Rejected(f"The identity provider did not say your username (claim {claim}).")
    return value.strip()


def account_for(claims: dict[str, Any]) -> Account:
    """The existing, enabled account whose username is the token's username claim. Never
    creates one: an unknown or disabled account is Refused, and the refusal is audited
    (account.sign-in-refused, the actor "sso:<username>", since no account acted)."""
    name = username(claims)
    account = db.session.scalars(select(Account).where(Account.username == name)).first()
    if account is not None and account.active:
        return account
    reason = "no such account" if account is None else "account disabled"
    _audit_refusal(name, reason)
    if account is None:
        raise Refused(
            f"No account here has the username {name!r}. Single sign-on signs in existing "
            "accounts only: ask an administrator to create yours."
        )
    raise Refused(f"The account {name!r} is disabled.")


def _audit_refusal(name: str, reason: str) -> None:
    actor = Principal(username=(ACTOR_PREFIX + name)[:80], via="ui")
    with write_transaction() as session:
        audit.record(
            session,
            [
                audit.entry(
                    actor,
                    "account.sign-in-refused",
                    f"account {name}"[:200],
                    detail=f"single sign-on refused: {reason}",
                )
            ],
        )


def confirm(account: Account, claims: dict[str, Any], asked_at: int) -> None:
    """Confirm the session `account` was loaded for (signin.confirm_session) with a fresh
    sign-in at the provider, asked for at `asked_at` (Unix seconds): the token must name this
    same account (else Refused), and its auth_time, when given, must not be older than the
    request (else Rejected: the provider did not ask again). Audited as account.confirmed."""
    if username(claims) != account.username:
        raise Refused(
            "The identity provider signed in someone else than this session's account; "
            "nothing was confirmed."
        )
    auth_time = claims.get("auth_time")
    if isinstance(auth_time, int | float) and auth_time < asked_at - LEEWAY:
        raise Rejected("The identity provider did not ask you to sign in again; try again.")
    signin.confirm_session(account, "oidc")
