"""Group coordinator settings, under Kafka's broker config names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from onceflow.coordinator.internal_topics import GROUP_METADATA_TOPIC
from onceflow.coordinator.partitioning import coordinator_partition

__all__ = ["OFFSETS_TOPIC", "GroupConfig"]

OFFSETS_TOPIC = GROUP_METADATA_TOPIC


@dataclass(frozen=True)
class GroupConfig:
    """What the group coordinator reads from the broker configuration."""

    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1  # group.max.size
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions
    offsets_topic_segment_bytes: int = 104_857_600  # offsets.topic.segment.bytes
    offsets_retention_ms: int = 10_080 * 60_000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    new_member_join_timeout_ms: int = 300_000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> GroupConfig:
        """Build from broker properties (Kafka's dotted names; missing keys keep defaults)."""

        def get(name: str, default: int) -> int:
            value = props.get(name)
            return default if value is None else int(str(value))

        d = cls()
        return cls(
            min_session_timeout_ms=get("group.min.session.timeout.ms", d.min_session_timeout_ms),
            max_session_timeout_ms=get("group.max.session.timeout.ms", d.max_session_timeout_ms),
            initial_rebalance_delay_ms=get(
                "group.initial.rebalance.delay.ms", d.initial_rebalance_delay_ms
            ),
            max_size=get("group.max.size", d.max_size),
            offsets_topic_num_partitions=get(
                "offsets.topic.num.partitions", d.offsets_topic_num_partitions
            ),
            offsets_topic_segment_bytes=get(
                "offsets.topic.segment.bytes", d.offsets_topic_segment_bytes
            ),
            offsets_retention_ms=get("offsets.retention.minutes", 10_080) * 60_000,
            offsets_retention_check_interval_ms=get(
                "offsets.retention.check.interval.ms", d.offsets_retention_check_interval_ms
            ),
            offset_metadata_max_bytes=get("offset.metadata.max.bytes", d.offset_metadata_max_bytes),
        )

    def partition_for(self, group_id: str) -> int:
        """The `__consumer_offsets` partition that holds `group_id` (Kafka's `partitionFor`)."""
        return coordinator_partition(group_id, self.offsets_topic_num_partitions)
