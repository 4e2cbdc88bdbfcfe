"""Opening a partition's segments, and segment recovery: validate batches, cut a torn or
corrupt tail, rebuild the indexes.

`load_segments` runs when `PartitionLog` opens: it removes leftovers of crashes from the
directory (`scan_directory`), opens every segment and recovers every segment that may hold
unflushed data (after an unclean shutdown: the segments from the recovery point on), any
segment whose index files are missing or fail their sanity check (including a last `.index`
entry off a batch boundary), and, after a clean shutdown, any segment whose size or last batch
differs from what the shutdown recorded (`SegmentShape`: a torn or foreign write since); a
truncated tail drops the segments after it. A scan reads the `.log` in large chunks and checks
each batch: length bounds, magic 2, CRC32C, offsets increasing (base offset at or after
the previous batch's next offset and the segment base, last offset delta >= 0, relative offsets
within int32). The first batch failing a check and everything after it is truncated; the
indexes are rebuilt from the valid batches with the same rule appends use. The segment's
aborted-transaction index is emptied here and refilled by the producer-state replay that follows
(`log.producer_replay`), which always covers every recovered segment.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from onceflow.log.cleaner.swap import complete_swaps
from onceflow.log.config import MAX_INT32, LogConfig
from onceflow.log.fsutil import fsync_dir
from onceflow.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    BatchInfo,
    LogSegment,
    parse_segment_stem,
    segment_file_stem,
)
from onceflow.records.batch import (
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    iter_batches,
    parse_header,
    split_complete_batches,
    verify_crc,
)
from onceflow.records.errors import CorruptRecordError

logger = logging.getLogger("onceflow.log")

READ_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class SegmentRecovery:
    """Outcome of `recover_segment`."""

    valid_bytes: int
    truncated_bytes: int
    next_offset: int
    batches: int
    # why the tail was cut ("torn batch at end of file", "CRC mismatch", ...); None if not cut
    reason: str | None


@dataclass(frozen=True)
class SegmentShape:
    """What a clean shutdown records of a segment: its size and its last batch's position."""

    size: int
    last_batch_position: int


@dataclass(frozen=True)
class LoadedSegments:
    """Outcome of `load_segments`."""

    segments: list[LogSegment]  # by base offset, never empty
    # first segment whose .txnindex the producer-state replay must rebuild; None: none
    replay_bound: int | None


def load_segments(
    dir_path: str,
    config: LogConfig,
    name: str,
    recovery_point: int,
    clean_shutdown: bool,
    shutdown_segments: Mapping[int, SegmentShape] | None = None,
) -> LoadedSegments:
    """Open every segment of the partition directory `dir_path` (log `name`), recovering
    those that may hold unflushed or damaged data; an empty directory gets segment 0.

    After a clean shutdown, `shutdown_segments` (when the shutdown recorded them) is the shape
    of each segment then; a segment whose shape differs now is recovered as after a crash."""
    bases = scan_directory(dir_path)
    if not bases:
        segment = LogSegment(dir_path, 0, config, create=True)
        fsync_dir(dir_path)
        return LoadedSegments([segment], None)
    missing = {}
    for base in bases:
        stem = os.path.join(dir_path, segment_file_stem(base))
        absent = [x for x in (INDEX_SUFFIX, TIME_INDEX_SUFFIX) if not os.path.exists(stem + x)]
        missing[base] = f"{', '.join(absent)} missing" if absent else None
    segments = [LogSegment(dir_path, b, config, create=False) for b in bases]
    summary = RecoverySummary(name)
    recovered: set[int] = set()
    replay_bound: int | None = None
    next_offset = 0
    for i, segment in enumerate(segments):
        is_last = i == len(segments) - 1
        next_base = None if is_last else segments[i + 1].base_offset
        problem = missing[segment.base_offset] or _index_problem(segment, next_base)
        if problem is None and clean_shutdown and shutdown_segments is not None:
            problem = _shape_problem(segment, shutdown_segments.get(segment.base_offset))
        unflushed = not clean_shutdown and (next_base is None or next_base > recovery_point)
        if problem is None and not unflushed:
            try:
                segment.load_state()
                next_offset = segment.next_offset
                continue
            except CorruptRecordError as exc:
                problem = str(exc)
        outcome = recover_segment(segment, next_offset)
        recovered.add(segment.base_offset)
        replay_bound = _distrust_txn_index(replay_bound, segment)
        summary.add(segment, outcome, problem)
        next_offset = segment.next_offset
        if outcome.truncated_bytes and not is_last:
            later = segments[i + 1 :]
            for doomed in later:
                doomed.delete()
            del segments[i + 1 :]
            summary.dropped_segments = len(later)
            fsync_dir(dir_path)
            break
    summary.log()
    for segment in segments:
        if segment.base_offset in recovered:
            continue  # its .txnindex was emptied; the producer-state replay refills it
        problem = segment.txn_index.load()
        if problem is not None:
            logger.warning(
                "cut the .txnindex of segment %d of %s (%s); rebuilding it from the log",
                segment.base_offset,
                name,
                problem,
            )
            replay_bound = _distrust_txn_index(replay_bound, segment)
    return LoadedSegments(segments, replay_bound)


