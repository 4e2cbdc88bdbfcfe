"""Errors of the records package and the Kafka error codes its validators return.

`CorruptRecordError` is raised for framing and encoding damage (a truncated batch, a bad
varint, a failed decompression). It carries `reason`, the name of the Kafka error code a broker
should answer with (``"CORRUPT_MESSAGE"`` unless said otherwise), so a caller can map it without
knowing the details.

`ErrorCode` is re-exported from `onceflow.protocol.errors` for the validators' return values.
"""

from __future__ import annotations

from onceflow.protocol.errors import ErrorCode

__all__ = ["CorruptRecordError", "ErrorCode"]


class CorruptRecordError(Exception):
    """A record batch or record that cannot be parsed.

    `reason` is the Kafka error code name to report (e.g. ``"CORRUPT_MESSAGE"``,
    ``"UNSUPPORTED_FOR_MESSAGE_FORMAT"``, ``"MESSAGE_TOO_LARGE"``).
    """

    def __init__(self, message: str, reason: str = "CORRUPT_MESSAGE") -> None:
        super().__init__(message)
        self.reason = reason

    @property
    def error_code(self) -> ErrorCode:
        """The `ErrorCode` member named by `reason`."""
        return ErrorCode[self.reason]
