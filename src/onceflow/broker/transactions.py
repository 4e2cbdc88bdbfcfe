"""`BrokerTransactions`: the broker's side of the transaction coordinator.

Owns the `TransactionCoordinator` of this node (built on the broker's `LogManager` and
`ProducerIdManager`, configured from the broker's `transaction.*` keys) and everything that ties
it to the rest of the broker. It knows nothing of `BrokerState`: the broker hands it the logs,
the producer-id manager, its config and the group coordinator's marker hook.

- Loading. As in Kafka, `__transaction_state` is created on first use: `start()` loads the
  coordinator at once only when the topic already exists (so a restart finishes the
  transactions left in PREPARE_COMMIT/PREPARE_ABORT before serving); otherwise the first
  FindCoordinator(TRANSACTION) or transactional InitProducerId calls `ensure_loaded()`, which
  creates the topic and loads (concurrent callers share one load). `ensure_loaded` does not
  yield once loaded, so handlers keep "state changes before the first await".
- Markers. The coordinator writes COMMIT/ABORT markers straight into the logs (its
  `InProcessTxnMarkerChannel`); the log manager's offsets events wake long-polling fetches of
  the partitions whose last stable offset moved. Markers landing on `__consumer_offsets` are
  handed to `on_offsets_marker` (the group coordinator's `on_txn_marker`) so pending
  transactional offsets materialise or drop.
- Produce verification (KIP-890 part 1): `verify_produce` checks a transactional batch against
  the coordinator before it is appended (see its docstring).
- Timers (timeout aborts, transactional-id expiration) from `start()`; `close()` stops them and
  the marker tasks before the logs close.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from onceflow.common import TopicPartition
from onceflow.coordinator.internal_topics import TRANSACTION_STATE_TOPIC
from onceflow.coordinator.producer_id import ProducerIdManager
from onceflow.coordinator.txn.config import TxnConfig
from onceflow.coordinator.txn.coordinator import TransactionCoordinator
from onceflow.log.manager import LogManager
from onceflow.protocol.errors import ErrorCode
from onceflow.records.batch import BatchHeader

log = logging.getLogger("onceflow.broker.transactions")

__all__ = ["BrokerTransactions", "OffsetsMarkerHook", "verification_error"]

# on_offsets_marker(offsets partition, producer_id, commit): a marker is durable on
# `__consumer_offsets` (the group coordinator's `on_txn_marker`)
OffsetsMarkerHook = Callable[[int, int, bool], None]

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


class BrokerTransactions:
    """The transaction coordinator of a broker, with its lifecycle and broker-side hooks."""

    def __init__(
        self,
        logs: LogManager,
        producer_ids: ProducerIdManager,
        properties: Mapping[str, object],
        *,
        on_offsets_marker: OffsetsMarkerHook | None = None,
    ) -> None:
        self._logs = logs
        # markers go straight into this broker's logs (its default `InProcessTxnMarkerChannel`)
        self.coordinator = TransactionCoordinator(
            logs, producer_ids, TxnConfig.from_properties(properties)
        )
        if on_offsets_marker is not None:
            self.coordinator.add_marker_listener(
                lambda tp, producer_id, commit: on_offsets_marker(tp.partition, producer_id, commit)
            )
        self.verification_enabled = bool(
            properties.get("transaction.partition.verification.enable", True)
        )
        self._loading: asyncio.Task[None] | None = None
        self.loaded = False
        self._started = False

    async def start(self) -> None:
        """Load now if `__transaction_state` exists (finishing prepared transactions), and start
        the timeout/expiration timers."""
        if self._logs.topic(TRANSACTION_STATE_TOPIC) is not None:
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
