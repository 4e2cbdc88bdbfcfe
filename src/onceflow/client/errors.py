"""The client's typed exceptions, named after Kafka's; import them from here.

Every broker error code has a `KafkaError` subclass (generated into `client.error_classes`,
one per `ErrorCode`: `UnknownTopicOrPartitionError`, `ProducerFencedError`, ...); `.code` is
the `ErrorCode` and `.retriable` says whether Kafka's client would retry. This module adds the
errors that arise in the client itself:

- `KafkaTimeoutError` — a bounded wait ran out (Kafka's `TimeoutException`): connecting, a
  request's request.timeout.ms, metadata, buffer space, delivery.timeout.ms, flush/close. The
  one timeout class of every client (producer, consumer, admin, CLI); also a `TimeoutError`.
- `KafkaConnectionError` — a broker could not be reached or the connection broke (an
  `OSError`); `BrokerResponseError` — a response that does not fit its request.
- `ConfigException` — a configuration value or combination Kafka's `ProducerConfig` /
  `ConsumerConfig` would refuse; its message is Kafka's.
- `OutOfOrderSequenceError` — Kafka's `OutOfOrderSequenceException` (the broker's
  OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that was next in sequence).
- `IllegalStateError` — an operation in a state that does not allow it (closed producer,
  producer state transition not in the table).
- `TransactionAbortableError` — the current transaction failed and must be aborted
  (`txn_requires_abort` is true; `.cause` is the error that failed it).
- `TransactionAbortedError` — a record's batch was dropped because its transaction aborted.
- `CommitFailedError` — a group's offsets cannot be committed: the member left or was
  removed from the generation (Kafka's `CommitFailedException`).
- `AuthenticationError` — the client could not authenticate (Kafka's
  `AuthenticationException`), the base of `SaslAuthenticationFailedError`,
  `UnsupportedSaslMechanismError` and `SslAuthenticationError` (a TLS handshake that failed:
  Kafka's `SslAuthenticationException`).

Every `KafkaError` carries confluent-kafka's flags as attributes: `retriable`, `fatal` (the
producer cannot continue: fenced, unauthorized, unsupported) and `txn_requires_abort`.
"""

from __future__ import annotations

from onceflow.client.error_base import AuthenticationError, KafkaError, TransactionAbortableError
from onceflow.client.error_classes import *  # noqa: F403  (re-exported: one class per code)
from onceflow.client.error_classes import (
    ERRORS_BY_CODE,
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    UnknownProducerIdError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from onceflow.protocol.errors import ErrorCode

__all__ = [
    "ERRORS_BY_CODE",
    "AuthenticationError",
    "BrokerResponseError",
    "CommitFailedError",
    "ConfigException",
    "DuplicateSequenceNumberError",
    "IllegalStateError",
    "InvalidProducerEpochError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "MessageTooLargeError",
    "NotLeaderOrFollowerError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "ProducerFencedError",
    "SslAuthenticationError",
    "TransactionAbortableError",
    "TransactionAbortedError",
    "UnknownProducerIdError",
    "UnknownTopicOrPartitionError",
    "UnsupportedVersionError",
    "error_for_code",
    "raise_for_error",
]


def raise_for_error(code: int, message: str | None = None) -> None:
    """Raise the typed error for `code` unless it is NONE (0)."""
    if code != ErrorCode.NONE:
        raise error_for_code(code, message)


class KafkaConnectionError(OSError):
    """The connection to a broker could not be made, or was closed mid-request."""


class BrokerResponseError(Exception):
    """A response that does not fit its request (correlation id mismatch, undecodable body)."""


# Kafka's client calls it OutOfOrderSequenceException (the code's class is
# OutOfOrderSequenceNumberError, as for every code)
OutOfOrderSequenceError = OutOfOrderSequenceNumberError


class _PlainMessageError(KafkaError):
    """A client-side KafkaError whose text is just its message (no code-name prefix)."""

    def __init__(self, message: str | None = None):
        self.message = message
        Exception.__init__(self, message or self.code.name)


class KafkaTimeoutError(_PlainMessageError, TimeoutError):
    """A bounded wait ran out (Kafka's `TimeoutException`); also a `TimeoutError`."""

    code = ErrorCode.REQUEST_TIMED_OUT

    @property
    def retriable(self) -> bool:
        return True


class ConfigException(_PlainMessageError, ValueError):
    """A configuration Kafka would refuse (Kafka's `ConfigException`); also a `ValueError`."""

    code = ErrorCode.INVALID_CONFIG


class SslAuthenticationError(_PlainMessageError, AuthenticationError):
    """The TLS handshake with a broker failed (Kafka's `SslAuthenticationException`): its
    certificate is not trusted (`ssl.ca.location`) or does not name the host connected to
    (`ssl.endpoint.identification.algorithm=https`), it refused the client's certificate, or
    the two share no protocol version or cipher. The message holds OpenSSL's reason. Kafka
    has no error code for it (the handshake comes before any request): `code` is
    SASL_AUTHENTICATION_FAILED, the code of the other way to fail authentication."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED


class IllegalStateError(_PlainMessageError):
    """An operation the client's current state does not allow (Kafka's
    `IllegalStateException`): sending after close, a producer state transition not in the
    transition table."""

    code = ErrorCode.INVALID_TXN_STATE

    @property
    def retriable(self) -> bool:
        return False


def error_for_code(code: int, message: str | None = None) -> KafkaError:
    """The typed error for a broker error code (a plain `KafkaError` for unknown codes)."""
    cls = ERRORS_BY_CODE.get(int(code))
    if cls is None:
        return KafkaError(f"error code {code}" + (f": {message}" if message else ""))
    return cls(message)


class TransactionAbortedError(_PlainMessageError):
    """A batch failed because its transaction was aborted (Kafka's
    `TransactionAbortedException`)."""

    code = ErrorCode.TRANSACTION_ABORTABLE

    @property
    def retriable(self) -> bool:
        return False


class CommitFailedError(_PlainMessageError):
    """Offsets cannot be committed: the member is no longer part of the group's generation
    (Kafka's `CommitFailedException`)."""

    code = ErrorCode.ILLEGAL_GENERATION

    @property
    def retriable(self) -> bool:
        return False
