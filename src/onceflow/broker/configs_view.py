"""Config descriptions for DescribeConfigs and CreateTopics: values, sources, synonyms, types.

Topic configs are the log package's topic-level keys (`log.config`); a topic's value comes from
its override (source TOPIC_CONFIG), else the broker key it maps to when that was set
(STATIC_BROKER_CONFIG), else the default (DEFAULT_CONFIG). Broker configs are `BROKER_CONFIGS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from onceflow.broker.config import BROKER_CONFIGS, BrokerConfig, describe_value
from onceflow.log.config import BROKER_TO_TOPIC_REVERSE, TOPIC_CONFIG_TYPES, LogConfig


class ConfigResourceType(IntEnum):
    """Kafka's `ConfigResource.Type`: the resource a config request names. onceflow serves
    TOPIC and BROKER; BROKER_LOGGER, CLIENT_METRICS and GROUP (KIP-848 group configs) are not."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


def unsupported_resource_type(resource_type: int) -> str:
    """Kafka's INVALID_REQUEST message for a config resource type its broker does not serve."""
    try:
        name = ConfigResourceType(resource_type).name
    except ValueError:
        name = str(resource_type)
    return f"Unsupported resource type: {name}"


class ConfigSource(IntEnum):
    """Kafka's `DescribeConfigsResponse.ConfigSource`."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigType(IntEnum):
    """Kafka's `DescribeConfigsResponse.ConfigType` (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


_TYPE_NAMES = {
    "boolean": ConfigType.BOOLEAN,
    "string": ConfigType.STRING,
    "int": ConfigType.INT,
    "long": ConfigType.LONG,
    "double": ConfigType.DOUBLE,
    "list": ConfigType.LIST,
}
# topic key -> broker keys that set it, most specific first (Kafka's synonym order)
_BROKER_SYNONYMS = {
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
}
_BROKER_TYPES = {
    "int": ConfigType.INT,
    "long": ConfigType.LONG,
    "bool": ConfigType.BOOLEAN,
    "str": ConfigType.STRING,
    "password": ConfigType.PASSWORD,
}


@dataclass(frozen=True)
class DescribedConfig:
    """One described config with its synonyms (most specific first)."""

    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]
    documentation: str | None = None
    read_only: bool = False
    sensitive: bool = False


def topic_config_entries(
    config: BrokerConfig, log_config: LogConfig, overrides: dict[str, str]
) -> list[DescribedConfig]:
    """Every topic-level config of a topic with its effective value and source."""
    entries = []
    for name, value in sorted(log_config.to_topic_properties().items()):
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if name in overrides:
            synonyms.append((name, overrides[name], ConfigSource.TOPIC_CONFIG))
        broker_keys = _BROKER_SYNONYMS.get(name) or (BROKER_TO_TOPIC_REVERSE.get(name),)
        known = [k for k in broker_keys if k is not None and k in BROKER_CONFIGS]
        for broker_key in known:
            if config.is_explicit(broker_key):
                value_text = describe_value(config.get(broker_key))
                synonyms.append((broker_key, value_text, ConfigSource.STATIC_BROKER_CONFIG))
        for broker_key in known:
            default = describe_value(BROKER_CONFIGS[broker_key].default)
            if default is not None:
                synonyms.append((broker_key, default, ConfigSource.DEFAULT_CONFIG))
                break
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(
            DescribedConfig(
                name, value, source, _TYPE_NAMES[TOPIC_CONFIG_TYPES[name]], tuple(synonyms)
            )
        )
    return entries


def broker_config_entries(
    config: BrokerConfig, dynamic: dict[str, str] | None = None
) -> list[DescribedConfig]:
    """The stored dynamic configs (`broker.dynamic_configs`: accepted, no effect), then every
    other known broker config with its value and source (static or default)."""
    entries = [
        DescribedConfig(
            name,
            value,
            ConfigSource.DYNAMIC_BROKER_CONFIG,
            ConfigType.STRING,
            ((name, value, ConfigSource.DYNAMIC_BROKER_CONFIG),),
        )
        for name, value in sorted((dynamic or {}).items())
    ]
    for name, value in config.items():
        if dynamic and name in dynamic:  # one entry per name, as Kafka: the dynamic one wins
            continue
        definition = BROKER_CONFIGS[name]
        sensitive = definition.type == "password"
        text = None if sensitive else describe_value(value)  # as Kafka: never a password
        source = (
            ConfigSource.STATIC_BROKER_CONFIG
            if config.is_explicit(name)
            else ConfigSource.DEFAULT_CONFIG
        )
        synonyms = ((name, text, source),)
        entries.append(
            DescribedConfig(
                name,
                text,
                source,
                _BROKER_TYPES.get(definition.type, ConfigType.STRING),
                synonyms,
                documentation=definition.doc or None,
                read_only=True,
                sensitive=sensitive,
            )
        )
    return entries
