"""CreateTopics handler.

API: CreateTopics (key 19), versions 2-7.

Behaviour: creates each topic through the log manager (registry, partition directories).
num_partitions -1 means `num.partitions`; replication_factor must be -1 or 1 (one node;
anything else is INVALID_REPLICATION_FACTOR). Manual assignments are accepted when every
replica list is exactly this node and num_partitions/replication_factor are -1 (else
INVALID_REQUEST / INVALID_REPLICA_ASSIGNMENT). Configs are topic-level overrides; an unknown
key, a bad value or a null value is INVALID_CONFIG. A name listed twice is INVALID_REQUEST for
each occurrence. An internal topic's name (`__consumer_offsets`, `__transaction_state`) is
INVALID_REQUEST: the coordinators create those on first use (`coordinator.internal_topics`).
validate_only checks everything and creates nothing. A partition that cannot be created (no
space, too many open files) is KAFKA_STORAGE_ERROR for its topic, and the partitions already
made are removed again. From v5 a successful result carries the
partition count, replication factor and every effective config; from v7 the new topic id.

Authorization (authorizer on): CREATE on the CLUSTER allows every topic, else CREATE on each
topic is needed (TOPIC_AUTHORIZATION_FAILED "Authorization failed.", nothing created); a
created topic the caller may not DESCRIBE_CONFIGS is answered without its details
(topic_config_error_code TOPIC_AUTHORIZATION_FAILED, configs null, counts -1), as Kafka.

Versions: v2-v4 classic; v5 flexible with the topic details; v7 topic_id.

Deviations: `timeout_ms` is irrelevant (creation is synchronous); no CreateTopicPolicy. Kafka
refuses only `__cluster_metadata` this way and lets ACLs guard its other internal topics.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied
from onceflow.broker.configs_view import topic_config_entries
from onceflow.coordinator.internal_topics import TopicOperation, internal_topic_refusal
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.create_topics import CreateTopicsResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.broker.state import BrokerState
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.create_topics import CreateTopicsRequest

_Result = CreateTopicsResponse.CreatableTopicResult
_Config = CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs
_ZERO_UUID = uuid.UUID(int=0)
_API = ApiKey.CREATE_TOPICS


def _failure(name: str, error: ErrorCode, message: str | None) -> _Result:
    return _Result(
        name=name,
        topic_id=_ZERO_UUID,
        error_code=error,
        error_message=message,
        topic_config_error_code=0,
        num_partitions=-1,
        replication_factor=-1,
        configs=None,
    )


def _check_request(
    broker: BrokerState, topic: CreateTopicsRequest.CreatableTopic
) -> tuple[ErrorCode, str | None, int]:
    """Validate replication and assignments; returns (error, message, partitions)."""
    partitions = topic.num_partitions
    if topic.assignments:
        if partitions != -1 or topic.replication_factor != -1:
            return (
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
                0,
            )
        indexes = sorted(a.partition_index for a in topic.assignments)
        if indexes != list(range(len(indexes))):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions must be 0..n-1", 0
        for assignment in topic.assignments:
            if assignment.broker_ids != [broker.node_id]:
                return (
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"replicas {assignment.broker_ids} of partition {assignment.partition_index} "
                    f"must be [{broker.node_id}] on this single-node broker",
                    0,
                )
        return ErrorCode.NONE, None, len(indexes)
    if topic.replication_factor not in (-1, 1):
        return (
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {topic.replication_factor} larger than available brokers: 1.",
            0,
        )
    if partitions == 0 or partitions < -1:
        return ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.", 0
    return ErrorCode.NONE, None, partitions


def _create(
    broker: BrokerState,
    topic: CreateTopicsRequest.CreatableTopic,
    validate_only: bool,
    version: int,
) -> _Result:
    refusal = internal_topic_refusal(topic.name, TopicOperation.CREATE)
    if refusal is not None:
        return _failure(topic.name, *refusal)
    error, message, partitions = _check_request(broker, topic)
    if error != ErrorCode.NONE:
        return _failure(topic.name, error, message)
    configs: dict[str, str] = {}
    for config in topic.configs:
        if config.value is None:
            return _failure(
                topic.name, ErrorCode.INVALID_CONFIG, f"Null value not supported for {config.name}"
            )
        configs[config.name] = config.value
    result = broker.logs.create_topic(topic.name, partitions, configs, validate_only=validate_only)
    if result.error != ErrorCode.NONE:
        return _failure(topic.name, ErrorCode(result.error), result.message)
    if partitions == -1:
        partitions = broker.config.num_partitions
    described = None
    if version >= 5:
        from onceflow.log.config import LogConfig

        log_config = LogConfig.from_properties(broker.config.log_properties(), configs)
        described = [
            _Config(
                name=e.name,
                value=e.value,
                read_only=False,
                config_source=e.source,
                is_sensitive=False,
            )
            for e in topic_config_entries(broker.config, log_config, configs)
        ]
    return _Result(
        name=topic.name,
        topic_id=result.topic_id or _ZERO_UUID,
        error_code=ErrorCode.NONE,
        error_message=None,
        topic_config_error_code=0,
        num_partitions=partitions,
        replication_factor=1,
        configs=described,
    )


async def handle_create_topics(
    ctx: RequestContext, header: RequestHeader, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    """Create (or, with validate_only, check) every requested topic."""
    broker = ctx.broker
    version = header.request_api_version
    counts = Counter(topic.name for topic in request.topics)
    any_topic = denied(ctx, _API, "cluster") is None
    results = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            results.append(
                _failure(
                    topic.name,
                    ErrorCode.INVALID_REQUEST,
                    "Create topics request from client contains a duplicate topic",
                )
            )
            continue
        if not any_topic and denied(ctx, _API, "topic", topic.name) is not None:
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            results.append(_failure(topic.name, error, "Authorization failed."))
            continue
        result = _create(broker, topic, request.validate_only, version)
        if result.error_code == ErrorCode.NONE and denied(
            ctx, _API, "describe_configs", topic.name
        ):
            result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            result.num_partitions = result.replication_factor = -1
            result.configs = None
        results.append(result)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)
