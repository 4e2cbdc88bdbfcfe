"""Metadata handler.

API: Metadata (key 3), versions 0-13.

Behaviour: this node is the only broker, the controller, and the leader (epoch 0) of every
partition, with itself as the only replica and in-sync replica. A null topic list (v1+; an
empty one in v0) lists every topic. A requested topic that does not exist is created with
`num.partitions` partitions when `auto.create.topics.enable` is true and the request allows it
(v4+ `allow_auto_topic_creation`; always allowed before v4), else it is
UNKNOWN_TOPIC_OR_PARTITION; an illegal name is INVALID_TOPIC_EXCEPTION. From v10 topics carry
their persistent topic id, and from v12 a topic may be asked for by id (UNKNOWN_TOPIC_ID when
unknown). As in Kafka, a v10-11 request that names a topic by id (a null name or a non-zero
topic id) is answered INVALID_REQUEST for every topic it asks for, with an empty name for a null
one (the response cannot carry a null name before v12); nothing is created.
The cluster id is the one in the data directory's meta.properties.

Versions: v1 controller_id, is_internal, null topics; v2 cluster_id; v4 auto-creation flag;
v5 offline_replicas; v7 leader_epoch; v8 authorized operations: when asked for
(`include_topic_authorized_operations`; `include_cluster_authorized_operations` in v8-10)
every topic named in the answer and the cluster carry the operations the caller may perform
(`broker.authorized_ops`; with no authorizer, all that Kafka supports on the resource type),
otherwise INT32_MIN as in Kafka (also for unknown topic ids); v9 flexible; v10 topic ids; v12
nullable topic names; v13 top-level error_code (always NONE).

Authorization (authorizer on), as Kafka: topics the caller may not DESCRIBE are left out of
an all-topics answer and are TOPIC_AUTHORIZATION_FAILED when asked for by name or id; a missing
topic is auto-created only with CREATE on the cluster or the topic, else
TOPIC_AUTHORIZATION_FAILED (nothing created). `*_authorized_operations` come from the
authorizer (`broker.authorized_ops`).

Deviations: Kafka answers LEADER_NOT_AVAILABLE for a topic it has just auto-created and the
client asks again; here creation is synchronous, so the topic comes back ready at once.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied, denied_names
from onceflow.broker.authorized_ops import AUTHORIZED_OPERATIONS_OMITTED, authorized_operations
from onceflow.coordinator.internal_topics import is_internal
from onceflow.log.manager import validate_topic_name
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.metadata import MetadataResponse
from onceflow.security.acl import ResourceType

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.broker.state import BrokerState
    from onceflow.log.manager import TopicInfo
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.metadata import MetadataRequest

_ZERO_UUID = uuid.UUID(int=0)
_Topic = MetadataResponse.MetadataResponseTopic
_TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _topic_response(broker: BrokerState, info: TopicInfo) -> _Topic:
    node = broker.node_id
    partitions = [
        MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
            error_code=ErrorCode.NONE,
            partition_index=index,
            leader_id=node,
            leader_epoch=0,
            replica_nodes=[node],
            isr_nodes=[node],
            offline_replicas=[],
        )
        for index in range(info.partitions)
    ]
    return MetadataResponse.MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=is_internal(info.name),
        partitions=partitions,
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _topic_error(name: str | None, error: ErrorCode, topic_id: uuid.UUID = _ZERO_UUID) -> _Topic:
    return MetadataResponse.MetadataResponseTopic(
        error_code=error,
        name=name,
        topic_id=topic_id,
        is_internal=False,
        partitions=[],
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _lookup(
    broker: BrokerState, name: str, may_create: bool, create_refused: bool = False
) -> _Topic:
    logs = broker.logs
    info = logs.topic(name)
    if info is not None:
        return _topic_response(broker, info)
    if validate_topic_name(name) is not None:
        return _topic_error(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
    if not may_create:
        return _topic_error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if create_refused:
        return _topic_error(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    result = broker.auto_create_topic(name)
    created = logs.topic(name) if result.error == ErrorCode.NONE else None
    if created is None:
        return _topic_error(name, ErrorCode(result.error or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    return _topic_response(broker, created)


def _by_id(topic: MetadataRequest.MetadataRequestTopic) -> bool:
    return topic.name is None or topic.topic_id != _ZERO_UUID


def _lookup_by_id(broker: BrokerState, topic_id: uuid.UUID) -> _Topic:
    info = broker.topic_by_id(topic_id)
    if info is not None:
        return _topic_response(broker, info)
    return _topic_error(None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id)


async def handle_metadata(
    ctx: RequestContext, header: RequestHeader, request: MetadataRequest
) -> MetadataResponse:
    """Describe the broker and the requested (or all) topics, auto-creating when allowed."""
    broker = ctx.broker
    version = header.request_api_version
    requested = request.topics
    api = ApiKey.METADATA
    if requested is None or (version == 0 and not requested):
        infos = broker.logs.topics()
        hidden = denied_names(ctx, api, "topic", (info.name for info in infos))
        topics = [_topic_response(broker, info) for info in infos if info.name not in hidden]
    elif version < 12 and any(_by_id(topic) for topic in requested):
        topics = [
            _topic_error(topic.name or "", ErrorCode.INVALID_REQUEST, topic.topic_id)
            for topic in requested
        ]
    else:
        allowed = request.allow_auto_topic_creation if version >= 4 else True
        may_create = allowed and broker.config.auto_create_topics
        topics = []
        for topic in requested:
            if topic.name is None:
                found = _lookup_by_id(broker, topic.topic_id)
                if found.name is not None and denied(ctx, api, "topic", found.name):
                    found = _topic_error(None, _TOPIC_DENIED, topic.topic_id)
                topics.append(found)
            elif denied(ctx, api, "topic", topic.name):
                topics.append(_topic_error(topic.name, _TOPIC_DENIED))
            else:
                refused = may_create and bool(
                    denied(ctx, api, "cluster_create") and denied(ctx, api, "create", topic.name)
                )
                topics.append(_lookup(broker, topic.name, may_create, refused))
    cluster_operations = AUTHORIZED_OPERATIONS_OMITTED
    if version >= 8:
        if request.include_topic_authorized_operations:
            for described in topics:
                if described.name is not None:  # Kafka leaves unknown topic ids out
                    described.topic_authorized_operations = authorized_operations(
                        ctx, ResourceType.TOPIC, described.name
                    )
        if version <= 10 and request.include_cluster_authorized_operations:
            cluster_operations = authorized_operations(ctx, ResourceType.CLUSTER, None)
    address = ctx.advertised
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[
            MetadataResponse.MetadataResponseBroker(
                node_id=broker.node_id, host=address.host, port=address.port, rack=None
            )
        ],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
        cluster_authorized_operations=cluster_operations,
        error_code=ErrorCode.NONE,
    )
