"""EndTxn: the decision table, `prepare_end` and the durable PREPARE_COMMIT/ABORT.

EndTxn is two-phase: PREPARE_COMMIT/ABORT is made durable and the client answered; then a
background task (`TxnCompleter`) writes a marker to every partition of the transaction and
appends COMPLETE_COMMIT/ABORT (pending meanwhile, so the next request of that id waits with
CONCURRENT_TRANSACTIONS). InitProducerId's fence of an ONGOING transaction and the timeout
abort end a transaction through the same `prepare_end` and `finish_end`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from onceflow.coordinator.txn.metadata import TransactionMetadata, TxnTransitMetadata
from onceflow.coordinator.txn.state import IllegalTxnTransition, TxnState
from onceflow.coordinator.txn.state_manager import TransactionStateManager
from onceflow.protocol.errors import ErrorCode

__all__ = ["END_TXN_RULES", "finish_end", "handle_end_txn", "prepare_end"]

# EndTxn's decision table (Kafka's endTransaction): (current state, the request commits?) ->
# the error to answer, or None to go ahead and prepare the commit or abort. NONE answers a
# retried EndTxn whose outcome is already the requested one.
COMMIT, ABORT = True, False
END_TXN_RULES: Final[Mapping[tuple[TxnState, bool], ErrorCode | None]] = MappingProxyType(
    {
        (TxnState.ONGOING, COMMIT): None,
        (TxnState.ONGOING, ABORT): None,
        (TxnState.COMPLETE_COMMIT, COMMIT): ErrorCode.NONE,
        (TxnState.COMPLETE_COMMIT, ABORT): ErrorCode.INVALID_TXN_STATE,
        (TxnState.COMPLETE_ABORT, COMMIT): ErrorCode.INVALID_TXN_STATE,
        (TxnState.COMPLETE_ABORT, ABORT): ErrorCode.NONE,
        (TxnState.PREPARE_COMMIT, COMMIT): ErrorCode.CONCURRENT_TRANSACTIONS,
        (TxnState.PREPARE_COMMIT, ABORT): ErrorCode.INVALID_TXN_STATE,
        (TxnState.PREPARE_ABORT, COMMIT): ErrorCode.INVALID_TXN_STATE,
        (TxnState.PREPARE_ABORT, ABORT): ErrorCode.CONCURRENT_TRANSACTIONS,
        (TxnState.EMPTY, COMMIT): ErrorCode.INVALID_TXN_STATE,
        (TxnState.EMPTY, ABORT): ErrorCode.INVALID_TXN_STATE,
        # DEAD and PREPARE_EPOCH_FENCE are never the settled state of a cached id: missing on
        # purpose
    }
)


async def handle_end_txn(
    txns: TransactionStateManager,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
) -> ErrorCode:
    """EndTxn: NONE once PREPARE_COMMIT/ABORT is durable (markers follow asynchronously).

    A retry after completion with the same result is NONE; PREPARE_* with the same result or
    a pending transition is CONCURRENT_TRANSACTIONS; a different result or EMPTY is
    INVALID_TXN_STATE; another epoch is PRODUCER_FENCED."""
    if not transactional_id:
        return ErrorCode.INVALID_REQUEST
    if not txns.loaded:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    md = txns.cache.get(transactional_id)
    if md is None:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    prepared = prepare_end(txns, md, producer_id, producer_epoch, commit, from_client=True)
    if isinstance(prepared, ErrorCode):
        return prepared
    return await finish_end(txns, md, prepared, fenced=False)


def prepare_end(
    txns: TransactionStateManager,
    md: TransactionMetadata,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    *,
    from_client: bool = False,
    fence: TxnTransitMetadata | None = None,
) -> ErrorCode | TxnTransitMetadata:
    """The checks and `prepare_*` of an EndTxn (no await): an error, or the PREPARE transit.
    Kafka's decision rules, in Kafka's order. `fence` is the PREPARE_EPOCH_FENCE transit when
    the coordinator itself ends the transaction (InitProducerId, timeout)."""
    error: ErrorCode | None
    if md.producer_id != producer_id:
        error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
    elif (from_client and producer_epoch != md.producer_epoch) or (
        producer_epoch < md.producer_epoch
    ):
        error = ErrorCode.PRODUCER_FENCED
    elif md.pending_transition_in_progress and not (
        fence is not None and md.pending_state is TxnState.PREPARE_EPOCH_FENCE
    ):
        error = ErrorCode.CONCURRENT_TRANSACTIONS
    elif (md.state, commit) in END_TXN_RULES:
        error = END_TXN_RULES[(md.state, commit)]
    else:
        raise IllegalTxnTransition(md.transactional_id, md.state, TxnState.PREPARE_ABORT)
    if error is not None:
        if fence is not None and md.pending_state is TxnState.PREPARE_EPOCH_FENCE:
            md.cancel_transition()
        return error
    target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    return md.prepare_abort_or_commit(target, txns.clock(), fence)


async def finish_end(
    txns: TransactionStateManager,
    md: TransactionMetadata,
    transit: TxnTransitMetadata,
    *,
    fenced: bool,
) -> ErrorCode:
    """Make a prepared PREPARE_COMMIT/ABORT durable and start its completion; a failed
    coordinator-side fence is remembered on `md` (`has_failed_epoch_fence`)."""
    error = await txns.append(md, transit, then=txns.start_completion)
    if error != ErrorCode.NONE and fenced:
        md.has_failed_epoch_fence = True
    return error
