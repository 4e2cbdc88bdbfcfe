"""Broker configuration: Kafka's dotted names, read from a properties file and `--set` overrides.

`BrokerConfig.load(path, overrides)` merges, in order, the defaults below, a Java-properties
file and `key=value` overrides, converts each value to its type and checks its range. A bad
value raises `ConfigError` with a message naming the key; an unknown key is kept (as text) and
reported once through `unknown_keys`, as Kafka logs unknown configs and carries on.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from onceflow.broker.listeners import (
    DEFAULT_PROTOCOL_MAP,
    Listener,
    ListenerConfigError,
    ListenerSpec,
    parse_endpoint,
    parse_listeners,
)
from onceflow.properties import parse_properties

__all__ = [
    "BROKER_CONFIGS",
    "BrokerConfig",
    "ConfigDef",
    "ConfigError",
    "Listener",
    "parse_listener",
    "parse_properties",
]


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key."""


@dataclass(frozen=True)
class ConfigDef:
    """One broker config: its Kafka name, type (int, long, bool, str, or password: a str that
    DescribeConfigs never shows), default and lower bound."""

    name: str
    type: str
    default: Any
    minimum: int | None = None
    doc: str = ""


def _defs(*defs: ConfigDef) -> Mapping[str, ConfigDef]:
    return {d.name: d for d in defs}


_HOUR_MS = 3_600_000

