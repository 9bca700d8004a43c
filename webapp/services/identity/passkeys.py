"""An account's passkeys and security keys (WebAuthn, docs/security.md#passkeys): adding one
(the browser's navigator.credentials.create), naming and removing it, and checking one
(navigator.credentials.get) as the second step of a sign-in or to confirm a session.

What the py_webauthn library checks for us: the challenge, the origin, the relying party's id
(its SHA-256 in the authenticator data), user presence, the signature with the stored public
key, and that the signature counter went up (when the authenticator keeps one). What is added
here: each challenge is good for one answer within CHALLENGE_FOR (its digest is recorded in
`form_once`, so a copy of an old session cookie holding it is no use), a credential is accepted
only for the account it was added to, and the counter is compared again under a row lock so
two answers racing with one counter value cannot both pass.

The relying party is the host the browser sees (`Party`): passkeys added at one host name work
at that name only.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Any

from flask import current_app
from sqlalchemy import delete, exists, func, select
from webauthn import (
    base64url_to_bytes,
    generate_authentication_options,
    generate_registration_options,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import bytes_to_base64url, options_to_json_dict
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    AuthenticatorTransport,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from ...database import utcnow, write_transaction
from ...errors import Invalid, NotFound
from ...extensions import db
from ...models import Account, FormOnce, Passkey
from ..history import audit
from . import factors, signin

RP_NAME = "Telephony admin"
CHALLENGE_FOR = 5 * 60  # seconds from the options to the browser's answer
MAX_NAME = 64
# What a malformed answer can make the library raise besides its own errors (a CBOR map with
# the wrong types, a key of an unknown kind): all mean "not a valid answer".
_BAD_ANSWER = (WebAuthnException, ValueError, TypeError, KeyError, IndexError, AttributeError)


@dataclass(frozen=True)
class Party:
    """The relying party as the browser sees it: `rp_id` the host name (no port), `origin`
    the scheme, host and port the page was loaded from."""

    rp_id: str
    origin: str


@dataclass(frozen=True)
class Challenge:
    """A challenge handed to the browser, as the caller keeps it (in the signed session): for
    which account and purpose, when, and the bytes as base64url."""

    account_id: int
    purpose: str
    value: str
    at: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "account": self.account_id,
            "purpose": self.purpose,
            "value": self.value,
            "at": self.at,
        }


def _new_challenge(account: Account, purpose: str) -> tuple[bytes, Challenge]:
    raw = secrets.token_bytes(32)
    return raw, Challenge(account.id, purpose, bytes_to_base64url(raw), int(time.time()))


def challenge_from(kept: object, account: Account, purpose: str) -> Challenge | None:
    """The challenge kept by the caller (`Challenge.as_dict`) if it was made for `account` and
    `purpose` within CHALLENGE_FOR; None otherwise."""
    if not isinstance(kept, dict):
        return None
    value, at = kept.get("value"), kept.get("at")
    if kept.get("account") != account.id or kept.get("purpose") != purpose:
        return None
    if not isinstance(value, str) or not isinstance(at, int) or time.time() - at > CHALLENGE_FOR:
        return None
    return Challenge(account.id, purpose, value, at)


def _user_handle(account: Account) -> bytes:
    # Opaque and stable: an HMAC of the account id under the app's secret key, so the
    # authenticator stores nothing that names the account or counts accounts.
    key = str(current_app.secret_key).encode()
    return hmac.new(key, f"passkey user {account.id}".encode(), hashlib.sha256).digest()


def _descriptors(account: Account) -> list[PublicKeyCredentialDescriptor]:
    rows = db.session.scalars(select(Passkey).where(Passkey.account_id == account.id))
    return [
        PublicKeyCredentialDescriptor(
            id=_b64decode(row.credential_id), transports=_transports(row.transports)
        )
        for row in rows
    ]


def _transports(stored: str | None) -> list[AuthenticatorTransport] | None:
    known = {t.value for t in AuthenticatorTransport}
    names = [t for t in (stored or "").split(",") if t in known]
    return [AuthenticatorTransport(t) for t in names] or None


def _b64decode(value: str) -> bytes:
    return base64url_to_bytes(value)


def registration_options(account: Account, party: Party) -> tuple[dict[str, Any], Challenge]:
    """What navigator.credentials.create needs to add a passkey to `account` (as JSON, binary
    fields in base64url), and the challenge for the caller to keep. The account's passkeys are
    excluded, so an authenticator that holds one already says so instead of adding another;
    a discoverable credential and user verification are preferred, not required (a security
    key without a PIN still works as a second factor)."""
    raw, challenge = _new_challenge(account, "register")
    options = generate_registration_options(
        rp_id=party.rp_id,
        rp_name=RP_NAME,
        user_name=account.username,
        user_id=_user_handle(account),
        challenge=raw,
        exclude_credentials=_descriptors(account),
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED,
            user_verification=UserVerificationRequirement.PREFERRED,
        ),
    )
    return options_to_json_dict(options), challenge


def check_name(account: Account, name: object) -> str:
    """`name` stripped, if it may name a new passkey of `account`: 1 to 64 printable
    characters, not the name of another of its passkeys (compared without case); Invalid
    otherwise."""
    text = name.strip() if isinstance(name, str) else ""
    if not 1 <= len(text) <= MAX_NAME or not text.isprintable():
        raise Invalid(
            f"A passkey's name is 1 to {MAX_NAME} printable characters.",
            {"name": f"1 to {MAX_NAME} printable characters"},
        )
    taken = db.session.scalar(
        select(
            exists().where(
                Passkey.account_id == account.id, func.lower(Passkey.name) == text.lower()
            )
        )
    )
    if taken:
        raise Invalid("Another passkey of yours has that name.", {"name": "already used"})
    return text


def _use_challenge(account: Account, challenge: Challenge) -> bool:
    """Record that `challenge` was answered; False if it was already (an old cookie replayed).
    Rows are pruned like the one-time forms' (views/once.py), after a session's life."""
    key = "wa" + hashlib.sha256(challenge.value.encode()).hexdigest()[:30]
    oldest = utcnow() - signin.session_limits().lifetime
    with write_transaction() as session:
        session.execute(delete(FormOnce).where(FormOnce.used_at < oldest))
        if session.get(FormOnce, key) is not None:
            return False
        session.add(FormOnce(key=key, account_id=account.id, what="passkey challenge"))
    return True


@dataclass(frozen=True)
class Added:
    """A passkey just added, and the recovery codes to show once when the account had no
    unused ones (its first second factor; None otherwise)."""

    passkey: Passkey
    recovery_codes: list[str] | None


def register(
    account: Account, party: Party, challenge: Challenge, credential: object, name: str
) -> Added:
    """Add the passkey the browser made (`credential`, the JSON of its PublicKeyCredential) to
    `account` under `name` (already checked by `check_name`), if it answers `challenge` for
    this relying party; Invalid otherwise, and nothing is stored.

    One write transaction stores the credential id (base64url), public key, counter and
    transports and audits account.factor-added; a credential already known (to this account
    or another) is refused. Then, if the account has no unused recovery codes (its first
    second factor), 10 new ones are made and returned to be shown once."""
    if not _use_challenge(account, challenge):
        raise Invalid("That answer was used already; try again.")
    try:
        verified = verify_registration_response(
            credential=credential if isinstance(credential, dict) else {},
            expected_challenge=_b64decode(challenge.value),
            expected_rp_id=party.rp_id,
            expected_origin=party.origin,
        )
    except _BAD_ANSWER:
        raise Invalid("The browser's answer could not be verified; try again.") from None
    credential_id = bytes_to_base64url(verified.credential_id)
    with write_transaction() as session:
        if session.scalar(select(exists().where(Passkey.credential_id == credential_id))):
            raise Invalid("That passkey is already registered.")
        row = Passkey(
            account_id=account.id,
            credential_id=credential_id,
            public_key=verified.credential_public_key,
            sign_count=verified.sign_count,
            name=name,
            transports=_transports_of(credential),
            created_at=utcnow(),
        )
        session.add(row)
        audit.record(
            session, [signin.own_entry(account, "account.factor-added", f"passkey '{name}'")]
        )
    return Added(row, factors.first_factor_codes(account))


def _transports_of(credential: object) -> str | None:
    response = credential.get("response") if isinstance(credential, dict) else None
    listed = response.get("transports") if isinstance(response, dict) else None
    known = {t.value for t in AuthenticatorTransport}
    names = (
        [t for t in listed if isinstance(t, str) and t in known] if isinstance(listed, list) else []
    )
    return ",".join(names)[:200] or None


def remove(account: Account, passkey_id: int) -> str:
    """Remove `account`'s passkey `passkey_id` (NotFound if it has no such passkey: another
    account's is never touched), audited as account.factor-removed; its name. With no second
    factor left, the account's recovery codes are deleted too."""
    with write_transaction() as session:
        row = session.scalar(
            select(Passkey).where(Passkey.id == passkey_id, Passkey.account_id == account.id)
        )
        if row is None:
            raise NotFound("You have no such passkey.")
        name = row.name
        session.delete(row)
        audit.record(
            session, [signin.own_entry(account, "account.factor-removed", f"passkey '{name}'")]
        )
    # Recovery codes stand in for a factor: with none left, they go too.
    factors.clear_codes_if_no_factor(account)
    return name


