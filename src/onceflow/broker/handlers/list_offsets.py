"""ListOffsets handler.

API: ListOffsets (key 2), versions 1-10.

Behaviour: per partition, the offset for a timestamp: -2 (earliest) is the log start offset,
-1 (latest) the high watermark (read_uncommitted) or last stable offset (read_committed),
-3 (max timestamp, v7+, KIP-734) the offset and timestamp of the record with the largest
timestamp, -4 (earliest local, v8+, KIP-405) the log start offset (every segment is local),
-5 (latest tiered, v9+, KIP-1005) offset -1 with leader epoch -1 (nothing is tiered), as a
Kafka broker without remote storage answers; any other value the first record whose timestamp
is at or after it (offset -1 and timestamp -1 when there is none). Unknown partitions are
UNKNOWN_TOPIC_OR_PARTITION; a partition listed twice is INVALID_REQUEST, as in Kafka.
leader_epoch is 0 (the only epoch).

Versions: v1 single offset with timestamp; v2 isolation_level and throttle_time_ms; v4
current_leader_epoch (not checked: one node) and leader_epoch; v6 flexible; v7 max timestamp;
v8 earliest local; v9 latest tiered; v10 timeout_ms (KIP-1075: how long a remote-storage lookup
may take; nothing here waits, so it is ignored). Version 11's earliest-pending-upload (-6) and
timestamps below it are INVALID_REQUEST.

Authorization (authorizer on): DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED for
its partitions, as Kafka.

Deviations: none known for the served versions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied_names
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.list_offsets import ListOffsetsResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.broker.state import BrokerState
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.list_offsets import ListOffsetsRequest

_PartitionResponse = ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
_READ_COMMITTED = 1
EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


def _answer(
    index: int, error: ErrorCode, timestamp: int = -1, offset: int = -1, epoch: int = -1
) -> _PartitionResponse:
    return _PartitionResponse(
        partition_index=index,
        error_code=error,
        old_style_offsets=[],
        timestamp=timestamp,
        offset=offset,
        leader_epoch=epoch,
    )


def _list_offset(
    broker: BrokerState,
    topic: str,
    index: int,
    timestamp: int,
    read_committed: bool,
    version: int,
) -> _PartitionResponse:
    partition_log = broker.get_log(topic, index)
    if partition_log is None:
        return _answer(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    epoch = partition_log.leader_epoch if version >= 4 else -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return _answer(index, ErrorCode.NONE, -1, partition_log.log_start_offset, epoch)
    if timestamp == LATEST_TIERED:
        return _answer(index, ErrorCode.NONE, -1, -1, -1)
    upper = partition_log.last_stable_offset if read_committed else partition_log.high_watermark
    if timestamp == LATEST:
        return _answer(index, ErrorCode.NONE, -1, upper, epoch)
    if timestamp < LATEST_TIERED:
        return _answer(index, ErrorCode.INVALID_REQUEST)
    found = partition_log.offset_for_timestamp(timestamp, upper)
    if found is None:
        return _answer(index, ErrorCode.NONE)
    return _answer(index, ErrorCode.NONE, found.timestamp, found.offset, epoch)


async def handle_list_offsets(
    ctx: RequestContext, header: RequestHeader, request: ListOffsetsRequest
) -> ListOffsetsResponse:
    """Look up offsets by timestamp for every requested partition."""
    broker = ctx.broker
    version = header.request_api_version
    read_committed = version >= 2 and request.isolation_level == _READ_COMMITTED
    unauthorized = denied_names(ctx, ApiKey.LIST_OFFSETS, "topic", [t.name for t in request.topics])
    topics = []
    seen: set[tuple[str, int]] = set()
    for topic in request.topics:
        partitions = []
        for partition in topic.partitions:
            if topic.name in unauthorized:
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                partitions.append(_answer(partition.partition_index, error))
                continue
            key = (topic.name, partition.partition_index)
            if key in seen:
                partitions.append(_answer(partition.partition_index, ErrorCode.INVALID_REQUEST))
                continue
            seen.add(key)
            partitions.append(
                _list_offset(
                    broker,
                    topic.name,
                    partition.partition_index,
                    partition.timestamp,
                    read_committed,
                    version,
                )
            )
        topics.append(
            ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=partitions)
        )
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
