"""DescribeConfigs handler.

API: DescribeConfigs (key 32), versions 1-4.

Behaviour: TOPIC resources (type 2) list every topic-level config the log supports with its
effective value and source (TOPIC_CONFIG for an override, STATIC_BROKER_CONFIG when the broker
key was set, DEFAULT_CONFIG otherwise); an unknown topic is UNKNOWN_TOPIC_OR_PARTITION. BROKER
resources (type 4) named after this node id, or "" for the cluster default, list every broker
config this broker knows (read-only, static or default); another id is INVALID_REQUEST.
`configuration_keys` filters by name (null: all). Synonyms are listed with include_synonyms,
most specific first. Other resource types (BROKER_LOGGER, CLIENT_METRICS, GROUP) are
INVALID_REQUEST "Unsupported resource type: GROUP", Kafka's answer for a type its broker does
not handle.

Authorization (authorizer on): DESCRIBE_CONFIGS on a TOPIC resource's topic, else
TOPIC_AUTHORIZATION_FAILED; on the CLUSTER for a BROKER resource, else
CLUSTER_AUTHORIZATION_FAILED; no configs for a denied resource, as Kafka.

Versions: v1 config_source and synonyms; v3 config_type and documentation; v4 flexible.

Deviations: Kafka serves GROUP configs (KIP-848's `consumer.session.timeout.ms` and the like,
share and streams group settings), CLIENT_METRICS (KIP-714) and BROKER_LOGGER resources;
onceflow has none of those features. Nothing is sensitive; onceflow's own broker configs
cannot be changed at runtime; the dynamic broker configs Kafka has for features onceflow
lacks (SSL/SASL, thread pools, the cleaner) are listed with source DYNAMIC_BROKER_CONFIG when
set, and have no effect. Topic overrides set with AlterConfigs / IncrementalAlterConfigs are
TOPIC_CONFIG, like those given at creation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied_config
from onceflow.broker.configs_view import (
    ConfigResourceType,
    broker_config_entries,
    topic_config_entries,
    unsupported_resource_type,
)
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.describe_configs import DescribeConfigsResponse

if TYPE_CHECKING:
    from onceflow.broker.configs_view import DescribedConfig
    from onceflow.broker.context import RequestContext
    from onceflow.broker.state import BrokerState
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.describe_configs import DescribeConfigsRequest

    _Resource = DescribeConfigsRequest.DescribeConfigsResource

_Result = DescribeConfigsResponse.DescribeConfigsResult
_Entry = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
_Synonym = _Entry.DescribeConfigsSynonym


def _result(
    resource: _Resource, error: ErrorCode, message: str | None, configs: list[_Entry]
) -> _Result:
    return _Result(
        error_code=error,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=configs,
    )


def _entries(
    broker: BrokerState, resource: _Resource
) -> tuple[ErrorCode, str | None, list[DescribedConfig]]:
    if resource.resource_type == ConfigResourceType.TOPIC:
        info = broker.logs.topic(resource.resource_name)
        if info is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Topic does not exist", []
        log_config = broker.logs.topic_config(info.name)
        return ErrorCode.NONE, None, topic_config_entries(broker.config, log_config, info.configs)
    if resource.resource_type == ConfigResourceType.BROKER:
        if resource.resource_name not in ("", str(broker.node_id)):
            message = (
                f"Unexpected broker id, expected {broker.node_id} or empty string, "
                f"but received {resource.resource_name}"
            )
            return ErrorCode.INVALID_REQUEST, message, []
        return (
            ErrorCode.NONE,
            None,
            broker_config_entries(broker.config, broker.dynamic_configs.values),
        )
    return ErrorCode.INVALID_REQUEST, unsupported_resource_type(resource.resource_type), []


async def handle_describe_configs(
    ctx: RequestContext, header: RequestHeader, request: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    """Describe topic and broker configs."""
    results = []
    for resource in request.resources:
        refused = denied_config(
            ctx, ApiKey.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name
        )
        if refused is not None:
            results.append(_result(resource, refused, None, []))
            continue
        error, message, entries = _entries(ctx.broker, resource)
        keys = resource.configuration_keys
        if keys is not None:
            wanted = set(keys)
            entries = [e for e in entries if e.name in wanted]
        configs = [
            _Entry(
                name=e.name,
                value=e.value,
                read_only=e.read_only,
                config_source=e.source,
                is_default=False,  # v0 only; not served
                is_sensitive=e.sensitive,
                synonyms=[_Synonym(name=n, value=v, source=s) for n, v, s in e.synonyms]
                if request.include_synonyms
                else [],
                config_type=e.type,
                documentation=e.documentation if request.include_documentation else None,
            )
            for e in entries
        ]
        results.append(_result(resource, error, message, configs))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
