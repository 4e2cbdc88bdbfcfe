"""The record accumulator: per-partition queues of batches waiting to be sent.

Application threads `append` records into the open batch of their partition (a `BatchBuilder`,
under one lock; no asyncio work per record). The sender thread asks which partitions are
`ready` — a batch is full, or has lingered `linger.ms`, or a flush/close is under way — and
`drain`s at most one batch per partition per request, grouped by leader, as Kafka's
`RecordAccumulator` does. The sender is woken only when a new batch is opened or one fills up.

Batches that failed with a retriable error are `reenqueue`d at the front of their queue in
sequence order and wait `retry.backoff.ms`, doubled for each further retry of the same batch
up to `retry.backoff.max.ms`, with +/-20% jitter (KIP-580). `buffer.memory` bounds the bytes
held: `append` blocks up to `max.block.ms` for space. Compression happens once, when a batch is
closed.
"""

from __future__ import annotations

import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, overload

from onceflow.client.errors import IllegalStateError, KafkaTimeoutError
from onceflow.client.net.backoff import ExponentialBackoff
from onceflow.client.producer.futures import FutureRecordMetadata, ProduceResult
from onceflow.client.producer.record_writer import RecordBatchWriter
from onceflow.common import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from onceflow.records.batch import (
    HEADER_SIZE,
    NO_SEQUENCE,
    PRODUCER_ID_OFFSET,
    TRANSACTIONAL_MASK,
    increment_sequence,
    patch_crc,
)

__all__ = ["ProducerBatch", "ReadyCheck", "RecordAccumulator", "now_ms", "sequence_before"]

RECORD_OVERHEAD = 24  # a generous bound on a record's framing: length, deltas, lengths, counts
_PRODUCER_FIELDS = struct.Struct(">qhi")  # producer id, epoch, base sequence: bytes 43..56


def yield_gil() -> None:
    """Release the GIL for a moment so a waiting I/O thread runs now.

    CPython hands the GIL to a waiting thread only after the switch interval (5 ms) unless
    the holder blocks; an application thread looping over `send` would otherwise delay every
    answer and wake-up of the I/O thread by up to 5 ms."""
    time.sleep(0)


def now_ms() -> int:
    """Wall-clock milliseconds on the monotonic clock (for deadlines, not timestamps)."""
    return time.monotonic_ns() // 1_000_000


def sequence_before(a: int, b: int) -> bool:
    """True when sequence `a` comes before `b`, allowing for the wrap from 2**31-1 to 0."""
    return a != b and (b - a) % (1 << 31) < (1 << 30)


