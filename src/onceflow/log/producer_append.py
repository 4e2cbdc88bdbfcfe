"""The producer-state step of `PartitionLog.append`: stage each batch, then commit after the write.

`stage_producer_batch` runs for every batch carrying a producer id, before anything is written:
a CLIENT retry of a batch still in the window yields its `DuplicateBatch`; otherwise the batch
is staged on the producer's `ProducerAppendInfo` (one per producer id per record set, so later
batches of the same set are checked against earlier ones) and an error comes back as
`(ErrorCode, message)`. `complete_producer_appends` commits the staged entries once the record
set is written and records aborted transactions in the marker segment's `.txnindex`.
"""

from __future__ import annotations

from onceflow.log.producer_state import (
    AppendOrigin,
    CompletedTxn,
    DuplicateBatch,
    ProducerAppendInfo,
    ProducerStateManager,
)
from onceflow.log.segment import LogSegment
from onceflow.log.txn_index import AbortedTxn
from onceflow.protocol.errors import ErrorCode
from onceflow.records.batch import BatchHeader
from onceflow.records.control import ControlRecordType, parse_control_record
from onceflow.records.errors import CorruptRecordError


def stage_producer_batch(
    state: ProducerStateManager,
    producers: dict[int, ProducerAppendInfo],
    header: BatchHeader,
    view: memoryview,
    first_offset: int,
    last_offset: int,
    timestamp: int,
    origin: AppendOrigin,
) -> DuplicateBatch | tuple[ErrorCode, str] | None:
    """Check one batch against its producer's staged state: None to go on, a DuplicateBatch to
    answer the retry, or `(error, message)` to reject the record set."""
    pid = header.producer_id
    if origin == AppendOrigin.CLIENT and not header.is_control:
        duplicate = state.find_duplicate(
            pid, header.producer_epoch, header.base_sequence, header.last_sequence
        )
        if duplicate is not None:
            return duplicate
    info = producers.get(pid)
    if info is None:
        info = producers[pid] = state.prepare_update(pid, origin)
    if header.is_control:
        try:
            marker = parse_control_record(view)
        except CorruptRecordError as exc:
            return ErrorCode.INVALID_RECORD, str(exc)
        if marker.coordinator_epoch is None:
            return ErrorCode.INVALID_RECORD, f"control type {marker.control_type} is not a marker"
        error = info.append_end_txn_marker(
            header.producer_epoch,
            marker.control_type == ControlRecordType.ABORT,
            marker.coordinator_epoch,
            first_offset,
            timestamp,
        )
    else:
        error = info.append_data_batch(
            header.producer_epoch,
            header.base_sequence,
            header.last_sequence,
            first_offset,
            last_offset,
            timestamp,
            header.is_transactional,
        )
    if error == ErrorCode.NONE:
        return None
    entry = info.updated
    return error, (
        f"{error.name}: producer {pid} epoch {header.producer_epoch} sequences "
        f"{header.base_sequence}..{header.last_sequence}; partition has epoch "
        f"{entry.producer_epoch}, last sequence {entry.last_seq}, coordinator epoch "
        f"{entry.coordinator_epoch}"
    )


def complete_producer_appends(
    state: ProducerStateManager, segment: LogSegment, producers: dict[int, ProducerAppendInfo]
) -> None:
    """After the write: commit the staged entries, index aborted transactions (OSError from the
    `.txnindex` write propagates)."""
    for info in producers.values():
        state.update(info)
    for info in producers.values():
        for txn in info.completed_txns:
            index_completed_txn(state, segment, txn, rebuild=False)


def index_completed_txn(
    state: ProducerStateManager, segment: LogSegment, txn: CompletedTxn, *, rebuild: bool
) -> None:
    """Record an aborted transaction in `segment`'s `.txnindex` (the segment of its marker),
    with the LSO right after it.

    With `rebuild` (recovery replay), an entry already there (at or before the index's last
    entry: entries are appended in marker order and a damaged file keeps a valid prefix) is
    skipped.
    """
    if not txn.is_aborted:
        return
    index = segment.txn_index
    if rebuild and txn.last_offset <= index.last_offset:
        return
    lso = state.last_stable_offset_after(txn)
    index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