def authentication_options(
    account: Account, party: Party, purpose: str
) -> tuple[dict[str, Any], Challenge]:
    """What navigator.credentials.get needs to prove `account`'s presence with one of its
    passkeys (only its own are allowed), and the challenge for the caller to keep. `purpose`
    ("signin" or "confirm") is kept with the challenge, so an answer for one is refused for
    the other."""
    raw, challenge = _new_challenge(account, purpose)
    options = generate_authentication_options(
        rp_id=party.rp_id,
        challenge=raw,
        allow_credentials=_descriptors(account),
        user_verification=UserVerificationRequirement.PREFERRED,
    )
    return options_to_json_dict(options), challenge


def authenticate(
    account: Account, party: Party, challenge: Challenge | None, credential: object
) -> Passkey | None:
    """The passkey of `account` that signed `challenge` in `credential` (the JSON of the
    browser's PublicKeyCredential), its counter and last use now updated; None for anything
    else (another account's credential, an unknown one, no challenge, a wrong or used one, a bad
    signature, a counter that did not go up), recorded in the audit log as a failed second
    factor."""
    found = _verified(account, party, challenge, credential)
    if found is None:
        with write_transaction() as session:
            audit.record(
                session, [signin.own_entry(account, "account.second-factor-failed", "passkey")]
            )
    return found


