"""`TransactionMetadata`: one transactional id's coordinator state, changed in two phases.

As in Kafka, every change is staged: a `prepare_*` call checks `state.VALID_PREVIOUS`, sets
`pending_state` and returns an immutable `TxnTransitMetadata`; the caller appends the transit to
`__transaction_state` and, once it is durable, calls `complete_transition(transit)` (or
`cancel_transition()` when the append failed). While a transition is pending the coordinator
answers competing requests with CONCURRENT_TRANSACTIONS. No method here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from onceflow.common import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TopicPartition
from onceflow.coordinator.txn.state import IllegalTxnTransition, TxnState, check_transition
from onceflow.protocol.errors import ErrorCode

__all__ = [
    "MAX_PRODUCER_EPOCH",
    "TransactionMetadata",
    "TxnTransitMetadata",
    "is_epoch_exhausted",
]

MAX_PRODUCER_EPOCH = 32767  # Java's Short.MAX_VALUE

_COMPLETED = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})


def is_epoch_exhausted(epoch: int) -> bool:
    """True when bumping `epoch` would leave no epoch for a later fence (Kafka's rule: the last
    usable epoch is Short.MAX_VALUE - 1, Short.MAX_VALUE is kept for fencing)."""
    return epoch >= MAX_PRODUCER_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The state a transactional id moves to: what is appended to `__transaction_state`."""

    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TxnState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int = 0


