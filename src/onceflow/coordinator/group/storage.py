"""The `__consumer_offsets` topic as the group coordinator uses it: create, append, read back.

The topic is created on demand (FindCoordinator, or the first write) with
`offsets.topic.num.partitions` partitions, `cleanup.policy=compact` and
`offsets.topic.segment.bytes`; when it already exists its own partition count decides which
partition holds a group (Kafka reads the count from the topic's metadata too). A write appends
one batch and `durable` waits until the group-commit flush covers it; storage errors are mapped
to the codes Kafka's coordinator answers with (tables below).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Final

from onceflow.coordinator.group.config import OFFSETS_TOPIC, GroupConfig
from onceflow.coordinator.topic import CoordinatorTopic
from onceflow.log.manager import LogManager
from onceflow.log.partition import PartitionLog
from onceflow.log.partition_append import AppendResult
from onceflow.log.producer_state import AppendOrigin
from onceflow.protocol.errors import ErrorCode
from onceflow.records.batch import BatchHeader, iter_batches

__all__ = ["COMMIT_ERRORS", "STORE_GROUP_ERRORS", "OffsetsTopic"]

logger = logging.getLogger("onceflow.coordinator.group")

_READ_CHUNK = 1 << 20

# Storage error -> what an OffsetCommit / TxnOffsetCommit answers (Kafka's storeOffsets).
COMMIT_ERRORS: Final[Mapping[ErrorCode, ErrorCode]] = MappingProxyType(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
        ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
        ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
        ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
        ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    }
)

# Storage error -> what a SyncGroup / JoinGroup answers when the group record fails
# (Kafka's storeGroup).
STORE_GROUP_ERRORS: Final[Mapping[ErrorCode, ErrorCode]] = MappingProxyType(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
        ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
        ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
        ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
        ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
    }
)


class OffsetsTopic(CoordinatorTopic):
    """Access to `__consumer_offsets` through the `LogManager`."""

    def __init__(self, logs: LogManager, config: GroupConfig) -> None:
        super().__init__(
            logs,
            OFFSETS_TOPIC,
            config.offsets_topic_num_partitions,
            {"segment.bytes": str(config.offsets_topic_segment_bytes)},
        )
        self.config = config

    def log_for(self, group_id: str) -> PartitionLog | None:
        """The log of the group's partition (creating the topic if needed), or None."""
        if self.ensure() != ErrorCode.NONE:
            return None
        return self.logs.get_log(OFFSETS_TOPIC, self.partition_for(group_id))

    @staticmethod
    def append(log: PartitionLog, batch: bytes | bytearray) -> AppendResult:
        """Append one batch with origin COORDINATOR: a transactional batch has its producer
        epoch checked but not its sequence; a batch without producer id is not checked."""
        return log.append(batch, origin=AppendOrigin.COORDINATOR)

    async def durable(self, log: PartitionLog, next_offset: int) -> ErrorCode:
        """Wait until everything below `next_offset` is flushed; NONE or KAFKA_STORAGE_ERROR."""
        return await self.logs.committer.flushed(log, next_offset)

    def partitions(self) -> Iterator[tuple[int, PartitionLog]]:
        """Every existing partition log of the topic, by index."""
        info = self.logs.topic(OFFSETS_TOPIC)
        if info is None:
            return
        for partition in range(info.partitions):
            log = self.logs.get_log(OFFSETS_TOPIC, partition)
            if log is not None:
                yield partition, log


def read_batches(log: PartitionLog) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every batch of `log` from its start to its end, in offset order (for loading)."""
    position = log.log_start_offset
    end = log.log_end_offset
    while position < end:
        result = log.read(position, _READ_CHUNK, upper_bound_offset=end)
        if result.error != ErrorCode.NONE:
            raise OSError(f"reading {log.name} at {position}: {result.error.name}")
        if not len(result.records):
            break
        for header, view in iter_batches(bytes(result.records)):
            if header.last_offset < position:
                continue
            yield header, view
            position = header.last_offset + 1
