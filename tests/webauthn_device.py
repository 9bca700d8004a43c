"""A software authenticator for tests without a browser: real P-256 keys and signatures, real
CBOR, the "none" attestation a passkey usually gives, so py_webauthn verifies its answers as it
would a phone's. The browser tests use Chromium's own virtual authenticator instead."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from webauthn.helpers import bytes_to_base64url as b64

UP, UV, AT = 0x01, 0x04, 0x40  # authenticator data flags: presence, verification, credential


class Device:
    """One credential on one authenticator, made for `origin`."""

    def __init__(self, origin: str = "http://localhost", counts: bool = True):
        self.origin = origin
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = os.urandom(16)
        self.counts = counts  # False: a synced passkey, whose counter stays 0
        self.sign_count = 0

    @property
    def id(self) -> str:
        return b64(self.credential_id)

    def _client_data(self, kind: str, challenge: str) -> bytes:
        data = {"type": kind, "challenge": challenge, "origin": self.origin, "crossOrigin": False}
        return json.dumps(data).encode()

    def _cose_key(self) -> bytes:
        numbers = self.key.public_key().public_numbers()
        x, y = numbers.x.to_bytes(32, "big"), numbers.y.to_bytes(32, "big")
        return cbor2.dumps({1: 2, 3: -7, -1: 1, -2: x, -3: y})

    def create(self, options: dict[str, Any]) -> dict[str, Any]:
        """What navigator.credentials.create answers to the server's `options`, as JSON."""
        rp_hash = hashlib.sha256(options["rp"]["id"].encode()).digest()
        auth_data = (
            rp_hash
            + bytes([UP | UV | AT])
            + struct.pack(">I", self.sign_count)
            + bytes(16)  # AAGUID
            + struct.pack(">H", len(self.credential_id))
            + self.credential_id
            + self._cose_key()
        )
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        client_data = self._client_data("webauthn.create", options["challenge"])
        return {
            "id": self.id,
            "rawId": self.id,
            "type": "public-key",
            "response": {
                "clientDataJSON": b64(client_data),
                "attestationObject": b64(attestation),
                "transports": ["internal"],
            },
        }

    def get(self, options: dict[str, Any], rp_id: str | None = None) -> dict[str, Any]:
        """What navigator.credentials.get answers to the server's `options`, as JSON."""
        if self.counts:
            self.sign_count += 1
        rp_hash = hashlib.sha256((rp_id or options["rpId"]).encode()).digest()
        auth_data = rp_hash + bytes([UP | UV]) + struct.pack(">I", self.sign_count)
        client_data = self._client_data("webauthn.get", options["challenge"])
        signed = auth_data + hashlib.sha256(client_data).digest()
        signature = self.key.sign(signed, ec.ECDSA(hashes.SHA256()))
        return {
            "id": self.id,
            "rawId": self.id,
            "type": "public-key",
            "response": {
                "clientDataJSON": b64(client_data),
                "authenticatorData": b64(auth_data),
                "signature": b64(signature),
            },
        }
