"""Which partition of an internal topic coordinates a key (Kafka's `partitionFor`).

Kafka hashes the transactional id (or group id) with Java's `String.hashCode` and takes
`Utils.abs(hash) % partitions`, where `Utils.abs(n)` is `n == Integer.MIN_VALUE ? 0 :
Math.abs(n)` - unlike `Math.abs`, it is never negative. (Not `hash & 0x7fffffff`: that differs
for every other negative hash, and the group coordinator and AddOffsetsToTxn must agree on the
`__consumer_offsets` partition of a group.)
"""

from __future__ import annotations

__all__ = ["coordinator_partition", "java_string_hashcode"]


def java_string_hashcode(text: str) -> int:
    """Java's `String.hashCode` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def coordinator_partition(key: str, partitions: int = 50) -> int:
    """The coordinator partition of `key`: `Utils.abs(hashCode(key)) % partitions`."""
    if partitions < 1:
        raise ValueError("partitions must be positive")
    h = java_string_hashcode(key)
    return (0 if h == -(2**31) else abs(h)) % partitions
