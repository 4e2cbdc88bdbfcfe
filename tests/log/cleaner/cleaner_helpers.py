"""Helpers for the cleaner tests: keyed batches, a consumer-like reader, logs to clean."""

from __future__ import annotations

from onceflow.common import NO_PRODUCER_ID
from onceflow.log.manager import LogManager
from onceflow.log.producer_state import AppendOrigin
from onceflow.records.batch import split_complete_batches
from onceflow.records.builder import BatchBuilder
from onceflow.records.control import ControlRecordType, build_control_batch, parse_control_record
from onceflow.records.record import decode_records

COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "1500",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "0",
}


def keyed_batch(
    pairs,
    *,
    pid: int = NO_PRODUCER_ID,
    epoch: int = -1,
    seq: int = -1,
    txn: bool = False,
    timestamp: int = 1_000,
    compression: int = 0,
) -> bytearray:
    """One batch of `(key, value)` records (value None: a tombstone)."""
    builder = BatchBuilder(
        compression=compression,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
    )
    for i, (key, value) in enumerate(pairs):
        builder.append(timestamp + i, key, value)
    return builder.build()


def end_txn(log, pid: int, epoch: int, *, abort: bool, timestamp: int = 2_000):
    """Append a COMMIT or ABORT marker for `pid` as the coordinator would."""
    kind = ControlRecordType.ABORT if abort else ControlRecordType.COMMIT
    marker = build_control_batch(pid, epoch, kind, 0, timestamp)
    return log.append(marker, origin=AppendOrigin.COORDINATOR)


def compacted_manager(path, **overrides) -> LogManager:
    manager = LogManager(str(path), {})
    manager.start()
    if manager.topic("c") is None:
        manager.create_topic("c", 1, {**COMPACTED, **overrides})
    return manager


def log_batches(log):
    """`(header, batch)` of every batch of `log`, from its start to its end."""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        batches = split_complete_batches(log.read(offset, 10**8).records)[0]
        if not batches:
            return
        for header, data in batches:
            yield header, data
            offset = header.last_offset + 1


def read_view(log, *, committed: bool, drop_aborted: bool | None = None) -> dict[bytes, bytes]:
    """Latest value per key as a consumer would build it from the whole log (tombstones delete
    the key): up to the last stable offset when `committed`, else the high watermark; records
    of aborted transactions dropped (default: when `committed`) as the Java consumer drops
    them, from the aborted-transaction list a fetch returns."""
    drop = committed if drop_aborted is None else drop_aborted
    upper = log.last_stable_offset if committed else log.high_watermark
    aborted = sorted(
        log.collect_aborted_transactions(log.log_start_offset, upper), key=lambda e: e[1]
    )
    aborted_pids: set[int] = set()
    view: dict[bytes, bytes] = {}
    offset = log.log_start_offset
    while offset < upper:
        result = log.read(offset, 10**7, upper)
        assert result.error == 0
        batches = split_complete_batches(result.records)[0]
        if not batches:
            break
        for header, data in batches:
            offset = header.last_offset + 1
            while drop and aborted and aborted[0][1] <= header.last_offset:
                aborted_pids.add(aborted.pop(0)[0])
            if header.is_control:
                if drop and header.records_count:
                    record = parse_control_record(data)
                    if record.control_type == ControlRecordType.ABORT:
                        aborted_pids.discard(header.producer_id)
                continue
            if drop and header.is_transactional and header.producer_id in aborted_pids:
                continue
            for record in decode_records(data):
                if record.value is None:
                    view.pop(record.key, None)
                else:
                    view[record.key] = record.value
    return view
