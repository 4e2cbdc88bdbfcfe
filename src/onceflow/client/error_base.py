"""`KafkaError`, the base of every error the client raises for a Kafka error code;
`AuthenticationError`, the base of the errors that say the client could not authenticate; and
the one per-code class written by hand, `TransactionAbortableError`.

The subclass per code lives in the generated `error_classes` (which takes
`TransactionAbortableError` from here for code 120, so the class users catch is the one
`error_for_code` makes); `client.errors` is the module to import from.
"""

from __future__ import annotations

from onceflow.protocol.errors import ErrorCode

__all__ = ["AuthenticationError", "KafkaError", "TransactionAbortableError"]


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


class TransactionAbortableError(KafkaError):
    """The transaction hit an error that only `abort_transaction` can clear. Made by the
    producer from that error (`cause`, whose code becomes this error's `code`), or for a
    broker's TRANSACTION_ABORTABLE (code 120; `cause` None, the argument is the message)."""

    code = ErrorCode.TRANSACTION_ABORTABLE

    def __init__(self, cause: BaseException | str | None = None, message: str | None = None):
        if not isinstance(cause, BaseException):  # error_for_code(120, message)
            self.cause = None  # its flags are the producer's to set, as for any code
            super().__init__(cause)
            return
        self.cause = cause
        self.txn_requires_abort = True
        self.code = getattr(cause, "code", ErrorCode.TRANSACTION_ABORTABLE)
        self.message = message or f"Transaction must be aborted: {cause}"
        Exception.__init__(self, self.message)
        self.__cause__ = cause


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
