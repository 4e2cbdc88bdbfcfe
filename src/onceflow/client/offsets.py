"""Committed offsets and a group member's identity: the values the consumer commits and the
transactional producer sends to a transaction (`send_offsets_to_transaction`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple, Protocol

from onceflow.common import TopicPartition

__all__ = [
    "ConsumerGroupMetadata",
    "OffsetAndMetadata",
    "OffsetItem",
    "Offsets",
    "PartitionKey",
    "normalize_offsets",
]


class OffsetAndMetadata(NamedTuple):
    """A committed offset (the next record to read), its leader epoch and metadata."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class ConsumerGroupMetadata(NamedTuple):
    """A group member's identity for `send_offsets_to_transaction` (KIP-447): the broker
    fences offsets from a member of an older generation."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class PartitionKey(Protocol):
    """Anything naming a partition by `topic` and `partition` attributes."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...


class OffsetItem(PartitionKey, Protocol):
    """A partition and an offset to commit, as confluent-kafka's `TopicPartition` carries them
    (its `metadata` and `leader_epoch` are read when present)."""

    @property
    def offset(self) -> int: ...


OffsetValue = int | OffsetAndMetadata
# the offsets `Consumer.commit` and `Producer.send_offsets_to_transaction` take: a mapping
# from a partition to an offset (one mapping type per key form: Mapping is invariant in its
# keys), or (topic, partition, offset) tuples or OffsetItems
Offsets = (
    Mapping[TopicPartition, OffsetValue]
    | Mapping[tuple[str, int], OffsetValue]
    | Mapping[PartitionKey, OffsetValue]
    | Iterable[tuple[str, int, int] | OffsetItem]
)


def normalize_offsets(offsets: Offsets) -> dict[TopicPartition, OffsetAndMetadata]:
    """Offsets to commit, from the forms the producer and consumer accept: a mapping
    `(topic, partition) -> offset | OffsetAndMetadata`, items with `topic`, `partition`,
    `offset` (confluent-kafka's TopicPartition), or `(topic, partition, offset)` tuples."""
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    if isinstance(offsets, Mapping):
        for tp, committed in offsets.items():
            key = _tp(tp[0], tp[1]) if isinstance(tp, tuple) else _tp(tp.topic, tp.partition)
            if not isinstance(committed, OffsetAndMetadata):
                committed = OffsetAndMetadata(int(committed))
            out[key] = committed
        return out
    for item in offsets:
        if isinstance(item, tuple) and len(item) == 3:
            out[_tp(item[0], item[1])] = OffsetAndMetadata(int(item[2]))
        else:
            metadata = getattr(item, "metadata", None) or ""
            epoch = getattr(item, "leader_epoch", None)
            out[_tp(item.topic, item.partition)] = OffsetAndMetadata(
                int(item.offset), metadata, -1 if epoch is None else int(epoch)
            )
    return out


def _tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(str(topic), int(partition))
