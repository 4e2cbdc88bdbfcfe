"""Value types and sentinels every layer shares (broker, coordinators, log, client).

One definition each, so that a `TopicPartition` made by the admin client equals one made by
the consumer or the coordinator, and a sentinel has one spelling.
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = ["NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "TopicPartition"]

NO_PRODUCER_ID: Final = -1  # a batch or request without a producer id
NO_PRODUCER_EPOCH: Final = -1


class TopicPartition(NamedTuple):
    """A topic and a partition index (equal to the plain tuple `(topic, partition)`)."""

    topic: str
    partition: int
