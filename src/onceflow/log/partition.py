"""One partition's log: segments in `<data dir>/<topic>-<partition>`, appends, reads, retention.

`PartitionLog` is driven from the broker's event loop. `append` assigns offsets by patching each
batch's base offset (outside the CRC) in one copy of the record set, writes the whole set with
one `pwrite` or nothing, indexes it per batch and returns without fsync. `flush` (called from the
group-commit worker thread, see `log.durability`) fsyncs what was written and moves the flushed
offset; with `flush.on.ack` (the default) the high watermark is the flushed offset, so consumers
never see a record that a crash could take back. Reads return whole batches via `pread`.

Producer state (`log.producer_state`): `append` checks every batch carrying a producer id
against a staged copy of its producer's entry before anything is written (sequence window,
epochs, transactions), answers a retried batch still in the 5-batch window with its original
offsets (`AppendResult.duplicate`) without writing, and commits the staged entries only after
the write. Batches without a producer id skip all of it. A COMMIT/ABORT marker (origin
COORDINATOR) completes its producer's transaction; an aborted one is recorded in the marker
segment's `.txnindex` (`log.txn_index`). `last_stable_offset` is the first offset of the oldest
open transaction, capped by the high watermark. Producer-state snapshots
(`<offset>.snapshot`, `log.producer_snapshot`) are taken on roll and on close; on open the
state is rebuilt from the newest usable one plus the log (`log.producer_replay`).

The log start offset moves with retention and DeleteRecords (`check_delete_records`,
`increment_log_start_offset` on the event loop, `checkpoint_log_start_offset` in a worker
thread); a start offset inside a segment is kept, fsynced before DeleteRecords is answered,
in the partition directory's `log-start-offset` file (Kafka keeps one
`log-start-offset-checkpoint` per data directory and writes it every
`log.flush.start.offset.checkpoint.interval.ms`).

Offsets events: what a fetch can see is bounded by the log start offset, the high watermark
and the last stable offset (and whether the log is offline). Whenever one of them changes on
the event loop (an append, a marker completing a transaction, retention, DeleteRecords, a
config change, and, through `publish_offsets` from the group committer, an fsync round) the
log calls its `offsets_listener` once; the `LogManager` sets it and fans it out to its
subscribers (the broker's long-poll notifier). Nobody else has to remember to wake fetches.
"""

from __future__ import annotations

import logging
import os
import threading
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from onceflow.common import wall_clock_ms
from onceflow.log.cleaner.swap import CrashHook, swap_in
from onceflow.log.config import LogConfig
from onceflow.log.fsutil import fsync_dir, read_int_file, write_file_atomically
from onceflow.log.producer_append import complete_producer_appends, stage_producer_batch
from onceflow.log.producer_replay import load_producer_state, take_snapshot
from onceflow.log.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    AppendOrigin,
    DuplicateBatch,
    ProducerAppendInfo,
    ProducerInfo,
    ProducerStateManager,
)
from onceflow.log.recovery import SegmentShape, load_segments, segment_shape
from onceflow.log.segment import BatchInfo, LogSegment
from onceflow.log.timestamps import find_offset_by_timestamp
from onceflow.protocol.errors import ErrorCode
from onceflow.records.batch import (
    NO_PRODUCER_ID,
    BatchHeader,
    TimestampType,
    iter_batches,
    patch_base_offset,
    patch_max_timestamp,
    patch_partition_leader_epoch,
)
from onceflow.records.errors import CorruptRecordError

logger = logging.getLogger("onceflow.log")

LOG_START_OFFSET_FILE = "log-start-offset"
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


# offsets_listener(log): the visible offsets of `log` changed (called on the event loop)
OffsetsListener = Callable[["PartitionLog"], None]


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


def partition_dir_name(topic: str, partition: int) -> str:
    """Kafka's partition directory name: `<topic>-<partition>`."""
    return f"{topic}-{partition}"


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


