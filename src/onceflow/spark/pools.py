"""Clients kept between tasks in one Python worker (Spark reuses workers across tasks and
micro-batches while `spark.python.worker.reuse` is true, its default).

Spark's own Kafka connector keeps consumers and producers per executor the same way (its
consumer pool, `spark.kafka.consumer.cache.*`, and producer cache, both closing what has been
idle for 5 minutes). Here, per worker process:

- **Consumers**, keyed by their configuration. A read task takes one, preferring the one that
  last read its partition and stopped at the offset the task starts from (the records it
  already fetched past its last range are read without another fetch); any other is
  reassigned. A kept consumer is paused, so it does not fetch while idle.
- **Producers**, keyed by their whole configuration, `transactional.id` included. A write
  task's transactional producer is kept only after it handed its prepared transaction over to
  the driver (`Producer.hand_over_transaction`), which leaves it uninitialised: the next task
  calls `init_transactions` as a new producer would, so every task attempt still fences the
  ones before it with a new epoch. Only the connections, the metadata and the coordinator
  lookup are saved.

A client goes back only after its task succeeded; a task that fails closes it. At most
`capacity` idle clients are kept (the least recently used is closed first) and one idle for
`IDLE_TIMEOUT_S` is closed at the next take or give-back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from onceflow.client.consumer import Consumer
from onceflow.client.producer import Producer
from onceflow.common import TopicPartition

__all__ = [
    "IDLE_TIMEOUT_S",
    "ClientPool",
    "ProducerLease",
    "consumer_for",
    "pool_stats",
    "producer_for",
]

IDLE_TIMEOUT_S = 300.0  # Spark's spark.kafka.consumer.cache.timeout / producer cache timeout
CONSUMERS_KEPT = 16
PRODUCERS_KEPT = 16

ConfigKey = tuple[tuple[str, str], ...]


def config_key(config: dict[str, Any]) -> ConfigKey:
    return tuple(sorted((k, str(v)) for k, v in config.items()))


@dataclass
class _Idle:
    key: ConfigKey
    client: Any
    since: float
    tag: Any = None  # consumers: (TopicPartition, position) where the last read stopped


class ClientPool:
    """Idle clients by key; `take` hands each to one caller at a time (thread-safe)."""

    def __init__(self, capacity: int, close: Callable[[Any], None]) -> None:
        self.capacity = capacity
        self._close = close
        self._lock = threading.Lock()
        self._idle: list[_Idle] = []  # least recently given back first
        self.hits = 0
        self.misses = 0

    def take(self, key: ConfigKey, prefer: Any = None) -> tuple[Any, Any] | None:
        """An idle client with `key` (the one tagged `prefer` if there is one) and its tag,
        or None: the caller makes a new one."""
        with self._lock:
            expired = self._expire()
            match = [e for e in self._idle if e.key == key]
            chosen = next((e for e in match if e.tag == prefer), match[-1] if match else None)
            if chosen is not None:
                self._idle.remove(chosen)
                self.hits += 1
            else:
                self.misses += 1
        self._close_all(expired)
        return None if chosen is None else (chosen.client, chosen.tag)

    def give_back(self, key: ConfigKey, client: Any, tag: Any = None) -> None:
        """Keep `client` for the next `take` of `key`."""
        with self._lock:
            self._idle.append(_Idle(key, client, time.monotonic(), tag))
            expired = self._expire()
            while len(self._idle) > self.capacity:
                expired.append(self._idle.pop(0))
        self._close_all(expired)

    def clear(self) -> None:
        """Close every idle client."""
        with self._lock:
            idle, self._idle = self._idle, []
        self._close_all(idle)

    def __len__(self) -> int:
        return len(self._idle)

    def _expire(self) -> list[_Idle]:
        cutoff = time.monotonic() - IDLE_TIMEOUT_S
        expired = [e for e in self._idle if e.since < cutoff]
        if expired:
            self._idle = [e for e in self._idle if e.since >= cutoff]
        return expired

    def _close_all(self, entries: list[_Idle]) -> None:
        for entry in entries:
            self._close(entry.client)


_consumers = ClientPool(CONSUMERS_KEPT, lambda c: c.close(timeout=1))
_producers = ClientPool(PRODUCERS_KEPT, lambda p: p.close(timeout=0))


@contextmanager
def consumer_for(
    config: dict[str, Any], tp: TopicPartition, start: int, reuse: bool = True
) -> Iterator[Consumer]:
    """A consumer assigned to `tp` at offset `start`, given back (paused, with where it
    stopped) when the block ends normally, closed when it raises or when `reuse` is off."""
    key = config_key(config)
    taken = _consumers.take(key, (tp, start)) if reuse else None
    if taken is None:
        consumer = Consumer(config)
        consumer.assign([(tp.topic, tp.partition, start)])
    else:
        consumer, tag = taken
        if tag != (tp, start):  # else it keeps the records it fetched past its last range
            consumer.assign([(tp.topic, tp.partition, start)])
        consumer.resume([tp])  # assign keeps a partition's state, paused included
    try:
        yield consumer
    except BaseException:
        consumer.close(timeout=1)
        raise
    if not reuse:
        consumer.close(timeout=1)
        return
    consumer.pause([tp])
    _consumers.give_back(key, consumer, (tp, consumer.position(tp)))


@dataclass
class ProducerLease:
    """A producer taken from the pool; `keep()` marks it reusable once it is idle and
    healthy (nothing in flight; a transactional one has handed its transaction over)."""

    producer: Producer
    kept: bool = False

    def keep(self) -> None:
        self.kept = True


@contextmanager
def producer_for(config: dict[str, Any], reuse: bool = True) -> Iterator[ProducerLease]:
    """A producer with `config`; given back when the block ends and the lease was kept,
    closed otherwise."""
    key = config_key(config)
    taken = _producers.take(key) if reuse else None
    lease = ProducerLease(Producer(config) if taken is None else taken[0])
    try:
        yield lease
    finally:
        if reuse and lease.kept:
            _producers.give_back(key, lease.producer)
        else:
            lease.producer.close(timeout=0)


def pool_stats() -> dict[str, int]:
    """Hits and misses of this worker's pools (for tests and benchmarks)."""
    return {
        "consumer_hits": _consumers.hits,
        "consumer_misses": _consumers.misses,
        "producer_hits": _producers.hits,
        "producer_misses": _producers.misses,
    }