def _distrust_txn_index(replay_bound: int | None, segment: LogSegment) -> int | None:
    """The replay bound moved to at or before `segment` (its .txnindex is rebuilt from the
    log)."""
    if replay_bound is None or segment.base_offset < replay_bound:
        return segment.base_offset
    return replay_bound


def segment_shape(segment: LogSegment) -> SegmentShape:
    """The shape a clean shutdown records for `segment` (cheap: scans from the last index
    entry). Raises CorruptRecordError if a header on the way is corrupt."""
    return SegmentShape(segment.size, segment.last_batch_position())


def _shape_problem(segment: LogSegment, recorded: SegmentShape | None) -> str | None:
    """Why `segment` differs from the shape the clean shutdown recorded, or None.

    Reads one batch: the last one, whose header must frame the file's end and whose CRC must
    match. Changes before it (a bit flip mid-file) are met by reads, which answer
    CORRUPT_MESSAGE for the partition."""
    if recorded is None:
        return "segment not recorded by the clean shutdown"
    if segment.size != recorded.size:
        return f"size {segment.size} differs from {recorded.size} at clean shutdown"
    if segment.size == 0:
        return None
    data = segment.read_at(recorded.last_batch_position, segment.size)
    try:
        header = parse_header(data)
    except CorruptRecordError as exc:
        return f"last batch unreadable: {exc}"
    if recorded.last_batch_position + header.total_size != segment.size:
        return "last batch does not end the file"
    if header.magic != MAGIC or not verify_crc(memoryview(data), header):
        return "last batch fails its CRC"
    return None


def _index_problem(segment: LogSegment, next_base: int | None) -> str | None:
    """Why `segment`'s index files cannot be trusted, or None."""
    if not segment.offset_index.load():
        return "offset index size is not a whole number of entries"
    if not segment.time_index.load():
        return "time index size is not a whole number of entries"
    problem = segment.offset_index.sanity_check(segment.size)
    if problem is None:
        bound = segment.base_offset + 2**31 if next_base is None else next_base
        problem = segment.time_index.sanity_check(bound)
    if problem is None and next_base is not None:
        if segment.offset_index.last_entry()[0] >= next_base:
            problem = f"{INDEX_SUFFIX} points past the next segment"
    if problem is None:
        key, position = segment.offset_index.last_entry()
        if position and segment.indexed_position(key) != position:
            problem = f"last entry of {INDEX_SUFFIX} is not at a batch boundary"
    return problem


def scan_directory(dir_path: str) -> list[int]:
    """Base offsets of the segments in `dir_path`; finishes an interrupted cleaner swap and
    removes leftovers of crashes."""
    complete_swaps(dir_path)
    bases: set[int] = set()
    names = os.listdir(dir_path)
    for name in names:
        base = parse_segment_stem(name)
        if base is not None and name.endswith(LOG_SUFFIX):
            bases.add(base)
    for name in names:
        path = os.path.join(dir_path, name)
        base = parse_segment_stem(name)
        orphan = (
            base is not None
            and base not in bases
            and name.endswith(SEGMENT_SUFFIXES)
            and not name.endswith(SNAPSHOT_SUFFIX)  # a shutdown snapshot at the log end
        )
        leftover = name.endswith((".deleted", ".tmp", ".cleaned", ".swap"))
        if orphan or leftover:
            logger.info("removing leftover file %s", path)
            os.unlink(path)
    return sorted(bases)


def recover_segment(segment: LogSegment, min_offset: int) -> SegmentRecovery:
    """Validate every batch of `segment`, truncate at the first invalid one, rebuild indexes.

    `min_offset` is the smallest base offset the first batch may have (the previous segment's
    next offset). The indexes are rebuilt in place and fsynced, the log truncated and fsynced.
    """
    fd = segment.fd
    file_size = os.fstat(fd).st_size
    expected = max(min_offset, segment.base_offset)
    position = 0
    infos: list[BatchInfo] = []
    reason: str | None = None
    while position < file_size and reason is None:
        chunk = os.pread(fd, min(READ_CHUNK, file_size - position), position)
        batches, reason = _split(chunk)
        if not batches and reason is None:
            # one batch larger than the chunk, or a torn batch at the end of the file
            needed = _declared_size(chunk)
            if needed is None or needed <= len(chunk) or position + needed > file_size:
                reason = "torn batch at end of file"
                break
            batches, reason = _split(os.pread(fd, needed, position))
            if not batches:
                reason = reason or "torn batch at end of file"
                break
        for header, view in batches:
            problem = _check_batch(header, view, expected, segment.base_offset)
            if problem is not None:
                reason = problem
                break
            infos.append(BatchInfo(header.last_offset, header.max_timestamp, header.total_size))
            position += header.total_size
            expected = header.last_offset + 1
    truncated = file_size - position
    _rebuild(segment, position, infos)
    return SegmentRecovery(
        valid_bytes=position,
        truncated_bytes=truncated,
        next_offset=segment.next_offset,
        batches=len(infos),
        reason=(reason or "torn batch at end of file") if truncated else None,
    )


