"""The client side of SASL/OAUTHBEARER (RFC 7628, KIP-255) and where its tokens come from.

The exchange: the client's initial response `n,,\\x01auth=Bearer <token>\\x01[key=value\\x01]*\\x01`
(the extensions of `sasl.oauthbearer.extensions`, KIP-342); an empty server answer completes
it. A rejecting server answers with an error JSON (`{"status":"invalid_token"}`), to which the
client sends the single byte `\\x01`; the broker then fails the exchange with its message, which
the client raises (Kafka's `OAuthBearerSaslClient` does the same).

Token providers (librdkafka's and KIP-768's property names, read by `client.net.security`):

- `oauth_cb`: a callable `oauth_cb(sasl.oauthbearer.config) -> (token, expiry)` as
  confluent-kafka calls it; `expiry` is seconds since the epoch. A 3- or 4-tuple may add the
  principal and a dict of extensions. A string "package.module:function" names an importable
  callable (Spark executors cannot receive a pickled function).
- OIDC client credentials (`sasl.oauthbearer.method=oidc`): a POST of
  `grant_type=client_credentials` (and `scope`) to `sasl.oauthbearer.token.endpoint.url` with
  HTTP Basic `client.id:client.secret`, as Kafka's `HttpAccessTokenRetriever`; the answer's
  `access_token`, its lifetime from the JWT's `exp` (else `expires_in`).
- Kafka's unsecured token (`enable.sasl.oauthbearer.unsecure.jwt=true`), built from
  `sasl.oauthbearer.config` "principal=<p> [scope=<s,...>] [lifeSeconds=<n>]
  [principalClaimName=<c>] [scopeClaimName=<c>] [extension_<name>=<v>]", an `alg: none` JWS as
  librdkafka's default token builder and Kafka's `OAuthBearerUnsecuredLoginCallbackHandler`
  make; for tests and development only.

A token is reused until 80% of its lifetime has passed (librdkafka's refresh point); a new
connection then fetches a fresh one. A connection keeps its token until the broker's session
lifetime (KIP-368) ends it. The fetch runs in `prepare()`, which the producer's and consumer's
I/O loop runs on a worker thread before connecting (the AdminClient's blocking connections
call it inline); librdkafka refreshes in the background instead.
"""

from __future__ import annotations

import base64
import importlib
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from onceflow.security.sasl import IllegalSaslStateError, SaslAuthenticationError

__all__ = [
    "CallbackTokenProvider",
    "OAuthBearerClient",
    "OAuthBearerToken",
    "OidcTokenProvider",
    "RefreshingToken",
    "TokenProvider",
    "UnsecuredTokenProvider",
    "oauth_callback",
    "parse_extensions",
]

MECHANISM = "OAUTHBEARER"
REFRESH_FRACTION = 0.8  # librdkafka refreshes a token at 80% of its lifetime
HTTP_TIMEOUT_S = 10.0


@dataclass(frozen=True, repr=False)
class OAuthBearerToken:
    """A bearer token, when it expires (seconds since the epoch) and the extensions to send."""

    value: str
    expires_at: float
    principal: str | None = None
    extensions: Mapping[str, str] = field(default_factory=dict)
    issued_at: float = field(default_factory=time.time)

    def __repr__(self) -> str:
        return f"OAuthBearerToken(principal={self.principal!r}, expires_at={self.expires_at})"


class TokenProvider(Protocol):
    def fetch(self) -> OAuthBearerToken: ...


