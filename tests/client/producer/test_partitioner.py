"""murmur2 and the default partitioner: Java's vectors, kafka-python's implementation, KIP-480.

The vectors are the ones Kafka's `UtilsTest.testMurmur2` checks (Java's signed int32 results).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from onceflow.client.producer.partitioner import (
    StickyPartitionCache,
    default_partition,
    murmur2,
    to_positive,
)

JAVA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("key", "expected"), JAVA_VECTORS)
def test_murmur2_matches_java_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@given(st.binary(max_size=200))
def test_murmur2_matches_kafka_python(key: bytes) -> None:
    # kafka-python returns the same 32 bits unsigned
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)


@given(st.binary(min_size=1, max_size=64), st.integers(min_value=1, max_value=1000))
def test_default_partition_matches_kafka_python(key: bytes, partitions: int) -> None:
    expected = (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions
    assert default_partition(key, partitions) == expected


def test_to_positive_clears_the_sign_bit_not_abs() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0  # abs() would overflow in Java
    assert to_positive(5) == 5


def test_sticky_partition_stays_until_a_new_batch() -> None:
    cache = StickyPartitionCache(random.Random(7))
    first = cache.partition("t", 6)
    assert all(cache.partition("t", 6) == first for _ in range(20))
    moved = cache.next_partition("t", 6, previous=first)
    assert moved != first
    assert cache.partition("t", 6) == moved


def test_sticky_partition_prefers_available_partitions() -> None:
    cache = StickyPartitionCache(random.Random(1))
    for _ in range(20):
        previous = cache.partition("t", 10, available=[3, 4])
        assert previous in (3, 4)
        assert cache.next_partition("t", 10, [3, 4], previous) in (3, 4)


def test_sticky_partition_with_one_partition_stays_put() -> None:
    cache = StickyPartitionCache()
    assert cache.next_partition("t", 1, previous=0) == 0


def test_next_partition_does_not_move_twice_for_one_batch() -> None:
    cache = StickyPartitionCache(random.Random(3))
    first = cache.partition("t", 5)
    moved = cache.next_partition("t", 5, previous=first)
    # a second thread that also saw `first` must not move it again
    assert cache.next_partition("t", 5, previous=first) == moved
