"""`TransactionCoordinator`: InitProducerId, AddPartitions/AddOffsets, EndTxn, timeouts, recovery.

Kafka's `TransactionCoordinator` plus its `TransactionStateManager` cache, for one node. Every
request does its checks and its `prepare_*` before the first `await`; the pending state then
guards the transactional id while the transit is appended to `__transaction_state` (other
requests get CONCURRENT_TRANSACTIONS), and `complete_transition` runs once it is durable.

EndTxn is two-phase: PREPARE_COMMIT/ABORT is made durable and the client answered; then a
background task writes a marker to every partition of the transaction through the
`TxnMarkerChannel` and appends COMPLETE_COMMIT/ABORT (pending meanwhile, so the next request of
that id waits with CONCURRENT_TRANSACTIONS). `load` rebuilds the cache from the state log and
finishes every transaction found in a PREPARE_* state.

The rule that keeps an id from getting stuck: a transition, once appended, is finished whatever
happens to the request that caused it. Each append runs in a task the coordinator owns (not in
the request's task, which a shutdown or a future caller may cancel); that task completes the
transition and then runs what must follow it (EndTxn: start the markers; expiration: drop the
id) before the request hears anything. Completions retry until COMPLETE_* is durable.

Methods return Kafka error codes as values; handlers map PRODUCER_FENCED for old request
versions with `compat_error`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from onceflow.common import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TopicPartition, wall_clock_ms
from onceflow.coordinator.internal_topics import GROUP_METADATA_TOPIC
from onceflow.coordinator.partitioning import coordinator_partition
from onceflow.coordinator.producer_id import ProducerIdManager, ProducerIdStateError
from onceflow.coordinator.txn import admin, faults
from onceflow.coordinator.txn.completion import TxnCompleter
from onceflow.coordinator.txn.config import TxnConfig
from onceflow.coordinator.txn.markers import (
    InProcessTxnMarkerChannel,
    MarkerListener,
    TxnMarker,
    TxnMarkerChannel,
    write_marker,
)
from onceflow.coordinator.txn.metadata import (
    TransactionMetadata,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from onceflow.coordinator.txn.state import IllegalTxnTransition, TxnState
from onceflow.coordinator.txn.state_log import TransactionStateLog
from onceflow.log.manager import LogManager
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode

__all__ = ["InitProducerIdResult", "TransactionCoordinator", "compat_error"]

log = logging.getLogger("onceflow.coordinator.txn")

# KIP-588: requests older than these versions do not know PRODUCER_FENCED
_PRODUCER_FENCED_MIN_VERSION = {
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


# EndTxn's decision table (Kafka's endTransaction): (current state, the request commits?) ->
# the error to answer, or None to go ahead and prepare the commit or abort. NONE answers a
# retried EndTxn whose outcome is already the requested one.
COMMIT, ABORT = True, False
_END_TXN_RULES: Final[Mapping[tuple[TxnState, bool], ErrorCode | None]] = MappingProxyType(
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


@dataclass(frozen=True)
class InitProducerIdResult:
    """Answer to InitProducerId."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class TransactionCoordinator:
    """The transaction coordinator of this node; `await load()` before serving requests."""

    def __init__(
        self,
        logs: LogManager,
        producer_ids: ProducerIdManager,
        config: TxnConfig | None = None,
        *,
        marker_channel: TxnMarkerChannel | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.logs = logs
        self.producer_ids = producer_ids
        self.config = config or TxnConfig()
        self.state_log = TransactionStateLog(logs, self.config)
        self.markers = marker_channel or InProcessTxnMarkerChannel(logs)
        # listeners of markers landing on this node's logs (the admin abort's too)
        self.marker_listeners: list[MarkerListener] = (
            self.markers.listeners if isinstance(self.markers, InProcessTxnMarkerChannel) else []
        )
        self.clock = clock
        self.coordinator_epoch = -1
        # InitProducerId calls that gave an existing transactional id a new epoch (or producer
        # id), fencing the instance that held it before (observability: broker.metrics)
        self.fenced_producers = 0
        # TEST-ONLY fault point (faults.py), called right after a PREPARE_COMMIT is durable:
        # None unless a test installed it
        self.after_prepare_commit: Callable[[], None] | None = faults.crash_hook(
            faults.AFTER_PREPARE_COMMIT, self.config.crash_after_prepare
        )
        self._txns: dict[str, TransactionMetadata] = {}
        self._loaded = False
        self._closed = False
        self.completer = TxnCompleter(self.state_log, self.markers, clock)
        self._timers: list[asyncio.Task] = []
        self._appends: set[asyncio.Task] = set()  # transitions being made durable

    # -- lifecycle ----------------------------------------------------------------------------

    async def load(self) -> None:
        """Create `__transaction_state` if needed, bump the coordinator epoch, rebuild every
        transactional id (the last record per id wins; a tombstone removes it) and start
        finishing the transactions left in PREPARE_COMMIT/PREPARE_ABORT."""
        self._loaded = False
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
        self._txns = {tid: TransactionMetadata.from_transit(tid, t) for tid, t in states.items()}
        self._loaded = True
        unfinished = [
            md
            for md in self._txns.values()
            if md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
        ]
        for md in unfinished:
            self.completer.start(md, self.coordinator_epoch)
        log.info(
            "loaded %d transactional id(s), coordinator epoch %d, completing %d transaction(s)",
            len(self._txns),
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
        tasks = [*self._timers, *self._appends]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.completer.close()

    async def wait_for_completions(self) -> None:
        """Wait until every append, and every marker/COMPLETE_* task, started so far (or by
        those) has finished (tests, shutdown)."""
        while self._appends:
            await asyncio.gather(*list(self._appends), return_exceptions=True)
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
        if not self._loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def partition_for(self, transactional_id: str) -> int:
        """The `__transaction_state` partition of `transactional_id`."""
        return self.state_log.partition_for(transactional_id)

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        """The cached metadata of `transactional_id` (read-only use)."""
        return self._txns.get(transactional_id)

    def put_transaction_state(self, md: TransactionMetadata) -> TransactionMetadata:
        """Cache `md` unless its id is known; returns the cached one (Kafka's
        `putTransactionStateIfNotExists`; also how tests seed a state)."""
        return self._txns.setdefault(md.transactional_id, md)

    # -- InitProducerId -----------------------------------------------------------------------

    async def handle_init_producer_id(
        self,
        transactional_id: str | None,
        txn_timeout_ms: int,
        expected_producer_id_and_epoch: tuple[int, int] | None = None,
    ) -> InitProducerIdResult:
        """InitProducerId. Without a transactional id: a new producer id at epoch 0.

        With one: ONGOING is fenced and aborted (CONCURRENT_TRANSACTIONS: the client retries),
        PREPARE_* and pending transitions answer CONCURRENT_TRANSACTIONS, EMPTY/COMPLETE_* bump
        the epoch (a new producer id when the epoch is exhausted). The KIP-360 expected producer
        id and epoch, (-1, -1) meaning none, must match or PRODUCER_FENCED."""
        if transactional_id is None:
            producer_id = self._new_producer_id()
            if producer_id is None:
                return InitProducerIdResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return InitProducerIdResult(ErrorCode.NONE, producer_id, 0)
        if not transactional_id:
            return InitProducerIdResult(ErrorCode.INVALID_REQUEST)
        if not self._loaded:
            return InitProducerIdResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        if not 0 < txn_timeout_ms <= self.config.transaction_max_timeout_ms:
            return InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        expected = expected_producer_id_and_epoch
        if expected is not None and expected == (NO_PRODUCER_ID, NO_PRODUCER_EPOCH):
            expected = None
        if expected is not None and NO_PRODUCER_ID in (expected[0], expected[1]):
            return InitProducerIdResult(ErrorCode.INVALID_REQUEST)
        md = self._txns.get(transactional_id)
        fences = md is not None and md.producer_epoch != NO_PRODUCER_EPOCH
        if md is None:
            producer_id = self._new_producer_id()
            if producer_id is None:
                return InitProducerIdResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            md = TransactionMetadata(
                transactional_id,
                producer_id,
                txn_timeout_ms=txn_timeout_ms,
                txn_last_update_timestamp=self.clock(),
            )
            md = self.put_transaction_state(md)
        error, transit = self._prepare_init(md, txn_timeout_ms, expected)
        if error != ErrorCode.NONE:
            return InitProducerIdResult(error)
        if transit.txn_state is TxnState.PREPARE_EPOCH_FENCE:
            prepared = self._prepare_end(
                md, transit.producer_id, transit.producer_epoch, False, fence=transit
            )
            if isinstance(prepared, ErrorCode):
                return InitProducerIdResult(prepared)
            error = await self._finish_end(md, prepared, fenced=True)
            return InitProducerIdResult(
                ErrorCode.CONCURRENT_TRANSACTIONS if error == ErrorCode.NONE else error
            )
        error = await self._append(md, transit)
        if error != ErrorCode.NONE:
            return InitProducerIdResult(error)
        if fences:
            self.fenced_producers += 1
        return InitProducerIdResult(ErrorCode.NONE, md.producer_id, md.producer_epoch)

    def _prepare_init(
        self,
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
            now = self.clock()
            if md.is_producer_epoch_exhausted and (
                expected is None or expected[1] == md.producer_epoch
            ):
                producer_id = self._new_producer_id()
                if producer_id is None:
                    return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
                return ErrorCode.NONE, md.prepare_producer_id_rotation(
                    producer_id, txn_timeout_ms, now, expected is not None
                )
            return md.prepare_incr_producer_epoch(
                txn_timeout_ms, None if expected is None else expected[1], now
            )
        raise IllegalTxnTransition(md.transactional_id, state, TxnState.EMPTY, "InitProducerId")

    def _new_producer_id(self) -> int | None:
        try:
            return self.producer_ids.generate_producer_id()
        except (OSError, ProducerIdStateError) as exc:
            log.error("cannot allocate a producer id: %s", exc)
            return None

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------

    async def handle_add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        verify_only: bool = False,
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn for one transaction: an error code per partition.

        Unknown partitions get UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED
        (as Kafka's handler answers). `verify_only` (v4+, KIP-890 verification) changes nothing:
        NONE for partitions already in the ongoing transaction, INVALID_TXN_STATE otherwise."""
        parts = [TopicPartition(*tp) for tp in partitions]
        if verify_only:
            return self._verify_partitions(transactional_id, producer_id, producer_epoch, parts)
        missing = {tp for tp in parts if self.logs.get_log(tp.topic, tp.partition) is None}
        if missing:
            return {
                tp: (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    if tp in missing
                    else ErrorCode.OPERATION_NOT_ATTEMPTED
                )
                for tp in parts
            }
        error = await self._add_partitions(transactional_id, producer_id, producer_epoch, parts)
        return dict.fromkeys(parts, error)

    async def handle_add_partitions_batch(
        self,
        transactions: Iterable[tuple[str, int, int, Iterable[TopicPartition], bool]],
    ) -> dict[str, dict[TopicPartition, ErrorCode]]:
        """AddPartitionsToTxn v4+: `(transactional_id, producer_id, epoch, partitions,
        verify_only)` per transaction, handled concurrently; results by transactional id."""
        entries = list(transactions)
        results = await asyncio.gather(
            *(
                self.handle_add_partitions(tid, pid, epoch, parts, verify_only=verify)
                for tid, pid, epoch, parts, verify in entries
            )
        )
        return {entry[0]: result for entry, result in zip(entries, results, strict=True)}

    async def handle_add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> ErrorCode:
        """AddOffsetsToTxn: add the group's `__consumer_offsets` partition to the transaction."""
        info = self.logs.topic(GROUP_METADATA_TOPIC)
        count = info.partitions if info else self.config.offsets_topic_num_partitions
        tp = TopicPartition(GROUP_METADATA_TOPIC, coordinator_partition(group_id, count))
        return await self._add_partitions(transactional_id, producer_id, producer_epoch, [tp])

    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, TransactionMetadata | None]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        if not self._loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
        md = self._txns.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if md.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return ErrorCode.NONE, md

    async def _add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> ErrorCode:
        error, md = self._check_producer(transactional_id, producer_id, producer_epoch)
        if md is None:
            return error
        if md.pending_transition_in_progress or md.state in (
            TxnState.PREPARE_COMMIT,
            TxnState.PREPARE_ABORT,
        ):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if md.state is TxnState.ONGOING and set(partitions) <= md.topic_partitions:
            return ErrorCode.NONE
        transit = md.prepare_add_partitions(partitions, self.clock())
        return await self._append(md, transit)

    def verify_partition(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> ErrorCode:
        """Synchronous KIP-890 verification of one partition (what Produce runs before
        appending a transactional batch): the `verify_only` answer, without an `await`."""
        return self._verify_partitions(transactional_id, producer_id, producer_epoch, [tp])[tp]

    def _verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        error, md = self._check_producer(transactional_id, producer_id, producer_epoch)
        if md is not None and md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            error, md = ErrorCode.CONCURRENT_TRANSACTIONS, None
        if md is None:
            return dict.fromkeys(partitions, error)
        ongoing = md.state is TxnState.ONGOING
        return {
            tp: ErrorCode.NONE
            if ongoing and tp in md.topic_partitions
            else ErrorCode.INVALID_TXN_STATE
            for tp in partitions
        }

    # -- EndTxn -------------------------------------------------------------------------------

    async def handle_end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        """EndTxn: NONE once PREPARE_COMMIT/ABORT is durable (markers follow asynchronously).

        A retry after completion with the same result is NONE; PREPARE_* with the same result or
        a pending transition is CONCURRENT_TRANSACTIONS; a different result or EMPTY is
        INVALID_TXN_STATE; another epoch is PRODUCER_FENCED."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        if not self._loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        md = self._txns.get(transactional_id)
        if md is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        prepared = self._prepare_end(md, producer_id, producer_epoch, commit, from_client=True)
        if isinstance(prepared, ErrorCode):
            return prepared
        return await self._finish_end(md, prepared, fenced=False)

    def _prepare_end(
        self,
        md: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        from_client: bool = False,
        fence: TxnTransitMetadata | None = None,
    ) -> ErrorCode | TxnTransitMetadata:
        """The checks and `prepare_*` of an EndTxn (no await): an error, or the PREPARE transit.
        Kafka's decision rules, in Kafka's order."""
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
        elif (md.state, commit) in _END_TXN_RULES:
            error = _END_TXN_RULES[(md.state, commit)]
        else:
            raise IllegalTxnTransition(md.transactional_id, md.state, TxnState.PREPARE_ABORT)
        if error is not None:
            if fence is not None and md.pending_state is TxnState.PREPARE_EPOCH_FENCE:
                md.cancel_transition()
            return error
        target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        return md.prepare_abort_or_commit(target, self.clock(), fence)

    async def _finish_end(
        self, md: TransactionMetadata, transit: TxnTransitMetadata, *, fenced: bool
    ) -> ErrorCode:
        error = await self._append(md, transit, then=self._start_completion)
        if error != ErrorCode.NONE and fenced:
            md.has_failed_epoch_fence = True
        return error

    def _start_completion(self, md: TransactionMetadata, transit: TxnTransitMetadata) -> None:
        if transit.txn_state is TxnState.PREPARE_COMMIT and self.after_prepare_commit:
            self.after_prepare_commit()
        self.completer.start(md, self.coordinator_epoch)

    async def _append(
        self,
        md: TransactionMetadata,
        transit: TxnTransitMetadata,
        then: Callable[[TransactionMetadata, TxnTransitMetadata], None] | None = None,
    ) -> ErrorCode:
        """Append a prepared transit; once durable complete it and run `then`, else cancel it.

        The work runs in a task the coordinator owns, and the caller only awaits it (shielded):
        a caller cancelled mid-append must leave neither the transition pending forever, nor
        the log ahead of memory, nor a durable PREPARE_* without its completion."""
        task = asyncio.ensure_future(self._append_and_complete(md, transit, then))
        self._appends.add(task)
        task.add_done_callback(self._append_done)
        return await asyncio.shield(task)

    def _append_done(self, task: asyncio.Task) -> None:
        self._appends.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a __transaction_state append failed", exc_info=task.exception())

    async def _append_and_complete(
        self,
        md: TransactionMetadata,
        transit: TxnTransitMetadata,
        then: Callable[[TransactionMetadata, TxnTransitMetadata], None] | None,
    ) -> ErrorCode:
        try:
            error = await self.state_log.append(md.transactional_id, transit, self.clock())
        except BaseException:
            md.cancel_transition()
            raise
        if error != ErrorCode.NONE:
            md.cancel_transition()
            return error
        md.complete_transition(transit)
        if then is not None:
            then(md, transit)
        return ErrorCode.NONE

    # -- timeouts and expiration --------------------------------------------------------------

    async def abort_timed_out_transactions(self, now_ms: int | None = None) -> int:
        """Fence and abort every ONGOING transaction open longer than its timeout; the old
        producer's next request is fenced. Returns how many aborts were started."""
        now = self.clock() if now_ms is None else now_ms
        started = []
        for md in list(self._txns.values()):
            if (
                md.state is not TxnState.ONGOING
                or md.pending_transition_in_progress
                or md.txn_start_timestamp > now - md.txn_timeout_ms
            ):
                continue
            fence = md.prepare_fence_producer_epoch()
            prepared = self._prepare_end(
                md, fence.producer_id, fence.producer_epoch, False, fence=fence
            )
            if isinstance(prepared, ErrorCode):
                continue
            log.info("aborting timed-out transaction of %r", md.transactional_id)
            started.append(self._finish_end(md, prepared, fenced=True))
        await asyncio.gather(*started)
        return len(started)

    async def expire_transactional_ids(self, now_ms: int | None = None) -> int:
        """Remove ids idle (EMPTY/COMPLETE_*) for `transactional.id.expiration.ms`: a tombstone
        is written; the old producer then gets INVALID_PRODUCER_ID_MAPPING. Returns the count."""
        now = self.clock() if now_ms is None else now_ms
        limit = now - self.config.transactional_id_expiration_ms
        expiring = []
        for md in list(self._txns.values()):
            if (
                md.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
                and not md.pending_transition_in_progress
                and md.txn_last_update_timestamp <= limit
            ):
                expiring.append((md, md.prepare_dead()))
        results = await asyncio.gather(*(self._expire(md, t) for md, t in expiring))
        return sum(results)

    async def _expire(self, md: TransactionMetadata, transit: TxnTransitMetadata) -> bool:
        return await self._append(md, transit, then=self._forget) == ErrorCode.NONE

    def _forget(self, md: TransactionMetadata, _transit: TxnTransitMetadata) -> None:
        if self._txns.get(md.transactional_id) is md:  # removed before anything else runs
            del self._txns[md.transactional_id]
        log.info("transactional id %r expired", md.transactional_id)

    # -- admin (KIP-664) ----------------------------------------------------------------------

    def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> list[admin.TransactionDescription]:
        """DescribeTransactions."""
        ids = list(transactional_ids)
        if not self._loaded:
            return [
                admin.TransactionDescription(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, tid)
                for tid in ids
            ]
        return admin.describe_transactions(self._txns, ids)

    def list_transactions(
        self,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
        duration_filter_ms: int = -1,
    ) -> admin.ListTransactionsResult:
        """ListTransactions (the duration filter is v1+)."""
        if not self._loaded:
            return admin.ListTransactionsResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [], [])
        return admin.list_transactions(
            self._txns, state_filters, producer_id_filters, duration_filter_ms, self.clock()
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
