"""Partition assignors for consumer groups (pure; the group leader runs one after JoinGroup).

`assign(partitions_per_topic, subscriptions) -> {member_id: [TopicPartition, ...]}` where
`subscriptions` maps each member id to the topics it subscribed to. As in Kafka, members are
ordered by member id, so every leader computes the same answer from the same input:

- `RangeAssignor` ("range", Kafka's default): per topic, the members subscribed to it share
  its partitions in contiguous ranges; the first `partitions % members` get one more.
- `RoundRobinAssignor` ("roundrobin"): every subscribed partition, ordered by topic then
  partition, is dealt in turn to the next member (in member order) subscribed to its topic.

`ASSIGNORS` resolves Kafka's strategy names and class names to an assignor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Protocol

from onceflow.common import TopicPartition

__all__ = ["ASSIGNORS", "Assignor", "RangeAssignor", "RoundRobinAssignor", "assignor_for"]

Assignment = dict[str, list[TopicPartition]]


class Assignor(Protocol):
    name: str

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Sequence[str]]
    ) -> Assignment: ...


class RangeAssignor:
    """Kafka's `RangeAssignor`."""

    name = "range"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Sequence[str]]
    ) -> Assignment:
        """Contiguous ranges of each topic's partitions per subscribed member."""
        result: Assignment = {member: [] for member in subscriptions}
        for topic in sorted({t for topics in subscriptions.values() for t in topics}):
            count = partitions_per_topic.get(topic, 0)
            members = sorted(m for m, topics in subscriptions.items() if topic in topics)
            if not count or not members:
                continue
            per_member, extra = divmod(count, len(members))
            start = 0
            for index, member in enumerate(members):
                size = per_member + (1 if index < extra else 0)
                result[member].extend(TopicPartition(topic, p) for p in range(start, start + size))
                start += size
        return result


class RoundRobinAssignor:
    """Kafka's `RoundRobinAssignor`."""

    name = "roundrobin"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Sequence[str]]
    ) -> Assignment:
        """Deal every subscribed partition in turn to the members subscribed to its topic."""
        result: Assignment = {member: [] for member in subscriptions}
        members = sorted(subscriptions)
        if not members:
            return result
        topics = sorted({t for topics in subscriptions.values() for t in topics})
        turn = 0
        for topic in topics:
            for partition in range(partitions_per_topic.get(topic, 0)):
                for _ in range(len(members)):
                    member = members[turn % len(members)]
                    turn += 1
                    if topic in subscriptions[member]:
                        result[member].append(TopicPartition(topic, partition))
                        break
        return result


ASSIGNORS: Final[Mapping[str, type]] = {
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "org.apache.kafka.clients.consumer.rangeassignor": RangeAssignor,
    "org.apache.kafka.clients.consumer.roundrobinassignor": RoundRobinAssignor,
}


def assignor_for(name: str) -> Assignor | None:
    """The assignor for a strategy name or Kafka class name (case-insensitive), or None."""
    cls = ASSIGNORS.get(name.strip().lower())
    return cls() if cls is not None else None
