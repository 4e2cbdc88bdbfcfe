"""Rebuild a partition's producer state on open: newest usable snapshot, then replay the log.

`load_producer_state` runs after segment recovery (and after `truncate_to`):

1. Snapshots above the recovered log end (data a crash or a truncation took back) or below
   the first segment are deleted.
2. The newest snapshot at or below the replay bound is read. The bound is the log end, or the
   base of the first segment whose `.txnindex` could not be trusted (recovered or damaged), so
   the replay re-creates its aborted-transaction entries. A corrupt or unreadable snapshot is
   reported in one log line, deleted, and the next older one is tried; with none left, the
   replay starts at the first segment. Entries already expired are not loaded.
3. Every batch with a producer id from the snapshot offset on is replayed through
   `ProducerAppendInfo` with origin REPLICATION (no checks: the log holds what was accepted).
   Control batches complete transactions; an aborted one missing from its segment's
   `.txnindex` is appended there.

`take_snapshot` writes `<offset>.snapshot` and keeps the newest `SNAPSHOTS_TO_KEEP`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from onceflow.common import NO_PRODUCER_ID
from onceflow.log.producer_append import index_completed_txn
from onceflow.log.producer_snapshot import (
    CorruptSnapshotError,
    delete_snapshot,
    list_snapshot_offsets,
    read_snapshot,
    write_snapshot,
)
from onceflow.log.producer_state import AppendOrigin, ProducerStateManager
from onceflow.log.segment import LogSegment
from onceflow.records.batch import BatchHeader
from onceflow.records.control import ControlRecordType, parse_control_record
from onceflow.records.errors import CorruptRecordError

logger = logging.getLogger("onceflow.log")

SNAPSHOTS_TO_KEEP = 3


def load_producer_state(
    state: ProducerStateManager,
    dir_path: str,
    segments: Sequence[LogSegment],
    log_end_offset: int,
    replay_bound: int | None,
    now_ms: int,
    name: str,
) -> int:
    """Fill `state` from the newest usable snapshot plus the log; returns batches replayed."""
    state.clear()
    first_base = segments[0].base_offset
    bound = log_end_offset if replay_bound is None else min(log_end_offset, replay_bound)
    offsets = list_snapshot_offsets(dir_path)
    for offset in offsets:
        if offset > log_end_offset or offset < first_base:
            delete_snapshot(dir_path, offset)
    start = first_base
    loaded_from: int | None = None
    for offset in reversed(offsets):
        if offset > bound or offset < first_base:
            continue
        try:
            entries = read_snapshot(dir_path, offset)
        except (CorruptSnapshotError, OSError) as exc:
            logger.warning(
                "ignoring producer-state snapshot %d of %s (%s); trying an older one",
                offset,
                name,
                exc,
            )
            delete_snapshot(dir_path, offset)
            continue
        for entry in entries:
            if not state.is_expired(entry, now_ms):
                state.load_entry(entry)
        start = loaded_from = offset
        break
    replayed = replay(state, segments, start, name)
    state.map_end_offset = log_end_offset
    if replayed or start != log_end_offset:
        logger.info(
            "loaded producer state of %s: %d producer(s), snapshot offset %s, replayed %d "
            "batch(es) up to %d",
            name,
            len(state),
            "none" if loaded_from is None else loaded_from,
            replayed,
            log_end_offset,
        )
    return replayed


def replay(
    state: ProducerStateManager, segments: Sequence[LogSegment], start: int, name: str
) -> int:
    """Apply every producer batch at or after `start` to `state`; returns how many."""
    count = 0
    for segment in segments:
        if segment.next_offset <= start:
            continue
        position = 0
        if segment.base_offset < start:
            found = segment.translate_offset(start)
            if found is None:
                continue
            position = found
        for batch_position, header in segment.iter_headers(position):
            if header.producer_id == NO_PRODUCER_ID or header.base_offset < start:
                continue
            info = state.prepare_update(header.producer_id, AppendOrigin.REPLICATION)
            if header.is_control:
                marker = read_marker(segment, batch_position, header, name)
                if marker is None:
                    continue
                info.append_end_txn_marker(
                    header.producer_epoch,
                    marker[0],
                    marker[1],
                    header.base_offset,
                    header.max_timestamp,
                )
            else:
                info.append_data_batch(
                    header.producer_epoch,
                    header.base_sequence,
                    header.last_sequence,
                    header.base_offset,
                    header.last_offset,
                    header.max_timestamp,
                    header.is_transactional,
                )
            state.update(info)
            for txn in info.completed_txns:
                index_completed_txn(state, segment, txn, rebuild=True)
            count += 1
    return count


def read_marker(
    segment: LogSegment, position: int, header: BatchHeader, name: str
) -> tuple[bool, int] | None:
    """`(is_abort, coordinator_epoch)` of the control batch at `position`, None if it is not a
    transaction marker (logged)."""
    try:
        record = parse_control_record(segment.read_at(position, header.total_size))
    except CorruptRecordError as exc:
        logger.warning(
            "skipping unreadable control batch at offset %d of %s: %s",
            header.base_offset,
            name,
            exc,
        )
        return None
    if record.coordinator_epoch is None:
        return None
    return record.control_type == ControlRecordType.ABORT, record.coordinator_epoch


def take_snapshot(state: ProducerStateManager, dir_path: str, offset: int, name: str) -> None:
    """Write `<offset>.snapshot` and delete all but the newest `SNAPSHOTS_TO_KEEP`.

    A failed write is logged, not raised: snapshots only shorten the replay on open.
    """
    try:
        write_snapshot(dir_path, offset, state.producers.values())
        for old in list_snapshot_offsets(dir_path)[:-SNAPSHOTS_TO_KEEP]:
            delete_snapshot(dir_path, old)
    except OSError as exc:
        logger.warning("could not write producer-state snapshot %d of %s: %s", offset, name, exc)