def _token_error(message: str) -> SaslAuthenticationError:
    return SaslAuthenticationError(f"OAUTHBEARER token: {message}")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def jwt_claims(token: str) -> dict[str, Any] | None:
    """The claims of a compact JWS (not verified), or None when `token` is not one."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (ValueError, UnicodeDecodeError):
        return None
    return claims if isinstance(claims, dict) else None


def parse_extensions(text: str | None) -> dict[str, str]:
    """`sasl.oauthbearer.extensions` "key=value,key2=value2" (librdkafka's format)."""
    extensions: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.strip().partition("=")
        if not sep or not key:
            raise ValueError(f"extension {item.strip()!r} is not key=value")
        if key == "auth":
            raise ValueError("the extension name 'auth' is reserved (RFC 7628)")
        extensions[key] = value
    return extensions


class CallbackTokenProvider:
    """Tokens from a user callback, as confluent-kafka's `oauth_cb`."""

    def __init__(self, callback: Callable[[str], Any], config: str = ""):
        self._callback = callback
        self._config = config

    def fetch(self) -> OAuthBearerToken:
        try:
            result = self._callback(self._config)
        except Exception as exc:
            raise _token_error(f"oauth_cb failed: {exc!r}") from exc
        if not isinstance(result, tuple) or not 2 <= len(result) <= 4:
            raise _token_error(
                "oauth_cb must return (token, expiry_seconds_since_epoch[, principal[, "
                f"extensions]]), not {type(result).__name__}"
            )
        token, expiry = result[0], result[1]
        principal = result[2] if len(result) > 2 else None
        extensions = dict(result[3]) if len(result) > 3 and result[3] else {}
        if not isinstance(token, str) or not token:
            raise _token_error("oauth_cb returned an empty token")
        return OAuthBearerToken(token, float(expiry), principal, extensions)


def oauth_callback(name: str) -> Callable[[str], Any]:
    """The callable a "package.module:function" name refers to."""
    module_name, sep, attribute = name.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{name!r} is not 'package.module:function'")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"{name!r} is not callable")
    return target  # type: ignore[no-any-return]


class OidcTokenProvider:
    """OAuth 2 client credentials against an OIDC token endpoint (KIP-768)."""

    def __init__(
        self,
        endpoint_url: str,
        client_id: str,
        client_secret: str,
        scope: str | None = None,
        extensions: Mapping[str, str] | None = None,
    ):
        self.endpoint_url = endpoint_url
        self.client_id = client_id
        self._client_secret = client_secret
        self.scope = scope
        self.extensions = dict(extensions or {})

    def fetch(self) -> OAuthBearerToken:
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        quote = urllib.parse.quote
        basic = f"{quote(self.client_id)}:{quote(self._client_secret)}".encode()
        request = urllib.request.Request(
            self.endpoint_url,
            data=urllib.parse.urlencode(form).encode(),
            headers={
                "Authorization": "Basic " + base64.b64encode(basic).decode(),
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
        )
        now = time.time()
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise _token_error(
                f"{self.endpoint_url} answered HTTP {exc.code}: {exc.read()[:200]!r}"
            ) from None
        except (OSError, ValueError) as exc:
            raise _token_error(f"no token from {self.endpoint_url}: {exc}") from None
        access_token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(access_token, str) or not access_token:
            raise _token_error(f"{self.endpoint_url} answered without an access_token")
        claims = jwt_claims(access_token) or {}
        if isinstance(claims.get("exp"), (int, float)):
            expires_at = float(claims["exp"])
        elif isinstance(body.get("expires_in"), (int, float)):
            expires_at = now + float(body["expires_in"])
        else:
            raise _token_error(f"the token from {self.endpoint_url} has no exp or expires_in")
        sub = claims.get("sub")
        return OAuthBearerToken(
            access_token, expires_at, sub if isinstance(sub, str) else None, self.extensions, now
        )


class UnsecuredTokenProvider:
    """Kafka's unsecured (`alg: none`) token from `sasl.oauthbearer.config`."""

    OPTIONS = frozenset(
        {"principal", "scope", "lifeSeconds", "principalClaimName", "scopeClaimName"}
    )

    def __init__(self, config: str):
        options: dict[str, str] = {}
        self.extensions: dict[str, str] = {}
        for item in config.split():
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"sasl.oauthbearer.config: {item!r} is not name=value")
            if key.startswith("extension_"):
                self.extensions[key.removeprefix("extension_")] = value
            elif key in self.OPTIONS:
                options[key] = value
            else:
                raise ValueError(f"sasl.oauthbearer.config: unknown option {key!r}")
        if not options.get("principal"):
            raise ValueError("sasl.oauthbearer.config must name a principal=<name>")
        self.principal = options["principal"]
        self.scope = [s for s in options.get("scope", "").split(",") if s]
        self.life_seconds = int(options.get("lifeSeconds", "3600"))
        self.principal_claim = options.get("principalClaimName", "sub")
        self.scope_claim = options.get("scopeClaimName", "scope")

    def fetch(self) -> OAuthBearerToken:
        now = time.time()
        claims: dict[str, Any] = {
            self.principal_claim: self.principal,
            "iat": int(now),
            "exp": int(now) + self.life_seconds,
        }
        if self.scope:
            claims[self.scope_claim] = self.scope
        header = _b64url(b'{"alg":"none"}')
        payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
        return OAuthBearerToken(
            f"{header}.{payload}.", float(claims["exp"]), self.principal, self.extensions, now
        )


class RefreshingToken:
    """A provider's token, fetched again once 80% of its lifetime has passed (thread-safe)."""

    def __init__(self, provider: TokenProvider, clock: Callable[[], float] = time.time):
        self.provider = provider
        self._clock = clock
        self._lock = threading.Lock()
        self._token: OAuthBearerToken | None = None

    def current(self) -> OAuthBearerToken:
        with self._lock:
            token, now = self._token, self._clock()
            if token is None or now >= _refresh_at(token):
                token = self.provider.fetch()
                if token.expires_at <= now:
                    raise _token_error(
                        f"the token expired at {token.expires_at:.0f} (now {now:.0f})"
                    )
                self._token = token
            return token


def _refresh_at(token: OAuthBearerToken) -> float:
    return token.issued_at + (token.expires_at - token.issued_at) * REFRESH_FRACTION


class OAuthBearerClient:
    """One OAUTHBEARER exchange: the initial response, then the server's empty answer (done) or
    its error JSON (answered with `\\x01`; the broker then fails the exchange)."""

    mechanism = MECHANISM

    def __init__(self, token: RefreshingToken):
        self._token = token
        self._sent = False
        self.server_error: str | None = None

    def prepare(self) -> None:
        """Fetch the token now if it is due (blocking: the token endpoint or the callback)."""
        self._token.current()

    def first_token(self) -> bytes:
        if self._sent:
            raise IllegalSaslStateError("OAUTHBEARER client already sent its token")
        token = self._token.current()
        self._sent = True
        extensions = "".join(f"{k}={v}\x01" for k, v in token.extensions.items())
        return f"n,,\x01auth=Bearer {token.value}\x01{extensions}\x01".encode()

    def next_token(self, challenge: bytes) -> bytes | None:
        if not self._sent:
            raise IllegalSaslStateError("OAUTHBEARER client has not sent its token")
        if self.server_error is not None:  # the broker must fail after our \x01
            raise SaslAuthenticationError(f"OAUTHBEARER token rejected: {self.server_error}")
        if not challenge:
            return None
        self.server_error = challenge.decode("utf-8", "replace")
        return b"\x01"

    def __repr__(self) -> str:
        return f"OAuthBearerClient({type(self._token.provider).__name__})"
