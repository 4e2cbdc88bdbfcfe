"""DeleteRecords handler.

API: DeleteRecords (key 21), versions 0-2.

Behaviour: for each partition, moves the log start offset up to the requested offset (-1: the
high watermark), as Kafka's `ReplicaManager.deleteRecords` does, and answers the new low
watermark (the log start offset; lower requests leave it where it is). Records below it are
gone for readers: Fetch below it is OFFSET_OUT_OF_RANGE, ListOffsets(earliest) answers it, and
segments wholly below it are deleted at once. Producer state, open transactions and aborted
transactions below the new start are kept, and the last stable offset never drops below the
start (`PartitionLog.increment_log_start_offset`). Errors, with low_watermark -1: an unknown
topic or partition UNKNOWN_TOPIC_OR_PARTITION; `__consumer_offsets` / `__transaction_state`
INVALID_TOPIC_EXCEPTION; a topic whose `cleanup.policy` lacks `delete` POLICY_VIOLATION; an
offset below -1 or above the high watermark OFFSET_OUT_OF_RANGE; a failed checkpoint write
KAFKA_STORAGE_ERROR (the log goes offline).

Durability: the start moves before the handler's first `await` (so a request arriving later
on the connection sees it), and the answer waits until it is fsynced (the partition's
`log-start-offset` file, written in a worker thread), so a crash after the answer keeps it.
A crash before the answer may bring the old start back, which is no broken promise: the
client was not answered, and the records below it were still on disk.

Authorization (authorizer on): DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED for its
partitions (their start does not move), as Kafka.

Versions: v1 same as v0; v2 flexible.

Deviations: Kafka writes its log-start-offset checkpoint every
`log.flush.start.offset.checkpoint.interval.ms`, so a crash can undo an answered DeleteRecords
there; here it is durable when answered. `timeout_ms` is not used: with one replica the low
watermark has moved when the log's start has.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied_names
from onceflow.coordinator.internal_topics import TopicOperation, internal_topic_refusal
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.delete_records import DeleteRecordsResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.broker.state import BrokerState
    from onceflow.log.partition import PartitionLog
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.delete_records import DeleteRecordsRequest

log = logging.getLogger("onceflow.broker.delete_records")

_TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
_PartitionResult = _TopicResult.DeleteRecordsPartitionResult


def _check(
    broker: BrokerState, topic: str, partition: int, offset: int
) -> tuple[ErrorCode, PartitionLog | None, int]:
    """`(error, log, target offset)` for one partition, before anything changes."""
    refusal = internal_topic_refusal(topic, TopicOperation.DELETE_RECORDS)
    if refusal is not None:
        return refusal[0], None, -1
    partition_log = broker.get_log(topic, partition)
    if partition_log is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, -1
    if not partition_log.config.delete_enabled:
        return ErrorCode.POLICY_VIOLATION, None, -1
    error, target = partition_log.check_delete_records(offset)
    return error, partition_log, target


async def _checkpoint(
    broker: BrokerState,
    ctx: RequestContext,
    result: _PartitionResult,
    topic: str,
    partition_log: PartitionLog,
) -> None:
    """Fsync the moved start offset in a worker thread before the answer."""
    try:
        await asyncio.to_thread(partition_log.checkpoint_log_start_offset, result.low_watermark)
    except OSError as exc:
        gone = broker.get_log(topic, result.partition_index) is not partition_log
        result.error_code = (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if gone else ErrorCode.KAFKA_STORAGE_ERROR
        )
        result.low_watermark = -1
        log.warning("DeleteRecords on %s from %s failed: %s", partition_log.name, ctx.peer, exc)


async def handle_delete_records(
    ctx: RequestContext, header: RequestHeader, request: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    """Move the log start offset of every requested partition."""
    broker = ctx.broker
    topics: list[_TopicResult] = []
    work = []
    unauthorized = denied_names(
        ctx, ApiKey.DELETE_RECORDS, "topic", [t.name for t in request.topics]
    )
    for topic in request.topics:
        partitions: list[_PartitionResult] = []
        topics.append(_TopicResult(name=topic.name, partitions=partitions))
        for requested in topic.partitions:
            index = requested.partition_index
            if topic.name in unauthorized:
                error, partition_log, target = ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, -1
            else:
                error, partition_log, target = _check(broker, topic.name, index, requested.offset)
            result = _PartitionResult(partition_index=index, low_watermark=-1, error_code=error)
            partitions.append(result)
            if error != ErrorCode.NONE or partition_log is None:  # a log whenever NONE
                log.info(
                    "DeleteRecords on %s-%d to %d from %s: %s",
                    topic.name,
                    index,
                    requested.offset,
                    ctx.peer,
                    error.name,
                )
                continue
            # moving the start publishes the log's offsets event: parked fetches re-read
            result.low_watermark = partition_log.increment_log_start_offset(target)
            work.append(_checkpoint(broker, ctx, result, topic.name, partition_log))
    if work:
        await asyncio.gather(*work)
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
