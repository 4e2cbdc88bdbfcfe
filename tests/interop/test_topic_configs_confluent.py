"""Kafka's topic configs through confluent-kafka's AdminClient: create_topics with configs
librdkafka's own tests use, describe_configs with sources, and Kafka's INVALID_CONFIG."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from confluent_kafka.admin import ConfigSource as Source

TIMEOUT = 30
LIBRDKAFKA_CONFIGS = {
    "compression.type": "lz4",
    "delete.retention.ms": "1000",
    "min.insync.replicas": "1",
    "min.compaction.lag.ms": "100",
    "unclean.leader.election.enable": "false",
    "message.timestamp.difference.max.ms": "86400000",
    "max.message.bytes": "2000000",
}


def test_create_with_standard_configs_and_describe_them(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = NewTopic("configured", 2, 1, config=LIBRDKAFKA_CONFIGS)
    admin.create_topics([topic])["configured"].result(TIMEOUT)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "configured")
    entries = admin.describe_configs([resource])[resource].result(TIMEOUT)
    for key, value in LIBRDKAFKA_CONFIGS.items():
        assert entries[key].value == value, key
        assert entries[key].source == Source.DYNAMIC_TOPIC_CONFIG.value, key
    assert entries["preallocate"].value == "false"
    assert entries["preallocate"].source == Source.DEFAULT_CONFIG.value
    assert entries["min.cleanable.dirty.ratio"].value == "0.5"


@pytest.mark.parametrize(
    ("key", "value"),
    [("compression.type", "brotli"), ("min.insync.replicas", "0"), ("retention.ms", "abc")],
)
def test_bad_values_get_invalid_config(broker, key, value):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    future = admin.create_topics([NewTopic("bad", 1, 1, config={key: value})])["bad"]
    with pytest.raises(KafkaException) as info:
        future.result(TIMEOUT)
    error = info.value.args[0]
    assert error.name() == "INVALID_CONFIG"
    assert key in error.str()


def _produce(bootstrap: str, topic: str, records, **config) -> list:
    """Produce (value, timestamp) pairs with confluent-kafka; the delivery errors (None = ok)."""
    from confluent_kafka import Producer

    errors: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    for value, timestamp in records:
        producer.produce(
            topic,
            value,
            partition=0,
            timestamp=timestamp,
            on_delivery=lambda e, _m: errors.append(e),
        )
    assert producer.flush(TIMEOUT) == 0
    return errors


def test_topic_compression_type_recompresses_what_confluent_sends(broker):
    from onceflow.records.batch import split_complete_batches
    from onceflow.records.compression import CompressionType

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = NewTopic("zstd", 1, 1, config={"compression.type": "zstd"})
    admin.create_topics([topic])["zstd"].result(TIMEOUT)
    values = [b"record-%d " % i * 20 for i in range(2000)]
    errors = _produce(
        broker.bootstrap, "zstd", [(v, 0) for v in values], **{"compression.type": "lz4"}
    )
    assert errors == [None] * 2000
    codecs = set()
    for segment in sorted((broker.data_dir / "zstd-0").glob("*.log")):
        batches, _ = split_complete_batches(segment.read_bytes())
        codecs |= {header.compression for header, _ in batches}
    assert codecs == {CompressionType.ZSTD}
    from confluent_kafka import Consumer

    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "z", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["zstd"])
    got = []
    while len(got) < 2000:
        message = consumer.poll(TIMEOUT)
        assert message is not None and message.error() is None
        got.append(message.value())
    consumer.close()
    assert got == values


def test_timestamp_limits_and_min_insync_replicas_reach_confluent(broker):
    import time

    from confluent_kafka import KafkaError

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = [
        NewTopic("ts", 1, 1, config={"message.timestamp.before.max.ms": "60000"}),
        NewTopic("isr", 1, 1, config={"min.insync.replicas": "2"}),
    ]
    for future in admin.create_topics(topics).values():
        future.result(TIMEOUT)
    now = int(time.time() * 1000)
    errors = _produce(broker.bootstrap, "ts", [(b"old", now - 3_600_000)])
    assert [e.code() for e in errors] == [KafkaError.INVALID_TIMESTAMP]
    assert _produce(broker.bootstrap, "ts", [(b"new", now)]) == [None]
    errors = _produce(broker.bootstrap, "isr", [(b"x", 0)], **{"message.timeout.ms": 3000})
    assert [e.code() for e in errors] in (
        [KafkaError.NOT_ENOUGH_REPLICAS],
        [KafkaError._MSG_TIMED_OUT],  # librdkafka retries NOT_ENOUGH_REPLICAS until the timeout
    )
    assert _produce(broker.bootstrap, "isr", [(b"x", 0)], acks=1) == [None]
