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
