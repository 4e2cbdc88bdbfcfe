"""Reading a whole topic with confluent-kafka (assign mode, no group features) for the checks
of exactly-once tests: every partition from its beginning to its end at one isolation level."""

from __future__ import annotations

import time
from collections.abc import Mapping


def confluent_read_to_end(
    config: Mapping[str, object],
    topic: str,
    partitions: int,
    isolation: str,
    *,
    expect: int = 0,
    timeout: float = 60.0,
) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record of `topic` visible at `isolation`, read until
    every partition is at its end and at least `expect` records arrived (a committed
    transaction's markers are written after EndTxn returns, so the end moves a little later).
    `config` holds `bootstrap.servers` and any security settings."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            **config,
            "group.id": f"verify-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    records: list[tuple[int, int, bytes]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < partitions or len(records) < expect:
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic} not read to its end: {len(records)} records")
            for msg in consumer.consume(num_messages=5000, timeout=0.3):
                error = msg.error()
                if error is None:
                    records.append((msg.partition(), msg.offset(), msg.value()))
                    at_end.discard(msg.partition())
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                else:
                    raise AssertionError(f"consume error {error}")
    finally:
        consumer.close()
    return records
