"""AddOffsetsToTxn handler.

API: AddOffsetsToTxn (key 25), versions 0-4.

Behaviour: adds the group's `__consumer_offsets` partition to the producer's transaction
(`TransactionCoordinator.handle_add_offsets`), so the transaction's COMMIT/ABORT marker also
lands there and decides the offsets the producer then sends with TxnOffsetCommit. Errors as
AddPartitionsToTxn: CONCURRENT_TRANSACTIONS, PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING,
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR before the coordinator was looked up.

Versions: v1 same as v0; v2 PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH,
KIP-588); v3 flexible; v4 same as v3 (transaction version 2 clients).

Authorization (authorizer on): WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group (GROUP_AUTHORIZATION_FAILED),
as Kafka; a denied request adds nothing.

Producer id binding (onceflow, stricter than Kafka; `broker.producer_binding`): after the
authorization checks, a producer id another principal obtained is
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and nothing changes.

Deviations: the group id is not checked for emptiness (Kafka neither).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied
from onceflow.broker.producer_binding import refusal as binding_refusal
from onceflow.coordinator.txn.coordinator import compat_error
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest


async def handle_add_offsets_to_txn(
    ctx: RequestContext, header: RequestHeader, request: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    """Add the group's offsets partition to the transaction."""
    transactions = ctx.broker.transactions
    api = ApiKey.ADD_OFFSETS_TO_TXN
    error = (
        denied(ctx, api, "transactional_id", request.transactional_id)
        or denied(ctx, api, "group", request.group_id)
        or binding_refusal(ctx, "AddOffsetsToTxn", request.producer_id)
        or transactions.not_ready_error()
        or await transactions.coordinator.handle_add_offsets(
            request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
        )
    )
    return AddOffsetsToTxnResponse(
        throttle_time_ms=0,
        error_code=compat_error(error, ApiKey.ADD_OFFSETS_TO_TXN, header.request_api_version),
    )