class PartitionLog:
    """The log of one partition. Everything but `flush` runs on one thread (the event loop)."""

    def __init__(
        self,
        dir_path: str,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        clean_shutdown: bool = False,
        shutdown_segments: Mapping[int, SegmentShape] | None = None,
        leader_epoch: int = 0,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        offsets_listener: OffsetsListener | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.config = config
        self.leader_epoch = leader_epoch
        self.name = partition_dir_name(topic, partition)
        self.dir_path = os.path.join(dir_path, self.name)
        self._lock = threading.Lock()  # guards the flush snapshot against append/roll
        self._flush_lock = threading.Lock()  # held while fsyncing; closing a segment takes it
        self._segments: list[LogSegment] = []
        self._base_offsets: list[int] = []
        self._unflushed: list[LogSegment] = []  # rolled segments not yet fsynced
        self._dir_dirty = False
        self.failed: OSError | None = None
        self._reported_corruption: set[str] = set()  # corrupt batches a read already logged
        self.cleaner_busy = False  # a cleaning round reads the segments (defers retention)
        self.last_flush_ms = wall_clock_ms()
        self.producer_state = ProducerStateManager(producer_id_expiration_ms)
        created = not os.path.isdir(self.dir_path)
        os.makedirs(self.dir_path, exist_ok=True)
        if created:
            fsync_dir(os.path.dirname(self.dir_path))
        loaded = load_segments(
            self.dir_path, config, self.name, recovery_point, clean_shutdown, shutdown_segments
        )
        self._segments = loaded.segments
        self._base_offsets = [s.base_offset for s in loaded.segments]
        # first segment whose .txnindex needs a replay
        self._replay_bound: int | None = loaded.replay_bound
        self._log_end_offset = self._segments[-1].next_offset
        stored_start = read_int_file(os.path.join(self.dir_path, LOG_START_OFFSET_FILE))
        self._checkpoint_lock = threading.Lock()  # serialises `checkpoint_log_start_offset`
        self._checkpointed_start = stored_start or 0
        self._log_start_offset = max(self._segments[0].base_offset, stored_start or 0)
        self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
        self._flushed_offset = self._log_end_offset
        self._load_producer_state()
        self.offsets_listener = offsets_listener
        self._published = self._visible_offsets()

    # -- offsets -------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """First offset a consumer may fetch."""
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """Offset the next appended record gets."""
        return self._log_end_offset

    @property
    def flushed_offset(self) -> int:
        """Every offset below this is fsynced (Kafka's recovery point)."""
        return self._flushed_offset

    @property
    def high_watermark(self) -> int:
        """Offsets below this are visible: the flushed offset, or the end with flush.on.ack off."""
        if self.config.flush_on_ack:
            return self._flushed_offset
        return self._log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """read_committed bound: the first offset of the oldest open transaction (at least the
        log start offset, as Kafka clamps it), capped by the high watermark."""
        hw = self.high_watermark
        first_unstable = self.producer_state.first_unstable_offset
        if first_unstable is None:
            return hw
        return min(hw, max(first_unstable, self._log_start_offset))

    def _visible_offsets(self) -> tuple[int, int, int, bool]:
        """What bounds a fetch: log start, high watermark, last stable offset, offline."""
        return (
            self._log_start_offset,
            self.high_watermark,
            self.last_stable_offset,
            self.failed is not None,
        )

    def publish_offsets(self) -> None:
        """Call `offsets_listener(self)` if the visible offsets changed since the last call.

        On the event loop only: the log calls it after changing them there; the group committer
        calls it after an fsync round (which moves the high watermark in a worker thread)."""
        visible = self._visible_offsets()
        if visible != self._published:
            self._published = visible
            if self.offsets_listener is not None:
                self.offsets_listener(self)

    @property
    def live_producer_count(self) -> int:
        """Number of producer ids with state on this partition (a metric)."""
        return len(self.producer_state)

    def active_producers(self) -> list[ProducerInfo]:
        """Every live producer's id, epoch, last sequence, last timestamp, coordinator epoch and
        open transaction's first offset (-1 if none), for DescribeProducers."""
        return self.producer_state.active_producers()

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Drop producers idle for `producer.id.expiration.ms` (none with an open transaction);
        the broker calls it every `producer.id.expiration.check.interval.ms`."""
        now = wall_clock_ms() if now_ms is None else now_ms
        return self.producer_state.remove_expired(now)

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

    @property
    def size_bytes(self) -> int:
        """Total bytes of all `.log` files."""
        return sum(segment.size for segment in self._segments)

    @property
    def segments(self) -> Sequence[LogSegment]:
        """The segments, oldest first (read-only view for tests and tools)."""
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        """The segment appends go to."""
        return self._segments[-1]

    def update_config(self, config: LogConfig) -> None:
        """Apply changed topic configs (index sizes apply to segments created from now on)."""
        self.config = config
        for segment in self._segments:
            segment.config = config
        self.publish_offsets()  # flush.on.ack decides what the high watermark is

    # -- append --------------------------------------------------------------------------------

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

    def replace_segments(
        self, old: Sequence[LogSegment], new: LogSegment, crash: CrashHook | None = None
    ) -> bool:
        """Swap the cleaner's `new` segment in for the consecutive segments `old` (on the
        event loop; `log.cleaner.swap`). False, and nothing changed, when `old` are no longer
        consecutive segments of this log (retention or a truncation got there first)."""
        with self._flush_lock:
            index = next((i for i, s in enumerate(self._segments) if s is old[0]), None)
            if index is None:
                return False
            current = self._segments[index : index + len(old)]
            if len(current) != len(old) or any(
                a is not b for a, b in zip(current, old, strict=True)
            ):
                return False
            swap_in(self.dir_path, old, new, crash)
            with self._lock:
                self._segments[index : index + len(old)] = [new]
                self._base_offsets[index : index + len(old)] = [new.base_offset]
                self._unflushed = [s for s in self._unflushed if s not in old]
        return True

    def _go_offline(self, exc: OSError, action: str) -> None:
        self.failed = exc
        logger.error("log %s is offline after a failed %s: %s", self.name, action, exc)

    # -- flush (group-commit worker thread) ----------------------------------------------------

    def flush(self) -> int:
        """fsync everything appended so far; returns the offset now covered. Thread-safe.

        Rolled segments get their `.log` and indexes fsynced, the active one its `.log`
        (fdatasync); the directory is fsynced when segments were created. Raises OSError (and
        takes the log offline) when an fsync fails.
        """
        with self._flush_lock:
            with self._lock:
                target = self._log_end_offset
                rolled, self._unflushed = self._unflushed, []
                active = self._segments[-1]
                dir_dirty, self._dir_dirty = self._dir_dirty, False
            if self.failed is not None:
                raise self.failed
            try:
                for segment in rolled:
                    segment.flush(indexes=True)
                active.flush(indexes=False)
                if dir_dirty:
                    fsync_dir(self.dir_path)
            except OSError as exc:
                self._go_offline(exc, "fsync")
                raise
            if target > self._flushed_offset:
                self._flushed_offset = target
            self.last_flush_ms = wall_clock_ms()
            return target

    @property
    def has_rolled_unflushed(self) -> bool:
        """True while a rolled segment still waits for its fsync."""
        return bool(self._unflushed)

    @property
    def unflushed_messages(self) -> int:
        """Offsets appended since the last flush (for `flush.messages`)."""
        return self._log_end_offset - self._flushed_offset

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

    def _read_segments(self, fetch_offset: int, max_bytes: int, upper: int, min_one: bool):
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

    # -- truncation ----------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch at or after the one containing `offset` (recovery, tests).

        The log end offset becomes the base offset of that batch (a batch is never split).
        """
        if offset >= self._log_end_offset:
            return
        with self._flush_lock:
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                with self._lock:
                    doomed = self._segments.pop()
                    self._base_offsets.pop()
                doomed.delete()
            segment = self._segments[-1]
            position = segment.translate_offset(offset)
            if position is not None:
                segment.truncate_to_position(position)
            segment.flush(indexes=True)
            with self._lock:
                self._unflushed = [s for s in self._unflushed if s in self._segments]
                self._log_end_offset = max(segment.next_offset, segment.base_offset)
                self._flushed_offset = min(self._flushed_offset, self._log_end_offset)
                self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
        self._load_producer_state()
        self.publish_offsets()
        logger.info("truncated %s to offset %d", self.name, self._log_end_offset)

    # -- load and close ------------------------------------------------------------------------

    def _load_producer_state(self) -> None:
        """Rebuild producer state and the untrusted `.txnindex` files (`log.producer_replay`)."""
        load_producer_state(
            self.producer_state,
            self.dir_path,
            self._segments,
            self._log_end_offset,
            self._replay_bound,
            wall_clock_ms(),
            self.name,
        )
        self._replay_bound = None

    def segment_shapes(self) -> dict[int, SegmentShape] | None:
        """Each segment's size and last batch position by base offset, for the clean-shutdown
        record (None when a header on the way is corrupt: the next start then recovers)."""
        try:
            return {s.base_offset: segment_shape(s) for s in self._segments}
        except CorruptRecordError:
            return None

    def close(self) -> None:
        """Flush, seal the active segment's time index, fsync the indexes, snapshot the
        producer state at the log end, close every file."""
        if self.failed is None:
            try:
                self.active_segment.seal_time_index()
                self.flush()
                self.active_segment.flush(indexes=True)
            except OSError:
                pass  # already logged and recorded by flush
        if self.failed is None:
            take_snapshot(self.producer_state, self.dir_path, self._log_end_offset, self.name)
        with self._flush_lock:
            for segment in self._segments:
                segment.close()

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.name!r}, start={self._log_start_offset}, "
            f"end={self._log_end_offset}, hw={self.high_watermark})"
        )
