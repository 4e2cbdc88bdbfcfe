"""AddPartitionsToTxn handler.

API: AddPartitionsToTxn (key 24), versions 0-5.

Behaviour: v0-3 (what producers send): one transaction — transactional_id, producer id and
epoch, topics — handed to `TransactionCoordinator.handle_add_partitions`, which appends the
partitions to the transaction in `__transaction_state` (EMPTY/COMPLETE_* -> ONGOING) and
answers one code for all of them: NONE; CONCURRENT_TRANSACTIONS while the id is completing
or changing; PRODUCER_FENCED for another epoch; INVALID_PRODUCER_ID_MAPPING when the id does
not map to that producer id. If any partition does not exist, those get
UNKNOWN_TOPIC_OR_PARTITION and the rest OPERATION_NOT_ATTEMPTED, nothing is added (Kafka's
handler). v4-5 (broker-to-broker in Kafka, KIP-890): a batch of transactions, each possibly
`verify_only` (changes nothing: NONE for partitions already in the ongoing transaction,
INVALID_TXN_STATE otherwise), through `handle_add_partitions_batch`; results by transactional
id, top-level error_code NONE. Before the coordinator is looked up (FindCoordinator loads
it) every partition (v4+: the top-level code) is NOT_COORDINATOR.

Versions: v1 same as v0; v2 PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH,
KIP-588); v3 flexible; v4 batched transactions and verify_only; v5 same as v4 (clients of
transaction version 2).

Authorization (authorizer on), as Kafka: v0-3 need WRITE on the transactional id (else every
partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each topic (else its
partitions are TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED); nothing is
added. v4+ needs CLUSTER_ACTION (top-level CLUSTER_AUTHORIZATION_FAILED).

Producer id binding (onceflow, stricter than Kafka; `broker.producer_binding`): v0-3, after the
authorization checks, a producer id another principal obtained is
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition and nothing is added (v4+ is
broker-to-broker and not checked).

Deviations: with the authorizer off, v4+ is accepted from any client. Internal topics are not
refused.
A v4+ request naming one transactional id twice answers the last entry only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied, denied_names
from onceflow.broker.producer_binding import refusal as binding_refusal
from onceflow.common import TopicPartition
from onceflow.coordinator.txn.coordinator import compat_error
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode, error_name
from onceflow.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader

log = logging.getLogger("onceflow.broker.add_partitions_to_txn")

_TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
_PartitionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult
_Result = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
_Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
_BATCHED_MIN_VERSION = 4


def _partitions(topics: list[_Topic]) -> list[TopicPartition]:
    return [TopicPartition(t.name, p) for t in topics for p in t.partitions]


def _topic_results(
    topics: list[_Topic], errors: Mapping[TopicPartition, ErrorCode], version: int
) -> list[_TopicResult]:
    """Results per requested topic and partition, in request order."""
    return [
        _TopicResult(
            name=t.name,
            results_by_partition=[
                _PartitionResult(
                    partition_index=p,
                    partition_error_code=compat_error(
                        errors[TopicPartition(t.name, p)], ApiKey.ADD_PARTITIONS_TO_TXN, version
                    ),
                )
                for p in t.partitions
            ],
        )
        for t in topics
    ]


def _refusals(
    ctx: RequestContext, tid: str, topics: list[_Topic], parts: list[TopicPartition]
) -> dict[TopicPartition, ErrorCode] | None:
    """Kafka's v0-3 checks: without WRITE on the transactional id every partition is
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED; without WRITE on some topic, its partitions are
    TOPIC_AUTHORIZATION_FAILED and the others OPERATION_NOT_ATTEMPTED. None when allowed."""
    api = ApiKey.ADD_PARTITIONS_TO_TXN
    refused = denied(ctx, api, "transactional_id", tid)
    if refused is not None:
        return dict.fromkeys(parts, refused)
    unauthorized = denied_names(ctx, api, "topic", (t.name for t in topics))
    if not unauthorized:
        return None
    return {
        tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if tp.topic in unauthorized
        else ErrorCode.OPERATION_NOT_ATTEMPTED
        for tp in parts
    }


def _answer_v3(
    request: AddPartitionsToTxnRequest, errors: Mapping[TopicPartition, ErrorCode], version: int
) -> AddPartitionsToTxnResponse:
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0,
        results_by_topic_v3_and_below=_topic_results(request.v3_and_below_topics, errors, version),
    )


async def handle_add_partitions_to_txn(
    ctx: RequestContext, header: RequestHeader, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    """Add partitions to transactions (or verify them, v4+)."""
    version = header.request_api_version
    transactions = ctx.broker.transactions
    coordinator = transactions.coordinator
    not_ready = transactions.not_ready_error()
    if version < _BATCHED_MIN_VERSION:
        tid = request.v3_and_below_transactional_id
        parts = _partitions(request.v3_and_below_topics)
        pid = request.v3_and_below_producer_id
        refused = _refusals(ctx, tid, request.v3_and_below_topics, parts)
        foreign = refused is None and binding_refusal(ctx, "AddPartitionsToTxn", pid)
        if foreign:  # logged
            return _answer_v3(request, dict.fromkeys(parts, foreign), version)
        if refused is not None:
            errors = refused
        elif not_ready is not None:
            errors = dict.fromkeys(parts, not_ready)
        else:
            errors = await coordinator.handle_add_partitions(
                tid, pid, request.v3_and_below_producer_epoch, parts
            )
        failed = {e for e in errors.values() if e != ErrorCode.NONE}
        if failed:
            names = ", ".join(sorted(error_name(e) for e in failed))
            log.info("AddPartitionsToTxn for %r from %s: %s", tid, ctx.peer, names)
        return _answer_v3(request, errors, version)
    not_ready = denied(ctx, ApiKey.ADD_PARTITIONS_TO_TXN, "cluster") or not_ready
    if not_ready is not None:
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=not_ready)
    entries = request.transactions
    results = await coordinator.handle_add_partitions_batch(
        (t.transactional_id, t.producer_id, t.producer_epoch, _partitions(t.topics), t.verify_only)
        for t in entries
    )
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        results_by_transaction=[
            _Result(
                transactional_id=t.transactional_id,
                topic_results=_topic_results(t.topics, results[t.transactional_id], version),
            )
            for t in entries
        ],
    )
