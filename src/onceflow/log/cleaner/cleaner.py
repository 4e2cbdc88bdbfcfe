"""One cleaning round of one partition log (Kafka's `Cleaner.clean`).

The cleanable part of a log runs from its first segment to the first uncleanable offset: the
smallest of the active segment's base offset, the base of the segment holding the last stable
offset (so nothing of an open transaction, nor above the high watermark, is cleaned), and the
base of the first segment with a record newer than `min.compaction.lag.ms`. Only whole
segments below it are cleaned. Its dirty section starts at the first dirty offset (the end of
the previous round, `LogCleanerManager`'s checkpoint); the dirty ratio is the dirty section's
bytes over the cleanable part's bytes.

A round builds the offset map of the dirty section (`offset_map`), then rewrites the cleanable
segments in groups (consecutive segments whose sizes add up to at most `segment.bytes`, their
offsets within 2**31 of the group's base) into one new segment per group, keeping a record
when it is the latest of its key, is not in an aborted transaction, and is not a tombstone
past its delete horizon. Batches are copied verbatim unless they lose records or need a delete
horizon (`batch_rewrite`). Transaction markers go once their transaction has no record left
and their delete horizon passed (`transactions`). A batch of a producer id whose records are
all removed stays as an empty header while the producer's state still refers to it (its
5-batch window), so idempotence survives. Deviation, for the crash-safe swap: the last batch of
each group is never removed entirely (a data batch stays as an empty header, a marker
verbatim), so a cleaned segment ends at the same offset as the segments it replaces.

`prepare_round` runs on the event loop (it reads the offsets and producer state),
`CleaningRound.write` in a child process (`cleaner.child`, given plain data: paths, offsets,
the aborted transactions) or a worker thread (the group's segments are immutable), `swap`
back on the event loop (`PartitionLog.replace_segments`, `cleaner.swap`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from onceflow.common import NO_PRODUCER_ID
from onceflow.log.cleaner.batch_rewrite import rebuild_batch
from onceflow.log.cleaner.offset_map import OffsetMap, build_offset_map, iter_batches_of
from onceflow.log.cleaner.throttler import Throttler
from onceflow.log.cleaner.transactions import CleanedTransactions
from onceflow.log.config import MAX_INT32, LogConfig
from onceflow.log.segment import BatchInfo, LogSegment
from onceflow.records.batch import BatchHeader
from onceflow.records.record_scan import ScannedRecords, scan_batch

CLEANED_SUFFIX = ".cleaned"
WRITE_CHUNK = 1024 * 1024


@dataclass
class CleanerStats:
    """What one round did (summed into the cleaner's metrics)."""

    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_removed: int = 0
    batches_rewritten: int = 0


@dataclass(frozen=True)
class CleanableRange:
    """The cleanable part of a log: `[log start, first_uncleanable)`, dirty from
    `first_dirty`; byte counts over whole segments."""

    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int

    @property
    def dirty_ratio(self) -> float:
        """Dirty bytes over cleanable bytes (0 when nothing is cleanable)."""
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def cleanable_range(log: Any, first_dirty: int, now_ms: int) -> CleanableRange:
    """The cleanable part of `log` (a `PartitionLog`) for a round at `now_ms`."""
    segments = log.segments
    bound = min(log.last_stable_offset, log.high_watermark, segments[-1].base_offset)
    lag = log.config.min_compaction_lag_ms
    first_uncleanable = segments[0].base_offset
    for i, segment in enumerate(segments[:-1]):
        next_base = segments[i + 1].base_offset
        if next_base > bound:
            break
        if lag > 0 and segment.max_timestamp >= 0 and now_ms - segment.max_timestamp < lag:
            break
        first_uncleanable = next_base
    first_dirty = min(max(first_dirty, log.log_start_offset), first_uncleanable)
    clean = dirty = 0
    for i, segment in enumerate(segments[:-1]):
        if segments[i + 1].base_offset > first_uncleanable:
            break
        if segments[i + 1].base_offset <= first_dirty:
            clean += segment.size
        else:
            dirty += segment.size
    return CleanableRange(first_dirty, first_uncleanable, clean, dirty)


def group_segments(segments: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    """Consecutive segments whose sizes add up to at most `max_bytes`, offsets within int32."""
    groups: list[list[LogSegment]] = []
    for segment in segments:
        if groups:
            group = groups[-1]
            size = sum(s.size for s in group) + segment.size
            if size <= max_bytes and segment.next_offset - 1 - group[0].base_offset <= MAX_INT32:
                group.append(segment)
                continue
        groups.append([segment])
    return groups


@dataclass
class CleaningRound:
    """A prepared round: what it cleans and the state it was prepared with."""

    # the PartitionLog (None in a child process, `cleaner.child`); not named, because
    # log.partition imports the cleaner's swap (a type import would close a cycle the
    # import-graph test refuses)
    log: Any
    range: CleanableRange
    groups: list[list[LogSegment]]
    aborted: list[tuple[int, int]]
    window_offsets: frozenset[tuple[int, int]]  # (producer id, last offset) of window batches
    now_ms: int
    stats: CleanerStats = field(default_factory=CleanerStats)
    cleaned: list[LogSegment] = field(default_factory=list)
    throttler: Throttler = field(default_factory=lambda: Throttler(float("inf")))

    def write(self) -> list[LogSegment]:
        """Write one `.cleaned` segment per group (fsynced); worker-thread safe."""
        return self.write_to(self.log.dir_path, self.log.config)

    def write_to(self, dir_path: str, config: LogConfig) -> list[LogSegment]:
        """`write` for the log in `dir_path` with `config` (what a child process knows of it,
        `cleaner.child`)."""
        rng = self.range
        start = self.groups[0][0].base_offset
        dirty = [s for g in self.groups for s in g if s.next_offset > rng.first_dirty]
        offset_map = build_offset_map(dirty, rng.first_dirty, rng.first_uncleanable, self.aborted)
        txns = CleanedTransactions(self.aborted)
        for group in self.groups:
            self.cleaned.append(self._clean_group(dir_path, config, group, offset_map, txns, start))
        return self.cleaned

    def discard(self) -> None:
        """Delete the `.cleaned` segments written so far (an aborted round)."""
        for segment in self.cleaned:
            segment.delete()
        self.cleaned = []

    def _clean_group(
        self,
        dir_path: str,
        config: LogConfig,
        group: list[LogSegment],
        offset_map: OffsetMap,
        txns: CleanedTransactions,
        start: int,
    ) -> LogSegment:
        out = LogSegment(
            dir_path, group[0].base_offset, config, create=True, file_suffix=CLEANED_SUFFIX
        )
        pending = bytearray()
        infos: list[BatchInfo] = []
        last = group[-1].next_offset - 1
        for segment in group:
            for header, data in iter_batches_of(segment, start):
                self.stats.bytes_read += header.total_size
                self.throttler.maybe_throttle(header.total_size)
                kept = self._filter(
                    header, data, offset_map, txns, config, header.last_offset == last
                )
                if kept is None:
                    continue
                infos.append(BatchInfo(header.last_offset, header.max_timestamp, len(kept)))
                pending += kept
                if len(pending) >= WRITE_CHUNK:
                    out.append(pending, infos)
                    pending, infos = bytearray(), []
        if pending:
            out.append(pending, infos)
        for segment in group:
            for entry in segment.txn_index.entries:
                if entry.last_offset > out.txn_index.last_offset:
                    out.txn_index.append(entry)
        out.seal_time_index()
        out.flush(indexes=True)
        out.release_index_files()  # no longer written; swapped in as a rolled segment
        self.stats.bytes_written += out.size
        return out

    def _filter(
        self,
        header: BatchHeader,
        data: bytes,
        offset_map: OffsetMap,
        txns: CleanedTransactions,
        config: LogConfig,
        is_last: bool,
    ) -> bytes | bytearray | None:
        """The bytes to keep for one batch (the batch itself, a rewrite, or None)."""
        pid = header.producer_id
        now = self.now_ms
        horizon_passed = header.has_delete_horizon and now >= header.base_timestamp
        self.stats.records_read += header.records_count
        if header.is_control:
            if pid == NO_PRODUCER_ID or txns.marker(pid, header.base_offset):
                return data
            if horizon_passed and not is_last:
                self.stats.records_removed += header.records_count
                return None
            if header.has_delete_horizon:
                return data
            self.stats.batches_rewritten += 1
            marker = scan_batch(data)
            every = range(len(marker.keys))
            return rebuild_batch(header, marker, every, now + config.delete_retention_ms)
        scanned: ScannedRecords | None = None
        kept: list[int]
        if header.is_transactional and txns.data_batch(pid, header.base_offset):
            kept, tombstones = [], False
        elif offset_map.covers(header):
            kept, tombstones = _kept_by_map(header, offset_map, horizon_passed)
        else:
            scanned = scan_batch(data)
            kept, tombstones = _kept_by_scan(header, scanned, offset_map, horizon_passed)
        self.stats.records_removed += header.records_count - len(kept)
        if kept and header.is_transactional:
            txns.kept_data(pid)
        needs_horizon = tombstones and not header.has_delete_horizon
        if len(kept) == header.records_count and not needs_horizon:
            return data  # verbatim: every record stays
        if not kept:
            if is_last:  # an empty header keeps the group's last offset
                self.stats.batches_rewritten += 1
                return rebuild_batch(header, None, [])
            if pid == NO_PRODUCER_ID or (pid, header.last_offset) not in self.window_offsets:
                return None
        self.stats.batches_rewritten += 1
        if kept and scanned is None:  # kept holds offsets: find their records
            scanned = scan_batch(data)
            wanted = set(kept)
            base = header.base_offset
            kept = [i for i, delta in enumerate(scanned.offset_deltas) if base + delta in wanted]
        horizon = now + config.delete_retention_ms if needs_horizon else None
        return rebuild_batch(header, scanned, kept, horizon)


def _kept_by_map(
    header: BatchHeader, offset_map: OffsetMap, horizon_passed: bool
) -> tuple[list[int], bool]:
    """The offsets of a covered dirty batch that stay, read off the map, and whether a tombstone
    is among them."""
    kept = offset_map.latest_in(header.base_offset, header.last_offset)
    dead = offset_map.tombstones
    if horizon_passed:
        kept = [offset for offset in kept if offset not in dead]
        return kept, False
    return kept, any(offset in dead for offset in kept)


def _kept_by_scan(
    header: BatchHeader, scanned: ScannedRecords, offset_map: OffsetMap, horizon_passed: bool
) -> tuple[list[int], bool]:
    """The indexes of a batch's records that stay, from its scanned keys, and whether a
    tombstone is among them."""
    kept: list[int] = []
    tombstones = False
    base = header.base_offset
    for index, (delta, key, tombstone) in enumerate(
        zip(scanned.offset_deltas, scanned.keys, scanned.tombstones, strict=True)
    ):
        if key is not None and offset_map.get(key, -1) > base + delta:
            continue
        if tombstone:
            if horizon_passed:
                continue
            tombstones = True
        kept.append(index)
    return kept, tombstones


def prepare_round(log: Any, first_dirty: int, now_ms: int) -> CleaningRound | None:
    """A round for `log` (on the event loop), None when nothing is cleanable."""
    rng = cleanable_range(log, first_dirty, now_ms)
    live = log.segments
    segments = [
        s for i, s in enumerate(live[:-1]) if live[i + 1].base_offset <= rng.first_uncleanable
    ]
    if not segments or rng.dirty_bytes == 0:
        return None
    start = segments[0].base_offset
    aborted = log.collect_aborted_transactions(start, rng.first_uncleanable)
    window = frozenset(
        (pid, batch.last_offset)
        for pid, entry in log.producer_state.producers.items()
        for batch in entry.batches
    )
    groups = group_segments(segments, log.config.segment_bytes)
    return CleaningRound(log, rng, groups, aborted, window, now_ms)
