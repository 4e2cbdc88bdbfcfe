"""Test your own pipelines the way onceflow tests its own: an embedded broker on a free port,
topics, a producer and a read_committed reader, and a local Spark session with the onceflow
data source registered.

    from onceflow.testing import embedded_broker

    with embedded_broker() as broker:
        broker.create_topic("orders", partitions=3)
        broker.produce("orders", [b"a", b"b"])
        assert sorted(r.value for r in broker.read("orders")) == [b"a", b"b"]

With pytest, installing onceflow makes the fixtures `onceflow_broker` (a broker per test
module) and `onceflow_spark` (one local Spark session per test run) available
(`onceflow.testing.pytest_plugin`). The broker is `onceflow broker` in a child process with its
own temporary data directory, durable as in production; it stops with the context (or the
module) and with the test process if that is killed.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from onceflow.cli.embedded_broker import EmbeddedBroker
from onceflow.client.admin import AdminClient, NewTopic, OffsetSpec
from onceflow.client.consumer import Consumer
from onceflow.client.producer import Producer
from onceflow.common import TopicPartition

__all__ = ["TestBroker", "embedded_broker", "spark_session"]

START_TIMEOUT_S = 60.0


class TestBroker:
    """A running onceflow broker for tests: `bootstrap`, and helpers to make topics, write
    records and read them back as a read_committed (or read_uncommitted) consumer would."""

    __test__ = False  # not a test class, whatever pytest's naming rules say

    def __init__(self, config: Mapping[str, object] | None = None) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="onceflow-test-broker-"))
        self._broker = EmbeddedBroker(self._dir, START_TIMEOUT_S, settings=config)
        self.bootstrap: str = self._broker.address

    def stop(self) -> None:
        """Stop the broker and delete its data."""
        self._broker.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> None:
        """Create a topic (replication factor 1); raises if it exists."""
        with AdminClient({"bootstrap.servers": self.bootstrap}) as admin:
            new = NewTopic(name, partitions, 1, dict(config or {}))
            admin.create_topics([new])[name].raise_for_error()

    def produce(
        self,
        topic: str,
        values: Iterable[bytes],
        key: bytes | None = None,
        partition: int | None = None,
    ) -> None:
        """Write `values` with an idempotent producer and wait until all are acknowledged."""
        with Producer({"bootstrap.servers": self.bootstrap}) as producer:
            for value in values:
                producer.send(topic, value, key=key, partition=partition)
            producer.flush(30)

    def read(self, topic: str, isolation_level: str = "read_committed") -> list[Any]:
        """Every record of `topic` up to its current end (the last stable offset for
        read_committed, the high watermark for read_uncommitted), partition by partition.
        Records have `.key`, `.value`, `.partition`, `.offset`, `.headers`."""
        committed = isolation_level == "read_committed"
        with AdminClient({"bootstrap.servers": self.bootstrap}) as admin:
            partitions = [p.partition for p in admin.describe_topics([topic])[topic].partitions]
            specs = {TopicPartition(topic, p): OffsetSpec.latest() for p in partitions}
            ends = {
                tp.partition: r.offset
                for tp, r in admin.list_offsets(specs, isolation_level=int(committed)).items()
            }
        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "isolation.level": isolation_level}
        )
        out: list[Any] = []
        try:
            consumer.assign([(topic, p, 0) for p in partitions])
            deadline = time.monotonic() + 30
            while not all(consumer.position((topic, p)) >= ends[p] for p in partitions):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"could not read {topic} up to offsets {ends}")
                out.extend(r for r in consumer.poll(0.2) if r.offset < ends[r.partition])
        finally:
            consumer.close()
        return sorted(out, key=lambda r: (r.partition, r.offset))

    def __enter__(self) -> TestBroker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@contextmanager
def embedded_broker(config: Mapping[str, object] | None = None) -> Iterator[TestBroker]:
    """A `TestBroker` for the `with` block; `config` takes broker settings by Kafka's names
    (for example `{"transaction.max.timeout.ms": 60000}`)."""
    broker = TestBroker(config)
    try:
        yield broker
    finally:
        broker.stop()


@contextmanager
def spark_session(master: str = "local[2]", **conf: str) -> Iterator[Any]:
    """A local SparkSession with the `onceflow` data source registered (stopped at the end).
    `conf` keys use underscores for dots (`spark_sql_shuffle_partitions="2"`)."""
    from onceflow.spark.pipeline import session

    spark = session(master, "onceflow-test", **conf)
    try:
        yield spark
    finally:
        spark.stop()
