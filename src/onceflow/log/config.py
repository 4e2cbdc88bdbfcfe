"""Per-log configuration: Kafka's topic-level names, built from broker `log.*` defaults.

`LogConfig.from_properties(broker_props, topic_overrides)` maps the broker-level keys
(`log.segment.bytes`, `log.roll.ms`/`log.roll.hours`, `log.retention.ms`/`.minutes`/`.hours`,
`log.retention.bytes`, `log.index.interval.bytes`, `log.index.size.max.bytes`,
`log.message.timestamp.type`, `message.max.bytes`, `log.cleanup.policy`,
`log.flush.interval.messages`, `log.flush.interval.ms`, `log.cleaner.min.cleanable.ratio`,
`log.cleaner.delete.retention.ms`, `log.cleaner.min/max.compaction.lag.ms`) to the topic-level
keys (`segment.bytes`, `segment.ms`, `retention.ms`, `retention.bytes`, `index.interval.bytes`,
`segment.index.bytes`, `message.timestamp.type`, `max.message.bytes`, `cleanup.policy`,
`flush.messages`, `flush.ms`) and applies topic overrides on top.

Deviations from Kafka, written down here once:

- Durable by default. `log.flush.on.ack` (onceflow's own key, topic override `flush.on.ack`,
  default true) makes every acks=1/all produce wait until its data is fsynced, and the high
  watermark only covers fsynced data. Kafka's default leaves flushing to the OS. With
  `flush.on.ack=false` the log behaves like Kafka: the high watermark is the log end offset and
  data is fsynced by `flush.messages`/`flush.ms` (unset means on segment roll and shutdown only).
- `cleanup.policy=compact` logs are compacted by the log cleaner (`log.cleaner`, one task);
  time and size retention apply only to topics whose policy includes `delete`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
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


def _bounded_int(low: int, high: int) -> Callable[[Any], int]:
    def convert(value: Any) -> int:
        try:
            number = int(str(value).strip()) if not isinstance(value, int) else value
        except ValueError:
            raise ValueError(f"{value!r} is not a whole number") from None
        if isinstance(number, bool) or not low <= number <= high:
            raise ValueError(f"{value!r} is outside [{low}, {high}]")
        return number

    return convert


def _bounded_float(low: float, high: float) -> Callable[[Any], float]:
    def convert(value: Any) -> float:
        try:
            number = float(str(value).strip())
        except ValueError:
            raise ValueError(f"{value!r} is not a number") from None
        if not low <= number <= high:
            raise ValueError(f"{value!r} is outside [{low}, {high}]")
        return number

    return convert


def _choice(*allowed: str) -> Callable[[Any], str]:
    def convert(value: Any) -> str:
        text = str(value).strip()
        if text not in allowed:
            raise ValueError(f"{value!r} is not one of {', '.join(allowed)}")
        return text

    return convert


def _to_list(value: Any) -> str:
    return ",".join(p.strip() for p in str(value).split(",") if p.strip())


def _gzip_level(value: Any) -> int:
    level = _bounded_int(-1, 9)(value)
    if level == 0:
        raise ValueError(f"{value!r} is not -1 or in [1, 9]")
    return level


def _remote_storage(value: Any) -> bool:
    if _to_bool(value):
        raise ValueError("tiered storage is not supported by this broker")
    return False


COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

# topic-level key -> (dataclass field, converter, DescribeConfigs type); Kafka's topic
# configs with Kafka's validation. Applied on one node: segment/retention/flush/index keys,
# cleanup.policy, max.message.bytes, message.timestamp.type, compression.type,
# message.timestamp.{before,after,difference}.max.ms, min.insync.replicas and the cleaner's
# delete.retention.ms, min/max.compaction.lag.ms, min.cleanable.dirty.ratio (`log.cleaner`).
# `ACCEPTED_ONLY` lists the keys that are validated, stored and described but change nothing
# here (replication, throttling, tiered storage).
_TOPIC_KEYS: dict[str, tuple[str, Any, str]] = {
    "segment.bytes": ("segment_bytes", _bounded_int(14, MAX_INT32), "int"),
    "segment.ms": ("segment_ms", _bounded_int(1, MAX_INT64), "long"),
    "segment.index.bytes": ("segment_index_bytes", _bounded_int(4, MAX_INT32), "int"),
    "index.interval.bytes": ("index_interval_bytes", _bounded_int(0, MAX_INT32), "int"),
    "retention.ms": ("retention_ms", _bounded_int(-1, MAX_INT64), "long"),
    "retention.bytes": ("retention_bytes", _bounded_int(-1, MAX_INT64), "long"),
    "message.timestamp.type": ("message_timestamp_type", _to_timestamp_type, "string"),
    "max.message.bytes": ("max_message_bytes", _bounded_int(0, MAX_INT32), "int"),
    "cleanup.policy": ("cleanup_policy", _to_policy, "list"),
    "flush.messages": ("flush_messages", _bounded_int(1, MAX_INT64), "long"),
    "flush.ms": ("flush_ms", _bounded_int(0, MAX_INT64), "long"),
    "flush.on.ack": ("flush_on_ack", _to_bool, "boolean"),
    "compression.type": ("compression_type", _choice(*COMPRESSION_TYPES), "string"),
    "message.timestamp.before.max.ms": (
        "message_timestamp_before_max_ms",
        _bounded_int(0, MAX_INT64),
        "long",
    ),
    "message.timestamp.after.max.ms": (
        "message_timestamp_after_max_ms",
        _bounded_int(0, MAX_INT64),
        "long",
    ),
    "message.timestamp.difference.max.ms": (
        "message_timestamp_difference_max_ms",
        _bounded_int(0, MAX_INT64),
        "long",
    ),
    "min.insync.replicas": ("min_insync_replicas", _bounded_int(1, MAX_INT32), "int"),
    # accepted only
    "compression.gzip.level": ("compression_gzip_level", _gzip_level, "int"),
    "compression.lz4.level": ("compression_lz4_level", _bounded_int(1, 17), "int"),
    "compression.zstd.level": ("compression_zstd_level", _bounded_int(-131072, 22), "int"),
    "delete.retention.ms": ("delete_retention_ms", _bounded_int(0, MAX_INT64), "long"),
    "file.delete.delay.ms": ("file_delete_delay_ms", _bounded_int(0, MAX_INT64), "long"),
    "follower.replication.throttled.replicas": ("follower_throttled", _to_list, "list"),
    "leader.replication.throttled.replicas": ("leader_throttled", _to_list, "list"),
    "local.retention.bytes": ("local_retention_bytes", _bounded_int(-2, MAX_INT64), "long"),
    "local.retention.ms": ("local_retention_ms", _bounded_int(-2, MAX_INT64), "long"),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _bounded_int(1, MAX_INT64), "long"),
    "message.downconversion.enable": ("message_downconversion_enable", _to_bool, "boolean"),
    "message.format.version": ("message_format_version", str, "string"),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _bounded_float(0, 1), "double"),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _bounded_int(0, MAX_INT64), "long"),
    "preallocate": ("preallocate", _to_bool, "boolean"),
    "remote.storage.enable": ("remote_storage_enable", _remote_storage, "boolean"),
    "remote.log.copy.disable": ("remote_log_copy_disable", _to_bool, "boolean"),
    "remote.log.delete.on.disable": ("remote_log_delete_on_disable", _to_bool, "boolean"),
    "segment.jitter.ms": ("segment_jitter_ms", _bounded_int(0, MAX_INT64), "long"),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _to_bool, "boolean"),
}
CLEANER_KEYS = frozenset(
    {
        "delete.retention.ms",
        "max.compaction.lag.ms",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
    }
)
ACCEPTED_ONLY = (
    frozenset(list(_TOPIC_KEYS)[list(_TOPIC_KEYS).index("compression.gzip.level") :]) - CLEANER_KEYS
)
TOPIC_CONFIG_TYPES: Mapping[str, str] = {key: entry[2] for key, entry in _TOPIC_KEYS.items()}

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
    "compression.type": "compression.type",
    "min.insync.replicas": "min.insync.replicas",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
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
    compression_type: str = "producer"
    message_timestamp_before_max_ms: int = MAX_INT64
    message_timestamp_after_max_ms: int = MAX_INT64
    message_timestamp_difference_max_ms: int = MAX_INT64
    min_insync_replicas: int = 1
    # accepted only (see ACCEPTED_ONLY)
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    delete_retention_ms: int = 86_400_000
    file_delete_delay_ms: int = 60_000
    follower_throttled: str = ""
    leader_throttled: str = ""
    local_retention_bytes: int = -2
    local_retention_ms: int = -2
    max_compaction_lag_ms: int = MAX_INT64
    message_downconversion_enable: bool = True
    message_format_version: str = "3.0-IV1"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    preallocate: bool = False
    remote_storage_enable: bool = False
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    segment_jitter_ms: int = 0
    unclean_leader_election_enable: bool = False

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
            field, convert, _type = _TOPIC_KEYS[key]
            try:
                fields[field] = convert(value)
            except ValueError as exc:
                raise ValueError(f"invalid value for {key}: {exc}") from None
        return dataclasses.replace(cls(), **fields)

    def to_topic_properties(self) -> dict[str, str]:
        """The effective values under their topic-level names (for DescribeConfigs)."""
        out: dict[str, str] = {}
        for key, (field, _convert, _type) in _TOPIC_KEYS.items():
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
