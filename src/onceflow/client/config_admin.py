"""Config administration for `AdminClient`: DescribeConfigs and IncrementalAlterConfigs.

Kafka's `describeConfigs` and `incrementalAlterConfigs` for TOPIC and BROKER resources, sent to
the bootstrap broker (the one broker that answers for every resource on a single node; with
several brokers a BROKER resource belongs on the broker it names, which this module does not
route). The functions send through the AdminClient's `AdminConnections` (split off to keep
admin.py readable).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from onceflow.client.admin_connections import AdminConnections, known_code
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.describe_configs import DescribeConfigsRequest
from onceflow.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest

__all__ = ["ConfigEntry", "ConfigResource", "ConfigsResult", "AlterOp"]

TOPIC, BROKER = 2, 4
SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}


@dataclass(frozen=True)
class ConfigResource:
    """A config resource: type 2 (topic) or 4 (broker) and its name."""

    resource_type: int
    name: str


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: str  # Kafka's ConfigSource name, e.g. DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG
    read_only: bool
    sensitive: bool


@dataclass(frozen=True)
class ConfigsResult:
    """A resource's answer: its error and, for DescribeConfigs, its entries by name."""

    error_code: ErrorCode
    error_message: str | None = None
    entries: dict[str, ConfigEntry] | None = None


@dataclass(frozen=True)
class AlterOp:
    """One IncrementalAlterConfigs change: operation SET 0, DELETE 1, APPEND 2, SUBTRACT 3."""

    name: str
    operation: int
    value: str | None = None


def describe_configs(
    net: AdminConnections, resources: Iterable[ConfigResource]
) -> dict[ConfigResource, ConfigsResult]:
    cls = DescribeConfigsRequest
    wanted = list(resources)
    request = cls(
        resources=[
            cls.DescribeConfigsResource(
                resource_type=r.resource_type, resource_name=r.name, configuration_keys=None
            )
            for r in wanted
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    response = net.bootstrap().send(request)
    out = {}
    for r in response.results:
        entries = {
            c.name: ConfigEntry(
                c.name,
                c.value,
                SOURCES.get(c.config_source, "UNKNOWN"),
                c.read_only,
                c.is_sensitive,
            )
            for c in r.configs
        }
        out[ConfigResource(r.resource_type, r.resource_name)] = ConfigsResult(
            known_code(r.error_code), r.error_message, entries
        )
    return out


def incremental_alter_configs(
    net: AdminConnections, changes: dict[ConfigResource, list[AlterOp]], validate_only: bool = False
) -> dict[ConfigResource, ConfigsResult]:
    cls = IncrementalAlterConfigsRequest
    resource_cls = cls.AlterConfigsResource
    request = cls(
        resources=[
            resource_cls(
                resource_type=resource.resource_type,
                resource_name=resource.name,
                configs=[
                    resource_cls.AlterableConfig(
                        name=op.name, config_operation=op.operation, value=op.value
                    )
                    for op in ops
                ],
            )
            for resource, ops in changes.items()
        ],
        validate_only=validate_only,
    )
    response = net.bootstrap().send(request)
    return {
        ConfigResource(r.resource_type, r.resource_name): ConfigsResult(
            known_code(r.error_code), r.error_message
        )
        for r in response.responses
    }
