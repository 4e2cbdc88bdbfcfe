"""OffsetDelete handler.

API: OffsetDelete (key 47), version 0 (KIP-496).

Behaviour: deletes committed offsets of a group. Partitions of unknown topics are
UNKNOWN_TOPIC_OR_PARTITION. The group must exist (GROUP_ID_NOT_FOUND); in an EMPTY group any
offset may go; in an active consumer group, offsets of topics a member is subscribed to are
GROUP_SUBSCRIBED_TO_TOPIC; an active group of another protocol type is NON_EMPTY_GROUP. A
group-level error answers with no topics, as Kafka does. Tombstones are flushed before the
answer.

Versions: v0 only (not flexible).

Authorization (authorizer on): DELETE on the group, else GROUP_AUTHORIZATION_FAILED with no
topics and nothing deleted; READ on each topic, else TOPIC_AUTHORIZATION_FAILED for its
partitions (kept), as Kafka.

Deviations: none known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied, denied_names
from onceflow.broker.handlers.offset_commit import (
    partition_exists,
    partition_responses,
    topic_names,
)
from onceflow.common import TopicPartition
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.offset_delete import OffsetDeleteResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.offset_delete import OffsetDeleteRequest

_Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
_Partition = _Topic.OffsetDeleteResponsePartition


async def handle_offset_delete(
    ctx: RequestContext, header: RequestHeader, request: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    """Delete the requested committed offsets of a group."""
    broker = ctx.broker
    refused = denied(ctx, ApiKey.OFFSET_DELETE, "group", request.group_id)
    if refused is not None:
        return OffsetDeleteResponse(error_code=refused, throttle_time_ms=0, topics=[])
    unauthorized = denied_names(ctx, ApiKey.OFFSET_DELETE, "topic", topic_names(request))
    errors: dict[TopicPartition, ErrorCode] = {}
    known: list[TopicPartition] = []
    for topic in request.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if topic.name in unauthorized:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif partition_exists(broker, topic.name, p.partition_index):
                known.append(tp)
            else:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    group_error, results = await broker.group_coordinator.delete_offsets(request.group_id, known)
    if group_error != ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=group_error, throttle_time_ms=0, topics=[])
    errors.update(results)
    return OffsetDeleteResponse(
        error_code=ErrorCode.NONE,
        throttle_time_ms=0,
        topics=partition_responses(request.topics, errors, _Topic, _Partition),
    )
