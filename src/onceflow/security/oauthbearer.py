"""SASL/OAUTHBEARER (RFC 7628, KIP-255) as Kafka's `OAuthBearerSaslServer` runs it.

The client's initial response is `gs2-header \\x01auth=Bearer <token>\\x01[key=value\\x01]*\\x01`
(gs2-header `n,,` or `n,a=<authzid>,`). The token goes to a `security.jwt` validator; a valid
token completes the exchange with an empty answer and the principal is the token's principal
claim (`sub` unless configured), so ACLs on `User:<sub>` apply. An authzid other than the
principal is refused.

A token that does not validate gets Kafka's error answer `{"status":"invalid_token"}` as the
server token (not yet an error response); the client acknowledges with the single byte
`\\x01`, and the server then fails the exchange with that JSON as the error message. Extensions
are read and ignored (no extension validator is configured, as Kafka's default).

State machine: EXPECTING_RESPONSE --valid token--> COMPLETE;
EXPECTING_RESPONSE --invalid token--> ERROR_SENT --\\x01--> FAILED; anything else --> FAILED.
"""

from __future__ import annotations

import json
import re
from enum import Enum
from typing import Final, Protocol

from onceflow.security.jwt import InvalidTokenError, ValidatedToken
from onceflow.security.sasl import (
    IllegalSaslStateError,
    SaslAuthenticationError,
    authorization_id_of,
    generic_failure,
)
from onceflow.security.scram import AUTHZID_MISMATCH

__all__ = ["OAUTHBEARER_MECHANISM", "OAuthBearerServer", "TokenValidator", "parse_initial_response"]

OAUTHBEARER_MECHANISM: Final = "OAUTHBEARER"
INVALID_TOKEN: Final = json.dumps({"status": "invalid_token"})
_GS2 = re.compile(r"n,(?:a=(?P<authzid>[^,]*))?,")
_KEY = re.compile(r"[A-Za-z]+")


class TokenValidator(Protocol):
    def validate(self, token: str) -> ValidatedToken: ...


class OAuthBearerServerState(Enum):
    EXPECTING_RESPONSE = "expecting response"
    ERROR_SENT = "error sent"
    COMPLETE = "complete"
    FAILED = "failed"


def parse_initial_response(response: bytes) -> tuple[str, str | None, dict[str, str]]:
    """(token, authzid or None, extensions) of a client initial response; raises ValueError."""
    text = response.decode("utf-8")
    match = _GS2.match(text)
    if match is None:
        raise ValueError("no gs2 header 'n,,' or 'n,a=<authzid>,'")
    body = text[match.end() :]
    if not body.startswith("\x01") or not body.endswith("\x01\x01"):
        raise ValueError("the key/value list is not framed by \\x01 ... \\x01\\x01")
    token: str | None = None
    extensions: dict[str, str] = {}
    for pair in body[1:-2].split("\x01"):
        key, sep, value = pair.partition("=")
        if not sep or _KEY.fullmatch(key) is None:
            raise ValueError(f"malformed key/value {pair[:40]!r}")
        if key == "auth":
            scheme, _, token = value.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise ValueError("auth is not 'Bearer <token>'")
        else:
            extensions[key] = value
    if token is None:
        raise ValueError("no auth=Bearer <token>")
    return token.strip(), match.group("authzid") or None, extensions


class OAuthBearerServer:
    """The server side of one OAUTHBEARER exchange."""

    mechanism_name: Final = OAUTHBEARER_MECHANISM

    def __init__(self, validator: TokenValidator):
        self._validator = validator
        self.state = OAuthBearerServerState.EXPECTING_RESPONSE
        self._authorization_id: str | None = None
        self.token: ValidatedToken | None = None
        self.extensions: dict[str, str] = {}
        self.error_reason: str | None = None

    @property
    def is_complete(self) -> bool:
        return self.state is OAuthBearerServerState.COMPLETE

    @property
    def authorization_id(self) -> str:
        return authorization_id_of(self._authorization_id)

    @property
    def token_expires_at(self) -> float | None:
        """When the validated token expires (epoch seconds); bounds the session (KIP-368)."""
        return None if self.token is None else self.token.expires_at

    def step(self, response: bytes) -> bytes:
        """Consume the client's token: b"" when valid, the error JSON when not; raises
        `SaslAuthenticationError` after the client's \\x01 or on a malformed message."""
        state = self.state
        if state is OAuthBearerServerState.ERROR_SENT and response == b"\x01":
            self._fail()
            raise SaslAuthenticationError(INVALID_TOKEN, self.error_reason)
        if state is not OAuthBearerServerState.EXPECTING_RESPONSE:
            self._fail()
            raise IllegalSaslStateError(f"Unexpected response in SASL server state {state.value}")
        try:
            token, authzid, self.extensions = parse_initial_response(response)
        except (UnicodeDecodeError, ValueError) as exc:
            self._fail()
            reason = f"invalid initial response: {exc}"
            raise generic_failure(OAUTHBEARER_MECHANISM, reason) from None
        try:
            validated = self._validator.validate(token)
        except InvalidTokenError as exc:
            self.state = OAuthBearerServerState.ERROR_SENT
            self.error_reason = f"invalid token: {exc}"
            return INVALID_TOKEN.encode()
        if authzid is not None and authzid != validated.principal:
            self._fail()
            raise SaslAuthenticationError(AUTHZID_MISMATCH)
        self.token = validated
        self._authorization_id = validated.principal
        self.state = OAuthBearerServerState.COMPLETE
        return b""

    def _fail(self) -> None:
        self.state = OAuthBearerServerState.FAILED
        self._authorization_id = None
        self.token = None
