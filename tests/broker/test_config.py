"""BrokerConfig: properties parsing, precedence, typed values, bad values, unknown keys."""

from __future__ import annotations

import pytest

from onceflow.broker.config import BrokerConfig, ConfigError, parse_listener
from onceflow.properties import parse_properties


def test_parse_properties_java_syntax():
    text = (
        "# comment\n! also a comment\n"
        "a=1\n"
        "b : two words\n"
        "c three\n"
        "  d=continued \\\n     line\n"
        "e=tab\\tand\\u0041\n"
        "f\\=key=v\n"
        "empty=\n"
    )
    assert parse_properties(text) == {
        "a": "1",
        "b": "two words",
        "c": "three",
        "d": "continued line",
        "e": "tab\tandA",
        "f=key": "v",
        "empty": "",
    }


def test_defaults_are_kafkas():
    config = BrokerConfig({})
    assert config.node_id == 1
    assert config.num_partitions == 1
    assert config.auto_create_topics is True
    assert config.message_max_bytes == 1048588
    assert config.socket_request_max_bytes == 104857600
    assert config.retention_ms == 168 * 3_600_000
    assert config.advertised_listener is None


def test_file_then_flags_then_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=4\nlog.dirs=/from/file\nlog.retention.minutes=5\n")
    config = BrokerConfig.load(
        path, ["num.partitions=6", "auto.create.topics.enable=false"], {"log.dirs": "/flag"}
    )
    assert config.num_partitions == 6
    assert config.data_dir == "/flag"
    assert config.auto_create_topics is False
    assert config.retention_ms == 300_000
    assert config.is_explicit("num.partitions") and not config.is_explicit("node.id")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("num.partitions=zero", "num.partitions: expected an integer"),
        ("num.partitions=0", "num.partitions: must be at least 1"),
        ("auto.create.topics.enable=maybe", "expected true or false"),
        ("listeners=FOO://h:1", "no security protocol for listener FOO"),
        ("listeners=nohost", "expected HOST:PORT"),
        ("default.replication.factor=3", "single node"),
        ("log.message.timestamp.type=Wall", "CreateTime or LogAppendTime"),
        ("message.max.bytes=99999999999", "does not fit"),
        ("noequals", "--set expects key=value"),
    ],
)
def test_bad_values_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.load(None, [override])


def test_unknown_keys_are_kept_and_reported_once():
    config = BrokerConfig.load(None, ["some.future.key=1", "some.future.key=2"])
    assert config.unknown_keys == ["some.future.key"]
    assert config.get("some.future.key") == "2"


def test_listener_forms():
    assert str(parse_listener("PLAINTEXT://127.0.0.1:9092")) == "127.0.0.1:9092"
    assert str(parse_listener("localhost:0")) == "localhost:0"
    assert str(parse_listener("[::1]:9092")) == "[::1]:9092"
    assert parse_listener(":9092").host == "0.0.0.0"


def test_log_properties_feed_the_log_config():
    from onceflow.log.config import LogConfig

    config = BrokerConfig.load(None, ["log.retention.hours=1", "log.segment.bytes=1000000"])
    log_config = LogConfig.from_properties(config.log_properties())
    assert log_config.retention_ms == 3_600_000
    assert log_config.segment_bytes == 1000000
    assert log_config.flush_on_ack is True
