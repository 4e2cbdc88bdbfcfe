"""A coordinator's internal topic in this broker's logs (`__consumer_offsets`,
`__transaction_state`): its partition count, which partition holds a key, and its creation.

The topic is created on first use with the coordinator's partition count and configs (always
compacted); once it exists, its own partition count decides which partition holds a key, as
Kafka reads the count from the topic's metadata (`coordinator_partition`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from onceflow.coordinator.partitioning import coordinator_partition
from onceflow.log.manager import LogManager
from onceflow.protocol.errors import ErrorCode

__all__ = ["CoordinatorTopic"]

log = logging.getLogger("onceflow.coordinator")


class CoordinatorTopic:
    """Topic `name`, made with `partitions` partitions and `configs` when first needed."""

    def __init__(
        self, logs: LogManager, name: str, partitions: int, configs: Mapping[str, str]
    ) -> None:
        self.logs = logs
        self.name = name
        self._partitions = partitions
        self._configs = {"cleanup.policy": "compact", **configs}

    @property
    def num_partitions(self) -> int:
        """Partitions of the topic (its real count once it exists, else the configured one)."""
        info = self.logs.topic(self.name)
        return info.partitions if info is not None else self._partitions

    def partition_for(self, key: str) -> int:
        """The partition holding `key` (a group id or transactional id; Kafka's
        `partitionFor`: `Utils.abs(hashCode) % partitions`)."""
        return coordinator_partition(key, self.num_partitions)

    def ensure(self) -> ErrorCode:
        """Create the topic if it does not exist; NONE, or COORDINATOR_NOT_AVAILABLE."""
        if self.logs.topic(self.name) is not None:
            return ErrorCode.NONE
        result = self.logs.create_topic(self.name, self._partitions, self._configs)
        if result.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            log.error("cannot create %s: %s %s", self.name, result.error.name, result.message)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        log.info("created %s with %d partitions", self.name, self.num_partitions)
        return ErrorCode.NONE
