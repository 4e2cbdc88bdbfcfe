"""DescribeTransactions handler (KIP-664 tooling).

API: DescribeTransactions (key 65), version 0.

Behaviour: for every requested transactional id, the coordinator's view
(`TransactionCoordinator.describe_transactions`): state by Kafka's name ("Ongoing",
"PrepareCommit", ...), timeout, start time of the open transaction (-1 when none), producer id
and epoch, and the partitions in the transaction by topic. An unknown (or expiring) id is
TRANSACTIONAL_ID_NOT_FOUND; before the coordinator has loaded every id gets
COORDINATOR_LOAD_IN_PROGRESS (NOT_COORDINATOR before it was ever looked up).

Authorization (authorizer on): DESCRIBE on each transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it; topics the caller may not DESCRIBE are left out
of a transaction's partitions, as Kafka.

Deviations: none known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import allowed_names, denied_names
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.describe_transactions import DescribeTransactionsResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.describe_transactions import DescribeTransactionsRequest

_State = DescribeTransactionsResponse.TransactionState
_Topic = _State.TopicData
_API = ApiKey.DESCRIBE_TRANSACTIONS


async def handle_describe_transactions(
    ctx: RequestContext, header: RequestHeader, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    """Describe transactional ids."""
    ids = request.transactional_ids
    refused = denied_names(ctx, _API, "transactional_id", ids)
    if refused:
        described = _describe(ctx, [tid for tid in ids if tid not in refused])
        by_id = {s.transactional_id: s for s in described.transaction_states}
        described.transaction_states = [
            _refused(tid) if tid in refused else by_id[tid] for tid in ids
        ]
        return described
    return _describe(ctx, ids)


def _refused(transactional_id: str) -> _State:
    return _State(
        error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        transactional_id=transactional_id,
        transaction_state="",
        topics=[],
    )


def _describe(ctx: RequestContext, transactional_ids: list[str]) -> DescribeTransactionsResponse:
    transactions = ctx.broker.transactions
    not_ready = transactions.not_ready_error()
    if not_ready is not None:
        states = [
            _State(error_code=not_ready, transactional_id=tid, transaction_state="", topics=[])
            for tid in transactional_ids
        ]
        return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)
    states = [
        _State(
            error_code=d.error,
            transactional_id=d.transactional_id,
            transaction_state=d.state,
            transaction_timeout_ms=d.txn_timeout_ms,
            transaction_start_time_ms=d.txn_start_timestamp,
            producer_id=d.producer_id,
            producer_epoch=d.producer_epoch,
            topics=[
                _Topic(topic=t, partitions=list(d.topics[t]))
                for t in allowed_names(ctx, _API, "topic", d.topics)
            ],
        )
        for d in transactions.coordinator.describe_transactions(transactional_ids)
    ]
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)
