"""A real OpenID provider for the single sign-on tests: oidc-provider-mock's Flask app (RS256
ID tokens, discovery, JWKS, authorization code grant) served on 127.0.0.1 by Werkzeug in a
thread, behind a thin WSGI layer that counts requests by path and can make the provider
misbehave as a broken or hostile one would:

- `published_keys`: the JWKS it publishes instead of its own (tokens are still signed with
  its real key, so they carry a signature from a key the issuer does not publish);
- `issue_to`: the client id the code and the ID token are issued to instead of the one asking
  (a token for another client: the audience is not ours);
- `discovery_changes`: what its discovery document says differently (another issuer...);
- `rotate_key(kid)`: sign with a new key of that id from now on, and publish it.
"""

from __future__ import annotations

import base64
import io
import json
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import requests
from werkzeug.serving import make_server
from werkzeug.wrappers import Response

with warnings.catch_warnings():  # its imports of authlib.jose warn of deprecation
    warnings.simplefilter("ignore")
    import oidc_provider_mock
    from authlib import jose
    from oidc_provider_mock import User

from .conftest import serving

CLIENT_ID = "telephony-admin"
CLIENT_SECRET = "client-secret-for-tests"


class Provider:
    def __init__(
        self, users: dict[str, dict[str, Any]], token_max_age: timedelta = timedelta(hours=1)
    ) -> None:
        """`users`: subject -> its claims (preferred_username, email...); `token_max_age`:
        how long its tokens are valid (negative: expired when issued)."""
        self.app = oidc_provider_mock.app(
            require_nonce=True,
            access_token_max_age=token_max_age,
            user_claims=[User(sub=sub, claims=claims) for sub, claims in users.items()],
        )
        self.hits: Counter[str] = Counter()
        self.published_keys: dict[str, Any] | None = None
        self.issue_to: str | None = None
        self.discovery_changes: dict[str, Any] = {}
        self.url = ""

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        path = environ["PATH_INFO"]
        self.hits[path] += 1
        if path == "/jwks" and self.published_keys is not None:
            body = json.dumps(self.published_keys).encode()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        if self.issue_to is not None:
            self._reissue(environ)
        if path == "/.well-known/openid-configuration" and self.discovery_changes:
            answer = Response.from_app(self.app, environ)
            answer.set_data(json.dumps({**answer.get_json(), **self.discovery_changes}))
            return answer(environ, start_response)
        return self.app(environ, start_response)

    def _reissue(self, environ: dict[str, Any]) -> None:
        """Act as if `issue_to` had asked: the authorization request's client_id, and the
        token request's client credentials, name that client."""
        other = self.issue_to
        if environ["PATH_INFO"] == "/oauth2/authorize":
            query = dict(parse_qsl(environ["QUERY_STRING"]))
            query["client_id"] = other
            environ["QUERY_STRING"] = urlencode(query)
        elif environ["PATH_INFO"] == "/oauth2/token":
            basic = base64.b64encode(f"{other}:any".encode()).decode()
            environ["HTTP_AUTHORIZATION"] = f"Basic {basic}"
            length = int(environ.get("CONTENT_LENGTH") or 0)
            form = dict(parse_qsl(environ["wsgi.input"].read(length).decode()))
            form.pop("client_id", None)
            body = urlencode(form).encode()
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))

    def _internals(self) -> tuple[Any, Any]:
        """The provider's own store (signing key, users) and its authorization server, as its
        requests see them."""
        with self.app.test_request_context("/"):
            self.app.preprocess_request()
            from flask import g

            return g.oidc_provider_mock_storage, g._authlib_authorization_server

    def rotate_key(self, kid: str) -> None:
        """Sign with a new RSA key from now on, naming it `kid` in the tokens' header, and
        publish it (unless `published_keys` says otherwise)."""
        storage, server = self._internals()
        key = jose.RSAKey.generate_key(is_private=True)
        storage.jwk = jose.RSAKey.import_key({**key.as_dict(is_private=True), "kid": kid})
        # The provider names no key id in its tokens by itself; its ID-token extension (the
        # OpenIDCode of its code grant) is told to.
        for _grant, extensions in server._authorization_grants:
            for extension in extensions or ():
                extension.get_encode_header = lambda client: {"alg": "RS256", "kid": kid}

    def authorize(self, url: str, sub: str, **changes: str) -> str:
        """What the browser does at the provider: open the authorization `url` (with
        `changes` to its query, as someone tampering with it would) and pick the user `sub`;
        the callback address (path and query) the provider sends the browser back to."""
        parts = urlsplit(url)
        query = {**dict(parse_qsl(parts.query)), **changes}
        answer = requests.post(
            f"{self.url}{parts.path}?{urlencode(query)}",
            data={"sub": sub},
            allow_redirects=False,
            timeout=10,
        )
        assert answer.status_code == 302, answer.text
        back = urlsplit(answer.headers["Location"])
        return f"{back.path}?{back.query}"

    def deny(self, url: str) -> str:
        """Press Deny at the provider: the callback address with error=access_denied."""
        parts = urlsplit(url)
        answer = requests.post(
            f"{self.url}{parts.path}?{parts.query}",
            data={"action": "deny"},
            allow_redirects=False,
            timeout=10,
        )
        assert answer.status_code == 302, answer.text
        back = urlsplit(answer.headers["Location"])
        return f"{back.path}?{back.query}"


def other_keys() -> dict[str, Any]:
    """A JWKS of a freshly made RSA key: the keys of no provider."""
    key = jose.RSAKey.generate_key(is_private=True)
    return jose.KeySet((key,)).as_dict()


@contextmanager
def running(users: dict[str, dict[str, Any]], **options: Any) -> Iterator[Provider]:
    """A provider (`options`: Provider's) serving on a free port of 127.0.0.1 while the block
    runs."""
    provider = Provider(users, **options)
    with serving(make_server("127.0.0.1", 0, provider, threaded=True)) as url:
        provider.url = url
        yield provider


def configure(app: Any, issuer: str, **settings: str) -> None:
    """Set single sign-on up on `app` (undone with the rest of its configuration by the app
    fixture), and forget what an earlier test's provider said."""
    from webapp.services.identity import oidc

    oidc._clients.clear()
    app.config.update(
        {
            "OIDC_ISSUER": issuer,
            "OIDC_CLIENT_ID": CLIENT_ID,
            "OIDC_CLIENT_SECRET": CLIENT_SECRET,
            **settings,
        }
    )
