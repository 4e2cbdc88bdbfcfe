"""Kafka's default partitioner: murmur2 for keyed records, sticky partitioning for the rest.

A keyed record goes to ``to_positive(murmur2(key)) % num_partitions`` — the same partition
Kafka's Java client, kafka-python and librdkafka's ``murmur2_random`` choose. A keyless record
goes to the topic's current *sticky* partition (KIP-480): every keyless record sticks to one
partition until a new batch would have to be opened there, and then the producer moves to
another partition chosen at random among those with a leader.
"""

from __future__ import annotations

import random
import struct
import threading
from collections.abc import Sequence

__all__ = ["StickyPartitionCache", "default_partition", "murmur2", "to_positive"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """MurmurHash2 of `data` as Kafka's `Utils.murmur2` computes it (a signed int32)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    words = length // 4
    for k in struct.unpack_from(f"<{words}I", data) if words else ():
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    index = words * 4
    if tail == 3:
        h ^= data[index + 2] << 16
    if tail >= 2:
        h ^= data[index + 1] << 8
    if tail >= 1:
        h ^= data[index]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's `Utils.toPositive`: clear the sign bit (not `abs`, which overflows in Java)."""
    return number & 0x7FFFFFFF


def default_partition(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a keyed record."""
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitionCache:
    """The current sticky partition per topic (KIP-480); thread-safe."""

    def __init__(self, rng: random.Random | None = None):
        self._current: dict[str, int] = {}
        self._lock = threading.Lock()
        self._random = rng or random.Random()

    def partition(self, topic: str, num_partitions: int, available: Sequence[int] = ()) -> int:
        """The topic's sticky partition, choosing one if there is none yet."""
        current = self._current.get(topic)
        if current is not None and current < num_partitions:
            return current
        return self.next_partition(topic, num_partitions, available, current)

    def next_partition(
        self,
        topic: str,
        num_partitions: int,
        available: Sequence[int] = (),
        previous: int | None = None,
    ) -> int:
        """Move the topic to a new sticky partition (called when a new batch would be opened
        on `previous`): a random partition with a leader, different from `previous` when
        there is a choice."""
        with self._lock:
            current = self._current.get(topic)
            if current is not None and current != previous and current < num_partitions:
                return current  # another thread moved it already
            candidates = list(available) or list(range(num_partitions))
            if len(candidates) > 1 and previous in candidates:
                candidates.remove(previous)
            chosen = self._random.choice(candidates)
            self._current[topic] = chosen
            return chosen
