"""`TransactionCoordinator`: the transaction coordinator of one node, one method per request.

Kafka's `TransactionCoordinator`. The coordinator is a `TransactionStateManager`
(state_manager.py: the cached ids and the durable append of a transition) that owns the
lifecycle (`load` from `__transaction_state`, the periodic timers, `close`); each request
method is the function of the module that implements it, called with the coordinator:

- init_producer_id.py: InitProducerId (fencing an ONGOING transaction through end_txn.py);
- add_partitions.py: AddPartitionsToTxn, AddOffsetsToTxn and KIP-890 verification;
- end_txn.py: EndTxn's decision table and the durable PREPARE_COMMIT/ABORT; the markers and
  COMPLETE_* follow in completion.py;
- expiration.py: timed-out transactions aborted, idle transactional ids expired;
- admin.py: DescribeTransactions and ListTransactions (KIP-664).

Every request does its checks and its `prepare_*` before the first `await`; the pending state
then guards the transactional id while the transit is appended (other requests get
CONCURRENT_TRANSACTIONS), and `complete_transition` runs once it is durable. `load` rebuilds
the cache and finishes every transaction found in a PREPARE_* state.

Methods return Kafka error codes as values; handlers map PRODUCER_FENCED for old request
versions with `compat_error`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable

from onceflow.common import TopicPartition, wall_clock_ms
from onceflow.coordinator.producer_id import ProducerIdManager
from onceflow.coordinator.txn import (
    add_partitions,
    admin,
    end_txn,
    expiration,
    init_producer_id,
)
from onceflow.coordinator.txn.completion import TxnCompleter
from onceflow.coordinator.txn.config import TxnConfig
from onceflow.coordinator.txn.markers import (
    InProcessTxnMarkerChannel,
    MarkerListener,
    TxnMarker,
    TxnMarkerChannel,
    write_marker,
)
from onceflow.coordinator.txn.metadata import TransactionMetadata, TxnTransitMetadata
from onceflow.coordinator.txn.state import TxnState
from onceflow.coordinator.txn.state_log import TransactionStateLog
from onceflow.coordinator.txn.state_manager import TransactionStateManager
from onceflow.log.manager import LogManager
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode

__all__ = ["TransactionCoordinator", "compat_error"]

log = logging.getLogger("onceflow.coordinator.txn")

# KIP-588: requests older than these versions do not know PRODUCER_FENCED
_PRODUCER_FENCED_MIN_VERSION: dict[int, int] = {
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
    ApiKey.TXN_OFFSET_COMMIT: 2,
}


def compat_error(error: ErrorCode, api_key: int, version: int) -> ErrorCode:
    """PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for request versions before KIP-588."""
    if error == ErrorCode.PRODUCER_FENCED and version < _PRODUCER_FENCED_MIN_VERSION.get(
        api_key, 0
    ):
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


class TransactionCoordinator(TransactionStateManager):
    """The transaction coordinator of this node; `await load()` before serving requests.

    It is the `TransactionStateManager` (the cache and its durable appends) plus the
    lifecycle; each request method is the function of that request's module."""

    def __init__(
        self,
        logs: LogManager,
        producer_ids: ProducerIdManager,
        config: TxnConfig | None = None,
        *,
        marker_channel: TxnMarkerChannel | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        config = config or TxnConfig()
        state_log = TransactionStateLog(logs, config)
        self.markers = marker_channel or InProcessTxnMarkerChannel(logs)
        # listeners of markers landing on this node's logs (the admin abort's too)
        self.marker_listeners: list[MarkerListener] = (
            self.markers.listeners if isinstance(self.markers, InProcessTxnMarkerChannel) else []
        )
        completer = TxnCompleter(state_log, self.markers, clock)
        super().__init__(logs, producer_ids, config, state_log, completer, clock)
        self._closed = False
        self._timers: list[asyncio.Task[None]] = []

    # -- lifecycle ----------------------------------------------------------------------------

    async def load(self) -> None:
        """Create `__transaction_state` if needed, bump the coordinator epoch, rebuild every
        transactional id (the last record per id wins; a tombstone removes it) and start
        finishing the transactions left in PREPARE_COMMIT/PREPARE_ABORT."""
        self.loaded = False
        if self.state_log.ensure() != ErrorCode.NONE:
            raise OSError("cannot create __transaction_state")
        self.coordinator_epoch = self.state_log.bump_coordinator_epoch()
        states: dict[str, TxnTransitMetadata] = {}
        for partition in range(self.state_log.num_partitions):
            for tid, transit in self.state_log.read_partition(partition):
                if transit is None:
                    states.pop(tid, None)
                else:
                    states[tid] = transit
        self.cache = {tid: TransactionMetadata.from_transit(tid, t) for tid, t in states.items()}
        self.loaded = True
        unfinished = [
            md
            for md in self.cache.values()
            if md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
        ]
        for md in unfinished:
            self.completer.start(md, self.coordinator_epoch)
        log.info(
            "loaded %d transactional id(s), coordinator epoch %d, completing %d transaction(s)",
            len(self.cache),
            self.coordinator_epoch,
            len(unfinished),
        )

    def start(self) -> None:
        """Start the periodic timeout-abort and expiration tasks (on the running loop)."""
        cfg = self.config
        self._timers = [
            asyncio.create_task(
                self._every(
                    cfg.abort_timed_out_transaction_cleanup_interval_ms,
                    self.abort_timed_out_transactions,
                )
            ),
            asyncio.create_task(
                self._every(
                    cfg.remove_expired_transaction_cleanup_interval_ms,
                    self.expire_transactional_ids,
                )
            ),
        ]

    async def close(self) -> None:
        """Stop timers, appends and marker tasks; what is durable is finished on the next load."""
        self._closed = True
        tasks: list[asyncio.Task[None] | asyncio.Task[ErrorCode]] = [*self._timers, *self.appends]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.completer.close()

    async def wait_for_completions(self) -> None:
        """Wait until every append, and every marker/COMPLETE_* task, started so far (or by
        those) has finished (tests, shutdown)."""
        await self.wait_for_appends()
        await self.completer.wait_idle()

    async def _every(self, interval_ms: int, action: Callable[[], Awaitable[int]]) -> None:
        while not self._closed:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await action()
            except Exception:  # a bug: log it, keep the timer alive
                log.exception("periodic transaction coordinator task failed")

    # -- lookups ------------------------------------------------------------------------------

    def find_coordinator(self, transactional_id: str) -> ErrorCode:
        """FindCoordinator (key type 1): NONE when this node can serve `transactional_id`."""
        if not self.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def partition_for(self, transactional_id: str) -> int:
        """The `__transaction_state` partition of `transactional_id`."""
        return self.state_log.partition_for(transactional_id)

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        """The cached metadata of `transactional_id` (read-only use)."""
        return self.cache.get(transactional_id)

    def put_transaction_state(self, md: TransactionMetadata) -> TransactionMetadata:
        """Cache `md` unless its id is known; returns the cached one (Kafka's
        `putTransactionStateIfNotExists`; also how tests seed a state)."""
        return self.put(md)

    # -- requests: each the function of its module, called with the coordinator as `txns` ----

    handle_init_producer_id = init_producer_id.handle_init_producer_id
    handle_add_partitions = add_partitions.handle_add_partitions
    handle_add_partitions_batch = add_partitions.handle_add_partitions_batch
    handle_add_offsets = add_partitions.handle_add_offsets
    handle_end_txn = end_txn.handle_end_txn
    abort_timed_out_transactions = expiration.abort_timed_out_transactions
    expire_transactional_ids = expiration.expire_transactional_ids

    def verify_partition(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> ErrorCode:
        """Synchronous KIP-890 verification of one partition (what Produce runs before
        appending a transactional batch): the `verify_only` answer, without an `await`."""
        return add_partitions.verify_partitions(
            self, transactional_id, producer_id, producer_epoch, [tp]
        )[tp]

    # -- admin (KIP-664) ----------------------------------------------------------------------

    def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> list[admin.TransactionDescription]:
        """DescribeTransactions."""
        ids = list(transactional_ids)
        if not self.loaded:
            return [
                admin.TransactionDescription(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, tid)
                for tid in ids
            ]
        return admin.describe_transactions(self.cache, ids)

    def list_transactions(
        self,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
        duration_filter_ms: int = -1,
    ) -> admin.ListTransactionsResult:
        """ListTransactions (the duration filter is v1+)."""
        if not self.loaded:
            return admin.ListTransactionsResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [], [])
        return admin.list_transactions(
            self.cache, state_filters, producer_id_filters, duration_filter_ms, self.clock()
        )

    def add_marker_listener(self, listener: MarkerListener) -> None:
        """Register the group coordinator's `on_marker(partition, producer_id, commit)`: called
        once a marker is durable on a `__consumer_offsets` partition of this node."""
        self.marker_listeners.append(listener)

    async def abort_hanging_transaction(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int
    ) -> ErrorCode:
        """KIP-664's abort of a hanging transaction on one partition: a log-side ABORT marker
        for the producer id and epoch (what Kafka's admin sends as WriteTxnMarkers). The
        partition's producer state checks the epochs; the coordinator's cache is untouched."""
        marker = TxnMarker(producer_id, producer_epoch, coordinator_epoch, commit=False)
        return await write_marker(self.logs, tp, marker, self.marker_listeners)
