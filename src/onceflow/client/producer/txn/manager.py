"""The transactional producer's state, with no I/O (Kafka's client `TransactionManager`).

`TxnManager` extends the idempotent producer's `TransactionManager` (producer id, epoch,
sequences) with transactions. Application threads make the calls of Kafka's producer API —
`begin_init`, `begin_transaction`, `maybe_add_partition`, `send_offsets`, `begin_commit`,
`begin_abort` — which check `states.ALLOWED_STATES`, move the state along the table in
`states` and queue coordinator requests (one class per kind in `requests`), returning
a `TransactionalRequestResult` to wait on. The I/O thread takes requests with `next_request`
(one at a time, by priority; EndTxn only once every batch is resolved) and hands each answer
to `on_response` / `on_transport_error`: the request's error table gives the action, the
request applies a success, and the manager moves the state for a retry or a failure. A retried
request waits `retry.backoff.ms`, doubled for each further attempt of the same request up to
`retry.backoff.max.ms`, with +/-20% jitter (KIP-580); CONCURRENT_TRANSACTIONS waits at most
CONCURRENT_TXN_BACKOFF_S, as in Kafka.

A call that timed out leaves its result pending: the same call (init, commit, abort) returns
that result again, any other call raises `IllegalStateError` until it is retried. Abortable
errors (a failed batch, a lost producer id, a group-metadata mismatch) move to ABORTABLE_ERROR,
where only `begin_abort` is allowed; fatal ones (fenced, unauthorized, unsupported) to
FATAL_ERROR, where every call raises the error. After an abort that left a sequence gap
(KIP-360) the epoch is bumped with InitProducerId before the producer is READY again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any, NamedTuple

from onceflow.client.errors import IllegalStateError, KafkaError, TransactionAbortableError
from onceflow.client.net.backoff import ExponentialBackoff
from onceflow.client.offsets import ConsumerGroupMetadata, OffsetAndMetadata
from onceflow.client.producer.accumulator import ProducerBatch
from onceflow.client.producer.idempotence import (
    InitProducerIdPlan,
    ProduceAction,
    ProduceDecision,
    TransactionManager,
)
from onceflow.client.producer.states import (
    ABORTABLE_IGNORED_IN,
    ALLOWED_STATES,
    BATCH_FAILURE_ABORTS_IN,
    COMPLETING,
    DROPS_BATCHES_IN,
    ERROR_STATES,
    HAS_PRODUCER_ID_IN,
    RESUMES_IN,
    SENDS_BATCHES_IN,
    ProducerState,
    TxnApi,
)
from onceflow.client.producer.txn.request import (
    AnyTxnRequest,
    TransactionalRequestResult,
    TxnAction,
    TxnRequest,
    TxnRequestKind,
)
from onceflow.client.producer.txn.requests import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    FindCoordinator,
    InitProducerId,
)
from onceflow.common import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TopicPartition
from onceflow.protocol.errors import ErrorCode

__all__ = ["ConsumerGroupMetadata", "OffsetAndMetadata", "TxnManager"]

log = logging.getLogger(__name__)
_S = ProducerState
_K = TxnRequestKind
CONCURRENT_TXN_BACKOFF_S = 0.02  # Kafka retries CONCURRENT_TRANSACTIONS sooner than usual


class _PendingTransition(NamedTuple):
    api: TxnApi
    state: ProducerState
    result: TransactionalRequestResult


class TxnManager(TransactionManager):
    """Producer id, epoch and sequences plus the transaction's state (thread-safe)."""

    transactional_id: str  # always set (None only for an idempotent producer's manager)

    def __init__(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int | None = None,
    ) -> None:
        super().__init__(transactional_id)
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff = ExponentialBackoff(retry_backoff_ms, retry_backoff_max_ms)
        self.lock = threading.RLock()
        self.coordinators: dict[tuple[int, str], tuple[int, str, int]] = {}
        self.partitions_in_transaction: set[tuple[str, int]] = set()
        self.pending_partitions: set[tuple[str, int]] = set()
        self.new_partitions: set[tuple[str, int]] = set()
        self.transaction_started = False
        self.in_flight: AnyTxnRequest | None = None
        self._queue: list[AnyTxnRequest] = []
        self._pending: _PendingTransition | None = None
        self.resumed = False  # resume_transaction: only EndTxn may follow
        self.resumes_only = False  # made by resume_transaction: never writes a transaction

    # ------------------------------------------------------------------ state checks

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID and self.state in HAS_PRODUCER_ID_IN

    @property
    def is_completing(self) -> bool:
        return self.state in COMPLETING

    @property
    def must_drop_batches(self) -> bool:
        """Queued batches are to be failed: the transaction is being or must be aborted."""
        return self.state in DROPS_BATCHES_IN

    def _abortable(self) -> TransactionAbortableError:
        error = self.last_error
        if isinstance(error, TransactionAbortableError):
            return error
        return TransactionAbortableError(error)

    def check_call(self, api: TxnApi) -> TransactionalRequestResult | None:
        """Raise unless `api` may be called now; returns the pending result when the call
        resumes one that timed out."""
        with self.lock:
            if self.state is _S.FATAL_ERROR:
                raise self.last_error or IllegalStateError("in FATAL_ERROR without an error")
            pending = self._pending
            if pending is not None and pending.result.acked:
                self._pending = pending = None
            if pending is not None:
                if RESUMES_IN.get(api) is pending.state and pending.api is api:
                    return pending.result
                raise IllegalStateError(
                    f"Cannot attempt operation `{api.value}` because the previous call to "
                    f"`{pending.api.value}` timed out and must be retried"
                )
            if self.state is _S.ABORTABLE_ERROR and api is not TxnApi.ABORT_TRANSACTION:
                raise self._abortable()
            if self.state not in ALLOWED_STATES[api]:
                raise IllegalStateError(
                    f"TransactionalId {self.transactional_id}: cannot call {api.value} "
                    f"in state {self.state.name}"
                )
            return None

    def _check_not_resumed(self, api: TxnApi) -> None:
        if self.resumed:
            raise IllegalStateError(
                f"TransactionalId {self.transactional_id}: cannot call {api.value} on a "
                "resumed transaction; only commit_transaction or abort_transaction"
            )

    def _begin(self, api: TxnApi, target: ProducerState) -> TransactionalRequestResult:
        result = TransactionalRequestResult(api.value)
        self.transition_to(target)
        self._pending = _PendingTransition(api, target, result)
        return result

    # ------------------------------------------------------------------ application calls

    def begin_init(self) -> TransactionalRequestResult:
        """init_transactions: find the coordinator, get a producer id and epoch (fencing
        older producers with this transactional id, aborting what they left open)."""
        with self.lock:
            resumed = self.check_call(TxnApi.INIT_TRANSACTIONS)
            if resumed is not None:
                return resumed
            result = self._begin(TxnApi.INIT_TRANSACTIONS, _S.INITIALIZING)
            self.enqueue(InitProducerId(NO_PRODUCER_ID, NO_PRODUCER_EPOCH, result))
            return result

    def resume_transaction(self, producer_id: int, producer_epoch: int) -> None:
        """Take over a transaction that another producer instance opened and left open
        with this transactional id, `producer_id` and `producer_epoch` (as Flink's Kafka sink
        does): no request is sent; the next `begin_commit` / `begin_abort` sends EndTxn with
        that id and epoch. Allowed before `init_transactions`, and again on a producer that
        only resumes, once the previous resumed transaction is committed or aborted (READY), so
        a committer can keep one producer per transactional id. Records cannot be added: the
        partitions already in the transaction are unknown here."""
        if producer_id < 0 or not 0 <= producer_epoch <= 32767:
            raise ValueError(f"invalid producer id/epoch {producer_id}/{producer_epoch}")
        with self.lock:
            if self._pending is not None and self._pending.result.acked:
                self._pending = None  # the previous commit or abort finished
            if not (self.resumes_only and self.state is _S.READY and self._pending is None):
                self.check_call(TxnApi.INIT_TRANSACTIONS)  # only a fresh producer may resume
                self.transition_to(_S.INITIALIZING)
                self.transition_to(_S.READY)
            self.producer_id, self.producer_epoch = producer_id, producer_epoch
            self.reset_sequences()
            self.clear_transaction()
            self.transition_to(_S.IN_TRANSACTION)
            self.transaction_started = True
            self.resumed = self.resumes_only = True

    def hand_over_transaction(self) -> None:
        """The open transaction, flushed, is now another producer instance's to end (two-phase
        commit: that instance calls `resume_transaction` with this producer id and epoch).
        This producer forgets it, its producer id and its epoch and is UNINITIALIZED again:
        it may be kept and reused, and its next `init_transactions` gets a new epoch (fencing
        this one) exactly as a new producer's would. Nothing may be queued or in flight."""
        with self.lock:
            self.check_call(TxnApi.SEND)  # IN_TRANSACTION, nothing pending, not failed
            self._check_not_resumed(TxnApi.SEND)
            busy = [
                what
                for what, pending in (
                    ("coordinator requests", self._queue or self.in_flight is not None),
                    ("partitions being added", self.new_partitions or self.pending_partitions),
                    ("batches", any(e.unresolved for e in self._partitions.values())),
                )
                if pending
            ]
            if busy:
                raise IllegalStateError(
                    f"TransactionalId {self.transactional_id}: cannot hand the transaction "
                    f"over with {' and '.join(busy)} unresolved; flush first"
                )
            self.transition_to(_S.UNINITIALIZED)
            self.producer_id, self.producer_epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            self.epoch_bump_required = False
            self.reset_sequences()
            self.clear_transaction()

    def begin_transaction(self) -> None:
        with self.lock:
            self.check_call(TxnApi.BEGIN_TRANSACTION)
            if self.resumes_only:
                raise IllegalStateError(
                    f"TransactionalId {self.transactional_id}: a producer that resumes "
                    "transactions cannot begin its own"
                )
            self.transition_to(_S.IN_TRANSACTION)

    def maybe_add_partition(self, tp: tuple[str, int]) -> None:
        """Before a record goes to `tp` (after `check_call(SEND)`): a partition new to the
        transaction is added with the next AddPartitionsToTxn. A partition already added or
        being added needs nothing, so the common case takes no lock."""
        if (
            tp in self.partitions_in_transaction
            or tp in self.pending_partitions
            or tp in self.new_partitions
        ):
            return
        with self.lock:
            self.check_call(TxnApi.SEND)
            self._check_not_resumed(TxnApi.SEND)
            if tp not in self.partitions_in_transaction and tp not in self.pending_partitions:
                self.new_partitions.add(tp)

    def send_offsets(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        group: ConsumerGroupMetadata,
    ) -> TransactionalRequestResult:
        """send_offsets_to_transaction: AddOffsetsToTxn, then TxnOffsetCommit."""
        with self.lock:
            self.check_call(TxnApi.SEND_OFFSETS_TO_TRANSACTION)
            self._check_not_resumed(TxnApi.SEND_OFFSETS_TO_TRANSACTION)
            result = TransactionalRequestResult(TxnApi.SEND_OFFSETS_TO_TRANSACTION.value)
            self.enqueue(AddOffsetsToTxn(group, dict(offsets), result))
            return result

    def begin_commit(self) -> TransactionalRequestResult:
        """commit_transaction: every batch is flushed, then EndTxn(commit)."""
        with self.lock:
            resumed = self.check_call(TxnApi.COMMIT_TRANSACTION)
            if resumed is not None:
                return resumed
            result = self._begin(TxnApi.COMMIT_TRANSACTION, _S.COMMITTING_TRANSACTION)
            self.enqueue(EndTxn(True, result))
            return result

    def begin_abort(self) -> TransactionalRequestResult:
        """abort_transaction: queued batches are dropped, batches in flight awaited, then
        EndTxn(abort) (and an epoch bump when a sequence was lost)."""
        with self.lock:
            resumed = self.check_call(TxnApi.ABORT_TRANSACTION)
            if resumed is not None:
                return resumed
            self.last_error = None
            result = self._begin(TxnApi.ABORT_TRANSACTION, _S.ABORTING_TRANSACTION)
            self.new_partitions.clear()
            self.enqueue(EndTxn(False, result))
            return result

    # ------------------------------------------------------------------ the request queue

    def enqueue(self, request: AnyTxnRequest) -> None:
        self._queue.append(request)
        self._queue.sort(key=TxnRequest.sort_key)

    def target(self, request: AnyTxnRequest) -> tuple[int, str] | None:
        """The coordinator a request goes to: (key type, key), None for FindCoordinator."""
        return request.target(self)

    def lookup_coordinator(self, key: tuple[int, str]) -> None:
        """Forget the coordinator of `key` and queue a FindCoordinator for it."""
        self.coordinators.pop(key, None)
        if not any(_finds(r, key) for r in self._queue) and not _finds(self.in_flight, key):
            self.enqueue(FindCoordinator(key))

    def next_request(
        self, now: float, has_incomplete_batches: bool
    ) -> tuple[AnyTxnRequest | None, float]:
        """The request to send now (marked in flight), or None and how long to wait."""
        with self.lock:
            if self.in_flight is not None:
                return None, 1.0
            if self.new_partitions and self.state in SENDS_BATCHES_IN:
                partitions = frozenset(self.new_partitions)
                self.pending_partitions |= partitions
                self.new_partitions.clear()
                self.enqueue(AddPartitionsToTxn(partitions))
            while self._queue:
                request = self._queue[0]
                if request.kind is _K.END_TXN and has_incomplete_batches:
                    return None, 1.0  # woken when the last batch resolves
                if self.state in ERROR_STATES and not (
                    self.state is _S.ABORTABLE_ERROR and request.kind is _K.FIND_COORDINATOR
                ):
                    self._queue.pop(0)
                    error = self.last_error if self.is_fatal else self._abortable()
                    request.result.complete(error)
                    continue
                if request.kind is _K.END_TXN and not self.transaction_started:
                    self._queue.pop(0)  # nothing reached the coordinator: nothing to end
                    self.complete_transaction(request.result)
                    continue
                if request.retry_at > now:
                    return None, request.retry_at - now
                key = self.target(request)
                if key is not None and key not in self.coordinators:
                    self.lookup_coordinator(key)
                    continue
                self._queue.pop(0)
                request.attempts += 1
                self.in_flight = request
                return request, 0.0
            return None, 1.0

    # ------------------------------------------------------------------ answers

    def on_transport_error(self, request: AnyTxnRequest, now: float) -> None:
        """The request got no answer (connection lost, timeout): find the coordinator again
        and retry."""
        with self.lock:
            self.in_flight = None
            self.coordinators.pop(request.coordinator_key(self), None)
            self._retry(request, now, self._backoff_s(request))

    def on_response(
        self, request: AnyTxnRequest, now: float, error_codes: Mapping[Any, int], **fields: Any
    ) -> None:
        """Apply an answer. `error_codes` is one code under key None, or one per partition
        (AddPartitionsToTxn, TxnOffsetCommit); `fields` the answer's data (node_id, host,
        port for FindCoordinator; producer_id, producer_epoch for InitProducerId)."""
        with self.lock:
            self.in_flight = None
            worst, worst_code = request.decide(error_codes)
            if worst is TxnAction.COMPLETE:
                request.on_success(self, fields)
            elif worst in (TxnAction.RETRY, TxnAction.LOOKUP):
                if worst is TxnAction.LOOKUP:
                    self.lookup_coordinator(request.coordinator_key(self))
                request.on_retry(error_codes)
                backoff = self._backoff_s(request)
                if worst_code == ErrorCode.CONCURRENT_TRANSACTIONS:
                    backoff = min(backoff, CONCURRENT_TXN_BACKOFF_S)
                self._retry(request, now, backoff)
            else:
                self._fail(request, worst, worst_code)

    def _backoff_s(self, request: AnyTxnRequest) -> float:
        """The wait before `request` is sent again: retry.backoff.ms after its first
        attempt, doubled after each further one up to retry.backoff.max.ms (KIP-580)."""
        return self.retry_backoff.backoff_s(request.attempts - 1)

    def _retry(self, request: AnyTxnRequest, now: float, backoff: float) -> None:
        if self.is_fatal:
            request.result.complete(self.last_error)
            return
        request.retry_at = now + backoff
        self.enqueue(request)

    def _fail(self, request: AnyTxnRequest, action: TxnAction, code: int) -> None:
        request.on_failure(self)
        error = request.error_for(action, code, self)
        if action is not TxnAction.ABORTABLE or self._ends_the_abort(request):
            self.transition_to_fatal(error)
            request.result.complete(error)
        elif self.state is _S.ABORTING_TRANSACTION:
            # Kafka: "the transaction is already being aborted" - a late answer to a request
            # of the transaction being aborted fails that request only
            what = f"{request.kind.name} for transactional id {self.transactional_id}"
            log.debug("%s failed while aborting, ignored: %s", what, error)
            request.result.complete(error)
        else:
            self.transition_to_abortable(error)
            request.result.complete(self._abortable())

    def _ends_the_abort(self, request: AnyTxnRequest) -> bool:
        """The abort's own EndTxn. Kafka fails it and stays in ABORTING_TRANSACTION, which no
        call can leave; here the producer fails for good, so the application closes it."""
        return request.kind is _K.END_TXN and self.state is _S.ABORTING_TRANSACTION

    def complete_transaction(self, result: TransactionalRequestResult) -> None:
        """The transaction ended (EndTxn answered, or nothing to end): READY again."""
        self.transition_to(_S.READY)
        self.clear_transaction()
        result.complete()

    def clear_transaction(self) -> None:
        self.resumed = False
        self.partitions_in_transaction.clear()
        self.pending_partitions.clear()
        self.new_partitions.clear()
        self.transaction_started = False

    # ------------------------------------------------------------------ errors

    def transition_to_fatal(self, error: BaseException) -> None:
        """FATAL_ERROR: every queued request fails with `error`, as does every later call."""
        with self.lock:
            if isinstance(error, KafkaError):
                error.fatal = True
            super().transition_to_fatal(error)
            queued, self._queue = self._queue, []
            for request in queued:
                request.result.complete(error)

    def transition_to_abortable(self, error: BaseException) -> None:
        """ABORTABLE_ERROR (ignored while aborting already, or after a fatal error)."""
        with self.lock:
            if self.state in ABORTABLE_IGNORED_IN:
                return
            if isinstance(error, KafkaError):
                error.txn_requires_abort = True
            self.last_error = error
            self.transition_to(_S.ABORTABLE_ERROR)

    def handle_failed_batch(self, batch: ProducerBatch, error: BaseException) -> None:
        """A batch failed: its transaction must be aborted (fatal errors are handled where
        they are found)."""
        with self.lock:
            if self.state in BATCH_FAILURE_ABORTS_IN:
                self.transition_to_abortable(error)

    # ------------------------------------------------------------------ idempotence hooks

    def prepare_init_producer_id(self) -> InitProducerIdPlan | None:
        """Transactional producers get their id through the request queue only."""
        return None

    def may_send(self, batch: ProducerBatch) -> bool:
        """A batch goes out only inside a transaction, once its partition was added."""
        if self.state not in SENDS_BATCHES_IN:
            return False
        if batch.tp not in self.partitions_in_transaction:
            return False
        return super().may_send(batch)

    def handle_produce_error(self, batch: ProducerBatch, error_code: int) -> ProduceDecision:
        """As for an idempotent producer, except that a transactional producer cannot bump
        its epoch mid-transaction: UNKNOWN_PRODUCER_ID fails the batch (the transaction
        must abort; the epoch is bumped after the abort) and INVALID_PRODUCER_EPOCH is
        fatal (fenced)."""
        with self.lock:
            if error_code == ErrorCode.INVALID_PRODUCER_EPOCH and not batch.done:
                error_code = int(ErrorCode.PRODUCER_FENCED)
            decision = super().handle_produce_error(batch, error_code)
            if decision.action is ProduceAction.RETRY_AFTER_BUMP:
                self.fail_batch(batch)
                return ProduceDecision(ProduceAction.FAIL, (batch,))
            return decision


def _finds(request: AnyTxnRequest | None, key: tuple[int, str]) -> bool:
    return isinstance(request, FindCoordinator) and request.key == key
