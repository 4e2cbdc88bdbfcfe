"""CreatePartitions handler.

API: CreatePartitions (key 37), versions 0-3.

Behaviour: grows a topic to `count` partitions; a count that is not an increase is
INVALID_PARTITIONS, an unknown topic UNKNOWN_TOPIC_OR_PARTITION. Assignments, when given, must
name exactly this node for each new partition and have one entry per new partition (else
INVALID_REPLICA_ASSIGNMENT). A topic listed twice is INVALID_REQUEST. validate_only changes
nothing. A new partition that cannot be created (no space, too many open files) is
KAFKA_STORAGE_ERROR, and the topic keeps its old count. An internal topic is INVALID_REQUEST:
more partitions would move groups and transactional ids to other coordinator partitions
(`coordinator.internal_topics`).

Authorization (authorizer on): ALTER on each topic, else TOPIC_AUTHORIZATION_FAILED and it
does not grow, as Kafka.

Versions: v2 flexible; v3 same as v2.

Deviations: growth is synchronous (`timeout_ms` unused). Kafka guards internal topics with
ACLs and in `kafka-topics.sh`; onceflow also refuses at the broker.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied
from onceflow.coordinator.internal_topics import TopicOperation, internal_topic_refusal
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.create_partitions import CreatePartitionsResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.broker.state import BrokerState
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.create_partitions import CreatePartitionsRequest

_Result = CreatePartitionsResponse.CreatePartitionsTopicResult


def _grow(
    broker: BrokerState, topic: CreatePartitionsRequest.CreatePartitionsTopic, validate_only: bool
) -> _Result:
    refusal = internal_topic_refusal(topic.name, TopicOperation.CREATE_PARTITIONS)
    if refusal is not None:
        return _Result(name=topic.name, error_code=refusal[0], error_message=refusal[1])
    info = broker.logs.topic(topic.name)
    if info is not None and topic.assignments is not None:
        new = topic.count - info.partitions
        if len(topic.assignments) != new:
            return _Result(
                name=topic.name,
                error_code=ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                error_message=f"Increasing the number of partitions by {new} but "
                f"{len(topic.assignments)} assignments provided.",
            )
        for assignment in topic.assignments:
            if assignment.broker_ids != [broker.node_id]:
                return _Result(
                    name=topic.name,
                    error_code=ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    error_message=f"replicas must be [{broker.node_id}] on this single-node broker",
                )
    result = broker.logs.create_partitions(topic.name, topic.count, validate_only=validate_only)
    return _Result(
        name=topic.name,
        error_code=result.error,
        error_message=result.message if result.error != ErrorCode.NONE else None,
    )


async def handle_create_partitions(
    ctx: RequestContext, header: RequestHeader, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    """Grow each requested topic."""
    counts = Counter(topic.name for topic in request.topics)
    results = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            results.append(
                _Result(
                    name=topic.name,
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message="Duplicate topic in request.",
                )
            )
            continue
        refused = denied(ctx, ApiKey.CREATE_PARTITIONS, "topic", topic.name)
        if refused is not None:
            results.append(_Result(name=topic.name, error_code=refused, error_message=None))
            continue
        results.append(_grow(ctx.broker, topic, request.validate_only))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
