"""EndTxn handler.

API: EndTxn (key 26), versions 0-5.

Behaviour: commits (committed=true) or aborts the producer's transaction through
`TransactionCoordinator.handle_end_txn`. The answer is NONE once PREPARE_COMMIT/PREPARE_ABORT
is durable in `__transaction_state`; the COMMIT/ABORT markers and COMPLETE_* follow in the
background (the id answers CONCURRENT_TRANSACTIONS meanwhile, and read_committed consumers
stay at the last stable offset until the markers are written). A retry after completion with
the same result is NONE; PREPARE_* with the same result CONCURRENT_TRANSACTIONS; the other
result or an EMPTY transaction INVALID_TXN_STATE; another epoch PRODUCER_FENCED; an id not
mapped to the producer id INVALID_PRODUCER_ID_MAPPING; NOT_COORDINATOR before the
coordinator was looked up (FindCoordinator loads it).

Versions: v1 same as v0; v2 PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH,
KIP-588); v3 flexible; v4 same (TRANSACTION_ABORTABLE may be returned to such clients); v5
returns producer_id and producer_epoch: this coordinator does not bump the epoch at the end of
a transaction (transaction version 1), so it returns the request's on success and -1/-1 on
an error.

Authorization (authorizer on): WRITE on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing changes.

Producer id binding (onceflow, stricter than Kafka; `broker.producer_binding`): after the
authorization checks, a producer id another principal obtained is
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and nothing changes.

Deviations: no transaction version 2 (KIP-890 part 2) epoch bump on EndTxn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied
from onceflow.broker.producer_binding import refusal as binding_refusal
from onceflow.coordinator.txn.coordinator import compat_error
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.end_txn import EndTxnResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.end_txn import EndTxnRequest


async def handle_end_txn(
    ctx: RequestContext, header: RequestHeader, request: EndTxnRequest
) -> EndTxnResponse:
    """Commit or abort the producer's transaction."""
    transactions = ctx.broker.transactions
    tid = request.transactional_id
    error = (
        denied(ctx, ApiKey.END_TXN, "transactional_id", tid)
        or binding_refusal(ctx, "EndTxn", request.producer_id)
        or transactions.not_ready_error()
        or await transactions.coordinator.handle_end_txn(
            tid, request.producer_id, request.producer_epoch, request.committed
        )
    )
    error = compat_error(error, ApiKey.END_TXN, header.request_api_version)
    ok = error == ErrorCode.NONE
    return EndTxnResponse(
        throttle_time_ms=0,
        error_code=error,
        producer_id=request.producer_id if ok else -1,
        producer_epoch=request.producer_epoch if ok else -1,
    )
