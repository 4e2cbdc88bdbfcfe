"""Batch builders for producer-state tests: idempotent, transactional and marker batches."""

from __future__ import annotations

from onceflow.records.builder import BatchBuilder
from onceflow.records.control import ControlRecordType, build_control_batch


def producer_batch(
    pid: int,
    epoch: int,
    seq: int,
    count: int = 1,
    *,
    txn: bool = False,
    timestamp: int = 1_000,
    tag: bytes = b"v",
) -> bytearray:
    """A batch of `count` records from producer `pid` starting at sequence `seq`."""
    builder = BatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn
    )
    for i in range(count):
        builder.append(timestamp + i, b"k%d" % i, tag + b"-%d" % i)
    return builder.build()


def marker(
    pid: int, epoch: int, *, abort: bool, coordinator_epoch: int = 0, timestamp: int = 2_000
):
    """A COMMIT or ABORT marker batch for `pid`."""
    kind = ControlRecordType.ABORT if abort else ControlRecordType.COMMIT
    return build_control_batch(pid, epoch, kind, coordinator_epoch, timestamp)
