"""`KafkaError`, the base of every error the client raises for a Kafka error code, and
`AuthenticationError`, the base of the errors that say the client could not authenticate.

The subclass per code lives in the generated `error_classes`; `client.errors` is the module to
import from.
"""

from __future__ import annotations

from onceflow.protocol.errors import ErrorCode

__all__ = ["AuthenticationError", "KafkaError"]


class KafkaError(Exception):
    """An error code returned by the broker; `code` is the `ErrorCode`."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR
    # confluent-kafka's KafkaError flags: the producer cannot go on (`fatal`), or the current
    # transaction must be aborted (`txn_requires_abort`); set per instance by the producer
    fatal: bool = False
    txn_requires_abort: bool = False

    def __init__(self, message: str | None = None):
        self.message = message
        super().__init__(self.code.name if not message else f"{self.code.name}: {message}")

    @property
    def retriable(self) -> bool:
        """True when Kafka's own client would retry after this error."""
        return self.code.retriable


class AuthenticationError(KafkaError):
    """The client could not authenticate with a broker (Kafka's `AuthenticationException`): a
    SASL login the broker refused (`SaslAuthenticationFailedError`), a mechanism it does not
    enable (`UnsupportedSaslMechanismError`) or a TLS handshake that failed
    (`SslAuthenticationError`). Not retriable: retrying with the same settings fails again.
    The producer, consumer and admin client raise it from their next call instead of waiting
    for a timeout; a connection attempt is still made now and then, in case the broker's side
    is fixed."""

    @property
    def retriable(self) -> bool:
        return False