def _verified(
    account: Account, party: Party, challenge: Challenge | None, credential: object
) -> Passkey | None:
    credential_id = credential.get("id") if isinstance(credential, dict) else None
    if challenge is None or not isinstance(credential_id, str):
        return None
    if not _use_challenge(account, challenge):
        return None
    row = db.session.scalar(
        select(Passkey).where(
            Passkey.account_id == account.id, Passkey.credential_id == credential_id
        )
    )
    if row is None:
        return None
    try:
        verified = verify_authentication_response(
            credential=credential if isinstance(credential, dict) else {},
            expected_challenge=_b64decode(challenge.value),
            expected_rp_id=party.rp_id,
            expected_origin=party.origin,
            credential_public_key=row.public_key,
            credential_current_sign_count=row.sign_count,
        )
    except _BAD_ANSWER:
        return None
    return _count_use(row.id, verified.new_sign_count)


def _count_use(passkey_id: int, new_count: int) -> Passkey | None:
    """Store the counter and the time of use, unless another answer moved the counter to
    `new_count` or past it since the library compared (two answers racing): then this one is
    refused. Authenticators that keep no counter (synced passkeys) always say 0."""
    with write_transaction() as session:
        locked = session.get(Passkey, passkey_id, with_for_update=True, populate_existing=True)
        if locked is None:
            return None  # removed meanwhile
        if (new_count or locked.sign_count) and new_count <= locked.sign_count:
            return None
        locked.sign_count = new_count
        locked.last_used_at = utcnow()
    return locked


def confirm(account: Account) -> None:
    """Record that the holder of `account`'s session proved it again with a passkey (already
    checked by `authenticate`): sensitive actions are allowed for signin.CONFIRM_FOR, and the
    confirmation is audited as account.confirmed."""
    signin.confirm_session(account, "a passkey")
