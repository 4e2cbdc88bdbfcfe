"""Log directory administration for `AdminClient`: DescribeLogDirs (Kafka's `describeLogDirs`).

Each broker is asked about its own directories; the answer names every directory with its
error, its total and usable bytes (-1 before DescribeLogDirs v4) and the requested partitions
it holds, with their size in bytes. The functions send through the AdminClient's connections
(split off to keep admin.py readable).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from onceflow.client.admin_connections import known_code
from onceflow.client.connection import BrokerConnection
from onceflow.client.errors import raise_for_error
from onceflow.common import TopicPartition
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.describe_log_dirs import DescribeLogDirsRequest

__all__ = ["LogDirDescription", "ReplicaInfo"]


@dataclass(frozen=True)
class ReplicaInfo:
    """A partition's replica in one directory (Kafka's `ReplicaInfo`)."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True)
class LogDirDescription:
    """One log directory of a broker (Kafka's `LogDirDescription`)."""

    path: str
    error_code: ErrorCode
    replicas: dict[TopicPartition, ReplicaInfo] = field(default_factory=dict)
    total_bytes: int = -1
    usable_bytes: int = -1


def describe_log_dirs(
    conn: BrokerConnection, partitions: Iterable[TopicPartition] | None
) -> list[LogDirDescription]:
    """DescribeLogDirs of the broker behind `conn`, about `partitions` (None: all it holds). A
    refused request (CLUSTER_AUTHORIZATION_FAILED, v3+) raises its error."""
    cls = DescribeLogDirsRequest
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = [cls.DescribableLogDirTopic(topic=t, partitions=ps) for t, ps in by_topic.items()]
    response = conn.send(cls(topics=topics))
    if response.error_code != ErrorCode.NONE:
        raise_for_error(response.error_code, "DescribeLogDirs")
    out = []
    for result in response.results:
        replicas = {
            TopicPartition(t.name, p.partition_index): ReplicaInfo(
                p.partition_size, p.offset_lag, p.is_future_key
            )
            for t in result.topics
            for p in t.partitions
        }
        out.append(
            LogDirDescription(
                result.log_dir,
                known_code(result.error_code),
                replicas,
                result.total_bytes,
                result.usable_bytes,
            )  # fmt: skip
        )
    return out
