"""A small OpenID Connect provider for the tests, built on Authlib's authorization server: the
authorization code flow with an RS256-signed id_token (nonce, at_hash, aud, iss, exp), a JWKS endpoint,
a userinfo endpoint and a discovery document, served over HTTP on a free port in a thread.

It signs in whoever the test says (`provider.users[...]`, `provider.login_as`) without a login form, and
the test can change a user's `groups` between logins. `sign_with_wrong_key` signs the id_token with a
key that is not in its JWKS (under the same key id), as a forged token would be; `audience` gives it
another client's `aud`.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from authlib.oauth2 import AuthorizationServer, OAuth2Request
from authlib.oauth2.rfc6749 import ClientMixin, grants
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oidc.core import AuthorizationCodeMixin, UserInfo
from authlib.oidc.core.grants import OpenIDCode
from joserfc.jwk import KeySet, RSAKey

KEY_ID = "fleetwatt-test-1"


@dataclass
class Account:
    """Someone the provider signs in."""

    sub: str
    preferred_username: str
    email: str
    name: str = ""
    groups: list[str] = field(default_factory=list)


@dataclass
class _Client(ClientMixin):
    client_id: str
    client_secret: str
    redirect_uris: list[str]

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return self.redirect_uris[0]

    def get_allowed_scope(self, scope: str) -> str:
        return " ".join(s for s in scope.split() if s in {"openid", "email", "profile", "groups"})

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return secrets.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method in {"client_secret_post", "client_secret_basic"}

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type == "authorization_code"


@dataclass
class _Code(AuthorizationCodeMixin):
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    nonce: str | None
    sub: str
    auth_time: int

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope

    def get_nonce(self) -> str | None:
        return self.nonce

    def get_auth_time(self) -> int:
        return self.auth_time

    def get_acr(self) -> None:
        return None

    def get_amr(self) -> None:
        return None


class _Request(OAuth2Request):
    def __init__(self, method: str, uri: str, headers: dict[str, str], form: dict[str, str]) -> None:
        super().__init__(method=method, uri=uri, headers=headers)
        self._args = dict(parse_qsl(urlsplit(uri).query))
        self._form = form
        self.payload = BasicOAuth2Payload({**self._args, **form})

    @property
    def args(self) -> dict[str, str]:
        return self._args

    @property
    def form(self) -> dict[str, str]:
        return self._form


class OidcProvider:
    """The provider; `start()` serves it, `stop()` ends it. `issuer` is its base URL."""

    def __init__(self, *, client_id: str, client_secret: str, redirect_uri: str) -> None:
        self.key = RSAKey.generate_key(2048, parameters={"kid": KEY_ID, "use": "sig", "alg": "RS256"})
        self.wrong_key = RSAKey.generate_key(2048, parameters={"kid": KEY_ID, "use": "sig", "alg": "RS256"})
        self.client = _Client(client_id, client_secret, [redirect_uri])
        self.users: dict[str, Account] = {}
        self.login_as: str | None = None
        self.sign_with_wrong_key = False
        self.audience: str | None = None  # the id_token's aud; None: the client's id
        self.codes: dict[str, _Code] = {}
        self.tokens: dict[str, str] = {}  # access token -> sub
        self.requests: defaultdict[str, int] = defaultdict(int)  # path -> count, for the tests to check
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        # "localhost": Authlib accepts plain HTTP only on a loopback name or address.
        self.issuer = f"http://localhost:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.server = self._authorization_server()

    # --- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> OidcProvider:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def endpoint(self, name: str) -> str:
        return f"{self.issuer}/{name}"

    # --- Authlib ---------------------------------------------------------------------------------

    def _authorization_server(self) -> AuthorizationServer:
        provider = self

        class Server(AuthorizationServer):
            def query_client(self, client_id: str) -> _Client | None:
                return provider.client if client_id == provider.client.client_id else None

            def save_token(self, token: dict[str, Any], request: OAuth2Request) -> None:
                provider.tokens[token["access_token"]] = request.user.sub

            def create_oauth2_request(self, request: _Request) -> _Request:
                return request

            def create_json_request(self, request: Any) -> Any:
                raise NotImplementedError

            def handle_response(self, status: int, body: Any, headers: list[tuple[str, str]]) -> Any:
                return status, body, headers

            def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
                return None

        class CodeGrant(grants.AuthorizationCodeGrant):
            TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_post", "client_secret_basic"]

            def save_authorization_code(self, code: str, request: OAuth2Request) -> None:
                provider.codes[code] = _Code(
                    code=code,
                    client_id=request.payload.client_id,
                    redirect_uri=request.payload.redirect_uri,
                    scope=request.payload.scope,
                    nonce=request.payload.data.get("nonce"),
                    sub=request.user.sub,
                    auth_time=int(time.time()),
                )

            def query_authorization_code(self, code: str, client: _Client) -> _Code | None:
                found = provider.codes.get(code)
                return found if found is not None and found.client_id == client.client_id else None

            def delete_authorization_code(self, authorization_code: _Code) -> None:
                provider.codes.pop(authorization_code.code, None)

            def authenticate_user(self, authorization_code: _Code) -> Account:
                return next(a for a in provider.users.values() if a.sub == authorization_code.sub)

        class OpenId(OpenIDCode):
            def exists_nonce(self, nonce: str, request: OAuth2Request) -> bool:
                return any(c.nonce == nonce for c in provider.codes.values())

            def resolve_client_private_key(self, client: _Client) -> RSAKey:
                return provider.wrong_key if provider.sign_with_wrong_key else provider.key

            def get_client_claims(self, client: _Client) -> dict[str, Any]:
                return {"iss": provider.issuer, "aud": [provider.audience or client.client_id]}

            def get_client_algorithm(self, client: _Client) -> str:
                return "RS256"

            def get_encode_header(self, client: _Client) -> dict[str, str]:
                return {"alg": "RS256", "kid": KEY_ID}

            def generate_user_info(self, user: Account, scope: str) -> UserInfo:
                # The id_token carries the identity; the groups come from userinfo (as Keycloak's and
                # Okta's can be set up to do), read again at every login.
                return UserInfo(sub=user.sub, preferred_username=user.preferred_username, email=user.email)

        server = Server(scopes_supported=["openid", "email", "profile", "groups"])
        server.register_grant(CodeGrant, [OpenId(require_nonce=True)])
        server.register_token_generator(
            "default", BearerTokenGenerator(lambda **_: secrets.token_urlsafe(32), None, lambda *_: 300)
        )
        return server

    # --- HTTP ------------------------------------------------------------------------------------

    def _discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": self.endpoint("authorize"),
            "token_endpoint": self.endpoint("token"),
            "userinfo_endpoint": self.endpoint("userinfo"),
            "jwks_uri": self.endpoint("jwks"),
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
        }

    def _userinfo(self, authorization: str) -> tuple[int, dict[str, Any]]:
        scheme, _, token = authorization.partition(" ")
        sub = self.tokens.get(token) if scheme.lower() == "bearer" else None
        if sub is None:
            return 401, {"error": "invalid_token"}
        account = next(a for a in self.users.values() if a.sub == sub)
        return 200, {
            "sub": account.sub,
            "preferred_username": account.preferred_username,
            "email": account.email,
            "name": account.name,
            "groups": list(account.groups),
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _send(self, status: int, body: Any, headers: list[tuple[str, str]] | None = None) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                for name, value in headers or [("Content-Type", "application/json")]:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _request(self, form: dict[str, str]) -> _Request:
                return _Request(self.command, provider.issuer + self.path, dict(self.headers.items()), form)

            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                provider.requests[path] += 1
                if path == "/.well-known/openid-configuration":
                    self._send(200, provider._discovery())
                elif path == "/jwks":
                    self._send(200, KeySet([provider.key]).as_dict(private=False))
                elif path == "/userinfo":
                    status, body = provider._userinfo(self.headers.get("Authorization", ""))
                    self._send(status, body)
                elif path == "/authorize":
                    account = provider.users.get(provider.login_as or "")
                    request = self._request({})
                    grant = provider.server.get_consent_grant(request, end_user=account)
                    status, body, headers = provider.server.create_authorization_response(
                        request, grant_user=account, grant=grant
                    )
                    self._send(status, body if body else b"", headers)
                else:
                    self._send(404, {"error": "not_found"})

            def do_POST(self) -> None:
                path = urlsplit(self.path).path
                provider.requests[path] += 1
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(parse_qsl(self.rfile.read(length).decode()))
                if path == "/token":
                    status, body, headers = provider.server.create_token_response(self._request(form))
                    self._send(status, body, headers)
                else:
                    self._send(404, {"error": "not_found"})

        return Handler