def _split(chunk: bytes) -> tuple[list[tuple[BatchHeader, memoryview]], str | None]:
    """The whole batches at the start of `chunk`, and the framing error after them if any."""
    try:
        batches, _ = split_complete_batches(chunk)
        return batches, None
    except CorruptRecordError as exc:
        batches = []
        try:
            for item in iter_batches(chunk):
                batches.append(item)
        except CorruptRecordError:
            pass
        return batches, f"invalid batch: {exc}"


def _declared_size(chunk: bytes) -> int | None:
    """Total size the batch at the start of `chunk` declares, None if it cannot say."""
    if len(chunk) < LOG_OVERHEAD:
        return None
    length = int.from_bytes(chunk[8:12], "big", signed=True)
    if length <= 0:
        return None
    return length + LOG_OVERHEAD


def _check_batch(
    header: BatchHeader, view: memoryview, expected: int, segment_base: int
) -> str | None:
    """Why the batch is invalid for this position of the log, or None."""
    if header.last_offset_delta < 0:
        return f"negative last offset delta at offset {header.base_offset}"
    if header.base_offset < expected:
        return (
            f"non-monotonic offset {header.base_offset} after {expected - 1}"
            if expected > segment_base
            else f"offset {header.base_offset} below segment base {segment_base}"
        )
    if header.last_offset - segment_base > MAX_INT32:
        return f"offset {header.last_offset} too far from segment base {segment_base}"
    if not verify_crc(view, header):
        return "CRC mismatch"
    return None


def _rebuild(segment: LogSegment, valid_bytes: int, infos: list[BatchInfo]) -> None:
    """Truncate the log to `valid_bytes` and rewrite both indexes from `infos`."""
    if valid_bytes < os.fstat(segment.fd).st_size:
        os.ftruncate(segment.fd, valid_bytes)
    segment.size = valid_bytes
    segment.offset_index.reset()
    segment.time_index.reset()
    segment.txn_index.reset()  # refilled by the producer-state replay (log.producer_replay)
    segment.bytes_since_last_index_entry = 0
    segment.max_timestamp = -1
    segment.offset_of_max_timestamp = segment.base_offset
    segment.next_offset = segment.base_offset
    segment.rolling_based_timestamp = None
    if infos:
        segment._index_batches(0, infos)
    segment.flush(indexes=True)


class RecoverySummary:
    """Collects what recovery did to one log's segments and reports it in one log line."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.checked: list[int] = []
        self.rebuilt: list[tuple[int, str]] = []
        self.truncation: tuple[int, SegmentRecovery] | None = None
        self.dropped_segments = 0

    def add(self, segment: LogSegment, outcome: SegmentRecovery, index_problem: str | None) -> None:
        """Record the outcome for `segment` (`index_problem`: why its index was distrusted)."""
        self.checked.append(segment.base_offset)
        if index_problem is not None:
            self.rebuilt.append((segment.base_offset, index_problem))
        if outcome.truncated_bytes:
            self.truncation = (segment.base_offset, outcome)

    def log(self) -> None:
        """Write the line (nothing when no segment needed recovery)."""
        if not self.checked:
            return
        parts = []
        if self.truncation is not None:
            base, outcome = self.truncation
            parts.append(
                f"truncated {outcome.truncated_bytes} bytes of corrupt tail at offset "
                f"{outcome.next_offset} ({outcome.reason}) in segment {base}"
            )
        if self.dropped_segments:
            parts.append(f"deleted {self.dropped_segments} later segment(s)")
        if self.rebuilt:
            rebuilt = ", ".join(f"{base} ({why})" for base, why in self.rebuilt)
            parts.append(f"rebuilt indexes of segment(s) {rebuilt}")
        damaged = bool(parts)
        parts.append(
            f"checked {len(self.checked)} segment(s) from offset {self.checked[0]}"
            + ("" if damaged else ", no damage")
        )
        level = logging.WARNING if damaged else logging.INFO
        logger.log(level, "recovered %s: %s", self.name, "; ".join(parts))
