"""`BrokerTransactions`: the broker's side of the transaction coordinator.

Owns the `TransactionCoordinator` of this node (built on the broker's `LogManager` and
`ProducerIdManager`, configured from the broker's `transaction.*` keys) and everything that ties
it to the rest of the broker:

- Loading. As in Kafka, `__transaction_state` is created on first use: `start()` loads the
  coordinator at once only when the topic already exists (so a restart finishes the
  transactions left in PREPARE_COMMIT/PREPARE_ABORT before serving); otherwise the first
  FindCoordinator(TRANSACTION) or transactional InitProducerId calls `ensure_loaded()`, which
  creates the topic and loads (concurrent callers share one load). `ensure_loaded` does not
  yield once loaded, so handlers keep "state changes before the first await".
- Markers. The coordinator writes COMMIT/ABORT markers through `BrokerMarkerChannel`, which
  wakes long-polling fetches of the partitions whose last stable offset moved; markers landing
  on `__consumer_offsets` are handed to the group coordinator (`broker.group_coordinator`,
  looked up when the marker lands) so pending transactional offsets materialise or drop.
- Produce verification (KIP-890 part 1): `verify_produce` checks a transactional batch against
  the coordinator before it is appended (see its docstring).
- Timers (timeout aborts, transactional-id expiration) from `start()`; `close()` stops them and
  the marker tasks before the logs close.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from onceflow.coordinator.txn.config import TxnConfig
from onceflow.coordinator.txn.coordinator import TransactionCoordinator
from onceflow.coordinator.txn.markers import InProcessTxnMarkerChannel
from onceflow.coordinator.txn.metadata import TopicPartition
from onceflow.coordinator.txn.state_log import TRANSACTION_STATE_TOPIC
from onceflow.protocol.errors import ErrorCode
from onceflow.records.batch import BatchHeader

if TYPE_CHECKING:
    from onceflow.broker.state import BrokerState

log = logging.getLogger("onceflow.broker.transactions")

__all__ = ["BrokerMarkerChannel", "BrokerTransactions", "verification_error"]

# Produce versions from which Kafka answers TRANSACTION_ABORTABLE for a failed verification
# (AddPartitionsToTxnManager.produceRequestVersionToTransactionSupportedOperation: v11+)
_ABORTABLE_MIN_PRODUCE_VERSION = 11
# retriable verification outcomes older clients do not retry on Produce: Kafka's ReplicaManager
# answers NOT_ENOUGH_REPLICAS instead (it does not trigger a metadata refresh)
_RETRY_AS_NOT_ENOUGH_REPLICAS = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)


def verification_error(error: ErrorCode, produce_version: int) -> ErrorCode:
    """Map the coordinator's verify-only answer for one partition to what Produce returns
    (Kafka's AddPartitionsToTxnManager + ReplicaManager rules)."""
    if error == ErrorCode.NONE:
        return error
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH  # producers expect this on Produce (KIP-588)
    if error in (ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_ABORTABLE):
        if produce_version >= _ABORTABLE_MIN_PRODUCE_VERSION:
            return ErrorCode.TRANSACTION_ABORTABLE
        return ErrorCode.INVALID_TXN_STATE
    if error in _RETRY_AS_NOT_ENOUGH_REPLICAS:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return error


class BrokerMarkerChannel(InProcessTxnMarkerChannel):
    """Writes markers to this broker's logs, then wakes fetches whose LSO moved."""

    def __init__(self, state: BrokerState) -> None:
        super().__init__(state.logs)
        self._state = state

    async def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        partitions: Iterable[TopicPartition],
    ) -> Mapping[TopicPartition, ErrorCode]:
        """Write one marker per partition (see `InProcessTxnMarkerChannel`), then wake fetches."""
        outcomes = await super().write_markers(
            producer_id, producer_epoch, coordinator_epoch, commit, partitions
        )
        self._state.markers_written(outcomes)
        return outcomes