class ProducerBatch:
    """Records for one partition sent together; built (compressed) when drained."""

    __slots__ = (
        "tp",
        "builder",
        "buffer",
        "result",
        "record_count",
        "reserved_bytes",
        "created_ms",
        "attempts",
        "retry_at_ms",
        "full",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "outstanding",
        "attributes",
    )

    def __init__(
        self, tp: tuple[str, int], compression: int, created_ms: int, transactional: bool = False
    ) -> None:
        self.tp = tp
        self.attributes = int(compression) | (TRANSACTIONAL_MASK if transactional else 0)
        self.builder: RecordBatchWriter | None = RecordBatchWriter(compression)
        self.buffer: bytearray | None = None
        self.result = ProduceResult(tp[0], tp[1])
        self.record_count = 0
        self.reserved_bytes = 0
        self.created_ms = created_ms
        self.attempts = 0
        self.retry_at_ms = 0
        self.full = False
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        self.outstanding = False  # sent and awaiting its response

    @property
    def done(self) -> bool:
        return self.result.done

    @property
    def open_builder(self) -> RecordBatchWriter:
        """The builder of a batch still taking records (before `close`)."""
        if self.builder is None:
            raise IllegalStateError(f"the batch for {self.tp} is closed")
        return self.builder

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence != NO_SEQUENCE

    @property
    def last_sequence(self) -> int:
        """Sequence of the batch's last record (wrapping past 2**31-1 to 0)."""
        return increment_sequence(self.base_sequence, self.record_count - 1)

    def size_bytes(self) -> int:
        """Bytes on the wire once built (an estimate before)."""
        if self.buffer is not None:
            return len(self.buffer)
        return self.builder.size if self.builder is not None else 0

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Stamp producer id, epoch and base sequence (patching the header if already built)."""
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.base_sequence = base_sequence
        if self.buffer is not None:
            _PRODUCER_FIELDS.pack_into(
                self.buffer, PRODUCER_ID_OFFSET, producer_id, producer_epoch, base_sequence
            )
            patch_crc(self.buffer)

    def close(self) -> bytearray:
        """Build the v2 batch (once) and return its bytes."""
        if self.buffer is None:
            self.buffer = self.open_builder.build(
                self.producer_id, self.producer_epoch, self.base_sequence, self.attributes
            )
            self.builder = None
        return self.buffer

    def __repr__(self) -> str:
        return (
            f"<ProducerBatch {self.tp[0]}-{self.tp[1]} records={self.record_count} "
            f"seq={self.base_sequence} attempts={self.attempts}>"
        )


class ReadyCheck:
    """What `ready` found: leaders with sendable data, when to look again, unknown leaders."""

    __slots__ = ("nodes", "next_delay_ms", "unknown_leader_topics")

    def __init__(self) -> None:
        self.nodes: set[int] = set()
        self.next_delay_ms = 2**31
        self.unknown_leader_topics: set[str] = set()


class RecordAccumulator:
    """Per-partition batch queues shared by application threads and the sender thread."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: int,
        compression: int,
        retry_backoff_ms: int,
        buffer_memory: int,
        max_block_ms: int,
        wakeup: Callable[[], None],
        transactional: bool = False,
        retry_backoff_max_ms: int | None = None,
    ):
        self.batch_size = max(batch_size, 1)
        self.transactional = transactional
        self._room = self.batch_size - HEADER_SIZE  # record bytes that fit in a batch
        self.linger_ms = linger_ms
        self.compression = compression
        self.retry_backoff = ExponentialBackoff(retry_backoff_ms, retry_backoff_max_ms)
        self.buffer_memory = buffer_memory
        self.max_block_ms = max_block_ms
        self._wakeup = wakeup
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)
        self._queues: dict[tuple[str, int], deque[ProducerBatch]] = {}
        self._incomplete: set[ProducerBatch] = set()
        self._buffered = 0
        self._flushes = 0
        self._drain_index: dict[int, int] = {}
        self.closed = False

    # ------------------------------------------------------------------ appending

    @overload
    def append(
        self,
        tp: tuple[str, int],
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        abort_on_new_batch: Literal[False] = False,
    ) -> FutureRecordMetadata: ...

    @overload
    def append(
        self,
        tp: tuple[str, int],
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
        abort_on_new_batch: bool,
    ) -> FutureRecordMetadata | None: ...

    def append(
        self,
        tp: tuple[str, int],
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        abort_on_new_batch: bool = False,
    ) -> FutureRecordMetadata | None:
        """Add a record to `tp`'s open batch (opening one if needed) and return its future.

        With `abort_on_new_batch`, returns None instead of opening a batch (the sticky
        partitioner then moves on, KIP-480). Blocks up to max.block.ms for buffer space."""
        estimate = RECORD_OVERHEAD + (len(key) if key is not None else 0)
        if value is not None:
            estimate += len(value)
        for hkey, hvalue in headers:
            estimate += len(hkey) + (len(hvalue) if hvalue else 0) + 10
        wake = False
        with self._lock:
            if self.closed:
                raise IllegalStateError("Cannot perform operation after producer has been closed")
            if self._buffered + estimate > self.buffer_memory and self._buffered > 0:
                self._reserve(estimate)
            else:
                self._buffered += estimate
            queue = self._queues.get(tp)
            if queue is None:
                queue = self._queues[tp] = deque()
            batch = queue[-1] if queue else None
            writer = batch.builder if batch is not None else None
            if (
                batch is None
                or writer is None
                or batch.full
                or len(writer.records) + estimate > self._room
            ):
                if abort_on_new_batch:
                    self._buffered -= estimate
                    return None
                if batch is not None and writer is not None:
                    batch.full = True
                batch = ProducerBatch(tp, self.compression, now_ms(), self.transactional)
                writer = batch.open_builder
                queue.append(batch)
                self._incomplete.add(batch)
                wake = True
            index = writer.append(timestamp, key, value, headers)
            batch.record_count += 1
            batch.reserved_bytes += estimate
            if len(writer.records) >= self._room:
                batch.full = True
                wake = True
        if wake:
            self._wakeup()
            yield_gil()
        return FutureRecordMetadata(batch.result, index, timestamp)

    def _reserve(self, size: int) -> None:
        """Account `size` bytes against buffer.memory, waiting for space (lock held)."""
        deadline = time.monotonic() + self.max_block_ms / 1000
        while self._buffered + size > self.buffer_memory and self._buffered > 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.closed:
                raise KafkaTimeoutError(
                    "Failed to allocate memory within the configured max blocking time "
                    f"{self.max_block_ms} ms."
                )
            self._wakeup()
            self._space.wait(remaining)
        self._buffered += size

    # ------------------------------------------------------------------ sender side

    def ready(self, now: int, leader_of: Callable[[tuple[str, int]], int | None]) -> ReadyCheck:
        """Which leaders have a batch to send now, and how long until the next one might."""
        check = ReadyCheck()
        with self._lock:
            flushing = self._flushes > 0 or self.closed
            for tp, queue in self._queues.items():
                if not queue:
                    continue
                first = queue[0]
                leader = leader_of(tp)
                if leader is None:
                    check.unknown_leader_topics.add(tp[0])
                    continue
                if first.attempts and now < first.retry_at_ms:
                    check.next_delay_ms = min(check.next_delay_ms, first.retry_at_ms - now)
                    continue
                due = first.created_ms + self.linger_ms
                if first.full or len(queue) > 1 or flushing or now >= due:
                    check.nodes.add(leader)
                else:
                    check.next_delay_ms = min(check.next_delay_ms, due - now)
        return check

    def drain(
        self,
        node_partitions: dict[int, list[tuple[str, int]]],
        max_request_size: int,
        now: int,
        prepare: Callable[[ProducerBatch], bool],
    ) -> dict[int, list[ProducerBatch]]:
        """Take at most one batch per partition for each node, up to max.request.size per
        node. `prepare(batch)` may veto a batch (idempotence ordering) or stamp its producer
        state; it runs before the batch is built."""
        drained: dict[int, list[ProducerBatch]] = {}
        with self._lock:
            for node, tps in node_partitions.items():
                batches: list[ProducerBatch] = []
                size = 0
                start = self._drain_index.get(node, 0) % max(len(tps), 1)
                for tp in tps[start:] + tps[:start]:
                    queue = self._queues.get(tp)
                    if not queue:
                        continue
                    first = queue[0]
                    if first.attempts and now < first.retry_at_ms:
                        continue
                    if batches and size + first.size_bytes() > max_request_size:
                        break
                    if not prepare(first):
                        continue
                    queue.popleft()
                    size += first.size_bytes()
                    batches.append(first)
                self._drain_index[node] = start + 1
                if batches:
                    drained[node] = batches
        for batches in drained.values():  # compress and checksum outside the lock
            for batch in batches:
                batch.close()
        return drained

    def reenqueue(self, batch: ProducerBatch, now: int) -> None:
        """Put a batch back for a retry: at the front, in sequence order, after the backoff
        for its number of attempts so far."""
        batch.attempts += 1
        batch.retry_at_ms = now + round(self.retry_backoff.backoff_ms(batch.attempts - 1))
        with self._lock:
            queue = self._queues.setdefault(batch.tp, deque())
            position = 0
            if batch.has_sequence:
                while (
                    position < len(queue)
                    and queue[position].has_sequence
                    and sequence_before(queue[position].base_sequence, batch.base_sequence)
                ):
                    position += 1
            queue.insert(position, batch)

    def deallocate(self, batch: ProducerBatch) -> None:
        """Forget a completed batch and release its buffer space."""
        with self._lock:
            self._incomplete.discard(batch)
            self._buffered -= batch.reserved_bytes
            batch.reserved_bytes = 0
            self._space.notify_all()

    def expired_batches(self, now: int, delivery_timeout_ms: int) -> list[ProducerBatch]:
        """Remove and return queued batches older than delivery.timeout.ms."""
        expired = []
        with self._lock:
            for queue in self._queues.values():
                while queue and now - queue[0].created_ms >= delivery_timeout_ms:
                    expired.append(queue.popleft())
        return expired

    def remove_all(self) -> list[ProducerBatch]:
        """Remove and return every queued batch (to fail them on a forced close)."""
        with self._lock:
            batches = [batch for queue in self._queues.values() for batch in queue]
            for queue in self._queues.values():
                queue.clear()
            return batches

    # ------------------------------------------------------------------ flush and close

    def begin_flush(self) -> None:
        with self._lock:
            self._flushes += 1

    def end_flush(self) -> None:
        with self._lock:
            self._flushes -= 1

    def incomplete(self) -> list[ProducerBatch]:
        """Batches not yet completed (queued or in flight)."""
        with self._lock:
            return list(self._incomplete)

    def has_undrained(self) -> bool:
        with self._lock:
            return any(self._queues.values())

    def has_incomplete(self) -> bool:
        with self._lock:
            return bool(self._incomplete)

    def close(self) -> None:
        """Refuse further appends; every queued batch becomes ready at once."""
        with self._lock:
            self.closed = True
            self._space.notify_all()

    def queued_partitions(self) -> Iterable[tuple[str, int]]:
        with self._lock:
            return [tp for tp, queue in self._queues.items() if queue]

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "buffered_bytes": self._buffered,
                "queued_batches": sum(len(q) for q in self._queues.values()),
                "incomplete_batches": len(self._incomplete),
            }
