"""Records through onceflow's own Producer and Consumer with one client configuration (the
security tests' check that a login works end to end)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from onceflow.client.consumer import Consumer
from onceflow.client.producer import Producer

TIMEOUT_S = 30.0


def produce(config: dict, topic: str, values: Sequence[bytes]) -> None:
    """Send `values` to partition 0 of `topic` and wait for each acknowledgement."""
    producer = Producer({**config, "max.block.ms": 20_000})
    try:
        for value in values:
            producer.send(topic, value, partition=0)
        producer.flush(TIMEOUT_S)
    finally:
        producer.close()


def consume(config: dict, topic: str, count: int) -> list[bytes]:
    """Up to `count` values of partition 0 of `topic` from its start (fewer after 30 s)."""
    consumer = Consumer({**config, "auto.offset.reset": "earliest"})
    values: list[bytes] = []
    try:
        consumer.assign([(topic, 0, 0)])
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < count and time.monotonic() < deadline:
            values += [r.value for r in consumer.poll(1.0)]
    finally:
        consumer.close()
    return values


def round_trip(config: dict, topic: str, values: Sequence[bytes]) -> list[bytes]:
    """`values` produced to `topic`, then what a consumer reads back."""
    produce(config, topic, values)
    return consume(config, topic, len(values))
