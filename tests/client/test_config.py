"""Producer/consumer configuration: defaults, parsing, and one test per error message
(messages as Kafka's ProducerConfig/ConfigDef word them)."""

from __future__ import annotations

import logging

import pytest

from onceflow.client.config import MAX_INT, producer_config
from onceflow.client.consumer.config import consumer_config
from onceflow.client.errors import ConfigException, KafkaError

BOOT = {"bootstrap.servers": "127.0.0.1:9092"}


def test_producer_defaults_are_kafkas() -> None:
    config = producer_config(BOOT)
    assert config["enable.idempotence"] is True
    assert config["acks"] == -1
    assert config["retries"] == MAX_INT
    assert config["max.in.flight.requests.per.connection"] == 5
    assert config["linger.ms"] == 5
    assert config["batch.size"] == 16384
    assert config["compression.type"] == "none"
    assert config["delivery.timeout.ms"] == 120_000
    assert config["bootstrap.servers"] == ["127.0.0.1:9092"]


def test_string_values_are_parsed_as_spark_passes_them() -> None:
    config = producer_config(
        {**BOOT, "acks": "1", "enable.idempotence": "false", "linger.ms": "20", "retries": "3"}
    )
    assert config["acks"] == 1
    assert config["enable.idempotence"] is False
    assert config["linger.ms"] == 20
    assert config["retries"] == 3


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            {"acks": "1"},
            "Must set acks to all in order to use the idempotent producer. "
            "Otherwise we cannot guarantee idempotence.",
        ),
        (
            {"acks": 0},
            "Must set acks to all in order to use the idempotent producer. "
            "Otherwise we cannot guarantee idempotence.",
        ),
        ({"retries": 0}, "Must set retries to non-zero when using the idempotent producer."),
        (
            {"max.in.flight.requests.per.connection": 6},
            "Must set max.in.flight.requests.per.connection to at most 5 to use the idempotent "
            "producer.",
        ),
    ],
)
def test_explicit_idempotence_conflicts_raise(setting: dict, message: str) -> None:
    with pytest.raises(ConfigException) as info:
        producer_config({**BOOT, "enable.idempotence": True, **setting})
    assert str(info.value) == message
    assert isinstance(info.value, KafkaError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "setting",
    [{"acks": "1"}, {"acks": "0"}, {"retries": 0}, {"max.in.flight.requests.per.connection": 10}],
)
def test_implicit_idempotence_is_disabled_quietly(setting: dict, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="onceflow.client.config"):
        config = producer_config({**BOOT, **setting})
    assert config["enable.idempotence"] is False
    assert "Idempotence will be disabled" in caplog.text


def test_acks_all_and_minus_one_keep_idempotence() -> None:
    assert producer_config({**BOOT, "acks": "-1"})["enable.idempotence"] is True
    assert producer_config({**BOOT, "acks": "ALL"})["acks"] == -1


def test_transactional_id_without_idempotence() -> None:
    with pytest.raises(
        ConfigException,
        match=r"^Cannot set a transactional.id without also "
        r"enabling idempotence\.$",
    ):
        producer_config({**BOOT, "transactional.id": "tx", "enable.idempotence": False})


def test_transactional_id_after_implicit_disable() -> None:
    with pytest.raises(ConfigException, match="Cannot set a transactional.id"):
        producer_config({**BOOT, "transactional.id": "tx", "acks": "1"})


def test_missing_bootstrap_servers() -> None:
    with pytest.raises(ConfigException) as info:
        producer_config({})
    assert str(info.value) == (
        'Missing required configuration "bootstrap.servers" which has no default value.'
    )


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("acks", "2", "String must be one of: all, -1, 0, 1"),
        ("compression.type", "brotli", "String must be one of: none, gzip, snappy, lz4, zstd"),
        ("linger.ms", "soon", "Not a number of type INT"),
        ("linger.ms", -1, "Value must be at least 0"),
        ("retries", -1, "Value must be in range [0,...,2147483647]"),
        ("max.in.flight.requests.per.connection", 0, "Value must be at least 1"),
        ("enable.idempotence", "maybe", "Expected value to be either true or false"),
    ],
)
def test_invalid_producer_values(name: str, value: object, reason: str) -> None:
    with pytest.raises(ConfigException) as info:
        producer_config({**BOOT, name: value})
    assert str(info.value) == f"Invalid value {value} for configuration {name}: {reason}"


def test_delivery_timeout_below_linger_plus_request_timeout() -> None:
    with pytest.raises(ConfigException) as info:
        producer_config({**BOOT, "delivery.timeout.ms": 1000, "request.timeout.ms": 5000})
    assert str(info.value) == (
        "delivery.timeout.ms should be equal to or larger than linger.ms + request.timeout.ms"
    )


def test_delivery_timeout_default_is_raised_to_the_floor() -> None:
    config = producer_config({**BOOT, "request.timeout.ms": 200_000})
    assert config["delivery.timeout.ms"] == 200_005


def test_unknown_names_are_logged_and_ignored(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="onceflow.client.config"):
        config = producer_config({**BOOT, "key.serializer": "x"})
    assert "The configuration 'key.serializer' was supplied but isn't a known config." in (
        caplog.text
    )
    assert "key.serializer" not in config


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        (
            "isolation.level",
            "serializable",
            "String must be one of: read_committed, read_uncommitted",
        ),
        ("auto.offset.reset", "smallest", "String must be one of: latest, earliest, none"),
        ("fetch.max.wait.ms", -5, "Value must be at least 0"),
        ("max.poll.records", 0, "Value must be at least 1"),
    ],
)
def test_invalid_consumer_values(name: str, value: object, reason: str) -> None:
    with pytest.raises(ConfigException) as info:
        consumer_config({**BOOT, name: value})
    assert str(info.value) == f"Invalid value {value} for configuration {name}: {reason}"


def test_consumer_defaults() -> None:
    config = consumer_config({**BOOT, "isolation.level": "READ_COMMITTED"})
    assert config["isolation.level"] == "read_committed"
    assert config["auto.offset.reset"] == "latest"
    assert config["fetch.min.bytes"] == 1
    assert config["max.partition.fetch.bytes"] == 1_048_576
