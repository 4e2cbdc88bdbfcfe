"""The coordinator's own transitions: timed-out transactions aborted, idle ids expired.

Kafka's `abortTimedOutTransactions` and `removeExpiredTransactionalIds`, run periodically by
the coordinator (`TransactionCoordinator.start`) or directly by tests with a chosen `now_ms`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from onceflow.coordinator.txn.end_txn import finish_end, prepare_end
from onceflow.coordinator.txn.metadata import TransactionMetadata, TxnTransitMetadata
from onceflow.coordinator.txn.state import TxnState
from onceflow.coordinator.txn.state_manager import TransactionStateManager
from onceflow.protocol.errors import ErrorCode

__all__ = ["abort_timed_out_transactions", "expire_transactional_ids"]

log = logging.getLogger("onceflow.coordinator.txn")


async def abort_timed_out_transactions(
    txns: TransactionStateManager, now_ms: int | None = None
) -> int:
    """Fence and abort every ONGOING transaction open longer than its timeout (at `now_ms`,
    default the clock); the old producer's next request is fenced. Returns how many aborts
    were started."""
    now = txns.clock() if now_ms is None else now_ms
    started: list[Coroutine[Any, Any, ErrorCode]] = []
    for md in list(txns.cache.values()):
        if (
            md.state is not TxnState.ONGOING
            or md.pending_transition_in_progress
            or md.txn_start_timestamp > now - md.txn_timeout_ms
        ):
            continue
        fence = md.prepare_fence_producer_epoch()
        prepared = prepare_end(
            txns, md, fence.producer_id, fence.producer_epoch, False, fence=fence
        )
        if isinstance(prepared, ErrorCode):
            continue
        log.info("aborting timed-out transaction of %r", md.transactional_id)
        started.append(finish_end(txns, md, prepared, fenced=True))
    await asyncio.gather(*started)
    return len(started)


async def expire_transactional_ids(txns: TransactionStateManager, now_ms: int | None = None) -> int:
    """Remove ids idle (EMPTY/COMPLETE_*) for `transactional.id.expiration.ms` (at `now_ms`,
    default the clock): a tombstone is written; the old producer then gets
    INVALID_PRODUCER_ID_MAPPING. Returns the count."""
    now = txns.clock() if now_ms is None else now_ms
    limit = now - txns.config.transactional_id_expiration_ms
    expiring = []
    for md in list(txns.cache.values()):
        if (
            md.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
            and not md.pending_transition_in_progress
            and md.txn_last_update_timestamp <= limit
        ):
            expiring.append((md, md.prepare_dead()))
    results = await asyncio.gather(*(_expire(txns, md, t) for md, t in expiring))
    return sum(results)


async def _expire(
    txns: TransactionStateManager, md: TransactionMetadata, transit: TxnTransitMetadata
) -> bool:
    def forget(md: TransactionMetadata, _transit: TxnTransitMetadata) -> None:
        if txns.cache.get(md.transactional_id) is md:  # removed before anything else runs
            del txns.cache[md.transactional_id]
        log.info("transactional id %r expired", md.transactional_id)

    return await txns.append(md, transit, then=forget) == ErrorCode.NONE
