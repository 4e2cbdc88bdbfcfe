"""Transaction markers: COMMIT/ABORT control batches written to every partition of a transaction.

`TxnMarkerChannel` is the coordinator's view (Kafka's `TransactionMarkerChannelManager`): write
one `TxnMarker` (what a WriteTxnMarkers entry carries besides its partitions) per partition
and report each partition's outcome. `InProcessTxnMarkerChannel` writes
to this broker's logs (`PartitionLog.append(origin=COORDINATOR)`, then waits for the fsync); a
channel sending WriteTxnMarkers to other brokers could replace it without touching the
coordinator.

`write_marker` is the log-side entry point, shared with the KIP-664 admin abort of a hanging
transaction. When a marker lands on a `__consumer_offsets` partition the group coordinator must
materialise (commit) or drop (abort) that producer's pending transactional offsets: it registers
a `MarkerListener` with `add_marker_listener`, called once the marker is durable.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from onceflow.common import TopicPartition, wall_clock_ms
from onceflow.coordinator.internal_topics import GROUP_METADATA_TOPIC
from onceflow.log.manager import LogManager
from onceflow.log.producer_state import AppendOrigin
from onceflow.protocol.errors import ErrorCode
from onceflow.records.control import ControlRecordType, build_control_batch

__all__ = [
    "InProcessTxnMarkerChannel",
    "MarkerListener",
    "TxnMarker",
    "TxnMarkerChannel",
    "write_marker",
]

logger = logging.getLogger("onceflow.coordinator.txn")

# on_marker(partition, producer_id, commit): the group coordinator's hook, called after a
# marker for `producer_id` is durable on a `__consumer_offsets` partition
MarkerListener = Callable[[TopicPartition, int, bool], None]


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One transaction's COMMIT or ABORT marker, as written to each of its partitions."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool


class TxnMarkerChannel(Protocol):
    """Delivers transaction markers to partition leaders (here: this broker)."""

    async def write_markers(
        self, marker: TxnMarker, partitions: Iterable[TopicPartition]
    ) -> Mapping[TopicPartition, ErrorCode]:
        """Write `marker` to each partition; each partition's outcome (NONE once durable)."""
        ...


async def write_marker(
    logs: LogManager,
    tp: TopicPartition,
    marker: TxnMarker,
    listeners: Iterable[MarkerListener] = (),
) -> ErrorCode:
    """Append one COMMIT/ABORT marker to `tp` as the coordinator and wait until it is durable.

    UNKNOWN_TOPIC_OR_PARTITION when the partition is gone; the producer-state checks of the log
    may answer INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED (nothing written);
    KAFKA_STORAGE_ERROR when the log is offline. Listeners run for `__consumer_offsets`
    partitions after the marker is durable."""
    log = logs.get_log(tp.topic, tp.partition)
    if log is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    now = wall_clock_ms()
    control = ControlRecordType.COMMIT if marker.commit else ControlRecordType.ABORT
    batch = build_control_batch(
        marker.producer_id, marker.producer_epoch, control, marker.coordinator_epoch, now
    )
    result = log.append(batch, now_ms=now, origin=AppendOrigin.COORDINATOR)
    error = result.error
    if error == ErrorCode.NONE:
        error = await logs.committer.flushed(log, result.next_offset)
    if error != ErrorCode.NONE:
        return error
    if tp.topic == GROUP_METADATA_TOPIC:
        for listener in listeners:
            listener(tp, marker.producer_id, marker.commit)
    return ErrorCode.NONE


class InProcessTxnMarkerChannel:
    """Writes markers straight into this broker's partition logs, all partitions at once."""

    def __init__(self, logs: LogManager) -> None:
        self.logs = logs
        self.listeners: list[MarkerListener] = []

    def add_marker_listener(self, listener: MarkerListener) -> None:
        """Register the group coordinator's `on_marker(partition, producer_id, commit)`."""
        self.listeners.append(listener)

    async def write_markers(
        self, marker: TxnMarker, partitions: Iterable[TopicPartition]
    ) -> Mapping[TopicPartition, ErrorCode]:
        """Write `marker` to each partition concurrently; each partition's outcome."""
        ordered = sorted(partitions)
        outcomes = await asyncio.gather(
            *(write_marker(self.logs, tp, marker, self.listeners) for tp in ordered)
        )
        return dict(zip(ordered, outcomes, strict=True))
