"""`PartitionLogBase`: one partition's segments, offsets, offsets events, flush and close.

The state every part of a `PartitionLog` (partition.py) shares: the segments of
`<data dir>/<topic>-<partition>` as recovery loaded them, the log start, end and flushed
offsets, the high watermark and last stable offset, the producer state, and whether the log is
offline. Appends (partition_append.py), reads (partition_read.py) and retention
(partition_retention.py) build on it.

`flush` runs on the group-commit worker thread (`log.durability`): it fsyncs what was written
and moves the flushed offset; with `flush.on.ack` (the default) the high watermark is the
flushed offset, so consumers never see a record that a crash could take back. Everything else
runs on the event loop.

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
from collections.abc import Callable, Mapping, Sequence

from onceflow.common import wall_clock_ms
from onceflow.log.cleaner.swap import CrashHook, swap_in
from onceflow.log.config import LogConfig
from onceflow.log.fsutil import fsync_dir, read_int_file
from onceflow.log.producer_replay import load_producer_state, take_snapshot
from onceflow.log.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ProducerInfo,
    ProducerStateManager,
)
from onceflow.log.recovery import SegmentShape, load_segments, segment_shape
from onceflow.log.segment import LogSegment
from onceflow.records.errors import CorruptRecordError

LOG_START_OFFSET_FILE = "log-start-offset"

logger = logging.getLogger("onceflow.log")

# offsets_listener(log): the visible offsets of `log` changed (called on the event loop)
OffsetsListener = Callable[["PartitionLogBase"], None]


def partition_dir_name(topic: str, partition: int) -> str:
    """Kafka's partition directory name: `<topic>-<partition>`."""
    return f"{topic}-{partition}"


class PartitionLogBase:
    """A partition's segments and offsets. Everything but `flush` runs on the event loop."""

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
        for segment in self._segments[:-1]:  # recovery and replay may have written them
            segment.release_index_files()
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
                    if segment is not active:  # (`truncate_to` may make it active again)
                        segment.release_index_files()
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
                # `segment` was just fsynced whole: the flusher must not treat the (now active)
                # segment as a rolled one
                self._unflushed = [
                    s for s in self._unflushed if s in self._segments and s is not segment
                ]
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
