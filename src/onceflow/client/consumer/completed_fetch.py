"""One partition's fetched data, turned into `ConsumerRecord`s on demand (no I/O).

`CompletedFetch` holds the raw record set of one partition from a Fetch response and hands out
records from the consumer's position on, up to a limit per call, as Kafka's `CompletedFetch`
does:

- batches (or records) below the position are skipped (a fetch may start mid-batch);
- control batches (transaction markers) are never returned;
- with read_committed, the response's aborted transactions are applied: a transactional batch
  of a producer whose aborted transaction started at or before the batch is skipped, until
  that producer's ABORT marker is passed;
- after each batch the position moves to the batch's next offset, so control batches and
  compaction gaps are stepped over;
- with `check_crcs`, a batch whose CRC32C does not match raises `CorruptRecordError`.

A truncated last batch (the broker may cut a record set at the size limit) is ignored.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from onceflow.client.errors import IllegalStateError
from onceflow.common import BytesLike
from onceflow.records.batch import BatchHeader, TimestampType, split_complete_batches, verify_crc
from onceflow.records.control import ControlRecordType, parse_control_record
from onceflow.records.errors import CorruptRecordError
from onceflow.records.record import Record, RecordColumns, decode_batch_columns, decode_records

__all__ = ["CompletedFetch", "ConsumerRecord", "FetchedColumns"]

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


class ConsumerRecord(NamedTuple):
    """A record as `Consumer.poll` returns it (Kafka's `ConsumerRecord` fields)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]]  # a list
    leader_epoch: int


class FetchedColumns(NamedTuple):
    """Records of one partition as parallel lists, in offset order (`Consumer.poll_columns`):
    entry i of every list belongs to the same record."""

    topic: str
    partition: int
    offsets: list[int]
    timestamps: list[int]
    timestamp_types: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[Sequence[tuple[str, bytes | None]]]  # of lists

    @classmethod
    def empty(cls, topic: str, partition: int) -> FetchedColumns:
        return cls(topic, partition, [], [], [], [], [], [])

    def add(self, record: ConsumerRecord) -> None:
        self.offsets.append(record.offset)
        self.timestamps.append(record.timestamp)
        self.timestamp_types.append(record.timestamp_type)
        self.keys.append(record.key)
        self.values.append(record.value)
        self.headers.append(record.headers)

    def add_batch(self, header: BatchHeader, columns: RecordColumns, position: int) -> None:
        """The decoded records of one batch from offset `position` on."""
        base_offset = header.base_offset
        first = 0
        if base_offset < position:  # a fetch that starts inside the batch
            first = bisect.bisect_left(columns.offset_deltas, position - base_offset)
        deltas = columns.offset_deltas[first:] if first else columns.offset_deltas
        self.offsets.extend([base_offset + delta for delta in deltas])
        if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
            self.timestamps.extend([header.max_timestamp] * len(deltas))
        else:
            base = header.base_timestamp
            self.timestamps.extend([base + delta for delta in columns.timestamp_deltas[first:]])
        self.timestamp_types.extend([int(header.timestamp_type)] * len(deltas))
        self.keys.extend(columns.keys[first:])
        self.values.extend(columns.values[first:])
        self.headers.extend(columns.headers[first:])


class CompletedFetch:
    """The unconsumed part of one partition's fetched record set."""

    def __init__(
        self,
        topic: str,
        partition: int,
        fetch_offset: int,
        records: BytesLike | None,
        *,
        isolation_level: int = READ_UNCOMMITTED,
        aborted_transactions: Iterable[tuple[int, int]] = (),
        check_crcs: bool = True,
        high_watermark: int = -1,
        last_stable_offset: int = -1,
        log_start_offset: int = -1,
    ):
        self.topic, self.partition = topic, partition
        self.fetch_offset = fetch_offset
        self.next_offset = fetch_offset  # the position after what has been handed out
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.check_crcs = check_crcs
        self.read_committed = isolation_level == READ_COMMITTED
        batches, _trailing = split_complete_batches(records) if records else ([], 0)
        self._batches: list[tuple[BatchHeader, memoryview]] = batches
        self._batch_index = 0
        self._pending: list[Record] = []  # decoded records of the current batch not yet handed out
        self._pending_index = 0
        self._current: BatchHeader | None = None
        # (first_offset, producer_id), smallest first offset on top
        self._aborted = [(first, pid) for pid, first in aborted_transactions]
        heapq.heapify(self._aborted)
        self._aborted_producers: set[int] = set()

    @property
    def last_fetched_offset(self) -> int:
        """The offset after the last complete batch in the record set (the next fetch's start)."""
        if not self._batches:
            return self.fetch_offset
        return max(self.fetch_offset, self._batches[-1][0].next_offset)

    @property
    def exhausted(self) -> bool:
        return self._batch_index >= len(self._batches) and self._pending_index >= len(self._pending)

    def take(self, max_records: int) -> list[ConsumerRecord]:
        """Up to `max_records` records from the position on (advancing it)."""
        out: list[ConsumerRecord] = []
        while True:
            if self._pending_index < len(self._pending):
                if len(out) >= max_records:
                    break
                self._take_pending(out, max_records)
                continue
            if self._current is not None:
                self.next_offset = max(self.next_offset, self._current.next_offset)
                self._current = None
            if len(out) >= max_records or self._batch_index >= len(self._batches):
                break
            header, batch = self._batches[self._batch_index]
            self._batch_index += 1
            self._open_batch(header, batch)
        return out

    def _take_pending(self, out: list[ConsumerRecord], max_records: int) -> None:
        header = self._current
        if header is None:
            raise IllegalStateError("decoded records without their batch")
        base_offset = header.base_offset
        log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
        timestamp_type = int(header.timestamp_type)
        base_timestamp = header.base_timestamp
        epoch = header.partition_leader_epoch
        topic, partition = self.topic, self.partition
        pending, index = self._pending, self._pending_index
        position = self.next_offset
        while index < len(pending) and len(out) < max_records:
            record = pending[index]
            index += 1
            offset = base_offset + record.offset_delta
            if offset < position:
                continue
            timestamp = (
                header.max_timestamp if log_append else base_timestamp + record.timestamp_delta
            )
            out.append(
                ConsumerRecord(
                    topic,
                    partition,
                    offset,
                    timestamp,
                    timestamp_type,
                    record.key,
                    record.value,
                    record.headers,
                    epoch,
                )
            )
            position = offset + 1
        self._pending_index = index
        self.next_offset = position

    def take_columns(self, max_records: int) -> FetchedColumns:
        """Like `take`, as parallel lists, whole batches at a time: stops after the batch
        that reaches `max_records`."""
        out = FetchedColumns.empty(self.topic, self.partition)
        if self._pending_index < len(self._pending):  # what a `take` left of its batch
            for record in self.take(len(self._pending) - self._pending_index):
                out.add(record)
        while len(out.offsets) < max_records and self._batch_index < len(self._batches):
            header, batch = self._batches[self._batch_index]
            self._batch_index += 1
            if self._readable(header, batch):
                out.add_batch(header, decode_batch_columns(batch), self.next_offset)
                self.next_offset = header.next_offset
        return out

    def _open_batch(self, header: BatchHeader, batch: memoryview) -> None:
        """Make `batch` current, or step over it (below the position, control, aborted)."""
        if self._readable(header, batch):
            self._current = header
            self._pending = decode_records(batch)
            self._pending_index = 0

    def _readable(self, header: BatchHeader, batch: memoryview) -> bool:
        """Whether `batch` has records to hand out; if not, the position steps over it."""
        if header.next_offset <= self.next_offset:
            return False
        if self.check_crcs and not verify_crc(batch, header):
            raise CorruptRecordError(
                f"record batch at offset {header.base_offset} of {self.topic}-{self.partition} "
                "failed its CRC check"
            )
        if self.read_committed:
            aborted = self._aborted
            while aborted and aborted[0][0] <= header.last_offset:
                self._aborted_producers.add(heapq.heappop(aborted)[1])
            if header.is_control:
                if header.producer_id in self._aborted_producers and _is_abort_marker(batch):
                    self._aborted_producers.discard(header.producer_id)
                self.next_offset = header.next_offset
                return False
            if header.is_transactional and header.producer_id in self._aborted_producers:
                self.next_offset = header.next_offset
                return False
        elif header.is_control:
            self.next_offset = header.next_offset
            return False
        return True


def _is_abort_marker(batch: memoryview) -> bool:
    try:
        return parse_control_record(batch).control_type == ControlRecordType.ABORT
    except CorruptRecordError:
        return False
