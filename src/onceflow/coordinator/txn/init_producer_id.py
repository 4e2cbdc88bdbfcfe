"""InitProducerId: a producer id and epoch, fencing the previous producer of a transactional id.

Without a transactional id: a new producer id at epoch 0. With one: ONGOING is fenced and
aborted (CONCURRENT_TRANSACTIONS: the client retries), PREPARE_* and pending transitions answer
CONCURRENT_TRANSACTIONS, EMPTY/COMPLETE_* bump the epoch (a new producer id when the epoch is
exhausted). The KIP-360 expected producer id and epoch must match or PRODUCER_FENCED.
"""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.common import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from onceflow.coordinator.txn.end_txn import finish_end, prepare_end
from onceflow.coordinator.txn.metadata import (
    TransactionMetadata,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from onceflow.coordinator.txn.state import IllegalTxnTransition, TxnState
from onceflow.coordinator.txn.state_manager import TransactionStateManager
from onceflow.protocol.errors import ErrorCode

__all__ = ["InitProducerIdResult", "handle_init_producer_id"]


@dataclass(frozen=True)
class InitProducerIdResult:
    """Answer to InitProducerId."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


async def handle_init_producer_id(
    txns: TransactionStateManager,
    transactional_id: str | None,
    txn_timeout_ms: int,
    expected_producer_id_and_epoch: tuple[int, int] | None = None,
) -> InitProducerIdResult:
    """InitProducerId (see the module docstring); `expected_producer_id_and_epoch` is KIP-360's,
    (-1, -1) meaning none."""
    if transactional_id is None:
        producer_id = txns.new_producer_id()
        if producer_id is None:
            return InitProducerIdResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return InitProducerIdResult(ErrorCode.NONE, producer_id, 0)
    if not transactional_id:
        return InitProducerIdResult(ErrorCode.INVALID_REQUEST)
    if not txns.loaded:
        return InitProducerIdResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    if not 0 < txn_timeout_ms <= txns.config.transaction_max_timeout_ms:
        return InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
    expected = expected_producer_id_and_epoch
    if expected is not None and expected == (NO_PRODUCER_ID, NO_PRODUCER_EPOCH):
        expected = None
    if expected is not None and NO_PRODUCER_ID in (expected[0], expected[1]):
        return InitProducerIdResult(ErrorCode.INVALID_REQUEST)
    md = txns.cache.get(transactional_id)
    fences = md is not None and md.producer_epoch != NO_PRODUCER_EPOCH
    if md is None:
        producer_id = txns.new_producer_id()
        if producer_id is None:
            return InitProducerIdResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        md = TransactionMetadata(
            transactional_id,
            producer_id,
            txn_timeout_ms=txn_timeout_ms,
            txn_last_update_timestamp=txns.clock(),
        )
        md = txns.put(md)
    error, transit = _prepare_init(txns, md, txn_timeout_ms, expected)
    if error != ErrorCode.NONE or transit is None:
        return InitProducerIdResult(error)
    if transit.txn_state is TxnState.PREPARE_EPOCH_FENCE:
        return await _fence_and_abort(txns, md, transit)
    error = await txns.append(md, transit)
    if error != ErrorCode.NONE:
        return InitProducerIdResult(error)
    if fences:
        txns.fenced_producers += 1
    return InitProducerIdResult(ErrorCode.NONE, md.producer_id, md.producer_epoch)


async def _fence_and_abort(
    txns: TransactionStateManager, md: TransactionMetadata, fence: TxnTransitMetadata
) -> InitProducerIdResult:
    """An ONGOING transaction met a new producer: abort it at the bumped epoch; the client
    retries (CONCURRENT_TRANSACTIONS) once the abort is under way."""
    prepared = prepare_end(txns, md, fence.producer_id, fence.producer_epoch, False, fence=fence)
    if isinstance(prepared, ErrorCode):
        return InitProducerIdResult(prepared)
    error = await finish_end(txns, md, prepared, fenced=True)
    return InitProducerIdResult(
        ErrorCode.CONCURRENT_TRANSACTIONS if error == ErrorCode.NONE else error
    )


def _prepare_init(
    txns: TransactionStateManager,
    md: TransactionMetadata,
    txn_timeout_ms: int,
    expected: tuple[int, int] | None,
) -> tuple[ErrorCode, TxnTransitMetadata | None]:
    if md.pending_transition_in_progress:
        return ErrorCode.CONCURRENT_TRANSACTIONS, None
    if expected is not None and not (
        md.producer_epoch == NO_PRODUCER_EPOCH
        or expected[0] == md.producer_id
        or (expected[0] == md.previous_producer_id and is_epoch_exhausted(expected[1]))
    ):
        return ErrorCode.PRODUCER_FENCED, None
    state = md.state
    if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        return ErrorCode.CONCURRENT_TRANSACTIONS, None
    if state is TxnState.ONGOING:
        return ErrorCode.NONE, md.prepare_fence_producer_epoch()
    if state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        now = txns.clock()
        if md.is_producer_epoch_exhausted and (
            expected is None or expected[1] == md.producer_epoch
        ):
            producer_id = txns.new_producer_id()
            if producer_id is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
            return ErrorCode.NONE, md.prepare_producer_id_rotation(
                producer_id, txn_timeout_ms, now, expected is not None
            )
        return md.prepare_incr_producer_epoch(
            txn_timeout_ms, None if expected is None else expected[1], now
        )
    raise IllegalTxnTransition(md.transactional_id, state, TxnState.EMPTY, "InitProducerId")
