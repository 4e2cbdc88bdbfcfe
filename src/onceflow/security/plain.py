"""SASL PLAIN (RFC 4616) as Kafka's `PlainSaslServer` runs it: one token
`authzid NUL authcid NUL passwd`, answered with an empty token.

Where the passwords come from is onceflow's choice: Kafka checks PLAIN passwords against a JAAS
file of clear-text `user_<name>="<password>"` entries. onceflow keeps no clear-text passwords; the
`verify_password(username, password)` it is given (normally
`credentials.ScramCredentialStore.verify_password`) recomputes the salted password from the user's
SCRAM credential (SCRAM-SHA-512 when the user has one, else SCRAM-SHA-256) and compares StoredKey
in constant time. One store thus serves PLAIN and both SCRAM mechanisms, and a password changed
through AlterUserScramCredentials changes it for PLAIN too. The check runs PBKDF2 (a few
milliseconds at 4096 iterations), so the broker should call `step` off its event loop.

Answers, as Kafka's: an unparseable token, an empty user name or an empty password gets the
generic failure message; a wrong password or an unknown user gets "Invalid username or password"
(the same text, and the same PBKDF2 work, for both); an authzid other than the user name, checked
after the password as Kafka does, gets its own message. Kafka splits the token into at most three
fields and ignores anything after a third NUL; onceflow refuses such a token.

State machine: EXPECTING_RESPONSE --token--> COMPLETE; a bad token or any later token --> FAILED.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Final

from onceflow.security.sasl import (
    IllegalSaslStateError,
    SaslAuthenticationError,
    authorization_id_of,
    generic_failure,
)
from onceflow.security.scram import AUTHZID_MISMATCH

__all__ = ["PLAIN_MECHANISM", "PlainServer", "PlainServerState"]

PLAIN_MECHANISM: Final = "PLAIN"
INVALID_USERNAME_OR_PASSWORD: Final = "Authentication failed: Invalid username or password"


class PlainServerState(Enum):
    EXPECTING_RESPONSE = "expecting response"
    COMPLETE = "complete"
    FAILED = "failed"


class PlainServer:
    """The server side of one PLAIN exchange."""

    mechanism_name: Final = PLAIN_MECHANISM

    def __init__(self, verify_password: Callable[[str, str], bool]):
        self._verify_password = verify_password
        self._state = PlainServerState.EXPECTING_RESPONSE
        self._authorization_id: str | None = None

    @property
    def state(self) -> PlainServerState:
        return self._state

    @property
    def is_complete(self) -> bool:
        return self._state is PlainServerState.COMPLETE

    @property
    def authorization_id(self) -> str:
        return authorization_id_of(self._authorization_id)

    def step(self, response: bytes) -> bytes:
        """Check the client's token; returns the empty token. Raises `SaslAuthenticationError`."""
        try:
            if self._state is not PlainServerState.EXPECTING_RESPONSE:
                raise IllegalSaslStateError(
                    f"Unexpected challenge in Sasl server state {self._state}"
                )
            self._authorization_id = self._authenticate(response)
        except Exception:
            self._state = PlainServerState.FAILED
            self._authorization_id = None
            raise
        self._state = PlainServerState.COMPLETE
        return b""

    def _authenticate(self, response: bytes) -> str:
        try:
            authzid, username, password = response.decode("utf-8").split("\x00")
        except (UnicodeDecodeError, ValueError):
            raise generic_failure(
                PLAIN_MECHANISM, "Invalid SASL/PLAIN response: expected 3 NUL-separated tokens"
            ) from None
        if not username:
            raise generic_failure(PLAIN_MECHANISM, "Authentication failed: username not specified")
        if not password:
            raise generic_failure(PLAIN_MECHANISM, "Authentication failed: password not specified")
        try:
            verified = self._verify_password(username, password)
        except Exception as exc:  # the store's failure must not become a different answer
            raise SaslAuthenticationError(
                "Authentication failed: credentials for user could not be verified",
                f"credentials for {username!r} could not be verified: {exc!r}",
            ) from None
        if not verified:
            raise SaslAuthenticationError(
                INVALID_USERNAME_OR_PASSWORD, f"invalid username or password for {username!r}"
            )
        if authzid and authzid != username:
            raise SaslAuthenticationError(AUTHZID_MISMATCH)
        return username
