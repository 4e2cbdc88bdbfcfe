"""What every SASL mechanism server shares: the errors it raises and the interface the broker's
authenticator will drive (bytes in, bytes out; no I/O).

Error messages follow Kafka's `SaslServerAuthenticator`: a mechanism that rejects a client with a
plain `SaslException` gets the fixed text of `generic_failure_message`, which names only the
mechanism, so that nothing about the user leaks; a few rejections Kafka raises as
`SaslAuthenticationException` (an authorization id other than the user name; PLAIN's "Invalid
username or password") pass their own text to the client. Every error also carries a `reason` for
the broker's log line, which the client never sees. The mechanisms log nothing themselves: the
authenticator that drives them knows the peer and writes the one line.
"""

from __future__ import annotations

from typing import Protocol

from onceflow.protocol.errors import ErrorCode

__all__ = [
    "IllegalSaslStateError",
    "SaslAuthenticationError",
    "SaslServer",
    "authorization_id_of",
    "generic_failure",
    "generic_failure_message",
]


class SaslAuthenticationError(Exception):
    """The exchange failed. `client_message` is what the SaslAuthenticate response may carry;
    `reason` is for the broker's log only. The mechanism's server is FAILED afterwards."""

    error_code: ErrorCode = ErrorCode.SASL_AUTHENTICATION_FAILED

    def __init__(self, client_message: str, reason: str | None = None):
        super().__init__(client_message)
        self.client_message = client_message
        self.reason = reason or client_message


class IllegalSaslStateError(SaslAuthenticationError):
    """A token arrived when the exchange expects none (complete or failed), or a result was
    asked for before the exchange completed; Kafka's `IllegalSaslStateException`."""

    error_code = ErrorCode.ILLEGAL_SASL_STATE


def authorization_id_of(authorization_id: str | None) -> str:
    """The authenticated user a server recorded on completion; before completion (or after a
    failure, which clears it) an `IllegalSaslStateError`, as Kafka's `getAuthorizationID`."""
    if authorization_id is None:
        raise IllegalSaslStateError("Authentication exchange has not completed")
    return authorization_id


def generic_failure_message(mechanism_name: str, reauthentication: bool = False) -> str:
    """Kafka's text for a rejection that must not say why (wrong password, unknown user, a
    malformed token): it names the phase and the mechanism and nothing else."""
    phase = "re-authentication" if reauthentication else "authentication"
    return (
        f"Authentication failed during {phase} due to invalid credentials with SASL mechanism "
        f"{mechanism_name}"
    )


def generic_failure(mechanism_name: str, reason: str) -> SaslAuthenticationError:
    """The error for a rejection whose `reason` goes to the log only."""
    return SaslAuthenticationError(generic_failure_message(mechanism_name), reason)


class SaslServer(Protocol):
    """The server side of one SASL mechanism for one connection."""

    @property
    def mechanism_name(self) -> str: ...

    def step(self, response: bytes) -> bytes:
        """Consume the client's token, return the server's (possibly empty) token. Raises
        `SaslAuthenticationError` (or its subclass `IllegalSaslStateError`) and nothing else on
        bad input."""
        ...

    @property
    def is_complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user; raises `IllegalSaslStateError` before completion."""
        ...
