"""The consumer's configuration checks (Kafka's `ConsumerConfig`), on top of `client.config`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onceflow.client.config import CONSUMER_CONFIG, ClientConfig, invalid_value, parse_config
from onceflow.client.consumer.group.assignors import ASSIGNORS
from onceflow.client.errors import ConfigException

__all__ = ["consumer_config"]


def consumer_config(supplied: Mapping[str, Any]) -> ClientConfig:
    """Parse and validate a consumer configuration (Kafka's `ConsumerConfig` checks:
    heartbeat.interval.ms below session.timeout.ms, known assignment strategies)."""
    config = parse_config(CONSUMER_CONFIG, supplied)
    values = config._values
    if values["heartbeat.interval.ms"] >= values["session.timeout.ms"]:
        raise ConfigException("heartbeat.interval.ms must be lower than session.timeout.ms")
    strategies = [s.lower() for s in values["partition.assignment.strategy"]]
    for strategy in strategies:
        if strategy not in ASSIGNORS:
            raise invalid_value(
                "partition.assignment.strategy", strategy, "Unknown assignment strategy"
            )
    if not strategies:
        raise invalid_value("partition.assignment.strategy", "[]", "list is empty")
    values["partition.assignment.strategy"] = strategies
    if values["group.id"] is None and values["group.instance.id"] is not None:
        raise ConfigException("group.instance.id requires group.id")
    return config
