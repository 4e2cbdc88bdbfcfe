"""OffsetDelete handler.

API: OffsetDelete (key 47), version 0 (KIP-496).

Behaviour: deletes committed offsets of a group. Partitions of unknown topics are
UNKNOWN_TOPIC_OR_PARTITION. The group must exist (GROUP_ID_NOT_FOUND); in an EMPTY group any
offset may go; in an active consumer group, offsets of topics a member is subscribed to are
GROUP_SUBSCRIBED_TO_TOPIC; an active group of another protocol type is NON_EMPTY_GROUP. A
group-level error answers with no topics, as Kafka does. Tombstones are flushed before the
answer.

Versions: v0 only (not flexible).

Deviations: none known.
"""

from __future__ import annotations

from onceflow.broker.handlers.offset_commit import partition_exists, partition_responses
from onceflow.coordinator.group.offsets import TopicPartition
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.offset_delete import OffsetDeleteResponse

_Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
_Partition = _Topic.OffsetDeleteResponsePartition


async def handle_offset_delete(ctx, header, request) -> OffsetDeleteResponse:
    """Delete the requested committed offsets of a group."""
    broker = ctx.broker
    errors: dict[TopicPartition, ErrorCode] = {}
    known: list[TopicPartition] = []
    for topic in request.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if partition_exists(broker, topic.name, p.partition_index):
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
