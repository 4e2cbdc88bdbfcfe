"""`BrokerState`: everything handlers share — config, identity, logs, durability, wake-ups.

Handlers reach it as `ctx.broker`. It wraps the `LogManager` (topics and partition logs), its
`GroupCommitter`, the `HighWatermarkNotifier` for long-polling fetches, the cluster id from
`meta.properties` and the advertised address. It has no I/O of its own beyond what it
delegates, so handler tests build one on a temporary directory with `BrokerState.open`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable

from onceflow.broker.config import BrokerConfig, Listener
from onceflow.broker.meta import load_or_create
from onceflow.broker.notifier import HighWatermarkNotifier
from onceflow.log.manager import LogManager, TopicInfo, TopicResult
from onceflow.log.partition import PartitionLog

log = logging.getLogger("onceflow.broker")


class BrokerState:
    """Shared broker state; create with `open`, release with `close`."""

    def __init__(
        self,
        config: BrokerConfig,
        cluster_id: str,
        logs: LogManager,
        advertised: Listener,
    ) -> None:
        self.config = config
        self.node_id = config.node_id
        self.cluster_id = cluster_id
        self.logs = logs
        self.committer = logs.committer
        self.advertised = advertised
        self.notifier = HighWatermarkNotifier()
        self.stopping = False
        self._names_by_id: dict[uuid.UUID, str] = {}
        self.committer.add_listener(self._flushed)

    @classmethod
    def open(cls, config: BrokerConfig, advertised: Listener | None = None) -> BrokerState:
        """Load (or create) the data directory: identity, topic registry, every partition.

        Raises ConfigError for a data directory of another node, OSError for I/O failures.
        """
        meta = load_or_create(config.data_dir, config.node_id)
        logs = LogManager(config.data_dir, config.log_properties())
        logs.start()
        address = advertised or config.advertised_listener or config.listener
        return cls(config, meta.cluster_id, logs, address)

    # -- partitions ----------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The log of `topic`/`partition`, or None when it does not exist."""
        return self.logs.get_log(topic, partition)

    def appended(self, logs: Iterable[PartitionLog]) -> None:
        """Called by Produce after appending: wake fetches where data is already visible
        (logs with flush.on.ack=false expose the log end at once)."""
        for partition_log in logs:
            if not partition_log.config.flush_on_ack:
                self.notifier.notify(partition_log.topic, partition_log.partition)

    def _flushed(self, partition_log: PartitionLog) -> None:
        self.notifier.notify(partition_log.topic, partition_log.partition)

    # -- topics --------------------------------------------------------------------------------

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        """The topic with `topic_id`, or None (a cached index, rebuilt when it is stale)."""
        name = self._names_by_id.get(topic_id)
        info = self.logs.topic(name) if name is not None else None
        if info is not None and info.topic_id == topic_id:
            return info
        self._names_by_id = {t.topic_id: t.name for t in self.logs.topics()}
        name = self._names_by_id.get(topic_id)
        return self.logs.topic(name) if name is not None else None

    def auto_create_topic(self, name: str) -> TopicResult:
        """Create `name` with `num.partitions` partitions (auto.create.topics.enable)."""
        result = self.logs.create_topic(name, self.config.num_partitions)
        if result.error == 0:
            log.info("auto-created topic %s", name)
        return result

    def delete_topic(self, name: str) -> TopicResult:
        """Delete a topic and wake fetches reading it (they then see it is gone)."""
        info = self.logs.topic(name)
        result = self.logs.delete_topic(name)
        if info is not None and result.error == 0:
            for partition in range(info.partitions):
                self.notifier.notify(name, partition)
        return result

    # -- shutdown ------------------------------------------------------------------------------

    def begin_stop(self) -> None:
        """Make long-polling fetches answer now; no new waits start."""
        self.stopping = True
        self.notifier.notify_all()

    async def close(self) -> None:
        """Finish pending fsync rounds, flush and close every log (clean shutdown marker)."""
        self.begin_stop()
        await self.logs.shutdown()
