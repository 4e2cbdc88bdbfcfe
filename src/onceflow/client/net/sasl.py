"""The client side of the SASL mechanisms onceflow's client speaks: PLAIN and SCRAM-SHA-256/512.

Each is a small state object with no I/O, driven by the wire core (`wire.WireConnection`):
`first_token()` is the `auth_bytes` of the first SaslAuthenticate request; `next_token(auth
bytes of the response)` returns the next request's token, or None when the exchange is
complete. A bad server token raises `SaslAuthenticationError` (from `security.sasl`).

PLAIN (RFC 4616) is one token, `authzid NUL authcid NUL passwd` with an empty authzid, as Kafka's
`PlainSaslClient` sends; SCRAM is `security.scram.ScramClient` (client-first, client-final, and
the check of the server's signature in the server-final).
"""

from __future__ import annotations

from typing import Protocol

from onceflow.security.sasl import IllegalSaslStateError
from onceflow.security.scram import ScramClient, ScramMechanism

__all__ = ["SASL_MECHANISMS", "PlainClient", "SaslClient", "ScramSaslClient", "sasl_client"]

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SaslClient(Protocol):
    mechanism: str

    def prepare(self) -> None:
        """Blocking work before the exchange (an OAUTHBEARER token fetch); the transports run
        it on a worker thread, never on an event loop."""
        ...

    def first_token(self) -> bytes: ...

    def next_token(self, challenge: bytes) -> bytes | None: ...


class PlainClient:
    """SASL/PLAIN: one token; the broker's empty answer completes it."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str):
        self.username = username
        self._password = password
        self._sent = False

    def prepare(self) -> None:
        """Nothing to fetch."""

    def first_token(self) -> bytes:
        if self._sent:
            raise IllegalSaslStateError("PLAIN client already sent its token")
        self._sent = True
        return b"\0" + self.username.encode() + b"\0" + self._password.encode()

    def next_token(self, challenge: bytes) -> bytes | None:
        if not self._sent:
            raise IllegalSaslStateError("PLAIN client has not sent its token")
        return None

    def __repr__(self) -> str:
        return f"PlainClient(username={self.username!r}, password=<hidden>)"


class ScramSaslClient:
    """SASL/SCRAM-SHA-256 or -512 around `ScramClient`: two tokens, then the server-final."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str):
        self.mechanism = mechanism.mechanism_name
        self._scram = ScramClient(mechanism, username, password)
        self._final_sent = False

    def prepare(self) -> None:
        """Nothing to fetch (the PBKDF2 runs when the server's salt arrives)."""

    def first_token(self) -> bytes:
        return self._scram.first_message()

    def next_token(self, challenge: bytes) -> bytes | None:
        if not self._final_sent:
            self._final_sent = True
            return self._scram.handle_server_first(challenge)
        self._scram.verify_server_final(challenge)
        return None

    def __repr__(self) -> str:
        return f"ScramSaslClient({self.mechanism}, username={self._scram.username!r})"


def sasl_client(mechanism: str, username: str, password: str) -> SaslClient:
    """A fresh client for one exchange of `mechanism` (one of SASL_MECHANISMS)."""
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    scram = ScramMechanism.from_mechanism_name(mechanism)
    if scram is None:
        raise ValueError(f"unsupported SASL mechanism {mechanism!r}")
    return ScramSaslClient(scram, username, password)
