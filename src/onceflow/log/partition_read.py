"""`PartitionRead`: Fetch and ListOffsets reads of a partition log.

Reads return whole batches via `pread`, never past the high watermark (or a lower bound the
caller gives: the last stable offset for read_committed), and stay within one segment as
Kafka's do. `collect_aborted_transactions` answers read_committed fetches from the segments'
`.txnindex` files; `offset_for_timestamp` answers ListOffsets.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from dataclasses import dataclass

from onceflow.log.partition_base import PartitionLogBase
from onceflow.log.timestamps import find_offset_by_timestamp
from onceflow.protocol.errors import ErrorCode
from onceflow.records.errors import CorruptRecordError

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1

logger = logging.getLogger("onceflow.log")


@dataclass(frozen=True)
class ReadResult:
    """Outcome of `PartitionLog.read`."""

    error: ErrorCode
    records: bytes | memoryview
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int


@dataclass(frozen=True)
class TimestampAndOffset:
    """Answer of `offset_for_timestamp` (ListOffsets): the record's timestamp and offset."""

    timestamp: int
    offset: int


class PartitionRead(PartitionLogBase):
    """The read path of a partition log (on the event loop)."""

    # -- read ----------------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        upper_bound_offset: int | None = None,
        *,
        min_one_message: bool = True,
    ) -> ReadResult:
        """Whole batches from the one containing `fetch_offset`, at most `max_bytes` unless the
        first batch alone is bigger (KIP-74, when `min_one_message`), never a batch starting at
        or after `upper_bound_offset` (default: the high watermark).

        OFFSET_OUT_OF_RANGE when `fetch_offset` is below the log start or above the log end,
        KAFKA_STORAGE_ERROR when the log is offline or the read fails (the log goes offline),
        CORRUPT_MESSAGE when a batch header on the way is corrupt (one error line; the log
        stays online for other offsets), as Kafka's `ReplicaManager.readFromLocalLog` answers
        per partition. Reads stay within one segment, as Kafka's do; the client fetches again.
        """
        hw = self.high_watermark
        upper = hw if upper_bound_offset is None else min(upper_bound_offset, hw)
        start = self._log_start_offset
        if fetch_offset < start or fetch_offset > self._log_end_offset:
            return ReadResult(
                ErrorCode.OFFSET_OUT_OF_RANGE, b"", hw, self.last_stable_offset, start
            )
        if self.failed is not None:
            return ReadResult(
                ErrorCode.KAFKA_STORAGE_ERROR, b"", hw, self.last_stable_offset, start
            )
        empty = ReadResult(ErrorCode.NONE, b"", hw, self.last_stable_offset, start)
        if fetch_offset >= upper:
            return empty
        try:
            data = self._read_segments(fetch_offset, max_bytes, upper, min_one_message)
        except CorruptRecordError as exc:
            # one line per damaged place, not per fetch retry
            level = logging.DEBUG if str(exc) in self._reported_corruption else logging.ERROR
            self._reported_corruption.add(str(exc))
            logger.log(level, "read of %s at offset %d failed: %s", self.name, fetch_offset, exc)
            return ReadResult(ErrorCode.CORRUPT_MESSAGE, b"", hw, self.last_stable_offset, start)
        except OSError as exc:
            self._go_offline(exc, f"read at offset {fetch_offset}")
            return ReadResult(
                ErrorCode.KAFKA_STORAGE_ERROR, b"", hw, self.last_stable_offset, start
            )
        if data is None:
            return empty
        return ReadResult(ErrorCode.NONE, data, hw, self.last_stable_offset, start)

    def _read_segments(
        self, fetch_offset: int, max_bytes: int, upper: int, min_one: bool
    ) -> memoryview | None:
        """The batches `read` returns, None when there is nothing below `upper`."""
        index = max(0, bisect_right(self._base_offsets, fetch_offset) - 1)
        for segment in self._segments[index:]:
            if segment.base_offset >= upper:
                break
            position = segment.translate_offset(fetch_offset)
            if position is None:
                continue
            return segment.read(position, max_bytes, upper, min_one)
        return None

    def offset_for_timestamp(
        self, timestamp: int, upper_bound_offset: int | None = None
    ) -> TimestampAndOffset | None:
        """ListOffsets: the first record with timestamp >= `timestamp` below the upper bound
        (default the high watermark); -2 earliest, -1 latest (the upper bound), -3 the record
        with the largest timestamp (KIP-734). None when there is no such record.
        """
        upper = self.high_watermark if upper_bound_offset is None else upper_bound_offset
        if timestamp == EARLIEST_TIMESTAMP:
            return TimestampAndOffset(-1, self._log_start_offset)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(-1, upper)
        found = find_offset_by_timestamp(self._segments, timestamp, self._log_start_offset, upper)
        if found is None:
            return None
        return TimestampAndOffset(*found)

    def collect_aborted_transactions(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> list[tuple[int, int]]:
        """`(producer_id, first_offset)` of every aborted transaction overlapping
        `[fetch_offset, upper_bound_offset)`, for read_committed fetches (Kafka's
        `collectAbortedTransactions`: the segment of `fetch_offset` and later ones, until an
        entry's last stable offset reaches the bound)."""
        index = max(0, bisect_right(self._base_offsets, fetch_offset) - 1)
        aborted: list[tuple[int, int]] = []
        for segment in self._segments[index:]:
            found, complete = segment.txn_index.collect(fetch_offset, upper_bound_offset)
            aborted.extend((entry.producer_id, entry.first_offset) for entry in found)
            if complete:
                break
        return aborted
