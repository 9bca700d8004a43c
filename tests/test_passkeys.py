"""The passkeys service (webapp/services/identity/passkeys.py) below the pages: what a
challenge is good for, the signature counter, and the user handle, with the software
authenticator of tests/webauthn_device.py (docs/security.md#passkeys)."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from webapp.errors import Invalid
from webapp.extensions import db
from webapp.models import Account, Passkey
from webapp.services.identity import passkeys

from .webauthn_device import Device

PARTY = passkeys.Party(rp_id="localhost", origin="http://localhost")


def _account(factory, username: str) -> Account:
    factory.account(username)
    return db.session.scalars(select(Account).where(Account.username == username)).one()


def _registered(account: Account, device: Device, name: str = "Laptop") -> Passkey:
    options, challenge = passkeys.registration_options(account, PARTY)
    added = passkeys.register(account, PARTY, challenge, device.create(options), name)
    return added.passkey


def _sign(account: Account, device: Device, purpose: str = "signin"):
    options, challenge = passkeys.authentication_options(account, PARTY, purpose)
    return passkeys.authenticate(account, PARTY, challenge, device.get(options))


def test_a_kept_challenge_is_good_for_its_account_and_purpose_for_5_minutes(factory):
    alice, bob = _account(factory, "alice"), _account(factory, "bob")
    _, challenge = passkeys.authentication_options(alice, PARTY, "signin")
    kept = challenge.as_dict()
    assert passkeys.challenge_from(kept, alice, "signin") == challenge
    assert passkeys.challenge_from(kept, bob, "signin") is None
    assert passkeys.challenge_from(kept, alice, "confirm") is None
    old = dict(kept, at=int(time.time()) - passkeys.CHALLENGE_FOR - 1)
    assert passkeys.challenge_from(old, alice, "signin") is None
    assert passkeys.challenge_from("not a dict", alice, "signin") is None


def test_the_counter_must_go_up_and_is_stored(factory):
    alice = _account(factory, "alice")
    device = Device()
    _registered(alice, device)
    assert _sign(alice, device) is not None
    assert _sign(alice, device).sign_count == 2
    device.sign_count = 0  # a cloned authenticator replaying an older counter
    assert _sign(alice, device) is None
    db.session.rollback()
    assert db.session.scalars(select(Passkey.sign_count)).one() == 2


def test_a_challenge_answers_once_and_a_passkey_works_at_its_host_only(factory):
    alice = _account(factory, "alice")
    device = Device(counts=False)
    _registered(alice, device)
    options, challenge = passkeys.authentication_options(alice, PARTY, "signin")
    answer = device.get(options)
    assert passkeys.authenticate(alice, PARTY, challenge, answer) is not None
    assert passkeys.authenticate(alice, PARTY, challenge, answer) is None
    other_host = passkeys.Party(rp_id="admin.example", origin="https://admin.example")
    assert _sign(alice, device) is not None
    options, challenge = passkeys.authentication_options(alice, other_host, "signin")
    assert passkeys.authenticate(alice, other_host, challenge, device.get(options)) is None


def test_the_user_handle_is_stable_and_names_no_account(factory):
    alice, bob = _account(factory, "alice"), _account(factory, "bob")
    first, _ = passkeys.registration_options(alice, PARTY)
    again, _ = passkeys.registration_options(alice, PARTY)
    other, _ = passkeys.registration_options(bob, PARTY)
    assert first["user"]["id"] == again["user"]["id"] != other["user"]["id"]
    assert first["user"]["name"] == "alice"
    assert first["rp"] == {"name": "Telephony admin", "id": "localhost"}
    assert first["authenticatorSelection"]["residentKey"] == "preferred"
    device = Device()
    _registered(alice, device)
    excluded, _ = passkeys.registration_options(alice, PARTY)
    assert [c["id"] for c in excluded["excludeCredentials"]] == [device.id]


_TEXT = st.text(alphabet="AZaz09-_=+/%!", max_size=40)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)
# A credential's shape with any values in it: what a broken or hostile browser might send.
_CREDENTIALS = st.fixed_dictionaries(
    {},
    optional={
        "id": _JSON,
        "rawId": _JSON,
        "type": st.sampled_from(["public-key", "other"]) | _JSON,
        "response": st.fixed_dictionaries(
            {},
            optional={
                key: _TEXT | _JSON
                for key in ("clientDataJSON", "authenticatorData", "signature", "userHandle")
            },
        ),
    },
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(credential=_CREDENTIALS | _JSON)
def test_any_malformed_answer_is_refused_without_an_error(factory, credential):
    if not db.session.scalar(select(Account.id).where(Account.username == "alice")):
        _registered(_account(factory, "alice"), Device())
    alice = db.session.scalars(select(Account).where(Account.username == "alice")).one()
    if isinstance(credential, dict) and "id" in credential:
        credential["id"] = db.session.scalars(select(Passkey.credential_id)).first()
    _, challenge = passkeys.authentication_options(alice, PARTY, "signin")
    assert passkeys.authenticate(alice, PARTY, challenge, credential) is None
    with pytest.raises(Invalid):
        _, challenge = passkeys.registration_options(alice, PARTY)
        passkeys.register(alice, PARTY, challenge, credential, "Other")
