"""LogConfig: Kafka defaults, broker-to-topic key mapping, overrides and validation."""

from __future__ import annotations

import pytest

from onceflow.log.config import LogConfig, validate_topic_configs


def test_defaults_are_kafkas():
    config = LogConfig.from_properties()
    assert config.segment_bytes == 1 << 30
    assert config.segment_ms == config.retention_ms == 604_800_000
    assert config.retention_bytes == -1
    assert config.index_interval_bytes == 4096
    assert config.segment_index_bytes == 10 << 20
    assert config.max_message_bytes == 1_048_588
    assert config.message_timestamp_type == "CreateTime"
    assert config.cleanup_policy == ("delete",)
    assert config.flush_on_ack is True  # onceflow's deviation: durable by default


def test_broker_keys_map_and_topic_overrides_win():
    broker = {
        "log.segment.bytes": "2048",
        "log.roll.hours": "2",
        "log.retention.hours": "5",
        "log.retention.minutes": "3",
        "message.max.bytes": 5000,
        "log.flush.on.ack": "false",
        "log.cleanup.policy": "compact,delete",
    }
    config = LogConfig.from_properties(broker, {"segment.bytes": "4096"})
    assert config.segment_bytes == 4096
    assert config.segment_ms == 7_200_000
    assert config.retention_ms == 180_000  # minutes beat hours
    assert config.max_message_bytes == 5000
    assert config.flush_on_ack is False
    assert config.cleanup_policy == ("compact", "delete") and config.delete_enabled
    with_ms = LogConfig.from_properties({"log.retention.ms": "7", "log.retention.hours": "1"})
    assert with_ms.retention_ms == 7


@pytest.mark.parametrize(
    "overrides",
    [
        {"retention.ms": "-2"},
        {"segment.bytes": "10"},
        {"cleanup.policy": "shred"},
        {"message.timestamp.type": "WallClock"},
        {"flush.on.ack": "maybe"},
        {"unknown.key": "1"},
    ],
)
def test_invalid_overrides(overrides):
    with pytest.raises(ValueError):
        LogConfig.from_properties(None, overrides)
    assert validate_topic_configs(overrides) is not None


def test_to_topic_properties_round_trips():
    config = LogConfig.from_properties(None, {"cleanup.policy": "compact", "flush.ms": "10"})
    props = config.to_topic_properties()
    assert props["cleanup.policy"] == "compact" and props["flush.on.ack"] == "true"
    assert LogConfig.from_properties(None, props) == config
    assert not config.delete_enabled


# Kafka's topic configs (3.x and 4.x) with a valid value each
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy": "compact,delete",
    "compression.type": "zstd",
    "compression.gzip.level": "6",
    "compression.lz4.level": "12",
    "compression.zstd.level": "-5",
    "delete.retention.ms": "1000",
    "file.delete.delay.ms": "0",
    "flush.messages": "10",
    "flush.ms": "1000",
    "follower.replication.throttled.replicas": "0:1,1:1",
    "index.interval.bytes": "100",
    "leader.replication.throttled.replicas": "*",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": "60000",
    "max.message.bytes": "2000000",
    "message.downconversion.enable": "false",
    "message.format.version": "3.0-IV1",
    "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": "86400000",
    "message.timestamp.difference.max.ms": "86400000",
    "message.timestamp.type": "LogAppendTime",
    "min.cleanable.dirty.ratio": "0.25",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "2",
    "preallocate": "true",
    "remote.storage.enable": "false",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "retention.bytes": "-1",
    "retention.ms": "-1",
    "segment.bytes": "1048576",
    "segment.index.bytes": "4096",
    "segment.jitter.ms": "10",
    "segment.ms": "60000",
    "unclean.leader.election.enable": "false",
}


def test_every_kafka_topic_config_is_accepted_stored_and_described():
    assert validate_topic_configs(KAFKA_TOPIC_CONFIGS) is None
    described = LogConfig.from_properties(None, KAFKA_TOPIC_CONFIGS).to_topic_properties()
    for key, value in KAFKA_TOPIC_CONFIGS.items():
        assert described[key] == value, key
    assert LogConfig.from_properties(None, KAFKA_TOPIC_CONFIGS).min_insync_replicas == 2


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("compression.type", "brotli", "not one of uncompressed, zstd, lz4, snappy, gzip"),
        ("compression.gzip.level", "0", "not -1 or in [1, 9]"),
        ("compression.zstd.level", "23", "outside"),
        ("min.insync.replicas", "0", "outside [1,"),
        ("min.cleanable.dirty.ratio", "1.5", "outside [0, 1]"),
        ("min.cleanable.dirty.ratio", "half", "'half' is not a number"),
        ("retention.ms", "abc", "'abc' is not a whole number"),
        ("unclean.leader.election.enable", "maybe", "not a boolean"),
        ("remote.storage.enable", "true", "tiered storage is not supported"),
        ("local.retention.ms", "-3", "outside"),
    ],
)
def test_kafka_validation_of_topic_configs(key, value, message):
    error = validate_topic_configs({key: value})
    assert error is not None and error.startswith(f"invalid value for {key}: ")
    assert message in error
