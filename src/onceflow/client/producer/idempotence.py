"""The idempotent producer's state, with no I/O: producer id, epoch, per-partition sequences.

`TransactionManager` (named after Kafka's client class; `txn.manager.TxnManager` extends it
with transactions, whose states and transitions are in `producer.states`) is driven by the sender
thread:

- `prepare_init_producer_id()` says whether an InitProducerId is due and with which producer
  id/epoch (KIP-360: the current ones for an epoch bump, -1/-1 for a fresh id);
  `complete_init_producer_id(error_code, producer_id, producer_epoch)` applies the answer.
- `may_send(batch)` decides whether a partition's first queued batch may go out now and stamps
  a new batch with the next sequence (int32, wrapping from 2**31-1 to 0): up to 5 batches per
  partition in flight; a batch being retried only when it is the partition's lowest unresolved
  sequence, so order survives retries. The first batch of a partition under a producer id and
  epoch goes alone, the next ones once it is acknowledged: a Kafka broker that has no state
  for a producer yet accepts its first batch whatever its sequence, so a pipelined second batch
  could be written before a retried first one (seen on Kafka 4.4 when the partition's leader
  answered the first NOT_LEADER_OR_FOLLOWER and took the second a moment later); the first
  one's retry then fails with OUT_OF_ORDER_SEQUENCE_NUMBER until its delivery timeout.
- `handle_produce_error(batch, error_code)` maps a partition's Produce error to a
  `ProduceAction` through `PRODUCE_ERROR_ACTIONS`, a table.

Epoch bumps (after UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH, a batch failed or expired
with its sequence unresolved) happen only once no batch is outstanding at a broker, so no
answer for the old epoch can arrive after the sequences were reset; the batches still waiting
for a retry then get fresh sequences from 0 under the new epoch, in their original order.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType
from typing import Final, NamedTuple

from onceflow.client.errors import error_for_code
from onceflow.client.producer.accumulator import ProducerBatch
from onceflow.client.producer.states import ProducerState, check_transition
from onceflow.common import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from onceflow.protocol.errors import ErrorCode
from onceflow.records.batch import NO_SEQUENCE, increment_sequence

__all__ = [
    "MAX_IN_FLIGHT_PER_PARTITION",
    "PRODUCE_ERROR_ACTIONS",
    "InitProducerIdPlan",
    "PartitionEntry",
    "ProduceAction",
    "ProduceDecision",
    "TransactionManager",
]

MAX_IN_FLIGHT_PER_PARTITION = 5  # the broker keeps the metadata of the last 5 batches
MAX_EPOCH = 32767


class ProduceAction(Enum):
    """What to do with a batch after its partition's Produce answer."""

    COMPLETE = "complete"  # written (NONE, DUPLICATE_SEQUENCE_NUMBER)
    RETRY = "retry"  # re-enqueue with the same sequence
    RETRY_AFTER_BUMP = "retry_after_bump"  # re-enqueue; bump the epoch first (KIP-360)
    FAIL = "fail"  # fail this batch
    FAIL_WITH_FOLLOWERS = "fail_with_followers"  # fail it and every unresolved batch behind it
    FATAL = "fatal"  # the producer cannot continue (fenced)
    IGNORE = "ignore"  # the batch was already failed; drop the answer


_A = ProduceAction
_E = ErrorCode

# Produce error code -> action for an idempotent producer; codes not listed: RETRY when
# retriable, else FAIL. OUT_OF_ORDER_SEQUENCE_NUMBER is refined by the batch's position.
PRODUCE_ERROR_ACTIONS: Final[Mapping[ErrorCode, ProduceAction]] = MappingProxyType(
    {
        _E.NONE: _A.COMPLETE,
        _E.DUPLICATE_SEQUENCE_NUMBER: _A.COMPLETE,
        _E.OUT_OF_ORDER_SEQUENCE_NUMBER: _A.FAIL_WITH_FOLLOWERS,
        _E.UNKNOWN_PRODUCER_ID: _A.RETRY_AFTER_BUMP,
        _E.INVALID_PRODUCER_EPOCH: _A.RETRY_AFTER_BUMP,
        _E.PRODUCER_FENCED: _A.FATAL,
        _E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: _A.FATAL,
        _E.CLUSTER_AUTHORIZATION_FAILED: _A.FATAL,
        _E.INVALID_PRODUCER_ID_MAPPING: _A.FATAL,
    }
)

# InitProducerId answers worth retrying (the coordinator is loading or moving)
_INIT_RETRIABLE: Final[frozenset[ErrorCode]] = frozenset(
    {
        _E.COORDINATOR_LOAD_IN_PROGRESS,
        _E.COORDINATOR_NOT_AVAILABLE,
        _E.NOT_COORDINATOR,
        _E.CONCURRENT_TRANSACTIONS,
        _E.REQUEST_TIMED_OUT,
        _E.NETWORK_EXCEPTION,
    }
)


