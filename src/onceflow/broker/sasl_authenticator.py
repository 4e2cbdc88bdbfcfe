"""The SASL login of one connection on a SASL_PLAINTEXT or SASL_SSL listener, as Kafka's
`SaslServerAuthenticator` runs it; the SaslHandshake and SaslAuthenticate handlers drive it and
the connection asks it which requests may pass. No I/O: the handlers run `step` in a thread.

State machine (everything that changes the state is in this module; the table first):

    HANDSHAKE     --SaslHandshake, mechanism enabled------------> AUTHENTICATE
    AUTHENTICATE  --SaslAuthenticate, exchange goes on----------> AUTHENTICATE
    AUTHENTICATE  --SaslAuthenticate, exchange complete---------> AUTHENTICATED
    AUTHENTICATED --SaslHandshake (KIP-368, reauth enabled)-----> AUTHENTICATE
    HANDSHAKE/AUTHENTICATE --unknown mechanism / bad token------> FAILED

Before authentication a connection may send ApiVersions and SaslHandshake (HANDSHAKE), then
only SaslAuthenticate (AUTHENTICATE); any other request closes it, as Kafka's "Unexpected Kafka
request of type X during SASL handshake/authentication". A re-authenticating connection keeps its
old principal for other requests until the new exchange completes; the new one must name the
same principal (Kafka: "Cannot change principals during re-authentication").

Session lifetime (KIP-368): with `connections.max.reauth.ms` > 0 every successful exchange
starts a session of that length (OAUTHBEARER: at most until the token expires), told to the
client in SaslAuthenticate v1+; a request other
than SaslHandshake on an expired session closes the connection.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from enum import Enum
from types import MappingProxyType
from typing import Final

from onceflow.protocol.api_keys import ApiKey
from onceflow.security.credentials import ScramCredentialStore
from onceflow.security.oauthbearer import OAUTHBEARER_MECHANISM, OAuthBearerServer, TokenValidator
from onceflow.security.plain import PLAIN_MECHANISM, PlainServer
from onceflow.security.sasl import IllegalSaslStateError, SaslServer
from onceflow.security.scram import ScramMechanism, ScramServer

__all__ = ["AuthState", "IllegalAuthTransition", "SaslAuthenticator", "SUPPORTED_MECHANISMS"]

SUPPORTED_MECHANISMS: Final = (
    PLAIN_MECHANISM,
    *(m.mechanism_name for m in ScramMechanism),
    OAUTHBEARER_MECHANISM,
)


class AuthState(Enum):
    HANDSHAKE = "awaiting SaslHandshake"
    AUTHENTICATE = "awaiting SaslAuthenticate"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


# Requests a connection may send in each state (AUTHENTICATED: all).
ALLOWED: Final = MappingProxyType(
    {
        AuthState.HANDSHAKE: frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE}),
        AuthState.AUTHENTICATE: frozenset({ApiKey.SASL_AUTHENTICATE}),
        AuthState.FAILED: frozenset(),
    }
)

VALID_PREVIOUS: Final = MappingProxyType(
    {
        AuthState.AUTHENTICATE: frozenset(
            {AuthState.HANDSHAKE, AuthState.AUTHENTICATE, AuthState.AUTHENTICATED}
        ),
        AuthState.AUTHENTICATED: frozenset({AuthState.AUTHENTICATE}),
        AuthState.FAILED: frozenset({AuthState.HANDSHAKE, AuthState.AUTHENTICATE}),
    }
)


_REAUTH_KEYS: Final = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class IllegalAuthTransition(Exception):
    """A transition the table does not allow (a bug in a caller)."""


class SaslAuthenticator:
    """One connection's SASL state. `principal` is set once an exchange completes."""

    def __init__(
        self,
        credentials: ScramCredentialStore,
        enabled_mechanisms: Sequence[str],
        max_reauth_ms: int = 0,
        clock: Callable[[], float] = time.monotonic,
        token_validator: TokenValidator | None = None,
        wall_clock: Callable[[], float] = time.time,
    ):
        self._credentials = credentials
        self._token_validator = token_validator
        self._wall_clock = wall_clock
        self.enabled_mechanisms = [m for m in enabled_mechanisms if m in SUPPORTED_MECHANISMS]
        self.max_reauth_ms = max_reauth_ms
        self._clock = clock
        self.state = AuthState.HANDSHAKE
        self.server: SaslServer | None = None
        self.principal: str | None = None  # of the last completed exchange
        self.session_expires_at: float | None = None
        self.reauthenticating = False

    def _transition(self, new: AuthState) -> None:
        if self.state not in VALID_PREVIOUS[new]:
            raise IllegalAuthTransition(f"{self.state.name} -> {new.name}")
        self.state = new

    @property
    def authenticated(self) -> bool:
        """True when other requests may pass (also while re-authenticating)."""
        return self.principal is not None and self.state is not AuthState.FAILED

    def refusal(self, api_key: int) -> str | None:
        """Why a request of `api_key` may not pass now, or None when it may."""
        if self.authenticated:
            if self.session_expired() and api_key not in _REAUTH_KEYS:
                return "the SASL session expired (connections.max.reauth.ms)"
            return None
        if api_key in ALLOWED[self.state]:
            return None
        phase = "handshake" if self.state is AuthState.HANDSHAKE else "authentication"
        return f"unexpected {_name(api_key)} request during SASL {phase}"

    def session_expired(self) -> bool:
        return self.session_expires_at is not None and self._clock() >= self.session_expires_at

    def handshake(self, mechanism: str) -> bool:
        """SaslHandshake: True when `mechanism` is enabled (a server for it is ready). Raises
        IllegalSaslStateError when no handshake is expected."""
        if self.state is AuthState.AUTHENTICATED and self.max_reauth_ms > 0:
            self.reauthenticating = True
        elif self.state is not AuthState.HANDSHAKE:
            raise IllegalSaslStateError(f"Unexpected SaslHandshake in state {self.state.value}")
        if mechanism not in self.enabled_mechanisms:
            self._transition(AuthState.FAILED)
            return False
        self.server = self._new_server(mechanism)
        self._transition(AuthState.AUTHENTICATE)
        return True

    def _new_server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN_MECHANISM:
            return PlainServer(self._credentials.verify_password)
        if mechanism == OAUTHBEARER_MECHANISM:
            if self._token_validator is None:  # the broker builds one when OAUTHBEARER is on
                raise IllegalSaslStateError("OAUTHBEARER is enabled without a token validator")
            return OAuthBearerServer(self._token_validator)
        scram = ScramMechanism.from_mechanism_name(mechanism)
        if scram is None:  # unreachable: enabled_mechanisms holds supported ones only
            raise IllegalSaslStateError(f"unsupported mechanism {mechanism}")
        credentials = self._credentials
        return ScramServer(scram, lambda user: credentials.credential(user, scram))

    def expect_token(self) -> SaslServer:
        """The mechanism server for a SaslAuthenticate; raises IllegalSaslStateError when none
        is expected."""
        if self.state is not AuthState.AUTHENTICATE or self.server is None:
            raise IllegalSaslStateError(
                "SaslAuthenticate request received after successful authentication"
                if self.state is AuthState.AUTHENTICATED
                else f"Unexpected SaslAuthenticate in state {self.state.value}"
            )
        return self.server

    def complete(self, server: SaslServer) -> int:
        """After a `step` that completed `server`: the session lifetime in ms (0: none).
        Raises IllegalSaslStateError when a re-authentication names another principal."""
        principal = f"User:{server.authorization_id}"
        if self.reauthenticating and principal != self.principal:
            self.fail()
            raise IllegalSaslStateError(
                "Cannot change principals during re-authentication from "
                f"{self.principal} to {principal}"
            )
        self._transition(AuthState.AUTHENTICATED)
        self.server = None
        self.principal = principal
        self.reauthenticating = False
        if self.max_reauth_ms <= 0:
            self.session_expires_at = None
            return 0
        lifetime_ms = self.max_reauth_ms
        token_expires_at = getattr(server, "token_expires_at", None)
        if token_expires_at is not None:  # Kafka: a session ends when its token expires
            token_left_ms = int((token_expires_at - self._wall_clock()) * 1000)
            lifetime_ms = max(1, min(lifetime_ms, token_left_ms))
        self.session_expires_at = self._clock() + lifetime_ms / 1000
        return lifetime_ms

    def fail(self) -> None:
        """Any state -> FAILED (a failed re-authentication too); the connection closes."""
        self.state = AuthState.FAILED
        self.server = None
        self.principal = None


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api key {api_key}"
