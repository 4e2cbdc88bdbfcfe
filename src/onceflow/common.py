"""Value types, sentinels and the clock every layer shares (broker, coordinators, log, client).

One definition each, so that a `TopicPartition` made by the admin client equals one made by
the consumer or the coordinator, a sentinel has one spelling, and "now" in milliseconds is
read one way (`wall_clock_ms`; components that tests drive through time take a `Clock`
argument that defaults to it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final, NamedTuple, TypeAlias

__all__ = [
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "BytesLike",
    "Clock",
    "TopicPartition",
    "wall_clock_ms",
]

Clock = Callable[[], int]  # milliseconds since the epoch

# what the wire codecs read from and append (record sets travel as zero-copy views)
BytesLike: TypeAlias = bytes | bytearray | memoryview


def wall_clock_ms() -> int:
    """Wall-clock milliseconds since the epoch (Kafka's `Time.milliseconds()`): record
    timestamps, retention, expiry and timeouts that survive a restart."""
    return time.time_ns() // 1_000_000


NO_PRODUCER_ID: Final = -1  # a batch or request without a producer id
NO_PRODUCER_EPOCH: Final = -1


class TopicPartition(NamedTuple):
    """A topic and a partition index (equal to the plain tuple `(topic, partition)`)."""

    topic: str
    partition: int
