"""Producer and consumer configuration: Kafka's property names, defaults, checks and messages.

`producer_config(dict)` and `consumer.config.consumer_config(dict)` (which needs the
consumer's assignors) parse a user's configuration (values may be
typed or strings, as Spark passes them), apply Kafka's defaults, and raise `ConfigException`
with Kafka's message for a bad value (``Invalid value X for configuration NAME: reason``) or a
bad combination. Unknown names are logged and ignored, as Kafka's clients do.

Security properties (confluent-kafka's names: `security.protocol`, `sasl.*`, `ssl.*`) are
checked by `net.security.client_security`; the result is `ClientConfig.security`. Secret values
(`sasl.password`, `ssl.key.password`) never appear in a repr or an error message.

The idempotence checks follow Kafka 3.2+ `ProducerConfig`: idempotence is on by default; with
idempotence enabled `acks` must be all (-1), `retries` non-zero and
`max.in.flight.requests.per.connection` at most 5. When the user set `enable.idempotence`
explicitly a conflict raises; when they did not, idempotence is switched off quietly (logged).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from onceflow.client.errors import ConfigException
from onceflow.client.net.security import (
    PLAINTEXT,
    SECRET_KEYS,
    ClientSecurity,
    client_security,
)

__all__ = [
    "CONSUMER_CONFIG",
    "MAX_IN_FLIGHT_FOR_IDEMPOTENCE",
    "MAX_INT",
    "PRODUCER_CONFIG",
    "ClientConfig",
    "ConfigKey",
    "invalid_value",
    "parse_config",
    "producer_config",
]

log = logging.getLogger(__name__)

MAX_INT = 2**31 - 1
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5
_REQUIRED = object()
_COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass(frozen=True)
class ConfigKey:
    """One configuration property: name, type (int/bool/str/list), default, value check."""

    name: str
    kind: str
    default: Any = _REQUIRED
    check: Callable[[Any], str | None] | None = None


def at_least(minimum: int) -> Callable[[Any], str | None]:
    """Kafka's `Range.atLeast`."""
    return lambda v: None if v >= minimum else f"Value must be at least {minimum}"


def between(minimum: int, maximum: int) -> Callable[[Any], str | None]:
    """Kafka's `Range.between`."""
    return lambda v: (
        None if minimum <= v <= maximum else f"Value must be in range [{minimum},...,{maximum}]"
    )


def one_of(*allowed: str) -> Callable[[Any], str | None]:
    """Kafka's `ValidString.in` (case-insensitive here, values are lower-cased on parse)."""
    return lambda v: None if v in allowed else f"String must be one of: {', '.join(allowed)}"


_COMMON = (
    ConfigKey("bootstrap.servers", "list"),
    ConfigKey("client.id", "str", ""),
    ConfigKey("request.timeout.ms", "int", 30_000, at_least(0)),
    ConfigKey("retry.backoff.ms", "int", 100, at_least(0)),
    ConfigKey("retry.backoff.max.ms", "int", 1_000, at_least(0)),
    ConfigKey("metadata.max.age.ms", "int", 300_000, at_least(0)),
    ConfigKey("reconnect.backoff.ms", "int", 50, at_least(0)),
    ConfigKey("reconnect.backoff.max.ms", "int", 1_000, at_least(0)),
    ConfigKey("socket.connection.setup.timeout.ms", "int", 10_000, at_least(0)),
    ConfigKey("connections.max.idle.ms", "int", 540_000),
    ConfigKey("allow.auto.create.topics", "bool", True),
    # security (confluent-kafka's names; checked by net.security.client_security)
    ConfigKey("security.protocol", "str", "plaintext"),
    ConfigKey("sasl.mechanism", "str", None),
    ConfigKey("sasl.mechanisms", "str", None),
    ConfigKey("sasl.username", "str", None),
    ConfigKey("sasl.password", "str", None),
    ConfigKey("ssl.ca.location", "str", None),
    ConfigKey("ssl.certificate.location", "str", None),
    ConfigKey("ssl.key.location", "str", None),
    ConfigKey("ssl.key.password", "str", None),
    ConfigKey("ssl.endpoint.identification.algorithm", "str", "https"),
    ConfigKey("enable.ssl.certificate.verification", "bool", True),
)

