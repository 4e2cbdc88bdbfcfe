"""Storage faults stay in their partition, seen by real clients.

- After a clean shutdown, a torn or foreign write appended to one partition's segment is found
  at start (the segment's size no longer matches what the shutdown recorded), recovered as
  after a crash, and logged; every partition reads back exactly what was produced.
- A batch damaged mid-file (not seen at start: only the last batch is checked) is answered as
  that partition's CORRUPT_MESSAGE when a fetch reaches it, as Kafka's ReplicaManager does; the
  connection stays open and a confluent-kafka consumer fetching every partition over it keeps
  reading the others to their end (before the fix, the handler raised, the connection closed
  and the other partitions stopped being served).
- The same for an internal topic: garbage after the last batch of a `__consumer_offsets`
  segment is recovered at start and the group's committed offsets survive.
"""

from __future__ import annotations

import random
import struct
import time
from pathlib import Path

from interop.test_group_confluent import consumer_config
from interop.workload import (
    check_exact_round_trip,
    consume_confluent,
    create_topic,
    produce_confluent,
    record_value,
)
from support.peers import GROUP_BROKER_CONFIG

from faults.test_fault_group_restart import committed

PARTITIONS = 3
N = 3000


def _last_segment(directory: Path) -> Path:
    return sorted(directory.glob("*.log"))[-1]


def _batch_starts(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos + 12 <= len(data):
        length = struct.unpack_from(">i", data, pos + 8)[0]
        starts.append(pos)
        pos += 12 + length
    return starts


def _produce(broker, topic: str) -> None:
    create_topic(broker.bootstrap, topic, PARTITIONS)
    for start in range(0, N, 300):  # ten produce rounds: many batches per partition
        out = produce_confluent(broker.bootstrap, topic, range(start, start + 300), PARTITIONS)
        assert out.failed == []


def test_foreign_write_after_clean_shutdown_is_recovered_at_start(broker):
    topic = "torn"
    _produce(broker, topic)
    broker.stop()
    segment = _last_segment(broker.data_dir / f"{topic}-1")
    with open(segment, "ab") as f:
        f.write(random.Random(3).randbytes(5000))
    before = broker.log_text()
    broker.start()
    new_log = broker.log_text()[len(before) :]
    assert f"recovered {topic}-1" in new_log and "truncated 5000 bytes" in new_log, new_log
    consumed, _ = consume_confluent(broker.bootstrap, topic, PARTITIONS, N, timeout=60)
    assert check_exact_round_trip(consumed, N, PARTITIONS) == []


def test_corrupt_batch_mid_file_fails_only_its_partition(broker):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    topic = "midfile"
    _produce(broker, topic)
    broker.stop()
    segment = _last_segment(broker.data_dir / f"{topic}-1")
    data = bytearray(segment.read_bytes())
    starts = _batch_starts(bytes(data))
    assert len(starts) >= 4
    damaged = starts[len(starts) // 2]
    damaged_offset = struct.unpack_from(">q", data, damaged)[0]
    struct.pack_into(">i", data, damaged + 8, 0)  # Kafka's "record size 0" corruption
    segment.write_bytes(bytes(data))
    broker.start()

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "midfile-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.error.backoff.ms": 50,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    errors: list[str] = []
    deadline = time.monotonic() + 60
    healthy = [p for p in range(PARTITIONS) if p != 1]
    try:
        while time.monotonic() < deadline:
            if all(len(got[p]) == N // PARTITIONS for p in healthy) and len(got[1]) >= 1:
                break
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                if msg.error() is not None:
                    errors.append(str(msg.error()))
                    continue
                assert msg.value() == record_value(int(msg.value()[:10]))
                got[msg.partition()].append(msg.offset())
    finally:
        consumer.close()
    for p in healthy:
        assert got[p] == list(range(N // PARTITIONS)), f"partition {p} stopped being served"
    assert got[1] == list(range(damaged_offset))
    text = broker.log_text()
    assert f"read of {topic}-1 at offset {damaged_offset} failed: corrupt batch" in text
    assert "Traceback" not in text


def test_internal_topic_segment_garbage_is_recovered(broker_factory):
    from confluent_kafka import Consumer, TopicPartition

    broker = broker_factory(GROUP_BROKER_CONFIG)
    create_topic(broker.bootstrap, "tracked", 4)
    consumer = Consumer(consumer_config(broker.bootstrap, "tracked-group"))
    try:
        for round_ in range(1, 4):
            offsets = [TopicPartition("tracked", p, round_ * 10 + p) for p in range(4)]
            consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()
    broker.stop()
    damaged = []
    for directory in sorted(broker.data_dir.glob("__consumer_offsets-*")):
        segment = _last_segment(directory)
        if segment.stat().st_size:
            with open(segment, "ab") as f:
                f.write(b"\x00\x00\x00\x00\x00\x00\x00\x07\x7f\xff\xff\xff" + b"\x5a" * 500)
            damaged.append(directory.name)
    assert damaged
    before = broker.log_text()
    broker.start()
    new_log = broker.log_text()[len(before) :]
    for name in damaged:
        assert f"recovered {name}" in new_log
    assert committed(broker.bootstrap, "tracked-group", "tracked") == {p: 30 + p for p in range(4)}
