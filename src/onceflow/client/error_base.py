"""`KafkaError`, the base of every error the client raises for a Kafka error code.

The subclass per code lives in the generated `error_classes`; `client.errors` is the module to
import from.
"""

from __future__ import annotations

from onceflow.protocol.errors import ErrorCode

__all__ = ["KafkaError"]


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
