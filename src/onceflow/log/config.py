"""Per-log configuration: Kafka's topic-level names, built from broker `log.*` defaults.

`LogConfig.from_properties(broker_props, topic_overrides)` maps the broker-level keys
(`log.segment.bytes`, `log.roll.ms`/`log.roll.hours`, `log.retention.ms`/`.minutes`/`.hours`,
`log.retention.bytes`, `log.index.interval.bytes`, `log.index.size.max.bytes`,
`log.message.timestamp.type`, `message.max.bytes`, `log.cleanup.policy`,
`log.flush.interval.messages`, `log.flush.interval.ms`) to the topic-level keys
(`segment.bytes`, `segment.ms`, `retention.ms`, `retention.bytes`, `index.interval.bytes`,
`segment.index.bytes`, `message.timestamp.type`, `max.message.bytes`, `cleanup.policy`,
`flush.messages`, `flush.ms`) and applies topic overrides on top.

Deviations from Kafka, written down here once:

- Durable by default. `log.flush.on.ack` (onceflow's own key, topic override `flush.on.ack`,
  default true) makes every acks=1/all produce wait until its data is fsynced, and the high
  watermark only covers fsynced data. Kafka's default leaves flushing to the OS. With
  `flush.on.ack=false` the log behaves like Kafka: the high watermark is the log end offset and
  data is fsynced by `flush.messages`/`flush.ms` (unset means on segment roll and shutdown only).
- `cleanup.policy=compact` is accepted but compaction is not implemented: such topics are kept
  forever (time and size retention apply only to topics whose policy includes `delete`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1

TIMESTAMP_CREATE_TIME = "CreateTime"
TIMESTAMP_LOG_APPEND_TIME = "LogAppendTime"


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def _to_policy(value: Any) -> tuple[str, ...]:
    if isinstance(value, (tuple, list)):
        parts = [str(p).strip() for p in value]
    else:
        parts = [p.strip() for p in str(value).split(",")]
    policy = tuple(p for p in parts if p)
    if not policy or any(p not in ("delete", "compact") for p in policy):
        raise ValueError(f"invalid cleanup.policy: {value!r}")
    return policy


def _to_timestamp_type(value: Any) -> str:
    text = str(value).strip()
    if text not in (TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME):
        raise ValueError(f"invalid message.timestamp.type: {value!r}")
    return text


def _bounded_int(low: int, high: int):
    def convert(value: Any) -> int:
        number = int(str(value).strip()) if not isinstance(value, int) else value
        if isinstance(number, bool) or not low <= number <= high:
            raise ValueError(f"{value!r} is outside [{low}, {high}]")
        return number

    return convert


# topic-level key -> (dataclass field, converter)
_TOPIC_KEYS: dict[str, tuple[str, Any]] = {
    "segment.bytes": ("segment_bytes", _bounded_int(14, MAX_INT32)),
    "segment.ms": ("segment_ms", _bounded_int(1, MAX_INT64)),
    "segment.index.bytes": ("segment_index_bytes", _bounded_int(4, MAX_INT32)),
    "index.interval.bytes": ("index_interval_bytes", _bounded_int(0, MAX_INT32)),
    "retention.ms": ("retention_ms", _bounded_int(-1, MAX_INT64)),
    "retention.bytes": ("retention_bytes", _bounded_int(-1, MAX_INT64)),
    "message.timestamp.type": ("message_timestamp_type", _to_timestamp_type),
    "max.message.bytes": ("max_message_bytes", _bounded_int(0, MAX_INT32)),
    "cleanup.policy": ("cleanup_policy", _to_policy),
    "flush.messages": ("flush_messages", _bounded_int(1, MAX_INT64)),
    "flush.ms": ("flush_ms", _bounded_int(0, MAX_INT64)),
    "flush.on.ack": ("flush_on_ack", _to_bool),
}

# broker-level key -> topic-level key (Kafka's mapping, plus onceflow's log.flush.on.ack)
BROKER_TO_TOPIC: Mapping[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "message.max.bytes": "max.message.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.flush.on.ack": "flush.on.ack",
}

# coarser broker keys, used only when the finer one is absent (Kafka's precedence)
_COARSE_KEYS = (
    ("log.roll.hours", "segment.ms", 3_600_000),
    ("log.retention.hours", "retention.ms", 3_600_000),
    ("log.retention.minutes", "retention.ms", 60_000),  # after hours: minutes win
)

TOPIC_CONFIG_KEYS = frozenset(_TOPIC_KEYS)


@dataclass(frozen=True)
class LogConfig:
    """Effective configuration of one partition log (topic-level names, Kafka defaults)."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3_600_000
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3_600_000
    retention_bytes: int = -1
    message_timestamp_type: str = TIMESTAMP_CREATE_TIME
    max_message_bytes: int = 1024 * 1024 + 12
    cleanup_policy: tuple[str, ...] = ("delete",)
    flush_messages: int | None = None
    flush_ms: int | None = None
    flush_on_ack: bool = True

    @property
    def delete_enabled(self) -> bool:
        """True when time/size retention applies (policy contains `delete`)."""
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        """True when the broker stamps batches with its own clock."""
        return self.message_timestamp_type == TIMESTAMP_LOG_APPEND_TIME

    @classmethod
    def from_properties(
        cls,
        broker_props: Mapping[str, Any] | None = None,
        topic_overrides: Mapping[str, Any] | None = None,
    ) -> LogConfig:
        """Build from broker-level `log.*` properties, then topic-level overrides.

        Raises ValueError for an unknown topic key or a bad value.
        """
        values: dict[str, Any] = {}
        broker_props = broker_props or {}
        for broker_key, topic_key, factor in _COARSE_KEYS:
            finer = BROKER_TO_TOPIC_REVERSE[topic_key]
            if broker_key in broker_props and finer not in broker_props:
                values[topic_key] = int(str(broker_props[broker_key]).strip()) * factor
        for broker_key, topic_key in BROKER_TO_TOPIC.items():
            if broker_key in broker_props:
                values[topic_key] = broker_props[broker_key]
        for key, value in (topic_overrides or {}).items():
            if key not in _TOPIC_KEYS:
                raise ValueError(f"unknown topic config {key!r}")
            values[key] = value
        fields: dict[str, Any] = {}
        for key, value in values.items():
            field, convert = _TOPIC_KEYS[key]
            fields[field] = convert(value)
        return dataclasses.replace(cls(), **fields)

    def to_topic_properties(self) -> dict[str, str]:
        """The effective values under their topic-level names (for DescribeConfigs)."""
        out: dict[str, str] = {}
        for key, (field, _) in _TOPIC_KEYS.items():
            value = getattr(self, field)
            if value is None:
                continue
            if isinstance(value, tuple):
                value = ",".join(value)
            elif isinstance(value, bool):
                value = "true" if value else "false"
            out[key] = str(value)
        return out


BROKER_TO_TOPIC_REVERSE: Mapping[str, str] = {v: k for k, v in BROKER_TO_TOPIC.items()}


def validate_topic_configs(configs: Mapping[str, Any]) -> str | None:
    """Return None when `configs` are valid topic overrides, else a message for INVALID_CONFIG."""
    try:
        LogConfig.from_properties(None, configs)
    except (ValueError, TypeError) as exc:
        return str(exc)
    return None
