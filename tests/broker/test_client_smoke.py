"""Smoke tests with real clients against a broker process: confluent-kafka (librdkafka),
kafka-python, aiokafka and kcat. Small and fast; the big and fault runs live in tests/interop
and tests/faults."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time

import pytest

pytestmark = pytest.mark.timeout(120)


def test_confluent_kafka_1000_records_3_partitions_acks_all(broker):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic("smoke", 3, 1)]).values():
        future.result(15)
    delivered = []

    def on_delivery(err, msg):
        assert err is None, err
        delivered.append((msg.partition(), msg.offset(), msg.value()))

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(1000):
        producer.produce(
            "smoke", value=b"value-%d" % i, key=b"%d" % i, partition=i % 3, on_delivery=on_delivery
        )
    assert producer.flush(30) == 0
    assert len(delivered) == 1000
    for partition in range(3):
        offsets = sorted(o for p, o, _ in delivered if p == partition)
        assert offsets == list(range(len(offsets)))

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("smoke", p, 0) for p in range(3)])
    seen = {}
    deadline = time.monotonic() + 30
    while len(seen) < 1000 and time.monotonic() < deadline:
        for msg in consumer.consume(500, 1.0):
            assert msg.error() is None, msg.error()
            seen[(msg.partition(), msg.offset())] = msg.value()
    consumer.close()
    assert seen == {(p, o): v for p, o, v in delivered}


def test_kafka_python_produce_and_consume(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("kp", 2, 1)])
    admin.close()
    # kafka-python 3 defaults to idempotence, which needs InitProducerId (not served yet)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=False
    )
    futures = [producer.send("kp", value=b"v%d" % i, partition=i % 2) for i in range(200)]
    producer.flush(30)
    metadata = [f.get(10) for f in futures]
    producer.close()
    assert sorted(m.offset for m in metadata if m.partition == 0) == list(range(100))
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=3000
    )
    consumer.assign([TopicPartition("kp", 0), TopicPartition("kp", 1)])
    values = sorted(int(m.value[1:]) for m in consumer)
    consumer.close()
    assert values == list(range(200))


def test_aiokafka_produce_and_consume(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    async def scenario():
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        await producer.start()
        try:
            results = [await producer.send_and_wait("ak", b"v%d" % i) for i in range(100)]
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        values = []
        try:
            consumer.assign([TopicPartition("ak", 0)])
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + 20
            while len(values) < 100 and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=1000)
                values += [m.value for msgs in batches.values() for m in msgs]
        finally:
            await consumer.stop()
        return results, values

    results, values = asyncio.run(scenario())
    assert [r.offset for r in results] == list(range(100))
    assert values == [b"v%d" % i for i in range(100)]


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_metadata_produce_consume(broker):
    def kcat(*args, stdin=None):
        return subprocess.run(
            ["kcat", "-b", broker.bootstrap, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout

    kcat("-P", "-t", "kc", "-p", "0", stdin="one\ntwo\nthree\n")
    listing = kcat("-L")
    assert "broker 1 at 127.0.0.1" in listing and 'topic "kc" with 1 partitions' in listing
    assert kcat("-C", "-t", "kc", "-e", "-o", "beginning").splitlines() == ["one", "two", "three"]
    assert kcat("-C", "-t", "kc", "-e", "-o", "-1").splitlines() == ["three"]


def test_confluent_admin_client(broker):
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = admin.create_topics([NewTopic("adm", 1, 1, config={"retention.ms": "60000"})])
    created["adm"].result(15)
    cluster = admin.describe_cluster().result(15)
    assert [node.id for node in cluster.nodes] == [1] and cluster.controller.id == 1
    resource = ConfigResource(ConfigResource.Type.TOPIC, "adm")
    configs = admin.describe_configs([resource])[resource].result(15)
    assert configs["retention.ms"].value == "60000"
    broker_resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    broker_configs = admin.describe_configs([broker_resource])[broker_resource].result(15)
    assert broker_configs["num.partitions"].value == "1"
    admin.create_partitions([NewPartitions("adm", 3)])["adm"].result(15)
    assert len(admin.list_topics(timeout=15).topics["adm"].partitions) == 3
    admin.delete_topics(["adm"])["adm"].result(15)
    assert "adm" not in admin.list_topics(timeout=15).topics
