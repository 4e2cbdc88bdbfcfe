"""The idempotent producer against a live broker (onceflow's, Apache Kafka TV2 and TV1): every
record once, in order, one producer id with gapless sequences; and across a broker restart."""

from __future__ import annotations

import time
from collections import defaultdict

from client.helpers import create_topic
from onceflow.client.connection import connect_bootstrap
from onceflow.client.consumer import Consumer
from onceflow.client.producer import Producer
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.messages import REQUESTS
from onceflow.records.batch import iter_batches


def read_all(bootstrap: str, topic: str, partitions: int, n: int) -> dict[int, list[bytes]]:
    got: dict[int, list[bytes]] = defaultdict(list)
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as c:
        c.assign([(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + 60
        total = 0
        while total < n and time.monotonic() < deadline:
            for record in c.poll(0.5):
                got[record.partition].append(record.value)
                total += 1
        assert c.poll(0.5) == []  # nothing beyond
    return got


def batch_headers(bootstrap: str, topic: str, partition: int) -> list:
    conn = connect_bootstrap(bootstrap)
    try:
        cls = REQUESTS[ApiKey.FETCH]
        request = cls(
            max_wait_ms=0,
            min_bytes=0,
            topics=[
                cls.FetchTopic(
                    topic=topic,
                    partitions=[
                        cls.FetchTopic.FetchPartition(
                            partition=partition, fetch_offset=0, partition_max_bytes=64 << 20
                        )
                    ],
                )
            ],
        )
        response = conn.send(request, min(conn.api_version(ApiKey.FETCH), 12))
        records = response.responses[0].partitions[0].records
        return [header for header, _ in iter_batches(records)]
    finally:
        conn.close()


def test_idempotent_producer_writes_exactly_once_in_order(peer) -> None:
    bootstrap, topic = peer.bootstrap, peer.name("idem")
    create_topic(bootstrap, topic, 3)
    with Producer({"bootstrap.servers": bootstrap, "batch.size": 4096}) as p:
        futures = [p.send(topic, b"%06d" % i, partition=i % 3) for i in range(10_000)]
        p.flush(60)
        assert p.producer_id >= 0
        producer_id = p.producer_id
    assert all(f.exception(0) is None for f in futures)
    got = read_all(bootstrap, topic, 3, 10_000)
    for partition in range(3):
        assert got[partition] == [b"%06d" % i for i in range(partition, 10_000, 3)]
        headers = batch_headers(bootstrap, topic, partition)
        assert {h.producer_id for h in headers} == {producer_id}
        sequence = 0
        for header in headers:
            assert header.base_sequence == sequence
            sequence += header.records_count


def test_idempotent_producer_survives_broker_restart(peer) -> None:
    bootstrap, topic = peer.bootstrap, peer.name("idem")
    create_topic(bootstrap, topic, 3)
    with Producer(
        {"bootstrap.servers": bootstrap, "batch.size": 4096, "retry.backoff.ms": 50}
    ) as p:
        futures = [p.send(topic, b"%06d" % i, partition=i % 3) for i in range(3000)]
        peer.restart()
        futures += [p.send(topic, b"%06d" % i, partition=i % 3) for i in range(3000, 6000)]
        p.flush(60)
    assert all(f.exception(0) is None for f in futures)
    got = read_all(peer.bootstrap, topic, 3, 6000)
    for partition in range(3):
        assert got[partition] == [b"%06d" % i for i in range(partition, 6000, 3)]
