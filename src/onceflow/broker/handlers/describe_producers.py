"""DescribeProducers handler (KIP-664 tooling: find producers and hanging transactions).

API: DescribeProducers (key 61), version 0.

Behaviour: for every requested partition, the producers with state on it
(`PartitionLog.active_producers`): producer id, epoch, last sequence, last timestamp,
coordinator epoch and the first offset of its open transaction (-1 when none), ordered by
producer id. An unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION for that partition
only. Producers expired by `producer.id.expiration.ms` are gone from the answer.

Authorization (authorizer on): READ on each topic, else TOPIC_AUTHORIZATION_FAILED for its
partitions, as Kafka.

Deviations: one node
leads every partition, so never NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.describe_producers import DescribeProducersResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.broker.state import BrokerState
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.describe_producers import DescribeProducersRequest

_TopicResponse = DescribeProducersResponse.TopicResponse
_PartitionResponse = _TopicResponse.PartitionResponse
_ProducerState = _PartitionResponse.ProducerState


def _error(index: int, error: ErrorCode) -> _PartitionResponse:
    return _PartitionResponse(
        partition_index=index, error_code=error, error_message=None, active_producers=[]
    )


def _describe(broker: BrokerState, topic: str, index: int) -> _PartitionResponse:
    partition_log = broker.get_log(topic, index)
    if partition_log is None:
        return _PartitionResponse(
            partition_index=index,
            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            error_message=None,
            active_producers=[],
        )
    producers = [
        _ProducerState(
            producer_id=p.producer_id,
            producer_epoch=p.producer_epoch,
            last_sequence=p.last_sequence,
            last_timestamp=p.last_timestamp,
            coordinator_epoch=p.coordinator_epoch,
            current_txn_start_offset=p.current_txn_start_offset,
        )
        for p in partition_log.active_producers()
    ]
    return _PartitionResponse(
        partition_index=index,
        error_code=ErrorCode.NONE,
        error_message=None,
        active_producers=producers,
    )


async def handle_describe_producers(
    ctx: RequestContext, header: RequestHeader, request: DescribeProducersRequest
) -> DescribeProducersResponse:
    """Describe the active producers of every requested partition."""
    broker = ctx.broker
    topics = []
    for topic in request.topics:
        refused = denied(ctx, ApiKey.DESCRIBE_PRODUCERS, "topic", topic.name)
        partitions = [
            _error(i, refused) if refused is not None else _describe(broker, topic.name, i)
            for i in topic.partition_indexes
        ]
        topics.append(_TopicResponse(name=topic.name, partitions=partitions))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
