"""JWT validation for the broker's OAUTHBEARER listener, as Kafka's validators do it.

Two modes, chosen by the broker configuration:

- Unsecured (Kafka's `OAuthBearerUnsecuredValidatorCallbackHandler`, KIP-255): a JWS with
  `"alg": "none"` and an empty signature; `exp` is required, the principal claim (default
  `sub`) must be a non-empty string, and every required scope must be in the scope claim.
- Signed (Kafka's `OAuthBearerValidatorCallbackHandler`, KIP-768): a JWS whose `kid` names a
  key of the JWKS at `sasl.oauthbearer.jwks.endpoint.url` (file:// or http(s)://, reloaded
  after `sasl.oauthbearer.jwks.endpoint.refresh.ms` or when a `kid` is unknown); RS256/384/512
  and ES256/384/512. `exp` is required; `iat` and `nbf` must not be in the future; `aud` must
  include one of `sasl.oauthbearer.expected.audience` and `iss` must be
  `sasl.oauthbearer.expected.issuer` when those are set; all with
  `sasl.oauthbearer.clock.skew.seconds` of tolerance.

A failure raises `InvalidTokenError` with the reason (for the broker's log; the client is told
only `invalid_token`).
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

__all__ = [
    "InvalidTokenError",
    "JwksValidator",
    "JwtValidator",
    "UnsecuredValidator",
    "ValidatedToken",
    "token_validator",
]

_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "256": hashes.SHA256,
    "384": hashes.SHA384,
    "512": hashes.SHA512,
}
_CURVES: dict[str, type[ec.EllipticCurve]] = {
    "P-256": ec.SECP256R1,
    "P-384": ec.SECP384R1,
    "P-521": ec.SECP521R1,
}
JWKS_TIMEOUT_S = 10.0


class InvalidTokenError(Exception):
    """The token is not acceptable; the message says why (for the log)."""


@dataclass(frozen=True)
class ValidatedToken:
    """What a valid token grants: the principal, its scope and when it expires (epoch s)."""

    principal: str
    scope: frozenset[str]
    expires_at: float


class JwtValidator:
    """The claim checks both modes share."""

    def __init__(
        self,
        principal_claim: str = "sub",
        scope_claim: str = "scope",
        clock_skew_s: float = 30.0,
        clock: Callable[[], float] = time.time,
    ):
        self.principal_claim = principal_claim
        self.scope_claim = scope_claim
        self.clock_skew_s = clock_skew_s
        self._clock = clock

    def validate(self, token: str) -> ValidatedToken:
        """The token's grant; raises `InvalidTokenError`."""
        header, claims, signing_input, signature = _split(token)
        self._check_signature(header, signing_input, signature)
        return self._check_claims(claims)

    def _check_signature(self, header: dict[str, Any], signing_input: bytes, sig: bytes) -> None:
        raise NotImplementedError

    def _check_claims(self, claims: dict[str, Any]) -> ValidatedToken:
        now = self._clock()
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)) or isinstance(exp, bool):
            raise InvalidTokenError("the token has no numeric exp claim")
        if now - self.clock_skew_s >= exp:
            raise InvalidTokenError(f"the token expired at {exp} (now {now:.0f})")
        for name in ("iat", "nbf"):
            value = claims.get(name)
            if isinstance(value, (int, float)) and value > now + self.clock_skew_s:
                raise InvalidTokenError(f"the token's {name} {value} is in the future")
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise InvalidTokenError(f"the token has no {self.principal_claim} claim (principal)")
        scope = claims.get(self.scope_claim, [])
        if isinstance(scope, str):
            scope = scope.split()
        if not isinstance(scope, list) or not all(isinstance(s, str) for s in scope):
            raise InvalidTokenError(f"the {self.scope_claim} claim is not a list of strings")
        self._check_more(claims)
        return ValidatedToken(principal, frozenset(scope), float(exp))

    def _check_more(self, claims: dict[str, Any]) -> None:
        """Checks of one mode (audience, issuer, required scope)."""


class UnsecuredValidator(JwtValidator):
    """Kafka's unsecured validator: `alg: none`, no signature."""

    def __init__(self, required_scope: Sequence[str] = (), **kwargs: Any):
        super().__init__(**kwargs)
        self.required_scope = frozenset(required_scope)

    def _check_signature(self, header: dict[str, Any], signing_input: bytes, sig: bytes) -> None:
        if header.get("alg") != "none" or sig:
            raise InvalidTokenError("an unsecured token must have alg none and no signature")

    def _check_more(self, claims: dict[str, Any]) -> None:
        scope = claims.get(self.scope_claim, [])
        granted = set(scope.split() if isinstance(scope, str) else scope)
        missing = self.required_scope - granted
        if missing:
            raise InvalidTokenError(f"the token lacks the required scope {sorted(missing)}")


