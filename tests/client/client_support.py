"""Shared helpers for the client's transaction and group tests (imported as
`client.client_support`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from support.peers import FAST_GROUP_BROKER  # noqa: F401 - re-exported for client tests
from support.topic_reader import confluent_read_to_end

from onceflow.client import Consumer, Producer

WAIT_S = 30.0


def group_consumer(bootstrap: str, group: str, **extra) -> Consumer:
    """A onceflow consumer in `group` with quick session and heartbeat settings."""
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
        "max.poll.interval.ms": 20_000,
    }
    config.update(extra)
    return Consumer(config)


def txn_producer(bootstrap: str, transactional_id: str, **extra) -> Producer:
    config = {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5}
    config.update(extra)
    return Producer(config)


def produce(
    bootstrap: str, topic: str, values: Iterable[bytes], partitions: int, first: int = 0
) -> None:
    """Idempotent produce of `values`, numbered from `first`: value i to partition
    i % partitions."""
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        for i, value in enumerate(values, first):
            producer.send(topic, value, partition=i % partitions)
        producer.flush(WAIT_S)


def poll_until(consumers: list[Consumer], done: Callable[[], bool], sink=None, timeout=WAIT_S):
    """Poll each consumer in turn until `done()`; records go to `sink(consumer, record)`."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        for consumer in consumers:
            for record in consumer.poll(0.05):
                if sink is not None:
                    sink(consumer, record)


def read_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: str,
    expect: int | None = None,
    quiet_s: float = 1.5,
) -> list:
    """Every record of `topic` visible at `isolation` to a onceflow consumer (assign mode):
    reads until `expect` records arrived, or nothing new came for `quiet_s`."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([(topic, p, 0) for p in range(partitions)])
        records: list = []
        deadline = time.monotonic() + WAIT_S
        last_new = time.monotonic()
        while time.monotonic() < deadline:
            batch = consumer.poll(0.2)
            if batch:
                records.extend(batch)
                last_new = time.monotonic()
            if expect is not None and len(records) >= expect:
                break
            if expect is None and time.monotonic() - last_new > quiet_s:
                break
        return records
    finally:
        consumer.close()


def confluent_read_all(
    bootstrap: str, topic: str, partitions: int, isolation: str, expect: int
) -> list[bytes]:
    """The values of `topic` visible to confluent-kafka at `isolation`, once at least `expect`
    arrived and every partition is at its end."""
    config = {"bootstrap.servers": bootstrap}
    records = confluent_read_to_end(config, topic, partitions, isolation, expect=expect)
    return [value for _partition, _offset, value in records]
