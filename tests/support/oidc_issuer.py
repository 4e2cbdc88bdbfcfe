"""A local OIDC test issuer: an RSA key, its JWKS file, RS256 JWTs minted on demand, and a tiny
HTTP token endpoint for the OAuth 2 client-credentials grant (POST /token with HTTP Basic
client credentials; GET /jwks serves the key set too).

    with OidcIssuer(tmp_path, clients={"svc": "secret"}) as issuer:
        issuer.token_url, issuer.jwks_file, issuer.mint("alice")
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

ISSUER = "https://issuer.onceflow.test"
AUDIENCE = "onceflow-broker"
# the security tests' OIDC clients: a writer the tests grant ACLs, mallory who gets none
WRITER, WRITER_SECRET = "svc-writer", "writer-secret-Ω"
TEST_CLIENTS = {WRITER: WRITER_SECRET, "mallory": "m"}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _uint(value: int) -> str:
    return b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))


def unsecured_token(sub: str, life_s: int = 3600, **claims: Any) -> str:
    """Kafka's unsecured JWS (`alg: none`, empty signature)."""
    now = int(time.time())
    body = {"sub": sub, "iat": now, "exp": now + life_s, **claims}
    header = b64url(json.dumps({"alg": "none"}).encode())
    return f"{header}.{b64url(json.dumps(body).encode())}."


class OidcIssuer:
    """The issuer; `clients` maps client ids to secrets, each client's token has sub=client id."""

    def __init__(
        self,
        directory: Path,
        clients: dict[str, str] | None = None,
        kid: str = "k1",
        iss: str = ISSUER,
        aud: str = AUDIENCE,
    ):
        self.kid, self.iss, self.aud = kid, iss, aud
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.clients = dict(clients or {})
        self.token_life_s = 3600
        self.requests: list[dict[str, str]] = []  # the token requests' form fields
        numbers = self.key.public_key().public_numbers()
        self.jwks = {
            "keys": [
                {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid}
                | {"n": _uint(numbers.n), "e": _uint(numbers.e)}
            ]
        }
        self.jwks_file = Path(directory) / "jwks.json"
        self.jwks_file.write_text(json.dumps(self.jwks))
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/token"

    @property
    def jwks_url(self) -> str:
        return self.jwks_file.as_uri()

    def mint(self, sub: str, life_s: int | None = None, key: Any = None, **claims: Any) -> str:
        """An RS256 JWT for `sub` (iss and aud of this issuer unless `claims` say otherwise)."""
        now = int(time.time())
        body = {"iss": self.iss, "aud": self.aud, "sub": sub, "iat": now}
        body |= {"exp": now + (self.token_life_s if life_s is None else life_s), **claims}
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(body).encode())}"
        signature = (key or self.key).sign(
            signing_input.encode(), padding.PKCS1v15(), hashes.SHA256()
        )
        return f"{signing_input}.{b64url(signature)}"

    def __enter__(self) -> OidcIssuer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(issuer: OidcIssuer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/jwks":
                self._reply(200, issuer.jwks)
            else:
                self._reply(404, {"error": "not_found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
            issuer.requests.append(form)
            client = _basic(self.headers.get("Authorization", ""))
            if self.path != "/token" or form.get("grant_type") != "client_credentials":
                self._reply(400, {"error": "unsupported_grant_type"})
            elif client is None or issuer.clients.get(client[0]) != client[1]:
                self._reply(401, {"error": "invalid_client"})
            else:
                scope = form.get("scope", "")
                token = issuer.mint(client[0], scope=scope) if scope else issuer.mint(client[0])
                self._reply(
                    200,
                    {"access_token": token, "token_type": "Bearer", "expires_in": 3600},
                )

    return Handler


def sasl_config(bootstrap: str, **settings: Any) -> dict[str, Any]:
    """Client settings for an OAUTHBEARER login on a SASL_PLAINTEXT listener."""
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        **settings,
    }


def oidc_config(bootstrap: str, issuer: OidcIssuer, client_id: str, secret: str) -> dict[str, Any]:
    """Client settings for an OIDC client-credentials login with this issuer (scope kafka)."""
    return sasl_config(
        bootstrap,
        **{
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": issuer.token_url,
            "sasl.oauthbearer.client.id": client_id,
            "sasl.oauthbearer.client.secret": secret,
            "sasl.oauthbearer.scope": "kafka",
        },
    )


def _basic(header: str) -> tuple[str, str] | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, _, secret = base64.b64decode(value).decode().partition(":")
    except ValueError:
        return None
    return urllib.parse.unquote(user), urllib.parse.unquote(secret)
