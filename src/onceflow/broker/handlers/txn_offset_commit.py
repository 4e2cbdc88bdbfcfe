"""TxnOffsetCommit handler.

API: TxnOffsetCommit (key 28), versions 0-5.

Behaviour: a transactional producer commits a consumer group's offsets as part of its
transaction (KIP-98; the producer first sent AddOffsetsToTxn, which added the group's
`__consumer_offsets` partition to the transaction). Partitions of unknown topics are
UNKNOWN_TOPIC_OR_PARTITION; the rest go to the group coordinator's `txn_offset_commit`, which
appends them in a transactional batch carrying the producer id and epoch (the log's producer
state fences a stale epoch) and holds them pending until the transaction's COMMIT marker lands
on the group's partition (then they become the committed offsets) or its ABORT marker (then
they are dropped). While pending, OffsetFetch with require_stable answers
UNSTABLE_OFFSET_COMMIT for them.

Versions: v1 same as v0; v2 committed_leader_epoch, PRODUCER_FENCED (older versions get
INVALID_PRODUCER_EPOCH, KIP-588); v3 flexible, generation_id, member_id, group_instance_id
(KIP-447: a zombie of an old generation is fenced with ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID /
FENCED_INSTANCE_ID); v4-5 KIP-890 versions, same fields.

Authorization (authorizer on): WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group (GROUP_AUTHORIZATION_FAILED), for
every partition, nothing staged; READ on each topic (TOPIC_AUTHORIZATION_FAILED for its
partitions, the others go on), as Kafka.

Producer id binding (onceflow, stricter than Kafka; `broker.producer_binding`): after the
authorization checks, a producer id another principal obtained is
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition, and nothing changes.

Deviations: v5 does not verify on the broker that the transaction includes the group's
partition (KIP-890 part 2 server-side verification).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied, denied_names
from onceflow.broker.handlers.offset_commit import (
    collect_offsets,
    partition_responses,
    partitions_of,
    topic_names,
)
from onceflow.broker.producer_binding import refusal as binding_refusal
from onceflow.coordinator.txn.coordinator import compat_error
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.messages.txn_offset_commit import TxnOffsetCommitResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.common import TopicPartition
    from onceflow.coordinator.group.offsets import CommittedOffset
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest

_Topic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
_Partition = _Topic.TxnOffsetCommitResponsePartition


async def handle_txn_offset_commit(
    ctx: RequestContext, header: RequestHeader, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    """Stage a transaction's offsets for a group."""
    broker = ctx.broker
    version = header.request_api_version
    api = ApiKey.TXN_OFFSET_COMMIT
    refused = (
        denied(ctx, api, "transactional_id", request.transactional_id)
        or denied(ctx, api, "group", request.group_id)
        or binding_refusal(ctx, "TxnOffsetCommit", request.producer_id)
    )
    if refused is not None:
        errors = dict.fromkeys(partitions_of(request.topics), refused)
        offsets: dict[TopicPartition, CommittedOffset] = {}
    else:
        unauthorized = denied_names(ctx, api, "topic", topic_names(request))
        errors, offsets = collect_offsets(
            broker, request.topics, with_leader_epoch=version >= 2, unauthorized=unauthorized
        )
    if offsets:
        results = await broker.group_coordinator.txn_offset_commit(
            request.transactional_id,
            request.group_id,
            request.producer_id,
            request.producer_epoch,
            request.generation_id if version >= 3 else -1,
            request.member_id if version >= 3 else "",
            request.group_instance_id if version >= 3 else None,
            offsets,
        )
        for tp, error in results.items():
            errors[tp] = compat_error(error, ApiKey.TXN_OFFSET_COMMIT, version)
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=partition_responses(request.topics, errors, _Topic, _Partition),
    )