# Kafka's names and defaults. None means "not set" (a derived key or the next fallback decides).
BROKER_CONFIGS: Final[Mapping[str, ConfigDef]] = _defs(
    ConfigDef("node.id", "int", 1, 0, "this broker's id, also the controller id"),
    ConfigDef("broker.id", "int", None, 0, "older name of node.id"),
    ConfigDef("listeners", "str", "PLAINTEXT://127.0.0.1:9092", None, "address to bind"),
    ConfigDef(
        "advertised.listeners",
        "str",
        None,
        None,
        "per listener name, the address given to clients that connect through it",
    ),
    ConfigDef(
        "listener.security.protocol.map",
        "str",
        DEFAULT_PROTOCOL_MAP,
        None,
        "NAME:PROTOCOL pairs: the security protocol of each listener name",
    ),
    ConfigDef(
        "inter.broker.listener.name", "str", None, None, "accepted and ignored (a single node)"
    ),
    ConfigDef(
        "security.inter.broker.protocol", "str", None, None, "accepted and ignored (a single node)"
    ),
    ConfigDef("ssl.keystore.type", "str", "PEM", None, "only PEM is supported"),
    ConfigDef("ssl.keystore.location", "str", None, None, "PEM file: certificate chain and key"),
    ConfigDef("ssl.keystore.certificate.chain", "password", None, None, "PEM certificate chain"),
    ConfigDef("ssl.keystore.key", "password", None, None, "PEM private key"),
    ConfigDef("ssl.keystore.password", "password", None, None, "unused for PEM (Kafka's too)"),
    ConfigDef("ssl.key.password", "password", None, None, "password of an encrypted PEM key"),
    ConfigDef("ssl.truststore.type", "str", "PEM", None, "only PEM is supported"),
    ConfigDef("ssl.truststore.location", "str", None, None, "PEM file of trusted CA certificates"),
    ConfigDef("ssl.truststore.certificates", "password", None, None, "PEM CA certificates"),
    ConfigDef("ssl.truststore.password", "password", None, None, "unused for PEM"),
    ConfigDef(
        "ssl.client.auth", "str", "none", None, "none, requested or required: client certificates"
    ),
    ConfigDef(
        "ssl.principal.mapping.rules",
        "str",
        "DEFAULT",
        None,
        "RULE:pattern/replacement/[LU] list mapping a certificate subject to a user name",
    ),
    ConfigDef("ssl.enabled.protocols", "str", "TLSv1.2,TLSv1.3", None, "TLSv1.2 and/or TLSv1.3"),
    ConfigDef(
        "sasl.enabled.mechanisms",
        "str",
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        None,
        "mechanisms SASL listeners offer (Kafka's default GSSAPI is not supported)",
    ),
    ConfigDef(
        "sasl.server.max.receive.size",
        "int",
        524288,
        1,
        "largest request frame accepted before authentication",
    ),
    ConfigDef(
        "connection.failed.authentication.delay.ms",
        "int",
        100,
        0,
        "how long a failed login waits before its answer and the close",
    ),
    ConfigDef(
        "connections.max.reauth.ms",
        "long",
        0,
        0,
        "KIP-368: SASL session lifetime (0: sessions do not expire)",
    ),
    ConfigDef(
        "sasl.oauthbearer.jwks.endpoint.url",
        "str",
        None,
        None,
        "OAUTHBEARER: JWKS (file:// or http(s)://) of signed tokens; unset: unsecured tokens",
    ),
    ConfigDef(
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "long",
        3600000,
        1,
        "OAUTHBEARER: how often the JWKS is reloaded (also on an unknown kid)",
    ),
    ConfigDef(
        "sasl.oauthbearer.expected.audience",
        "str",
        "",
        None,
        "OAUTHBEARER (signed): comma-separated audiences, one of which aud must name",
    ),
    ConfigDef(
        "sasl.oauthbearer.expected.issuer",
        "str",
        None,
        None,
        "OAUTHBEARER (signed): the iss tokens must carry",
    ),
    ConfigDef(
        "sasl.oauthbearer.sub.claim.name",
        "str",
        "sub",
        None,
        "OAUTHBEARER: the claim naming the principal (User:<value>)",
    ),
    ConfigDef(
        "sasl.oauthbearer.scope.claim.name", "str", "scope", None, "OAUTHBEARER: the scope claim"
    ),
    ConfigDef(
        "sasl.oauthbearer.clock.skew.seconds",
        "int",
        30,
        0,
        "OAUTHBEARER: tolerance of the exp, iat and nbf checks",
    ),
    ConfigDef(
        "onceflow.sasl.oauthbearer.unsecured.required.scope",
        "str",
        "",
        None,
        "OAUTHBEARER (unsecured): scopes a token must have (Kafka's "
        "unsecuredValidatorRequiredScope)",
    ),
    ConfigDef(
        "onceflow.sasl.bootstrap.users",
        "password",
        None,
        None,
        "onceflow: SCRAM users added at start when absent (kafka-storage --add-scram format)",
    ),
    ConfigDef("log.dirs", "str", None, None, "the data directory (one)"),
    ConfigDef("log.dir", "str", None, None, "used when log.dirs is not set; one is required"),
    ConfigDef("num.partitions", "int", 1, 1, "partitions of an auto-created topic"),
    ConfigDef(
        "max.request.partition.size.limit",
        "int",
        2000,
        1,
        "most partitions one DescribeTopicPartitions answer lists (KIP-966)",
    ),
    ConfigDef("default.replication.factor", "int", 1, 1, "must be 1 on a single node"),
    ConfigDef("auto.create.topics.enable", "bool", True),
    ConfigDef("message.max.bytes", "int", 1048588, 0, "largest record batch"),
    ConfigDef("socket.request.max.bytes", "int", 104857600, 1, "largest request frame"),
    ConfigDef("log.segment.bytes", "int", 1073741824, 14, "segment size before a roll"),
    ConfigDef("log.roll.ms", "long", None, 1),
    ConfigDef("log.roll.hours", "int", 168, 1),
    ConfigDef("log.retention.ms", "long", None, -1),
    ConfigDef("log.retention.minutes", "int", None, -1),
    ConfigDef("log.retention.hours", "int", 168, -1),
    ConfigDef("log.retention.bytes", "long", -1, -1),
    ConfigDef("log.retention.check.interval.ms", "long", 300000, 1),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", "int", 60000, 1),
    ConfigDef("log.index.interval.bytes", "int", 4096, 0),
    ConfigDef("log.flush.interval.messages", "long", 9223372036854775807, 1),
    ConfigDef("log.flush.interval.ms", "long", None, 0),
    ConfigDef("log.message.timestamp.type", "str", "CreateTime"),
    ConfigDef("min.insync.replicas", "int", 1, 1),
    ConfigDef("compression.type", "str", "producer", None, "codec topics are stored with"),
    ConfigDef("group.initial.rebalance.delay.ms", "int", 3000, 0),
    ConfigDef("group.min.session.timeout.ms", "int", 6000, 0),
    ConfigDef("group.max.session.timeout.ms", "int", 1800000, 0),
    ConfigDef("group.max.size", "int", 2147483647, 1),
    ConfigDef("offsets.topic.segment.bytes", "int", 104857600, 1),
    ConfigDef("offsets.retention.minutes", "int", 10080, 1),
    ConfigDef("offsets.retention.check.interval.ms", "long", 600000, 1),
    ConfigDef("offset.metadata.max.bytes", "int", 4096, 0),
    ConfigDef("offsets.topic.num.partitions", "int", 50, 1),
    ConfigDef("offsets.topic.replication.factor", "int", 1, 1),
    ConfigDef("transaction.state.log.num.partitions", "int", 50, 1),
    ConfigDef("transaction.state.log.replication.factor", "int", 1, 1),
    ConfigDef("transaction.max.timeout.ms", "int", 900000, 1, "largest transaction.timeout.ms"),
    ConfigDef(
        "transactional.id.expiration.ms",
        "int",
        604800000,
        1,
        "an idle transactional id is removed after this long",
    ),
    ConfigDef(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "int",
        10000,
        1,
        "how often transactions open past their timeout are fenced and aborted",
    ),
    ConfigDef(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "int",
        3600000,
        1,
        "how often expired transactional ids are removed",
    ),
    ConfigDef("transaction.state.log.segment.bytes", "int", 104857600, 1),
    ConfigDef(
        "transaction.partition.verification.enable",
        "bool",
        True,
        None,
        "KIP-890: Produce checks a transactional batch's partition is in its transaction",
    ),
    ConfigDef(
        "onceflow.producer.id.principal.binding.enable",
        "bool",
        True,
        None,
        "onceflow: refuse requests using a producer id another principal obtained",
    ),
    ConfigDef(
        "onceflow.admin.allow.write.txn.markers",
        "bool",
        False,
        None,
        "onceflow: accept WriteTxnMarkers ABORT from loopback clients (the transactions CLI)",
    ),
    ConfigDef(
        "onceflow.test.crash.after.prepare",
        "bool",
        False,
        None,
        "TEST-ONLY: exit right after a PREPARE_COMMIT is durable, before any marker",
    ),
    ConfigDef(
        "onceflow.test.crash.cleaner",
        "str",
        None,
        None,
        "TEST-ONLY: exit at a step of the log cleaner's swap (log.cleaner.swap.CRASH_POINTS)",
    ),
    ConfigDef("log.cleaner.enable", "bool", True, None, "run the log cleaner (one task)"),
    ConfigDef("log.cleaner.backoff.ms", "int", 15000, 0, "cleaner pause when nothing is dirty"),
    ConfigDef("log.cleaner.threads", "int", 1, 0, "accepted; onceflow runs one cleaner task"),
    ConfigDef(
        "onceflow.log.cleaner.process",
        "bool",
        True,
        None,
        "onceflow: write cleaned segments in a niced child process (false: a broker thread)",
    ),
    ConfigDef(
        "onceflow.log.cleaner.process.nice",
        "int",
        10,
        0,
        "onceflow: niceness the cleaner's child process adds to the broker's (at most 19)",
    ),
    ConfigDef(
        "onceflow.log.cleaner.process.sched.idle",
        "bool",
        True,
        None,
        "onceflow: run the cleaner's child process under Linux's SCHED_IDLE policy",
    ),
    ConfigDef(
        "log.cleaner.io.max.bytes.per.second",
        "str",
        None,
        None,
        "cleaner read throttle, bytes per second (unset: unlimited, as Kafka)",
    ),
    ConfigDef(
        "log.cleaner.min.cleanable.ratio",
        "str",
        "0.5",
        None,
        "default of the topic key min.cleanable.dirty.ratio",
    ),
    ConfigDef(
        "log.cleaner.delete.retention.ms", "int", 86400000, 0, "default of delete.retention.ms"
    ),
    ConfigDef("log.cleaner.min.compaction.lag.ms", "int", 0, 0, "default of min.compaction.lag.ms"),
    ConfigDef(
        "log.cleaner.max.compaction.lag.ms",
        "int",
        9223372036854775807,
        1,
        "default of max.compaction.lag.ms",
    ),
    ConfigDef("delete.topic.enable", "bool", True),
    ConfigDef("fetch.max.bytes", "int", 57671680, 0, "cap on a fetch response"),
    ConfigDef("log.index.size.max.bytes", "int", 10485760, 4),
    ConfigDef("log.cleanup.policy", "str", "delete"),
    ConfigDef("log.flush.on.ack", "bool", True, None, "onceflow: acks=1/all wait for fsync"),
    ConfigDef("producer.id.expiration.ms", "int", 86400000, 1, "idle producer state lifetime"),
    ConfigDef(
        "producer.id.expiration.check.interval.ms",
        "int",
        600000,
        1,
        "how often idle producer ids are expired",
    ),
    ConfigDef(
        "authorizer.class.name",
        "str",
        "",
        None,
        "empty: no authorization; Kafka's StandardAuthorizer or AclAuthorizer class name: ACLs",
    ),
    ConfigDef("super.users", "str", "", None, "principals allowed everything: User:a;User:b"),
    ConfigDef(
        "allow.everyone.if.no.acl.found",
        "bool",
        False,
        None,
        "allow a resource no ACL applies to (authorizer on)",
    ),
    ConfigDef(
        "onceflow.metrics.listener",
        "str",
        None,
        None,
        "onceflow: HOST:PORT of the Prometheus /metrics listener (off when unset)",
    ),
)

