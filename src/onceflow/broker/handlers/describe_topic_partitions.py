"""DescribeTopicPartitions handler.

API: DescribeTopicPartitions (key 75), version 0 (KIP-966; what Kafka 4.x's admin client asks
first for `describeTopics`, e.g. `kafka-topics --describe`).

Behaviour, as Kafka's `DescribeTopicPartitionsRequestHandler`: an empty topic list means every
topic; the topics (a set) are taken in name order, from the cursor's topic on, and the cursor's
topic starts at the cursor's partition. Partitions are listed until `response_partition_limit`
(at most `max.request.partition.size.limit`, at least 1) is used up; `next_cursor` then names
the first partition left out (a topic with none left to list is not in the answer). Each
partition: this node leads it (epoch 0) and is its only replica and in-sync replica; the
eligible-leader-replica lists are empty (KIP-966's ELR needs replication). A named topic that
does not exist is UNKNOWN_TOPIC_OR_PARTITION, an illegal name INVALID_TOPIC_EXCEPTION (both
left out when listing every topic). A cursor whose topic is not among the named topics, or
whose partition is negative, fails the request: every named topic is INVALID_REQUEST.
`topic_authorized_operations` is always filled in (`broker.authorized_ops`).

Authorization (authorizer on): DESCRIBE on each topic; a denied topic is left out of an
all-topics answer and is TOPIC_AUTHORIZATION_FAILED (zero topic id, after the others) when
named, so the caller learns nothing of it.

Deviations: none known.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied_names
from onceflow.broker.authorized_ops import authorized_operations
from onceflow.coordinator.internal_topics import is_internal
from onceflow.log.manager import validate_topic_name
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsResponse as Response,
)
from onceflow.security.acl import ResourceType

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.broker.state import BrokerState
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest

_Topic = Response.DescribeTopicPartitionsResponseTopic
_Partition = _Topic.DescribeTopicPartitionsResponsePartition
_ZERO_UUID = uuid.UUID(int=0)


def _error_topic(name: str, error: ErrorCode) -> _Topic:
    return _Topic(error_code=error, name=name, topic_id=_ZERO_UUID, is_internal=False,
                  partitions=[])  # fmt: skip


def _partitions(node: int, first: int, end: int) -> list[_Partition]:
    return [
        _Partition(error_code=ErrorCode.NONE, partition_index=index, leader_id=node,
                   leader_epoch=0, replica_nodes=[node], isr_nodes=[node],
                   eligible_leader_replicas=[], last_known_elr=[], offline_replicas=[])
        for index in range(first, end)
    ]  # fmt: skip


def _describe(
    broker: BrokerState,
    names: list[str],
    start_of: Callable[[str], int],
    limit: int,
    all_topics: bool,
) -> Response:
    """Kafka's `getTopicMetadataForDescribeTopicResponse`: `names` in order, `limit`
    partitions at most, `start_of(name)` the first partition of each."""
    response = Response(throttle_time_ms=0, topics=[], next_cursor=None)
    remaining = limit
    for name in names:
        if remaining == 0:
            response.next_cursor = Response.Cursor(topic_name=name, partition_index=0)
            break
        info = broker.logs.topic(name)
        if info is None:
            if not all_topics:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if validate_topic_name(name) is not None:
                    error = ErrorCode.INVALID_TOPIC_EXCEPTION
                response.topics.append(
                    _Topic(error_code=error, name=name, topic_id=_ZERO_UUID,
                           is_internal=is_internal(name), partitions=[])
                )  # fmt: skip
            continue
        first = start_of(name)
        end = min(info.partitions, first + remaining)
        response.topics.append(
            _Topic(error_code=ErrorCode.NONE, name=name, topic_id=info.topic_id,
                   is_internal=is_internal(name),
                   partitions=_partitions(broker.node_id, first, end))
        )  # fmt: skip
        if end < info.partitions:
            response.next_cursor = Response.Cursor(topic_name=name, partition_index=end)
            break
        remaining -= max(end - first, 0)
    return response


async def handle_describe_topic_partitions(
    ctx: RequestContext, header: RequestHeader, request: DescribeTopicPartitionsRequest
) -> Response:
    """Describe the partitions of the named (or all) topics, a page at a time."""
    broker = ctx.broker
    cursor = request.cursor
    after = cursor.topic_name if cursor is not None else ""
    all_topics = not request.topics
    requested = [info.name for info in broker.logs.topics()] if all_topics else [
        topic.name for topic in request.topics
    ]  # fmt: skip
    names = sorted({name for name in requested if name >= after})
    if cursor is not None and (
        (not all_topics and cursor.topic_name not in names) or cursor.partition_index < 0
    ):
        topics = [_error_topic(t.name, ErrorCode.INVALID_REQUEST) for t in request.topics]
        return Response(throttle_time_ms=0, topics=topics, next_cursor=None)
    hidden = denied_names(ctx, ApiKey.DESCRIBE_TOPIC_PARTITIONS, "topic", names)
    limit = max(min(broker.config.max_request_partition_size_limit,
                    request.response_partition_limit), 1)  # fmt: skip

    def start_of(name: str) -> int:
        return cursor.partition_index if cursor is not None and name == after else 0

    shown = [name for name in names if name not in hidden]
    response = _describe(broker, shown, start_of, limit, all_topics)
    for topic in response.topics:
        topic.topic_authorized_operations = authorized_operations(
            ctx, ResourceType.TOPIC, topic.name
        )
    if not all_topics:
        denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        response.topics.extend(_error_topic(name, denied) for name in sorted(hidden))
    return response
