"""Topic set-up shared by tests: create topics, produce values round-robin."""

from __future__ import annotations

from collections.abc import Iterable

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.producer import Producer


def create_topics(bootstrap: str, names: Iterable[str], partitions: int) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        for name in names:
            result = admin.create_topics([NewTopic(name, partitions, 1)])[name]
            assert result.ok, result


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    """`values[i]` to partition `i % partitions`, acknowledged."""
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for i, value in enumerate(values):
            producer.send(topic, value, partition=i % partitions)
        producer.flush(30)