_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")

# authorizer.class.name values: off, then Kafka's standard authorizers (KRaft's and ZooKeeper
# mode's class names) and onceflow's own name; all mean `security.authorizer.AclAuthorizer`
AUTHORIZER_CLASS_NAMES: Final = (
    "",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
    "onceflow.security.authorizer.AclAuthorizer",
)

_CLIENT_AUTH = ("none", "requested", "required")


def parse_listener(text: str, key: str = "listeners") -> Listener:
    """Parse `HOST:PORT` or `NAME://HOST:PORT` (the first of a comma-separated list)."""
    try:
        return parse_endpoint(text.split(",")[0].strip(), key)[1]
    except ListenerConfigError as exc:
        raise ConfigError(str(exc)) from None


def _convert(definition: ConfigDef, raw: str) -> Any:
    name = definition.name
    text = raw.strip()
    if definition.type in ("int", "long"):
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"{name}: expected an integer, got {raw!r}") from None
        limit = 2**31 - 1 if definition.type == "int" else 2**63 - 1
        if not -limit - 1 <= value <= limit:
            raise ConfigError(f"{name}: {value} does not fit a {definition.type}")
        if definition.minimum is not None and value < definition.minimum:
            raise ConfigError(f"{name}: must be at least {definition.minimum}, got {value}")
        return value
    if definition.type == "bool":
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise ConfigError(f"{name}: expected true or false, got {raw!r}")
        return lowered == "true"
    return text