class BrokerTransactions:
    """The transaction coordinator of a broker, with its lifecycle and broker-side hooks."""

    def __init__(self, state: BrokerState, properties: Mapping[str, object]) -> None:
        self._state = state
        self.channel = BrokerMarkerChannel(state)
        self.coordinator = TransactionCoordinator(
            state.logs,
            state.producer_ids,
            TxnConfig.from_properties(properties),
            marker_channel=self.channel,
        )
        self.coordinator.add_marker_listener(self._on_offsets_marker)
        self.verification_enabled = bool(
            properties.get("transaction.partition.verification.enable", True)
        )
        self._loading: asyncio.Task[None] | None = None
        self.loaded = False
        self._started = False

    async def start(self) -> None:
        """Load now if `__transaction_state` exists (finishing prepared transactions), and start
        the timeout/expiration timers."""
        if self._state.logs.topic(TRANSACTION_STATE_TOPIC) is not None:
            await self.ensure_loaded()
        if not self._started:
            self.coordinator.start()
            self._started = True

    async def ensure_loaded(self) -> TransactionCoordinator:
        """The coordinator, loading it (and creating `__transaction_state`) on first use.
        Raises OSError when the state log cannot be created or read."""
        if self.loaded:
            return self.coordinator
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._load())
        loading = self._loading
        try:
            await asyncio.shield(loading)
        except OSError:
            if self._loading is loading:
                self._loading = None  # let the next caller try again
            raise
        return self.coordinator

    def not_ready_error(self) -> ErrorCode | None:
        """None when loaded; else what the coordinator APIs answer: COORDINATOR_LOAD_IN_PROGRESS
        while loading, NOT_COORDINATOR before the first FindCoordinator(TRANSACTION) (the
        client then looks the coordinator up, which loads it)."""
        if self.loaded:
            return None
        if self._loading is not None:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    async def _load(self) -> None:
        await self.coordinator.load()
        self.loaded = True

    async def close(self) -> None:
        """Stop timers and marker tasks (unfinished transactions complete on the next load)."""
        if self._loading is not None and not self._loading.done():
            self._loading.cancel()
            try:
                await self._loading
            except (asyncio.CancelledError, OSError):
                pass
        await self.coordinator.close()

    def _on_offsets_marker(self, tp: TopicPartition, producer_id: int, commit: bool) -> None:
        group = getattr(self._state, "group_coordinator", None)
        if group is not None:
            group.on_txn_marker(tp.partition, producer_id, commit)

    def verify_produce(
        self,
        transactional_id: str | None,
        header: BatchHeader,
        topic: str,
        partition: int,
        produce_version: int,
    ) -> tuple[ErrorCode, str | None]:
        """KIP-890 part 1: may this transactional batch be appended to `topic`/`partition`?

        Only transactional batches of requests naming a transactional id are verified (as in
        Kafka, where a null transactional id skips verification). The coordinator must map the
        id to the batch's producer id (INVALID_PRODUCER_ID_MAPPING otherwise) at the batch's
        epoch (a fenced epoch: INVALID_PRODUCER_EPOCH) with the partition in its ONGOING
        transaction (else INVALID_TXN_STATE, or TRANSACTION_ABORTABLE for Produce v11+), so a
        late write cannot open a transaction that no marker will ever close. A transaction
        being completed answers NOT_ENOUGH_REPLICAS (retriable), as Kafka does. The check and
        the append happen without an `await` between them, so no marker can slip in."""
        if transactional_id is None or not header.is_transactional or not self.verification_enabled:
            return ErrorCode.NONE, None
        if not self.loaded:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            error = self.coordinator.verify_partition(
                transactional_id,
                header.producer_id,
                header.producer_epoch,
                TopicPartition(topic, partition),
            )
        mapped = verification_error(error, produce_version)
        if mapped == ErrorCode.NONE:
            return mapped, None
        return mapped, (
            f"transactional batch of {transactional_id!r} (producer {header.producer_id} epoch "
            f"{header.producer_epoch}) not verified: {ErrorCode(error).name}"
        )
