"""`PartitionAppend`: assigning offsets to produced record sets and writing them.

`append` assigns offsets by patching each batch's base offset (outside the CRC) in one copy of
the record set, writes the whole set with one `pwrite` or nothing, indexes it per batch and
returns without fsync (the group committer makes it durable; partition_base.py).

Producer state (`log.producer_state`): `append` checks every batch carrying a producer id
against a staged copy of its producer's entry before anything is written (sequence window,
epochs, transactions), answers a retried batch still in the 5-batch window with its original
offsets (`AppendResult.duplicate`) without writing, and commits the staged entries only after
the write. Batches without a producer id skip all of it. A COMMIT/ABORT marker (origin
COORDINATOR) completes its producer's transaction; an aborted one is recorded in the marker
segment's `.txnindex` (`log.txn_index`). A roll snapshots the producer state
(`<offset>.snapshot`, `log.producer_snapshot`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from onceflow.common import NO_PRODUCER_ID, wall_clock_ms
from onceflow.log.partition_base import PartitionLogBase
from onceflow.log.producer_append import complete_producer_appends, stage_producer_batch
from onceflow.log.producer_replay import take_snapshot
from onceflow.log.producer_state import (
    AppendOrigin,
    DuplicateBatch,
    ProducerAppendInfo,
)
from onceflow.log.segment import BatchInfo, LogSegment
from onceflow.protocol.errors import ErrorCode
from onceflow.records.batch import (
    BatchHeader,
    TimestampType,
    iter_batches,
    patch_base_offset,
    patch_max_timestamp,
    patch_partition_leader_epoch,
)
from onceflow.records.errors import CorruptRecordError

logger = logging.getLogger("onceflow.log")


def _batches_of(
    buf: bytearray, headers: Sequence[BatchHeader], max_batch_size: int
) -> list[tuple[BatchHeader, memoryview]]:
    """`(header, view of its batch in buf)` from headers parsed earlier, as `iter_batches`
    would split `buf`. Raises CorruptRecordError when their sizes do not add up to `buf`, or
    MESSAGE_TOO_LARGE for a batch above `max_batch_size` (recompression may grow one)."""
    view = memoryview(buf)
    batches = []
    position = 0
    for header in headers:
        if header.total_size > max_batch_size:
            raise CorruptRecordError(
                f"record batch of {header.total_size} bytes exceeds {max_batch_size}",
                "MESSAGE_TOO_LARGE",
            )
        end = position + header.total_size
        batches.append((header, view[position:end]))
        position = end
    if position != len(buf):
        raise CorruptRecordError(f"batch headers cover {position} of {len(buf)} bytes")
    return batches


@dataclass(frozen=True)
class AppendResult:
    """Outcome of `PartitionLog.append` (Kafka's `LogAppendInfo`, the fields produce needs)."""

    error: ErrorCode
    base_offset: int = -1
    last_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    max_timestamp: int = -1
    # offset after the appended records: what `GroupCommitter.flushed` waits for
    next_offset: int = -1
    # a client retry of a batch already in the log: the offsets are the original batch's and
    # nothing was written (the caller still waits for `next_offset` to be durable)
    duplicate: bool = False
    # why the append was rejected, for the produce response's error_message
    error_message: str | None = None


class PartitionAppend(PartitionLogBase):
    """The append path of a partition log (on the event loop)."""

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        headers: Sequence[BatchHeader] | None = None,
        now_ms: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendResult:
        """Assign offsets to an already validated record set and write all of it or nothing.

        `headers`, when given, are the record set's batch headers as the caller already parsed
        them (the produce path: `log.validator`); the log then trusts them instead of parsing
        the set again (only their sizes are checked: they must add up to the set's, each within
        `max.message.bytes`). Then every batch with a producer id is checked against the
        producer state (`origin` CLIENT for Produce, COORDINATOR for transaction markers):
        OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE,
        TRANSACTION_COORDINATOR_FENCED, INVALID_RECORD (a control batch that is not a marker)
        leave the log untouched; a client retry of a batch in the window returns NONE with
        `duplicate=True` and the original offsets (the whole record set is then skipped, as
        Kafka does). Returns KAFKA_STORAGE_ERROR when the write fails (the log goes offline),
        RECORD_LIST_TOO_LARGE when the set exceeds `segment.bytes`, MESSAGE_TOO_LARGE or
        CORRUPT_MESSAGE when framing is off (the broker normally rejected those already).
        A successful append publishes the offsets event when the high watermark or last stable
        offset moved (`publish_offsets`).
        """
        if self.failed is not None:
            return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR)
        buf = bytearray(records)
        limit = self.config.max_message_bytes
        try:
            if headers is None:
                batches = list(iter_batches(buf, limit))
            else:
                batches = _batches_of(buf, headers, limit)
        except CorruptRecordError as exc:
            return AppendResult(exc.error_code)
        if not batches:
            return AppendResult(ErrorCode.NONE, log_start_offset=self._log_start_offset)
        if len(buf) > self.config.segment_bytes:
            return AppendResult(ErrorCode.RECORD_LIST_TOO_LARGE)
        now = wall_clock_ms() if now_ms is None else now_ms
        log_append = self.config.log_append_time
        epoch = self.leader_epoch
        base_offset = offset = self._log_end_offset
        infos: list[BatchInfo] = []
        producers: dict[int, ProducerAppendInfo] = {}
        max_timestamp = -1
        for header, view in batches:
            patch_base_offset(view, offset)
            patch_partition_leader_epoch(view, epoch)
            timestamp = header.max_timestamp
            if log_append:
                patch_max_timestamp(view, now, TimestampType.LOG_APPEND_TIME)
                timestamp = now
            if timestamp > max_timestamp:
                max_timestamp = timestamp
            last = offset + header.last_offset_delta
            if header.producer_id != NO_PRODUCER_ID:
                outcome = stage_producer_batch(
                    self.producer_state, producers, header, view, offset, last, timestamp, origin
                )
                if outcome is not None:
                    if isinstance(outcome, DuplicateBatch):
                        return self._duplicate_result(outcome)
                    return AppendResult(outcome[0], error_message=outcome[1])
            infos.append(BatchInfo(last, timestamp, header.total_size))
            offset = last + 1
        segment = self._segments[-1]
        try:
            if segment.should_roll(len(buf), offset - 1, max_timestamp, now):
                segment = self._roll(now)
            segment.append(buf, infos)
        except OSError as exc:
            self._go_offline(exc, "append")
            return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR)
        with self._lock:
            self._log_end_offset = offset
        if producers:
            try:
                complete_producer_appends(self.producer_state, segment, producers)
            except OSError as exc:
                self._go_offline(exc, "transaction index append")
                return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR)
        self.producer_state.map_end_offset = offset
        self.publish_offsets()
        return AppendResult(
            ErrorCode.NONE,
            base_offset=base_offset,
            last_offset=offset - 1,
            log_append_time=now if log_append else -1,
            log_start_offset=self._log_start_offset,
            max_timestamp=max_timestamp,
            next_offset=offset,
        )

    def _duplicate_result(self, duplicate: DuplicateBatch) -> AppendResult:
        """The answer to a retried batch: its original offsets, nothing written.

        Kafka reports the original batch's timestamp as log_append_time even on CreateTime
        topics; we report it only on LogAppendTime topics (-1 otherwise, as for a first write).
        """
        return AppendResult(
            ErrorCode.NONE,
            base_offset=duplicate.first_offset,
            last_offset=duplicate.last_offset,
            log_append_time=duplicate.timestamp if self.config.log_append_time else -1,
            log_start_offset=self._log_start_offset,
            max_timestamp=duplicate.timestamp,
            next_offset=duplicate.last_offset + 1,
            duplicate=True,
        )

    def _roll(self, now_ms: int) -> LogSegment:
        """Start a new active segment at the log end offset; the old one waits for its fsync.

        The producer state as of the new base offset is snapshotted first (Kafka does this on
        roll too), so a restart replays at most the active segment.
        """
        old = self._segments[-1]
        old.seal_time_index()
        take_snapshot(self.producer_state, self.dir_path, self._log_end_offset, self.name)
        new = LogSegment(self.dir_path, self._log_end_offset, self.config, create=True)
        new.created_ms = now_ms
        with self._lock:
            self._unflushed.append(old)
            self._segments.append(new)
            self._base_offsets.append(new.base_offset)
            self._dir_dirty = True
        logger.debug("rolled %s: new segment at offset %d", self.name, new.base_offset)
        return new
