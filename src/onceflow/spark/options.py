"""Options of the `onceflow` Spark data source, named as Spark's built-in Kafka source and sink.

Spark hands a data source its options as a case-insensitive dict of strings; `dict(options)`
lower-cases the keys, so every name here is looked up in lower case. `kafka.*` options go to
the onceflow client without the prefix (`kafka.bootstrap.servers` -> `bootstrap.servers`), as
Spark's Kafka connector passes them to the Kafka client. Every check here raises
`OptionError` with a message naming the option, so a bad option fails the query at start.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "OptionError",
    "SinkOptions",
    "SourceOptions",
    "client_config",
    "parse_sink_options",
    "parse_source_options",
]

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"
EXACTLY_ONCE = "exactly_once"
AT_LEAST_ONCE = "at_least_once"
# a transaction lives from a task's first record to the driver's commit: a whole micro-batch
DEFAULT_SINK_TRANSACTION_TIMEOUT_MS = 300_000
DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's kafkaConsumer.pollTimeoutMs (spark.network.timeout)

# kafka.* keys Spark's connector refuses because the connector manages them itself
_MANAGED = {
    "kafka.auto.offset.reset": "set startingOffsets instead",
    "kafka.enable.auto.commit": "the source never auto-commits offsets",
    "kafka.key.deserializer": "keys are always read as bytes",
    "kafka.value.deserializer": "values are always read as bytes",
    "kafka.key.serializer": "keys are always written as bytes",
    "kafka.value.serializer": "values are always written as bytes",
    "kafka.interceptor.classes": "not supported",
    "kafka.transactional.id": "set transactional.id.prefix; each task gets its own id",
}


class OptionError(ValueError):
    """An option is missing, unknown in combination, or has a bad value."""


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """The `kafka.*` options without their prefix, for the onceflow client."""
    config = {}
    for key, value in options.items():
        if not key.startswith("kafka."):
            continue
        if key in _MANAGED:
            raise OptionError(f"Kafka option '{key[6:]}' is not supported: {_MANAGED[key]}")
        config[key[6:]] = value
    if not config.get("bootstrap.servers"):
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified")
    return config


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    value = options.get(key)
    if value is None:
        return default
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise OptionError(f"Option '{key}' must be true or false, not {value!r}")


def _int(options: Mapping[str, str], key: str, minimum: int = 1) -> int | None:
    value = options.get(key)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise OptionError(f"Option '{key}' must be an integer, not {value!r}") from None
    if number < minimum:
        raise OptionError(f"Option '{key}' must be >= {minimum}, not {number}")
    return number


def _int_or(options: Mapping[str, str], key: str, default: int) -> int:
    value = _int(options, key, minimum=0)
    return default if value is None else value


def _port(options: Mapping[str, str]) -> int | None:
    port = _int(options, "metricsport", minimum=1)
    if port is not None and port > 65535:
        raise OptionError(f"Option 'metricsPort' must be a TCP port (1-65535), not {port}")
    return port


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h)?\s*$")
_UNIT_MS = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}


def _duration_ms(options: Mapping[str, str], key: str) -> int | None:
    value = options.get(key)
    if value is None:
        return None
    match = _DURATION.match(value)
    if not match:
        raise OptionError(f"Option '{key}' must be a duration such as '15m' or '30s'")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


# ---------------------------------------------------------------------------------- source


@dataclass(frozen=True)
class SourceOptions:
    """The parsed source options; picklable, shipped to every read task."""

    client: dict[str, str]
    subscribe: tuple[str, ...] | None
    subscribe_pattern: str | None
    assign: dict[str, tuple[int, ...]] | None
    starting: Any  # "earliest" | "latest" | {topic: {partition: offset}}
    ending: Any  # batch only
    starting_timestamps: Any  # int (all partitions) | {topic: {partition: ts}} | None
    ending_timestamps: Any
    timestamp_strategy: str  # startingOffsetsByTimestampStrategy: error | latest
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None
    max_records_per_partition: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    read_committed: bool
    group_id: str | None  # kafka.group.id: commit each finished batch's offsets to this group
    fetch_offset_retries: int
    fetch_offset_retry_interval_ms: int
    reuse_clients: bool = True  # keep consumers between tasks in a Python worker (pools)
    metrics_port: int | None = None  # driver-side Prometheus endpoint (spark.metrics)

    def matches(self, topic: str) -> bool:
        """Whether a topic belongs to the query (subscribe, subscribePattern or assign)."""
        if self.subscribe is not None:
            return topic in self.subscribe
        if self.subscribe_pattern is not None:
            return re.fullmatch(self.subscribe_pattern, topic) is not None
        return topic in (self.assign or {})


def _offsets_json(key: str, value: str, batch: bool) -> Any:
    text = value.strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        raise OptionError(
            f"Option '{key}' must be earliest, latest or JSON such as "
            '{"topicA":{"0":23,"1":-2}}'
        ) from None
    if not isinstance(parsed, dict) or not all(isinstance(p, dict) for p in parsed.values()):
        raise OptionError(f"Option '{key}' must map topics to {{partition: offset}} objects")
    out: dict[str, dict[int, int]] = {}
    for topic, partitions in parsed.items():
        out[topic] = {}
        for partition, offset in partitions.items():
            try:
                out[topic][int(partition)] = int(offset)
            except (TypeError, ValueError):
                raise OptionError(f"Option '{key}': bad partition or offset in {topic}") from None
            if offset < -2:
                raise OptionError(f"Option '{key}': offset {offset} of {topic}-{partition}")
            if batch and key == "startingoffsets" and offset == -1:
                raise OptionError("startingOffsets for a batch query cannot be latest (-1)")
            if batch and key == "endingoffsets" and offset == -2:
                raise OptionError("endingOffsets for a batch query cannot be earliest (-2)")
    return out


def _timestamps(options: Mapping[str, str], single: str, by_partition: str) -> Any:
    if single in options:
        value = _int(options, single, minimum=0)
        return value
    if by_partition in options:
        parsed = _offsets_json(by_partition, options[by_partition], batch=False)
        if isinstance(parsed, str):
            raise OptionError(f"Option '{by_partition}' must be JSON of timestamps")
        return parsed
    return None


def parse_source_options(options: Mapping[str, str], batch: bool) -> SourceOptions:
    """Validate the source options of a streaming (`batch=False`) or batch query."""
    options = {k.lower(): v for k, v in options.items()}
    client = client_config(options)
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if options.get(k)]
    if len(chosen) != 1:
        raise OptionError(
            "Exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be "
            f"specified, not {len(chosen)}"
        )
    subscribe = pattern = assign = None
    if chosen[0] == "subscribe":
        subscribe = tuple(t.strip() for t in options["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise OptionError("Option 'subscribe' names no topic")
    elif chosen[0] == "subscribepattern":
        pattern = options["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"Option 'subscribePattern' is not a regex: {exc}") from None
    else:
        try:
            parsed = json.loads(options["assign"])
            assign = {t: tuple(int(p) for p in ps) for t, ps in parsed.items()}
        except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
            raise OptionError(
                'Option \'assign\' must be JSON such as {"topicA":[0,1],"topicB":[2,4]}'
            ) from None
    if batch:
        for key in ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"):
            if key in options:
                raise OptionError(f"Option '{key}' is for streaming queries only")
    elif "endingoffsets" in options or "endingoffsetsbytimestamp" in options:
        raise OptionError("Option 'endingOffsets' is for batch queries only")
    starting = _offsets_json(
        "startingoffsets", options.get("startingoffsets", "earliest" if batch else "latest"), batch
    )
    if batch and starting == "latest":
        raise OptionError("startingOffsets for a batch query cannot be latest")
    ending = _offsets_json("endingoffsets", options.get("endingoffsets", "latest"), batch)
    if batch and ending == "earliest":
        raise OptionError("endingOffsets for a batch query cannot be earliest")
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError("Option 'startingOffsetsByTimestampStrategy' must be error or latest")
    group_id = client.pop("group.id", None)  # the reader itself never joins a group
    isolation = client.pop("isolation.level", READ_COMMITTED).strip().lower()
    if isolation not in (READ_COMMITTED, READ_UNCOMMITTED):
        raise OptionError(
            f"Option 'kafka.isolation.level' must be {READ_COMMITTED} or {READ_UNCOMMITTED}"
        )
    max_delay = _duration_ms(options, "maxtriggerdelay")
    return SourceOptions(
        client=client,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        starting_timestamps=_timestamps(options, "startingtimestamp", "startingoffsetsbytimestamp"),
        ending_timestamps=_timestamps(options, "endingtimestamp", "endingoffsetsbytimestamp")
        if batch
        else None,
        timestamp_strategy=strategy,
        max_offsets_per_trigger=_int(options, "maxoffsetspertrigger"),
        min_offsets_per_trigger=_int(options, "minoffsetspertrigger"),
        max_trigger_delay_ms=900_000 if max_delay is None else max_delay,
        min_partitions=_int(options, "minpartitions"),
        max_records_per_partition=_int(options, "maxrecordsperpartition"),
        fail_on_data_loss=_bool(options, "failondataloss", True),
        include_headers=_bool(options, "includeheaders", False),
        poll_timeout_ms=_int(options, "kafkaconsumer.polltimeoutms") or DEFAULT_POLL_TIMEOUT_MS,
        read_committed=isolation == READ_COMMITTED,
        group_id=group_id,
        fetch_offset_retries=_int_or(options, "fetchoffset.numretries", 3),
        fetch_offset_retry_interval_ms=_int_or(options, "fetchoffset.retryintervalms", 1000),
        reuse_clients=_bool(options, "reuseclients", True),
        metrics_port=_port(options),
    )


# ---------------------------------------------------------------------------------- sink


@dataclass(frozen=True)
class SinkOptions:
    """The parsed sink options; picklable, shipped to every write task."""

    client: dict[str, str]
    topic: str | None
    delivery_guarantee: str
    transactional_id_prefix: str | None
    progress_topic: str | None
    transaction_timeout_ms: int
    checkpoint_location: str | None  # only when set with .option("checkpointLocation", ...)
    faults: str  # test fault points (onceflow.spark.faults); empty in production
    faults_dir: str | None
    recreate_markers_at_batch: int | None = None  # recovery after markers expired
    job_id: str | None = None  # batch writes: a re-run with the same id finishes the job once
    reuse_clients: bool = True  # keep producers between tasks in a Python worker (pools)
    metrics_port: int | None = None  # driver-side Prometheus endpoint (spark.metrics)

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == EXACTLY_ONCE


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the sink options."""
    options = {k.lower(): v for k, v in options.items()}
    client = client_config(options)
    guarantee = options.get("deliveryguarantee", EXACTLY_ONCE).strip().lower()
    if guarantee not in (EXACTLY_ONCE, AT_LEAST_ONCE):
        raise OptionError(
            f"Option 'deliveryGuarantee' must be {EXACTLY_ONCE} or {AT_LEAST_ONCE}, "
            f"not {guarantee!r}"
        )
    timeout = _int(options, "kafka.transaction.timeout.ms")
    client.pop("transaction.timeout.ms", None)
    prefix = options.get("transactional.id.prefix")
    if prefix is not None and not prefix.strip():
        raise OptionError("Option 'transactional.id.prefix' must not be empty")
    job_id = options.get("jobid")
    if job_id is not None and (not job_id.strip() or guarantee != EXACTLY_ONCE):
        raise OptionError(
            "Option 'jobId' must be a non-empty name, with deliveryGuarantee=exactly_once"
        )
    return SinkOptions(
        client=client,
        topic=options.get("topic"),
        delivery_guarantee=guarantee,
        transactional_id_prefix=prefix,
        progress_topic=options.get("progresstopic"),
        transaction_timeout_ms=timeout or DEFAULT_SINK_TRANSACTION_TIMEOUT_MS,
        checkpoint_location=options.get("checkpointlocation"),
        faults=options.get("onceflow.faults", ""),
        faults_dir=options.get("onceflow.faults.dir"),
        recreate_markers_at_batch=_int(options, "recreatemarkersatbatch", minimum=1),
        job_id=job_id,
        reuse_clients=_bool(options, "reuseclients", True),
        metrics_port=_port(options),
    )