PRODUCER_CONFIG: tuple[ConfigKey, ...] = (
    *_COMMON,
    ConfigKey("acks", "str", "all", one_of("all", "-1", "0", "1")),
    ConfigKey("enable.idempotence", "bool", True),
    ConfigKey("retries", "int", MAX_INT, between(0, MAX_INT)),
    ConfigKey("max.in.flight.requests.per.connection", "int", 5, at_least(1)),
    ConfigKey("linger.ms", "int", 5, at_least(0)),
    ConfigKey("batch.size", "int", 16_384, at_least(0)),
    ConfigKey("compression.type", "str", "none", one_of(*_COMPRESSION)),
    ConfigKey("delivery.timeout.ms", "int", 120_000, at_least(0)),
    ConfigKey("max.block.ms", "int", 60_000, at_least(0)),
    ConfigKey("buffer.memory", "int", 33_554_432, at_least(0)),
    ConfigKey("max.request.size", "int", 1_048_576, at_least(0)),
    ConfigKey("transactional.id", "str", None),
    ConfigKey("transaction.timeout.ms", "int", 60_000),
    ConfigKey("partitioner.ignore.keys", "bool", False),
)

CONSUMER_CONFIG: tuple[ConfigKey, ...] = (
    *_COMMON,
    ConfigKey("group.id", "str", None),
    ConfigKey("group.instance.id", "str", None),
    ConfigKey("session.timeout.ms", "int", 45_000, at_least(1)),
    ConfigKey("heartbeat.interval.ms", "int", 3_000, at_least(1)),
    ConfigKey("max.poll.interval.ms", "int", 300_000, at_least(1)),
    ConfigKey("partition.assignment.strategy", "list", ["range", "roundrobin"]),
    ConfigKey("enable.auto.commit", "bool", True),
    ConfigKey("auto.commit.interval.ms", "int", 5_000, at_least(0)),
    ConfigKey(
        "isolation.level", "str", "read_uncommitted", one_of("read_committed", "read_uncommitted")
    ),
    ConfigKey("auto.offset.reset", "str", "latest", one_of("latest", "earliest", "none")),
    ConfigKey("fetch.min.bytes", "int", 1, at_least(0)),
    ConfigKey("fetch.max.wait.ms", "int", 500, at_least(0)),
    ConfigKey("max.partition.fetch.bytes", "int", 1_048_576, at_least(0)),
    ConfigKey("fetch.max.bytes", "int", 52_428_800, at_least(0)),
    ConfigKey("max.poll.records", "int", 500, at_least(1)),
    ConfigKey("check.crcs", "bool", True),
    ConfigKey("default.api.timeout.ms", "int", 60_000, at_least(0)),
)


class ClientConfig(Mapping[str, Any]):
    """Parsed configuration: every known property with its value; `originals` holds what the
    user supplied (Kafka's `originals()`), used where Kafka distinguishes "set" from "default"."""

    def __init__(
        self,
        values: dict[str, Any],
        originals: Mapping[str, Any],
        security: ClientSecurity = PLAINTEXT,
    ):
        self._values = values
        self.originals = dict(originals)
        self.security = security

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def user_set(self, name: str) -> bool:
        """True when the user supplied `name`."""
        return name in self.originals

    def __repr__(self) -> str:
        return f"ClientConfig({hide_secrets(self._values)!r})"


