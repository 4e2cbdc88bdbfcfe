"""DescribeTransactions handler (KIP-664 tooling).

API: DescribeTransactions (key 65), version 0.

Behaviour: for every requested transactional id, the coordinator's view
(`TransactionCoordinator.describe_transactions`): state by Kafka's name ("Ongoing",
"PrepareCommit", ...), timeout, start time of the open transaction (-1 when none), producer id
and epoch, and the partitions in the transaction by topic. An unknown (or expiring) id is
TRANSACTIONAL_ID_NOT_FOUND; before the coordinator has loaded every id gets
COORDINATOR_LOAD_IN_PROGRESS (NOT_COORDINATOR before it was ever looked up).

Deviations: no ACLs (Kafka checks DESCRIBE on each transactional id and filters topics the
caller may not describe).
"""

from __future__ import annotations

from onceflow.protocol.messages.describe_transactions import DescribeTransactionsResponse

_State = DescribeTransactionsResponse.TransactionState
_Topic = _State.TopicData


async def handle_describe_transactions(ctx, header, request) -> DescribeTransactionsResponse:
    """Describe transactional ids."""
    transactions = ctx.broker.transactions
    not_ready = transactions.not_ready_error()
    if not_ready is not None:
        states = [
            _State(error_code=not_ready, transactional_id=tid, transaction_state="", topics=[])
            for tid in request.transactional_ids
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
            topics=[_Topic(topic=t, partitions=list(p)) for t, p in d.topics.items()],
        )
        for d in transactions.coordinator.describe_transactions(request.transactional_ids)
    ]
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)