class BrokerConfig:
    """The broker's effective configuration, with typed accessors for what the broker uses."""

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        """Build from raw string values (later keys win); raises `ConfigError` on a bad value."""
        self._values: dict[str, Any] = {n: d.default for n, d in BROKER_CONFIGS.items()}
        self._explicit: set[str] = set()
        self.unknown_keys: list[str] = []
        for key, raw in (values or {}).items():
            self._set(key, raw)
        self._check()

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        overrides: Iterable[str] = (),
        extra: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        """Merge a properties file, then `extra` (e.g. CLI flags), then `key=value` overrides."""
        raw: dict[str, str] = {}
        if path is not None:
            try:
                with open(path, encoding="utf-8") as f:
                    raw.update(parse_properties(f.read()))
            except OSError as exc:
                raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
            except UnicodeDecodeError as exc:
                raise ConfigError(
                    f"config file {path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} "
                    f"at offset {exc.start})"
                ) from None
        raw.update(extra or {})
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--set expects key=value, got {item!r}")
            raw[key.strip()] = value
        return cls(raw)

    def _set(self, key: str, raw: str) -> None:
        definition = BROKER_CONFIGS.get(key)
        if definition is None:
            if key not in self.unknown_keys:
                self.unknown_keys.append(key)
            self._values[key] = raw
            return
        self._values[key] = _convert(definition, raw)
        self._explicit.add(key)

    def _check(self) -> None:
        if self._values["log.message.timestamp.type"] not in _TIMESTAMP_TYPES:
            raise ConfigError(
                "log.message.timestamp.type: expected CreateTime or LogAppendTime, "
                f"got {self._values['log.message.timestamp.type']!r}"
            )
        self.listeners  # noqa: B018 - parses and checks every listener
        if self._values["onceflow.metrics.listener"]:
            parse_listener(self._values["onceflow.metrics.listener"], "onceflow.metrics.listener")
        if self._values["authorizer.class.name"] not in AUTHORIZER_CLASS_NAMES:
            raise ConfigError(
                "authorizer.class.name: expected empty or one of "
                f"{', '.join(AUTHORIZER_CLASS_NAMES[1:])}, "
                f"got {self._values['authorizer.class.name']!r}"
            )
        if self._values["ssl.client.auth"] not in _CLIENT_AUTH:
            raise ConfigError(
                f"ssl.client.auth: expected none, requested or required, got "
                f"{self._values['ssl.client.auth']!r}"
            )
        for key in ("ssl.keystore.type", "ssl.truststore.type"):
            if str(self._values[key]).upper() != "PEM":
                raise ConfigError(f"{key}: only PEM is supported, got {self._values[key]!r}")
        if self._values["default.replication.factor"] != 1:
            raise ConfigError("default.replication.factor: a single node supports only 1")

    def get(self, key: str) -> Any:
        """The effective value of `key` (typed for known keys, text for unknown ones)."""
        return self._values[key]

    def is_explicit(self, key: str) -> bool:
        """True when `key` was set by the file or an override rather than defaulted."""
        return key in self._explicit

    def items(self) -> list[tuple[str, Any]]:
        """Every known key and its effective value, sorted by name (for DescribeConfigs)."""
        return sorted((k, self._values[k]) for k in BROKER_CONFIGS)

    # Typed accessors for the values the broker reads often.

    @property
    def node_id(self) -> int:
        broker_id = self._values["broker.id"]
        if broker_id is not None and not self.is_explicit("node.id"):
            return int(broker_id)
        return int(self._values["node.id"])

    @property
    def listeners(self) -> list[ListenerSpec]:
        """Every listener in configured order (`broker.listeners`)."""
        try:
            return parse_listeners(
                self._values["listeners"],
                self._values["advertised.listeners"],
                self._values["listener.security.protocol.map"],
            )
        except ListenerConfigError as exc:
            raise ConfigError(str(exc)) from None

    @property
    def listener(self) -> Listener:
        """The first listener's bind address."""
        return self.listeners[0].bind

    @property
    def advertised_listener(self) -> Listener | None:
        """The first listener's advertised address, when configured."""
        return self.listeners[0].advertised

    @property
    def sasl_enabled_mechanisms(self) -> list[str]:
        text = self._values["sasl.enabled.mechanisms"]
        return [m.strip().upper() for m in text.split(",") if m.strip()]

    @property
    def data_dir(self) -> str:
        dirs: str = self._values["log.dirs"] or self._values["log.dir"]
        return dirs.split(",")[0].strip()

    @property
    def num_partitions(self) -> int:
        return int(self._values["num.partitions"])

    @property
    def max_request_partition_size_limit(self) -> int:
        return int(self._values["max.request.partition.size.limit"])

    @property
    def auto_create_topics(self) -> bool:
        return bool(self._values["auto.create.topics.enable"])

    @property
    def message_max_bytes(self) -> int:
        return int(self._values["message.max.bytes"])

    @property
    def socket_request_max_bytes(self) -> int:
        return int(self._values["socket.request.max.bytes"])

    @property
    def segment_bytes(self) -> int:
        return int(self._values["log.segment.bytes"])

    @property
    def roll_ms(self) -> int:
        if self._values["log.roll.ms"] is not None:
            return int(self._values["log.roll.ms"])
        return int(self._values["log.roll.hours"]) * _HOUR_MS

    @property
    def retention_ms(self) -> int:
        """log.retention.ms, else .minutes, else .hours; -1 means unlimited."""
        if self._values["log.retention.ms"] is not None:
            return int(self._values["log.retention.ms"])
        if self._values["log.retention.minutes"] is not None:
            minutes = int(self._values["log.retention.minutes"])
            return -1 if minutes < 0 else minutes * 60_000
        hours = int(self._values["log.retention.hours"])
        return -1 if hours < 0 else hours * _HOUR_MS

    @property
    def retention_bytes(self) -> int:
        return int(self._values["log.retention.bytes"])

    @property
    def retention_check_interval_ms(self) -> int:
        return int(self._values["log.retention.check.interval.ms"])

    @property
    def metrics_listener(self) -> Listener | None:
        """`onceflow.metrics.listener`, or None when metrics are not served."""
        text = self._values["onceflow.metrics.listener"]
        return parse_listener(text, "onceflow.metrics.listener") if text else None

    @property
    def producer_id_expiration_check_interval_ms(self) -> int:
        return int(self._values["producer.id.expiration.check.interval.ms"])

    @property
    def flush_on_ack(self) -> bool:
        return bool(self._values["log.flush.on.ack"])

    @property
    def authorizer_enabled(self) -> bool:
        return bool(self._values["authorizer.class.name"])

    def log_properties(self) -> dict[str, Any]:
        """The broker-level `log.*` values that are set, for `LogConfig.from_properties`."""
        return {k: v for k, v in self.items() if v is not None}


def describe_value(value: Any) -> str | None:
    """A config value as Kafka's DescribeConfigs shows it (booleans lower-case, None as null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