class JwksValidator(JwtValidator):
    """Signed tokens against the keys of a JWKS (file:// or http(s)://)."""

    def __init__(
        self,
        jwks_url: str,
        expected_audience: Sequence[str] = (),
        expected_issuer: str | None = None,
        refresh_s: float = 3600.0,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.jwks_url = jwks_url
        self.expected_audience = frozenset(expected_audience)
        self.expected_issuer = expected_issuer
        self.refresh_s = refresh_s
        self._lock = threading.Lock()
        self._keys: dict[str, Any] = {}
        self._loaded_at = -float("inf")

    def _key(self, kid: str | None) -> Any:
        with self._lock:
            stale = time.monotonic() - self._loaded_at >= self.refresh_s
            if stale or (kid not in self._keys and time.monotonic() - self._loaded_at > 1.0):
                self._keys = _load_jwks(self.jwks_url)
                self._loaded_at = time.monotonic()
            if kid is None and len(self._keys) == 1:
                return next(iter(self._keys.values()))
            key = self._keys.get(kid or "")
        if key is None:
            raise InvalidTokenError(f"no key with kid {kid!r} in {self.jwks_url}")
        return key

    def _check_signature(self, header: dict[str, Any], signing_input: bytes, sig: bytes) -> None:
        alg = header.get("alg")
        if not isinstance(alg, str) or alg[:2] not in ("RS", "ES") or alg[2:] not in _HASHES:
            raise InvalidTokenError(f"unsupported or missing alg {alg!r}")
        kid = header.get("kid")
        key = self._key(kid if isinstance(kid, str) else None)
        digest = _HASHES[alg[2:]]()
        try:
            if alg.startswith("RS") and isinstance(key, rsa.RSAPublicKey):
                key.verify(sig, signing_input, padding.PKCS1v15(), digest)
            elif alg.startswith("ES") and isinstance(key, ec.EllipticCurvePublicKey):
                half = len(sig) // 2
                r, s = int.from_bytes(sig[:half], "big"), int.from_bytes(sig[half:], "big")
                key.verify(encode_dss_signature(r, s), signing_input, ec.ECDSA(digest))
            else:
                raise InvalidTokenError(f"alg {alg} does not match the key {kid!r}")
        except InvalidSignature:
            raise InvalidTokenError("the token's signature does not verify") from None

    def _check_more(self, claims: dict[str, Any]) -> None:
        if self.expected_issuer is not None and claims.get("iss") != self.expected_issuer:
            raise InvalidTokenError(
                f"the token's iss {claims.get('iss')!r} is not {self.expected_issuer!r}"
            )
        if self.expected_audience:
            aud = claims.get("aud")
            audiences = {aud} if isinstance(aud, str) else set(aud or ())
            if not audiences & self.expected_audience:
                raise InvalidTokenError(f"the token's aud {aud!r} is not an expected audience")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _split(token: str) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidTokenError("the token is not a compact JWS (three dot-separated parts)")
    try:
        header = json.loads(_b64decode(parts[0]))
        claims = json.loads(_b64decode(parts[1]))
        signature = _b64decode(parts[2])
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidTokenError(f"the token does not decode: {exc}") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise InvalidTokenError("the token's header or claims are not JSON objects")
    return header, claims, f"{parts[0]}.{parts[1]}".encode("ascii"), signature


def _int(value: str) -> int:
    return int.from_bytes(_b64decode(value), "big")


def _public_key(jwk: Mapping[str, Any]) -> Any:
    if jwk.get("kty") == "RSA":
        return rsa.RSAPublicNumbers(_int(jwk["e"]), _int(jwk["n"])).public_key()
    if jwk.get("kty") == "EC" and jwk.get("crv") in _CURVES:
        curve = _CURVES[jwk["crv"]]()
        return ec.EllipticCurvePublicNumbers(_int(jwk["x"]), _int(jwk["y"]), curve).public_key()
    return None


def _load_jwks(url: str) -> dict[str, Any]:
    """The signature keys of a JWKS document, by kid (keys of other kinds or uses are skipped)."""
    try:
        with urllib.request.urlopen(url, timeout=JWKS_TIMEOUT_S) as response:
            document = json.loads(response.read())
    except (OSError, ValueError) as exc:
        raise InvalidTokenError(f"cannot load the JWKS at {url}: {exc}") from None
    keys: dict[str, Any] = {}
    for jwk in document.get("keys", []) if isinstance(document, dict) else []:
        if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
            continue
        try:
            key = _public_key(jwk)
        except (KeyError, ValueError, binascii.Error):
            continue
        if key is not None:
            keys[str(jwk.get("kid", ""))] = key
    return keys


def token_validator(config: Callable[[str], Any]) -> JwtValidator:
    """The validator the broker configuration `config(name)` asks for: signed tokens against
    `sasl.oauthbearer.jwks.endpoint.url` when it is set, else unsecured tokens."""
    common: dict[str, Any] = {
        "principal_claim": config("sasl.oauthbearer.sub.claim.name"),
        "scope_claim": config("sasl.oauthbearer.scope.claim.name"),
        "clock_skew_s": float(config("sasl.oauthbearer.clock.skew.seconds")),
    }
    url = config("sasl.oauthbearer.jwks.endpoint.url")
    if not url:
        scope = config("onceflow.sasl.oauthbearer.unsecured.required.scope") or ""
        return UnsecuredValidator([s.strip() for s in scope.split(",") if s.strip()], **common)
    audience = config("sasl.oauthbearer.expected.audience") or ""
    return JwksValidator(
        url,
        [a.strip() for a in audience.split(",") if a.strip()],
        config("sasl.oauthbearer.expected.issuer") or None,
        config("sasl.oauthbearer.jwks.endpoint.refresh.ms") / 1000,
        **common,
    )
