"""Shared workload for interop and fault tests: numbered 1 KiB records and their round trip.

Record `seq` goes to partition `seq % partitions`, so each partition must hold exactly the
sequence numbers `p, p + partitions, p + 2*partitions, ...` in that order, at consecutive offsets
from 0. Values are `b"%010d|"` followed by one of 64 fixed pseudo-random text blocks, so a value
can be checked byte for byte from its sequence number alone and compression has real work to do.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

RECORD_SIZE = 1024
_PREFIX_LEN = 11  # b"%010d|"
_rng = random.Random(20240611)
_ALPHABET = b"abcdefghijklmnopqrstuvwxyz0123456789 ,.-"
_BLOCKS = [
    bytes(_rng.choice(_ALPHABET) for _ in range(RECORD_SIZE - _PREFIX_LEN)) for _ in range(64)
]


def record_value(seq: int) -> bytes:
    """The 1 KiB value of record number `seq`."""
    return b"%010d|" % seq + _BLOCKS[seq % len(_BLOCKS)]


def parse_seq(value: bytes) -> int:
    """The sequence number carried by a value (raises ValueError on a malformed value)."""
    if len(value) < _PREFIX_LEN or value[10:11] != b"|":
        raise ValueError(f"malformed value {bytes(value[:20])!r}")
    return int(value[:10])


def expected_seqs(n: int, partitions: int, partition: int) -> list[int]:
    """Sequence numbers partition `partition` must hold after producing records 0..n-1."""
    return list(range(partition, n, partitions))


@dataclass
class Consumed:
    """What a consumer read: per partition, the (offset, seq) pairs in read order; bad values."""

    by_partition: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    bad_values: list[tuple[int, int, bytes]] = field(default_factory=list)

    def add(self, partition: int, offset: int, value: bytes | None) -> None:
        try:
            seq = parse_seq(value or b"")
        except ValueError:
            self.bad_values.append((partition, offset, bytes(value or b"")[:40]))
            return
        if bytes(value) != record_value(seq):
            self.bad_values.append((partition, offset, bytes(value)[:40]))
            return
        self.by_partition.setdefault(partition, []).append((offset, seq))

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.by_partition.values())


def check_exact_round_trip(consumed: Consumed, n: int, partitions: int) -> list[str]:
    """Problems found when every record 0..n-1 must be present exactly once, in order, at
    consecutive offsets from 0 in its partition. An empty list means the round trip is exact."""
    problems = [f"corrupt value at p{p} offset {o}: {v!r}" for p, o, v in consumed.bad_values]
    for partition in range(partitions):
        got = consumed.by_partition.get(partition, [])
        want = expected_seqs(n, partitions, partition)
        seqs = [s for _, s in got]
        offsets = [o for o, _ in got]
        if seqs != want:
            missing = sorted(set(want) - set(seqs))
            dupes = len(seqs) - len(set(seqs))
            problems.append(
                f"p{partition}: {len(seqs)} records, want {len(want)}; "
                f"{len(missing)} missing (first {missing[:5]}), {dupes} duplicates, "
                f"in order: {seqs == sorted(seqs)}"
            )
        if offsets != list(range(len(offsets))):
            problems.append(f"p{partition}: offsets not consecutive from 0")
    return problems


# ---------------------------------------------------------------------- confluent-kafka


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Create a topic with confluent-kafka's AdminClient (raises on failure)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=timeout)
    futures[topic].result(timeout)


@dataclass
class ProduceOutcome:
    """Delivery reports of a produce run: acknowledged (partition, offset, seq) and failures."""

    acked: list[tuple[int, int, int]] = field(default_factory=list)
    failed: list[tuple[int, str]] = field(default_factory=list)
    seconds: float = 0.0


def produce_confluent(
    bootstrap: str,
    topic: str,
    seqs: Iterable[int],
    partitions: int,
    config: Mapping[str, object] | None = None,
    flush_timeout: float = 120.0,
) -> ProduceOutcome:
    """Produce records `seqs` (record seq to partition seq % partitions) with acks=all and
    collect the delivery reports."""
    from confluent_kafka import Producer

    outcome = ProduceOutcome()
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.kbytes": 256 * 1024,
        "message.timeout.ms": 60_000,
    }
    conf.update(config or {})
    producer = Producer(conf)

    def on_delivery(err, msg) -> None:
        seq = parse_seq(msg.value())
        if err is not None:
            outcome.failed.append((seq, str(err)))
        else:
            outcome.acked.append((msg.partition(), msg.offset(), seq))

    start = time.monotonic()
    for seq in seqs:
        while True:
            try:
                producer.produce(
                    topic, record_value(seq), partition=seq % partitions, on_delivery=on_delivery
                )
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(flush_timeout)
    outcome.seconds = time.monotonic() - start
    if remaining:
        outcome.failed.append((-1, f"{remaining} records still queued after flush"))
    return outcome


def consume_confluent(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected_total: int | None,
    timeout: float = 120.0,
    config: Mapping[str, object] | None = None,
) -> tuple[Consumed, float]:
    """Read every partition from the beginning with assign() (no group features) until
    `expected_total` records arrived, or until every partition reached its end when
    `expected_total` is None. Returns what was read and the seconds it took."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": "onceflow-interop-assign-only",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "fetch.max.bytes": 50 * 1024 * 1024,
        "max.partition.fetch.bytes": 10 * 1024 * 1024,
    }
    conf.update(config or {})
    consumer = Consumer(conf)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    consumed = Consumed()
    at_eof: set[int] = set()
    start = time.monotonic()
    deadline = start + timeout
    try:
        while time.monotonic() < deadline:
            if expected_total is not None and consumed.total >= expected_total:
                break
            if expected_total is None and len(at_eof) == partitions:
                break
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_eof.add(msg.partition())
                        continue
                    raise RuntimeError(f"consumer error: {err}")
                at_eof.discard(msg.partition())
                consumed.add(msg.partition(), msg.offset(), msg.value())
    finally:
        consumer.close()
    return consumed, time.monotonic() - start


def first_message(consumer, timeout: float = 20.0):
    """The first record (not an error event) a confluent-kafka consumer polls, or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            return message
    return None
