"""`PartitionRetention`: retention, DeleteRecords and the log start offset.

The log start offset moves with retention (`retention.ms`, `retention.bytes`, whole segments
only) and DeleteRecords (`check_delete_records`, `increment_log_start_offset` on the event
loop, `checkpoint_log_start_offset` in a worker thread); a start offset inside a segment is
kept, fsynced before DeleteRecords is answered, in the partition directory's
`log-start-offset` file (Kafka keeps one `log-start-offset-checkpoint` per data directory and
writes it every `log.flush.start.offset.checkpoint.interval.ms`).
"""

from __future__ import annotations

import logging
import os

from onceflow.common import wall_clock_ms
from onceflow.log.fsutil import write_file_atomically
from onceflow.log.partition_base import LOG_START_OFFSET_FILE, PartitionLogBase
from onceflow.protocol.errors import ErrorCode

logger = logging.getLogger("onceflow.log")


class PartitionRetention(PartitionLogBase):
    """Retention and the log start offset of a partition log."""

    # -- retention -----------------------------------------------------------------------------

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply `retention.ms`, `retention.bytes` and the log start offset to whole segments.

        Never deletes the active segment nor a segment holding offsets at or above the high
        watermark; does nothing unless `cleanup.policy` includes `delete`. Returns how many
        segments were deleted and advances the log start offset past them.
        """
        if self.cleaner_busy:
            return 0  # the cleaner is reading these segments; retention runs next time
        now = wall_clock_ms() if now_ms is None else now_ms
        candidates = self._segments[:-1]
        hw = self.high_watermark
        eligible = 0
        for i in range(len(candidates)):
            if self._segments[i + 1].base_offset > hw:
                break
            eligible += 1
        if not eligible:
            return 0
        by_start = 0
        for i in range(eligible):
            if self._segments[i + 1].base_offset <= self._log_start_offset:
                by_start = i + 1
        by_time = by_size = 0
        if self.config.delete_enabled:
            retention_ms = self.config.retention_ms
            if retention_ms >= 0:
                for segment in candidates[:eligible]:
                    largest = segment.max_timestamp
                    if largest < 0:
                        largest = segment.last_modified_ms()
                    if now - largest <= retention_ms:
                        break
                    by_time += 1
            retention_bytes = self.config.retention_bytes
            if retention_bytes >= 0:
                excess = self.size_bytes - retention_bytes
                for segment in candidates[:eligible]:
                    if excess - segment.size < 0:
                        break
                    excess -= segment.size
                    by_size += 1
        count = max(by_start, by_time, by_size)
        if count:
            reason = (
                "log start offset"
                if count == by_start
                else ("retention.ms" if count == by_time else "retention.bytes")
            )
            self._delete_segments(count, reason)
            self.publish_offsets()
        return count

    def delete_records(self, offset: int) -> tuple[ErrorCode, int]:
        """DeleteRecords in one call (blocking: the checkpoint is fsynced on this thread).

        Returns `(error, low watermark)`; see `check_delete_records`."""
        error, target = self.check_delete_records(offset)
        if error != ErrorCode.NONE:
            return error, self._log_start_offset
        self.checkpoint_log_start_offset(target)
        return ErrorCode.NONE, self.increment_log_start_offset(target)

    def check_delete_records(self, offset: int) -> tuple[ErrorCode, int]:
        """The log start offset DeleteRecords would move to: `(NONE, offset)`, with -1 meaning
        the high watermark, or OFFSET_OUT_OF_RANGE below -1 or above the high watermark (Kafka's
        `Partition.deleteRecordsOnLeader` and `UnifiedLog.maybeIncrementLogStartOffset`)."""
        hw = self.high_watermark
        if offset == -1:
            offset = hw
        if offset < 0 or offset > hw:
            return ErrorCode.OFFSET_OUT_OF_RANGE, offset
        return ErrorCode.NONE, offset

    def checkpoint_log_start_offset(self, offset: int) -> None:
        """Make a log start offset of at least `offset` durable (the `log-start-offset` file,
        fsynced). Blocking, safe from any thread; concurrent calls never lower the stored
        value. Raises OSError (and takes the log offline) when the file cannot be written."""
        with self._checkpoint_lock:
            if offset <= self._checkpointed_start:
                return
            path = os.path.join(self.dir_path, LOG_START_OFFSET_FILE)
            try:
                write_file_atomically(path, f"{offset}\n".encode())
            except OSError as exc:
                self._go_offline(exc, "log start offset checkpoint")
                raise
            self._checkpointed_start = offset

    def increment_log_start_offset(self, offset: int) -> int:
        """Move the log start offset up to `offset` (never down, never past the high
        watermark) and delete the segments now wholly below it; returns the log start offset.

        Reads below it then get OFFSET_OUT_OF_RANGE and ListOffsets(earliest) answers it.
        Producer state is kept (as Kafka does since KIP-360: producers expire by
        `producer.id.expiration.ms`, not with the data), and so is a transaction still open
        below the new start: the last stable offset is clamped to the log start offset, as
        Kafka's `maybeIncrementFirstUnstableOffset` does, until the transaction's marker
        lands. Aborted transactions stay in the `.txnindex` of the segment holding their
        marker, so read_committed fetches from the new start still filter them.
        """
        offset = min(offset, self.high_watermark)
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            logger.info("log start offset of %s moved to %d (DeleteRecords)", self.name, offset)
            self.delete_old_segments()
            self.publish_offsets()
        return self._log_start_offset

    def _delete_segments(self, count: int, reason: str) -> None:
        with self._flush_lock:
            doomed = self._segments[:count]
            with self._lock:
                del self._segments[:count]
                del self._base_offsets[:count]
                self._unflushed = [s for s in self._unflushed if s not in doomed]
            new_start = self._segments[0].base_offset
            if new_start > self._log_start_offset:
                self._log_start_offset = new_start
            for segment in doomed:
                segment.delete()
        logger.info(
            "deleted %d segment(s) of %s (%s); log start offset now %d",
            count,
            self.name,
            reason,
            self._log_start_offset,
        )