class TransactionMetadata:
    """Coordinator state of one transactional id (Kafka's `TransactionMetadata`)."""

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        *,
        previous_producer_id: int = NO_PRODUCER_ID,
        next_producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        last_producer_epoch: int = NO_PRODUCER_EPOCH,
        txn_timeout_ms: int,
        state: TxnState = TxnState.EMPTY,
        topic_partitions: Iterable[TopicPartition] = (),
        txn_start_timestamp: int = -1,
        txn_last_update_timestamp: int,
        client_transaction_version: int = 0,
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.previous_producer_id = previous_producer_id
        self.next_producer_id = next_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.topic_partitions: set[TopicPartition] = set(topic_partitions)
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        self.client_transaction_version = client_transaction_version
        self.pending_state: TxnState | None = None
        # an epoch fence was applied in memory but its PREPARE_ABORT never became durable: the
        # next fence reuses the epoch instead of bumping again (Kafka's hasFailedEpochFence)
        self.has_failed_epoch_fence = False

    @classmethod
    def from_transit(
        cls, transactional_id: str, transit: TxnTransitMetadata
    ) -> TransactionMetadata:
        """Metadata in the state a transit describes (loading `__transaction_state`)."""
        return cls(
            transactional_id,
            transit.producer_id,
            previous_producer_id=transit.previous_producer_id,
            next_producer_id=transit.next_producer_id,
            producer_epoch=transit.producer_epoch,
            last_producer_epoch=transit.last_producer_epoch,
            txn_timeout_ms=transit.txn_timeout_ms,
            state=transit.txn_state,
            topic_partitions=transit.topic_partitions,
            txn_start_timestamp=transit.txn_start_timestamp,
            txn_last_update_timestamp=transit.txn_last_update_timestamp,
            client_transaction_version=transit.client_transaction_version,
        )

    # -- queries ------------------------------------------------------------------------------

    @property
    def pending_transition_in_progress(self) -> bool:
        """True between a `prepare_*` and its `complete_transition` / `cancel_transition`."""
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        """True when the next InitProducerId must rotate to a new producer id."""
        return is_epoch_exhausted(self.producer_epoch)

    def snapshot(self) -> TxnTransitMetadata:
        """The current state as a transit record (what a reload from the log would give)."""
        return self._transit(self.state)

    # -- prepare ------------------------------------------------------------------------------

    def prepare_incr_producer_epoch(
        self, txn_timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> tuple[ErrorCode, TxnTransitMetadata | None]:
        """InitProducerId on EMPTY/COMPLETE_*: bump the epoch and move to EMPTY.

        Without an expected epoch (a fresh `initTransactions`) the epoch is bumped and the last
        epoch forgotten. With one (KIP-360): the current epoch bumps; the last epoch means a
        retry of a bump whose answer was lost, so the current epoch is returned unchanged;
        anything else is PRODUCER_FENCED."""
        if expected_epoch is None:
            epoch, last = self.producer_epoch + 1, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.PRODUCER_FENCED, None
        if epoch > MAX_PRODUCER_EPOCH - 1:
            return ErrorCode.PRODUCER_FENCED, None  # the caller rotates ids before this happens
        return ErrorCode.NONE, self._prepare(
            TxnState.EMPTY,
            producer_epoch=epoch,
            last_producer_epoch=last,
            txn_timeout_ms=txn_timeout_ms,
            topic_partitions=frozenset(),
            txn_start_timestamp=-1,
            txn_last_update_timestamp=now_ms,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, txn_timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """InitProducerId when the epoch is exhausted: a new producer id at epoch 0 (EMPTY).

        The old id is kept as `previous_producer_id` (and, for a KIP-360 request, its epoch as
        `last_producer_epoch`) so a retry that lost its answer is recognised."""
        return self._prepare(
            TxnState.EMPTY,
            producer_id=new_producer_id,
            previous_producer_id=self.producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            txn_timeout_ms=txn_timeout_ms,
            topic_partitions=frozenset(),
            txn_start_timestamp=-1,
            txn_last_update_timestamp=now_ms,
        )

    def prepare_add_partitions(
        self, partitions: Iterable[TopicPartition], now_ms: int
    ) -> TxnTransitMetadata:
        """AddPartitionsToTxn/AddOffsetsToTxn: ONGOING with the union of the partitions; the
        transaction starts now when none was open."""
        start = now_ms if self.state in _COMPLETED else self.txn_start_timestamp
        return self._prepare(
            TxnState.ONGOING,
            topic_partitions=frozenset(self.topic_partitions) | frozenset(partitions),
            txn_start_timestamp=start,
            txn_last_update_timestamp=now_ms,
        )

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """ONGOING -> PREPARE_EPOCH_FENCE with a bumped epoch (never persisted, never returned to
        a client): the first step of aborting on InitProducerId or timeout."""
        if self.producer_epoch >= MAX_PRODUCER_EPOCH:
            raise IllegalTxnTransition(
                self.transactional_id, self.state, TxnState.PREPARE_EPOCH_FENCE, "epoch at max"
            )
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(
            TxnState.PREPARE_EPOCH_FENCE,
            producer_epoch=bumped,
            last_producer_epoch=NO_PRODUCER_EPOCH,
        )

    def prepare_abort_or_commit(
        self, target: TxnState, now_ms: int, fence: TxnTransitMetadata | None = None
    ) -> TxnTransitMetadata:
        """EndTxn on ONGOING: PREPARE_COMMIT or PREPARE_ABORT.

        With `fence` (the pending PREPARE_EPOCH_FENCE transit) the fenced epoch takes effect in
        memory first, as in Kafka; if the PREPARE_ABORT append then fails the caller sets
        `has_failed_epoch_fence` so the next fence does not bump again."""
        if target not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise IllegalTxnTransition(self.transactional_id, self.state, target, "not a prepare")
        if fence is not None:
            if self.pending_state is not TxnState.PREPARE_EPOCH_FENCE or (
                target is not TxnState.PREPARE_ABORT
            ):
                raise IllegalTxnTransition(
                    self.transactional_id, self.state, target, "no epoch fence is pending"
                )
            check_transition(self.transactional_id, TxnState.PREPARE_EPOCH_FENCE, target)
            self.pending_state = None
            self.producer_epoch = fence.producer_epoch
            self.last_producer_epoch = NO_PRODUCER_EPOCH
        return self._prepare(target, txn_last_update_timestamp=now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """PREPARE_COMMIT/ABORT -> COMPLETE_COMMIT/ABORT once every marker is written."""
        target = (
            TxnState.COMPLETE_COMMIT
            if self.state is TxnState.PREPARE_COMMIT
            else TxnState.COMPLETE_ABORT
        )
        return self._prepare(target, topic_partitions=frozenset(), txn_last_update_timestamp=now_ms)

    def prepare_dead(self) -> TxnTransitMetadata:
        """EMPTY/COMPLETE_* -> DEAD: the transactional id expired (a tombstone is written)."""
        return self._prepare(TxnState.DEAD, topic_partitions=frozenset())

    # -- complete -----------------------------------------------------------------------------

    def complete_transition(self, transit: TxnTransitMetadata) -> None:
        """Apply a transit whose append is durable; raises IllegalTxnTransition when it is not
        the pending one or breaks Kafka's invariants (a coordinator bug)."""
        target = transit.txn_state
        if self.pending_state is not target:
            raise IllegalTxnTransition(
                self.transactional_id,
                self.state,
                target,
                f"pending state is {self.pending_state.name if self.pending_state else None}",
            )
        check_transition(self.transactional_id, self.state, target)
        problem = self._invariant_problem(transit)
        if problem is not None:
            raise IllegalTxnTransition(self.transactional_id, self.state, target, problem)
        self.producer_id = transit.producer_id
        self.previous_producer_id = transit.previous_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.state = target
        self.topic_partitions = set(transit.topic_partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None
        self.has_failed_epoch_fence = False

    def cancel_transition(self) -> None:
        """Drop the pending transition after its append failed; the state stays as it was."""
        self.pending_state = None

    # -- internals ----------------------------------------------------------------------------

    def _invariant_problem(self, transit: TxnTransitMetadata) -> str | None:
        same_producer = transit.producer_id == self.producer_id
        if same_producer and transit.producer_epoch < self.producer_epoch:
            return f"epoch would go back from {self.producer_epoch} to {transit.producer_epoch}"
        target = transit.txn_state
        if target is TxnState.ONGOING and not self.topic_partitions <= transit.topic_partitions:
            return "partitions would be dropped from an ongoing transaction"
        if target in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT) and (
            transit.topic_partitions != frozenset(self.topic_partitions)
        ):
            return "partitions changed while preparing"
        if not same_producer and target is not TxnState.EMPTY:
            return "the producer id may only change on the way to EMPTY"
        return None

    def _prepare(self, target: TxnState, **changes: Any) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTxnTransition(
                self.transactional_id,
                self.state,
                target,
                f"{self.pending_state.name} is already pending",
            )
        check_transition(self.transactional_id, self.state, target)
        transit = self._transit(target, **changes)
        self.pending_state = target
        return transit

    def _transit(self, target: TxnState, **changes: Any) -> TxnTransitMetadata:
        fields: dict[str, Any] = {
            "producer_id": self.producer_id,
            "previous_producer_id": self.previous_producer_id,
            "next_producer_id": self.next_producer_id,
            "producer_epoch": self.producer_epoch,
            "last_producer_epoch": self.last_producer_epoch,
            "txn_timeout_ms": self.txn_timeout_ms,
            "txn_state": target,
            "topic_partitions": frozenset(self.topic_partitions),
            "txn_start_timestamp": self.txn_start_timestamp,
            "txn_last_update_timestamp": self.txn_last_update_timestamp,
            "client_transaction_version": self.client_transaction_version,
        }
        fields.update(changes)
        return TxnTransitMetadata(**fields)

    def __repr__(self) -> str:
        pending = f", pending={self.pending_state.name}" if self.pending_state else ""
        return (
            f"TransactionMetadata({self.transactional_id!r}, pid={self.producer_id}, "
            f"epoch={self.producer_epoch}, {self.state.name}{pending}, "
            f"partitions={sorted(self.topic_partitions)})"
        )
