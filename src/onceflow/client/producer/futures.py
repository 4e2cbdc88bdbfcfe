"""Delivery results: one `ProduceResult` per batch, one cheap future per record.

A batch's records share a `ProduceResult` (Kafka's `ProduceRequestResult`): one event, the
batch's base offset and error. `FutureRecordMetadata` is a three-slot view of it for one
record, with the `concurrent.futures.Future` methods (`result`, `exception`, `done`,
`add_done_callback`, ...). It is not a `concurrent.futures.Future` instance (building one per
record costs a lock and a condition), so `concurrent.futures.wait` does not accept it.

Callbacks (`add_done_callback`, the producer's `on_delivery`) run on the producer's I/O thread
when the batch completes, or at once in the caller's thread when it already has; keep them
short, as with Kafka's `Callback`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from onceflow.client.errors import KafkaTimeoutError

__all__ = ["FutureRecordMetadata", "ProduceResult", "RecordMetadata"]

log = logging.getLogger(__name__)
_LOCK = threading.Lock()  # guards callback lists against completion; held only briefly


class RecordMetadata(NamedTuple):
    """Where a record was written: offset -1 when unknown (acks=0); the timestamp is the
    broker's log-append time for LOG_APPEND_TIME topics, else the record's create time."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ProduceResult:
    """The outcome of one batch, shared by its records' futures."""

    __slots__ = (
        "topic",
        "partition",
        "base_offset",
        "log_append_time",
        "error",
        "done",
        "_event",
        "_callbacks",
    )

    def __init__(self, topic: str, partition: int):
        self.topic, self.partition = topic, partition
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self.done = False
        self._event = threading.Event()
        self._callbacks: list[Callable[[], Any]] | None = None

    def complete(
        self, base_offset: int, log_append_time: int = -1, error: BaseException | None = None
    ) -> None:
        """Record the outcome (only the first call counts) and run the callbacks."""
        with _LOCK:
            if self.done:
                return
            self.base_offset, self.log_append_time, self.error = (
                base_offset,
                log_append_time,
                error,
            )
            self.done = True
            callbacks, self._callbacks = self._callbacks, None
        self._event.set()
        for callback in callbacks or ():
            try:
                callback()
            except Exception:
                log.exception("producer callback raised")

    def add_callback(self, callback: Callable[[], Any]) -> None:
        """Run `callback()` on completion (now, if already complete)."""
        with _LOCK:
            if not self.done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(callback)
                return
        callback()

    def wait(self, timeout: float | None) -> bool:
        """Block until complete or `timeout` seconds pass; True when complete."""
        return self.done or self._event.wait(timeout)


class FutureRecordMetadata:
    """The future `Producer.send` returns: resolves to `RecordMetadata` or raises the
    batch's `KafkaError`."""

    __slots__ = ("_result", "_index", "_timestamp")

    def __init__(self, result: ProduceResult, index: int, timestamp: int):
        self._result, self._index, self._timestamp = result, index, timestamp

    def done(self) -> bool:
        return self._result.done

    def cancel(self) -> bool:
        """Records cannot be cancelled once sent to the accumulator (always False)."""
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return not self._result.done

    def _metadata(self) -> RecordMetadata:
        result = self._result
        offset = -1 if result.base_offset < 0 else result.base_offset + self._index
        timestamp = result.log_append_time if result.log_append_time >= 0 else self._timestamp
        return RecordMetadata(result.topic, result.partition, offset, timestamp)

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata; raises its delivery error, or `KafkaTimeoutError`."""
        if not self._result.wait(timeout):
            raise KafkaTimeoutError(f"no delivery report within {timeout} s")
        if self._result.error is not None:
            raise self._result.error
        return self._metadata()

    get = result  # Kafka's Future.get

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The delivery error, None on success; raises `KafkaTimeoutError` on timeout."""
        if not self._result.wait(timeout):
            raise KafkaTimeoutError(f"no delivery report within {timeout} s")
        return self._result.error

    def add_done_callback(self, fn: Callable[[FutureRecordMetadata], Any]) -> None:
        """Call `fn(self)` once delivered or failed."""
        self._result.add_callback(lambda: fn(self))

    def add_delivery_callback(
        self, on_delivery: Callable[[BaseException | None, RecordMetadata | None], Any]
    ) -> None:
        """Call `on_delivery(error, metadata)` (confluent-kafka's argument order)."""

        def deliver() -> None:
            error = self._result.error
            on_delivery(error, None if error is not None else self._metadata())

        self._result.add_callback(deliver)

    def __repr__(self) -> str:
        state = "pending" if not self._result.done else ("error" if self._result.error else "ok")
        return f"<FutureRecordMetadata {self._result.topic}-{self._result.partition} {state}>"
