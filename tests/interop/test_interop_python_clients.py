"""kafka-python and aiokafka round trips through a live onceflow broker.

Each client produces numbered 1 KiB records (acks=all) over 3 partitions and reads them back with
assign() and no group (group_id=None), and must get every record exactly once, byte for byte, in
per-partition order: 100 000 records uncompressed and 100 000 with one codec per client
(kafka-python: lz4, aiokafka: gzip). kafka-python 3 runs with enable_idempotence=False (its
default needs InitProducerId, which the idempotent-producer issue adds).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from interop.workload import Consumed, check_exact_round_trip, create_topic, record_value

PARTITIONS = 3


def _kafka_python_produce(bootstrap: str, topic: str, n: int, codec: str | None) -> float:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        # kafka-python 3 defaults to idempotence (InitProducerId), which comes with the
        # idempotent-producer issue; this round trip tests the plain produce path
        enable_idempotence=False,
        compression_type=codec,
        linger_ms=5,
        batch_size=512 * 1024,
        max_request_size=8 * 1024 * 1024,
        request_timeout_ms=60_000,
    )
    start = time.monotonic()
    futures = [producer.send(topic, record_value(s), partition=s % PARTITIONS) for s in range(n)]
    producer.flush(timeout=180)
    seconds = time.monotonic() - start
    metadata = [f.get(timeout=10) for f in futures]
    producer.close(timeout=10)
    for seq, md in enumerate(metadata):
        if md.partition != seq % PARTITIONS:
            raise AssertionError(f"record {seq} acknowledged on partition {md.partition}")
    return seconds


def _kafka_python_consume(bootstrap: str, topic: str, n: int) -> Consumed:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_bytes=50 * 1024 * 1024,
        max_partition_fetch_bytes=10 * 1024 * 1024,
    )
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    consumed = Consumed()
    deadline = time.monotonic() + 180
    try:
        while consumed.total < n and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500, max_records=20_000).items():
                for record in records:
                    consumed.add(tp.partition, record.offset, record.value)
    finally:
        consumer.close()
    return consumed


async def _aiokafka_produce(bootstrap: str, topic: str, n: int, codec: str | None) -> float:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        compression_type=codec,
        linger_ms=5,
        max_batch_size=512 * 1024,
        max_request_size=8 * 1024 * 1024,
        request_timeout_ms=60_000,
    )
    await producer.start()
    start = time.monotonic()
    try:
        futures = []
        for seq in range(n):
            futures.append(
                await producer.send(topic, record_value(seq), partition=seq % PARTITIONS)
            )
        metadata = await asyncio.wait_for(asyncio.gather(*futures), 180)
    finally:
        await producer.stop()
    seconds = time.monotonic() - start
    for seq, md in enumerate(metadata):
        if md.partition != seq % PARTITIONS:
            raise AssertionError(f"record {seq} acknowledged on partition {md.partition}")
    return seconds


async def _aiokafka_consume(bootstrap: str, topic: str, n: int) -> Consumed:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_bytes=50 * 1024 * 1024,
        max_partition_fetch_bytes=10 * 1024 * 1024,
    )
    await consumer.start()
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    await consumer.seek_to_beginning(*tps)
    consumed = Consumed()
    deadline = time.monotonic() + 180
    try:
        while consumed.total < n and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500, max_records=20_000)
            for tp, records in batches.items():
                for record in records:
                    consumed.add(tp.partition, record.offset, record.value)
    finally:
        await consumer.stop()
    return consumed


KAFKA_PYTHON_RUNS = [(None, 100_000), ("lz4", 100_000)]
AIOKAFKA_RUNS = [(None, 100_000), ("gzip", 100_000)]


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize(("codec", "n"), KAFKA_PYTHON_RUNS, ids=["none", "lz4"])
def test_kafka_python_round_trip(broker, codec, n):
    topic = f"kafka-python-{codec or 'none'}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce_s = _kafka_python_produce(broker.bootstrap, topic, n, codec)
    start = time.monotonic()
    consumed = _kafka_python_consume(broker.bootstrap, topic, n)
    consume_s = time.monotonic() - start
    assert check_exact_round_trip(consumed, n, PARTITIONS) == []
    mb = n * 1024 / 1e6
    print(f"kafka-python {codec}: produce {mb / produce_s:.1f} MB/s, consume {mb / consume_s:.1f}")


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize(("codec", "n"), AIOKAFKA_RUNS, ids=["none", "gzip"])
def test_aiokafka_round_trip(broker, codec, n):
    topic = f"aiokafka-{codec or 'none'}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce_s = asyncio.run(_aiokafka_produce(broker.bootstrap, topic, n, codec))
    start = time.monotonic()
    consumed = asyncio.run(_aiokafka_consume(broker.bootstrap, topic, n))
    consume_s = time.monotonic() - start
    assert check_exact_round_trip(consumed, n, PARTITIONS) == []
    mb = n * 1024 / 1e6
    print(f"aiokafka {codec}: produce {mb / produce_s:.1f} MB/s, consume {mb / consume_s:.1f}")