def hide_secrets(config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` with the values of secret properties replaced (for reprs and logs)."""
    return {k: ("[hidden]" if k in SECRET_KEYS and v is not None else v) for k, v in config.items()}


def invalid_value(name: str, value: Any, reason: str) -> ConfigException:
    if name in SECRET_KEYS:
        value = "[hidden]"
    return ConfigException(f"Invalid value {value} for configuration {name}: {reason}")


def _convert(key: ConfigKey, value: Any) -> Any:
    if value is None:
        return None
    if key.kind == "int":
        if isinstance(value, bool):
            raise invalid_value(key.name, value, "Expected value to be a 32-bit integer")
        try:
            return int(str(value).strip()) if isinstance(value, str) else int(value)
        except (TypeError, ValueError):
            raise invalid_value(key.name, value, "Not a number of type INT") from None
    if key.kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise invalid_value(key.name, value, "Expected value to be either true or false")
    if key.kind == "list":
        items = value.split(",") if isinstance(value, str) else list(value)
        return [str(item).strip() for item in items if str(item).strip()]
    text = str(value).strip()
    return text.lower() if key.check is not None else text


def parse_config(definitions: tuple[ConfigKey, ...], supplied: Mapping[str, Any]) -> ClientConfig:
    """Parse `supplied` against `definitions`: convert, default, check each value."""
    values: dict[str, Any] = {}
    known = {key.name for key in definitions}
    for name in supplied:
        if name not in known:
            log.warning("The configuration '%s' was supplied but isn't a known config.", name)
    for key in definitions:
        if key.name in supplied:
            value = _convert(key, supplied[key.name])
        elif key.default is _REQUIRED:
            raise ConfigException(
                f'Missing required configuration "{key.name}" which has no default value.'
            )
        else:
            value = key.default
        if value is not None and key.check is not None:
            reason = key.check(value)
            if reason is not None:
                raise invalid_value(key.name, supplied.get(key.name, value), reason)
        values[key.name] = value
    if not values["bootstrap.servers"]:
        raise invalid_value("bootstrap.servers", supplied.get("bootstrap.servers"), "list is empty")
    originals = {k: v for k, v in supplied.items() if k in known}
    return ClientConfig(values, originals, client_security(supplied))


def producer_config(supplied: Mapping[str, Any]) -> ClientConfig:
    """Parse and validate a producer configuration (see the module docstring)."""
    config = parse_config(PRODUCER_CONFIG, supplied)
    values = config._values
    values["acks"] = -1 if values["acks"] == "all" else int(values["acks"])
    _check_idempotence(config)
    _check_delivery_timeout(config)
    return config


def _check_idempotence(config: ClientConfig) -> None:
    values = config._values
    explicit = config.user_set("enable.idempotence")
    if values["enable.idempotence"]:
        conflicts = []
        if values["retries"] == 0:
            conflicts.append(
                ("retries", "Must set retries to non-zero when using the idempotent producer.")
            )
        if values["acks"] != -1:
            conflicts.append(
                (
                    "acks",
                    "Must set acks to all in order to use the idempotent producer. "
                    "Otherwise we cannot guarantee idempotence.",
                )
            )
        if values["max.in.flight.requests.per.connection"] > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
            conflicts.append(
                (
                    "max.in.flight.requests.per.connection",
                    "Must set max.in.flight.requests.per.connection to at most 5 to use the "
                    "idempotent producer.",
                )
            )
        if conflicts and explicit:
            raise ConfigException(conflicts[0][1])
        for name, _message in conflicts:
            log.info("Idempotence will be disabled because %s is set to %s.", name, values[name])
        if conflicts:
            values["enable.idempotence"] = False
    if config.user_set("transactional.id") and not values["enable.idempotence"]:
        raise ConfigException("Cannot set a transactional.id without also enabling idempotence.")


def _check_delivery_timeout(config: ClientConfig) -> None:
    values = config._values
    floor = values["linger.ms"] + values["request.timeout.ms"]
    if values["delivery.timeout.ms"] >= floor:
        return
    if config.user_set("delivery.timeout.ms"):
        raise ConfigException(
            "delivery.timeout.ms should be equal to or larger than linger.ms + request.timeout.ms"
        )
    log.warning("delivery.timeout.ms raised to linger.ms + request.timeout.ms = %d", floor)
    values["delivery.timeout.ms"] = floor