class InitProducerIdPlan(NamedTuple):
    """The InitProducerId to send: -1/-1 for a fresh id, else the id and epoch to bump."""

    producer_id: int
    producer_epoch: int


class ProduceDecision(NamedTuple):
    """An action, and the batches it fails (the batch itself, plus followers if any)."""

    action: ProduceAction
    failed: tuple[ProducerBatch, ...] = ()


class PartitionEntry:
    """One partition's sequence bookkeeping (Kafka's `TxnPartitionEntry`)."""

    __slots__ = ("next_sequence", "last_acked_sequence", "unresolved")

    def __init__(self) -> None:
        self.next_sequence = 0
        self.last_acked_sequence = NO_SEQUENCE
        self.unresolved: list[ProducerBatch] = []  # sequenced, not completed; sequence order

    def in_flight(self) -> int:
        return sum(1 for batch in self.unresolved if batch.outstanding)


def _error(error_code: int, context: str) -> BaseException:
    return error_for_code(error_code, context)


def _code(error_code: int) -> ErrorCode | None:
    try:
        return ErrorCode(error_code)
    except ValueError:
        return None


class TransactionManager:
    """Pure producer-id/epoch/sequence state for an idempotent producer."""

    def __init__(self, transactional_id: str | None = None):
        self.transactional_id = transactional_id
        self.state = ProducerState.UNINITIALIZED
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.epoch_bump_required = False
        self.last_error: BaseException | None = None
        self.init_in_flight = False
        self._partitions: dict[tuple[str, int], PartitionEntry] = {}
        self._outstanding = 0

    # ------------------------------------------------------------------ states

    def transition_to(self, target: ProducerState) -> None:
        check_transition(self.state, target)
        self.state = target

    def transition_to_fatal(self, error: BaseException) -> None:
        """Enter FATAL_ERROR; `error` is what every later send and pending batch gets."""
        self.last_error = error
        self.transition_to(ProducerState.FATAL_ERROR)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID and self.state == ProducerState.READY

    @property
    def is_fatal(self) -> bool:
        return self.state == ProducerState.FATAL_ERROR

    @property
    def outstanding(self) -> int:
        """Batches sent and not yet answered, over all partitions."""
        return self._outstanding

    def entry(self, tp: tuple[str, int]) -> PartitionEntry:
        entry = self._partitions.get(tp)
        if entry is None:
            entry = self._partitions[tp] = PartitionEntry()
        return entry

    # ------------------------------------------------------------------ InitProducerId

    def prepare_init_producer_id(self) -> InitProducerIdPlan | None:
        """The InitProducerId due now, or None. Moves to INITIALIZING."""
        if self.init_in_flight or self.is_fatal:
            return None
        if self.state == ProducerState.READY and self.epoch_bump_required:
            if self._outstanding:
                return None  # not safe yet: answers for the current epoch may still arrive
            self.transition_to(ProducerState.UNINITIALIZED)
            self.transition_to(ProducerState.INITIALIZING)
            self.init_in_flight = True
            if self.producer_epoch >= MAX_EPOCH:
                return InitProducerIdPlan(NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return InitProducerIdPlan(self.producer_id, self.producer_epoch)
        if self.state == ProducerState.UNINITIALIZED:
            self.transition_to(ProducerState.INITIALIZING)
        if self.state == ProducerState.INITIALIZING:
            self.init_in_flight = True
            return InitProducerIdPlan(self.producer_id, self.producer_epoch)
        return None

    def complete_init_producer_id(
        self, error_code: int, producer_id: int = -1, producer_epoch: int = -1
    ) -> bool:
        """Apply an InitProducerId answer. Returns True when it should be retried later."""
        self.init_in_flight = False
        code = _code(error_code)
        if code == ErrorCode.NONE:
            self.transition_to(ProducerState.READY)
            self.producer_id, self.producer_epoch = producer_id, producer_epoch
            self.epoch_bump_required = False
            self.reset_sequences()
            return False
        if code in _INIT_RETRIABLE:
            return True
        self.transition_to_fatal(_error(error_code, "InitProducerId"))
        return False

    def fail_init_producer_id(self) -> None:
        """The InitProducerId got no answer (connection lost, timeout): retry later."""
        self.init_in_flight = False

    def reset_sequences(self) -> None:
        """After a new id/epoch: sequences restart at 0; batches waiting for a retry are
        re-stamped in their original order."""
        for entry in self._partitions.values():
            entry.last_acked_sequence = NO_SEQUENCE
            entry.next_sequence = 0
            for batch in entry.unresolved:
                batch.set_producer_state(self.producer_id, self.producer_epoch, entry.next_sequence)
                entry.next_sequence = increment_sequence(entry.next_sequence, batch.record_count)

    # ------------------------------------------------------------------ sending

    def may_send(self, batch: ProducerBatch) -> bool:
        """Whether `batch` (first in its queue) may be sent now; stamps a new batch with
        the producer id, epoch and next sequence."""
        if not self.has_producer_id or self.epoch_bump_required:
            return False
        entry = self.entry(batch.tp)
        if batch.has_sequence:
            # a retry goes only as the lowest unresolved sequence, behind nothing in flight
            return (
                bool(entry.unresolved)
                and entry.unresolved[0] is batch
                and not any(b.outstanding for b in entry.unresolved)
            )
        if len(entry.unresolved) >= MAX_IN_FLIGHT_PER_PARTITION:
            return False
        if entry.unresolved and entry.last_acked_sequence == NO_SEQUENCE:
            return False  # the partition's first batch of this epoch goes alone (see above)
        if any(not b.outstanding for b in entry.unresolved):
            return False  # a retry is waiting: nothing may overtake it
        batch.set_producer_state(self.producer_id, self.producer_epoch, entry.next_sequence)
        entry.next_sequence = increment_sequence(entry.next_sequence, batch.record_count)
        entry.unresolved.append(batch)
        return True

    def mark_sent(self, batch: ProducerBatch) -> None:
        """The batch went out in a Produce request."""
        batch.outstanding = True
        self._outstanding += 1

    def mark_answered(self, batch: ProducerBatch) -> None:
        """An answer (or a transport failure) arrived for an outstanding batch."""
        if batch.outstanding:
            batch.outstanding = False
            self._outstanding -= 1

    # ------------------------------------------------------------------ outcomes

    def handle_produce_error(self, batch: ProducerBatch, error_code: int) -> ProduceDecision:
        """Decide a batch's fate from its partition's Produce error code (after
        `mark_answered`); completes the bookkeeping for COMPLETE and failures."""
        if batch.done:
            return ProduceDecision(ProduceAction.IGNORE)
        code = _code(error_code)
        action = PRODUCE_ERROR_ACTIONS.get(code) if code is not None else None
        if action is None:
            action = ProduceAction.RETRY if code is not None and code.retriable else _A.FAIL
        entry = self.entry(batch.tp)
        if action is ProduceAction.FAIL_WITH_FOLLOWERS and not self._is_next(entry, batch):
            # an earlier batch failed or is being retried: this one's gap is an artefact
            action = ProduceAction.RETRY
        if action is ProduceAction.COMPLETE:
            self.complete_batch(batch)
            return ProduceDecision(action)
        if action is ProduceAction.RETRY_AFTER_BUMP:
            self.epoch_bump_required = True
            return ProduceDecision(action)
        if action is ProduceAction.RETRY:
            return ProduceDecision(action)
        if action is ProduceAction.FAIL_WITH_FOLLOWERS:
            position = entry.unresolved.index(batch) if batch in entry.unresolved else 0
            failed = tuple(entry.unresolved[position:])
            del entry.unresolved[position:]
            self.epoch_bump_required = True
            return ProduceDecision(action, failed)
        if action is ProduceAction.FATAL:
            if batch in entry.unresolved:
                entry.unresolved.remove(batch)
            self.transition_to_fatal(_error(error_code, f"Produce to {batch.tp[0]}-{batch.tp[1]}"))
            return ProduceDecision(action, (batch,))
        self.fail_batch(batch)
        return ProduceDecision(action, (batch,))

    def _is_next(self, entry: PartitionEntry, batch: ProducerBatch) -> bool:
        return batch.base_sequence == increment_sequence(entry.last_acked_sequence, 1)

    def complete_batch(self, batch: ProducerBatch) -> None:
        """The batch is written: advance the partition's acknowledged sequence."""
        entry = self.entry(batch.tp)
        if batch in entry.unresolved:
            entry.unresolved.remove(batch)
        if batch.has_sequence:
            entry.last_acked_sequence = batch.last_sequence

    def fail_batch(self, batch: ProducerBatch) -> None:
        """A sequenced batch fails unresolved (error, retries or delivery timeout used up):
        its sequence leaves a gap, so the epoch must be bumped before the partition goes on."""
        entry = self.entry(batch.tp)
        if batch in entry.unresolved:
            entry.unresolved.remove(batch)
            self.epoch_bump_required = True

    def unresolved(self, tp: tuple[str, int]) -> tuple[ProducerBatch, ...]:
        """The partition's sequenced batches not yet completed, in sequence order."""
        entry = self._partitions.get(tp)
        return tuple(entry.unresolved) if entry else ()
