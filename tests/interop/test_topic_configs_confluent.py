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
