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

import heapq
from collections.abc import Iterable
from typing import NamedTuple

from onceflow.records.batch import BatchHeader, TimestampType, split_complete_batches, verify_crc
from onceflow.records.control import ControlRecordType, parse_control_record
from onceflow.records.errors import CorruptRecordError
from onceflow.records.record import decode_records

__all__ = ["CompletedFetch", "ConsumerRecord"]

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
    headers: list[tuple[str, bytes | None]]
    leader_epoch: int


class CompletedFetch:
    """The unconsumed part of one partition's fetched record set."""

    def __init__(
        self,
        topic: str,
        partition: int,
        fetch_offset: int,
        records: bytes | memoryview | None,
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
        self._pending: list = []  # decoded records of the current batch not yet handed out
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

    def _open_batch(self, header: BatchHeader, batch: memoryview) -> None:
        """Make `batch` current, or step over it (below the position, control, aborted)."""
        if header.next_offset <= self.next_offset:
            return
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
                return
            if header.is_transactional and header.producer_id in self._aborted_producers:
                self.next_offset = header.next_offset
                return
        elif header.is_control:
            self.next_offset = header.next_offset
            return
        self._current = header
        self._pending = decode_records(batch)
        self._pending_index = 0


def _is_abort_marker(batch: memoryview) -> bool:
    try:
        return parse_control_record(batch).control_type == ControlRecordType.ABORT
    except CorruptRecordError:
        return False
