"""The transactional producer's state machine (`TxnManager`), with no I/O.

Table-driven: every state x every transactional call -> the outcome Kafka's client
`TransactionManager` gives (a new state, the same pending result, `IllegalStateError`, the
abortable error, or the fatal error). The states are reached only through the manager's own
calls and simulated coordinator answers. Also: the request priority order, EndTxn held back
until every batch is resolved, retries and coordinator look-ups, commit retried after a
timeout, and an abort that never reached the coordinator.
"""

from __future__ import annotations

import pytest

from onceflow.client.errors import (
    CommitFailedError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionAbortableError,
)
from onceflow.client.net.coordinator_lookup import GROUP, TRANSACTION
from onceflow.client.offsets import ConsumerGroupMetadata, OffsetAndMetadata
from onceflow.client.producer.states import ProducerState, TxnApi
from onceflow.client.producer.txn.manager import TxnManager
from onceflow.client.producer.txn.request import (
    TransactionalRequestResult,
    TxnAction,
    TxnRequestKind,
)
from onceflow.client.producer.txn.requests import REQUEST_TYPES
from onceflow.protocol.errors import ErrorCode

S = ProducerState
K = TxnRequestKind
TP = ("out", 0)
GROUP_META = ConsumerGroupMetadata("g", 3, "member-1", None)
COORDINATOR = {"node_id": 0, "host": "127.0.0.1", "port": 9092}
NOW = 1000.0


def answer(txn: TxnManager, kind: K, code: ErrorCode = ErrorCode.NONE, *, now=NOW, **fields):
    """Take the next request (it must be `kind`) and apply an answer to it."""
    request, _delay = txn.next_request(now, False)
    assert request is not None and request.kind is kind, (request, kind)
    if kind is K.FIND_COORDINATOR:
        fields = {**COORDINATOR, **fields}
    if kind is K.INIT_PRODUCER_ID:
        fields = {"producer_id": 7, "producer_epoch": 2, **fields}
    if kind in (K.ADD_PARTITIONS_TO_TXN, K.TXN_OFFSET_COMMIT):
        partitions = request.partitions if kind is K.ADD_PARTITIONS_TO_TXN else request.offsets
        codes = dict.fromkeys(partitions, int(code))
    else:
        codes = {None: int(code)}
    txn.on_response(request, now, codes, **fields)
    return request


def in_state(state: S) -> TxnManager:
    """A manager brought to `state` through its API and coordinator answers."""
    return in_state_with_result(state)[0]


def in_state_with_result(state: S) -> tuple[TxnManager, TransactionalRequestResult | None]:
    """`in_state`, and the result of the call that entered the state, if any."""
    txn = TxnManager("tid", 60_000)
    if state is S.UNINITIALIZED:
        return txn, None
    result = txn.begin_init()
    if state is S.INITIALIZING:
        return txn, result
    answer(txn, K.FIND_COORDINATOR)
    answer(txn, K.INIT_PRODUCER_ID)
    result.wait(0)
    if state is S.READY:
        return txn, None
    txn.begin_transaction()
    if state is S.IN_TRANSACTION:
        return txn, None
    result = None
    if state is S.COMMITTING_TRANSACTION:
        result = txn.begin_commit()
    elif state is S.ABORTING_TRANSACTION:
        result = txn.begin_abort()
    elif state is S.ABORTABLE_ERROR:
        txn.maybe_add_partition(TP)
        answer(txn, K.ADD_PARTITIONS_TO_TXN, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    elif state is S.FATAL_ERROR:
        txn.maybe_add_partition(TP)
        answer(txn, K.ADD_PARTITIONS_TO_TXN, ErrorCode.PRODUCER_FENCED)
    assert txn.state is state
    return txn, result


def call(txn: TxnManager, api: TxnApi):
    if api is TxnApi.INIT_TRANSACTIONS:
        return txn.begin_init()
    if api is TxnApi.BEGIN_TRANSACTION:
        return txn.begin_transaction()
    if api is TxnApi.SEND:
        return txn.maybe_add_partition(TP)
    if api is TxnApi.SEND_OFFSETS_TO_TRANSACTION:
        return txn.send_offsets({("in", 0): OffsetAndMetadata(5)}, GROUP_META)
    if api is TxnApi.COMMIT_TRANSACTION:
        return txn.begin_commit()
    return txn.begin_abort()


I = IllegalStateError  # noqa: E741 - short names keep the table readable
A = TransactionAbortableError
F = ProducerFencedError
SAME = "same pending result"

# state -> call -> the state after it, SAME, or the exception raised (state unchanged)
EXPECTED: dict[S, dict[TxnApi, object]] = {
    S.UNINITIALIZED: {
        TxnApi.INIT_TRANSACTIONS: S.INITIALIZING,
        TxnApi.BEGIN_TRANSACTION: I,
        TxnApi.SEND: I,
        TxnApi.SEND_OFFSETS_TO_TRANSACTION: I,
        TxnApi.COMMIT_TRANSACTION: I,
        TxnApi.ABORT_TRANSACTION: I,
    },
    S.INITIALIZING: {
        TxnApi.INIT_TRANSACTIONS: SAME,
        TxnApi.BEGIN_TRANSACTION: I,
        TxnApi.SEND: I,
        TxnApi.SEND_OFFSETS_TO_TRANSACTION: I,
        TxnApi.COMMIT_TRANSACTION: I,
        TxnApi.ABORT_TRANSACTION: I,
    },
    S.READY: {
        TxnApi.INIT_TRANSACTIONS: I,
        TxnApi.BEGIN_TRANSACTION: S.IN_TRANSACTION,
        TxnApi.SEND: I,
        TxnApi.SEND_OFFSETS_TO_TRANSACTION: I,
        TxnApi.COMMIT_TRANSACTION: I,
        TxnApi.ABORT_TRANSACTION: I,
    },
    S.IN_TRANSACTION: {
        TxnApi.INIT_TRANSACTIONS: I,
        TxnApi.BEGIN_TRANSACTION: I,
        TxnApi.SEND: S.IN_TRANSACTION,
        TxnApi.SEND_OFFSETS_TO_TRANSACTION: S.IN_TRANSACTION,
        TxnApi.COMMIT_TRANSACTION: S.COMMITTING_TRANSACTION,
        TxnApi.ABORT_TRANSACTION: S.ABORTING_TRANSACTION,
    },
    S.COMMITTING_TRANSACTION: {
        TxnApi.INIT_TRANSACTIONS: I,
        TxnApi.BEGIN_TRANSACTION: I,
        TxnApi.SEND: I,
        TxnApi.SEND_OFFSETS_TO_TRANSACTION: I,
        TxnApi.COMMIT_TRANSACTION: SAME,
        TxnApi.ABORT_TRANSACTION: I,
    },
    S.ABORTING_TRANSACTION: {
        TxnApi.INIT_TRANSACTIONS: I,
        TxnApi.BEGIN_TRANSACTION: I,
        TxnApi.SEND: I,
        TxnApi.SEND_OFFSETS_TO_TRANSACTION: I,
        TxnApi.COMMIT_TRANSACTION: I,
        TxnApi.ABORT_TRANSACTION: SAME,
    },
    S.ABORTABLE_ERROR: {
        TxnApi.INIT_TRANSACTIONS: A,
        TxnApi.BEGIN_TRANSACTION: A,
        TxnApi.SEND: A,
        TxnApi.SEND_OFFSETS_TO_TRANSACTION: A,
        TxnApi.COMMIT_TRANSACTION: A,
        TxnApi.ABORT_TRANSACTION: S.ABORTING_TRANSACTION,
    },
    S.FATAL_ERROR: dict.fromkeys(TxnApi, F),
}


def test_table_covers_every_state_and_call():
    assert set(EXPECTED) == set(S)
    assert all(set(row) == set(TxnApi) for row in EXPECTED.values())


@pytest.mark.parametrize(
    ("state", "api"), [(s, a) for s in S for a in TxnApi], ids=lambda v: getattr(v, "name", v)
)
def test_state_x_call(state: S, api: TxnApi):
    txn, pending = in_state_with_result(state)
    expected = EXPECTED[state][api]
    if isinstance(expected, type):
        with pytest.raises(expected) as info:
            call(txn, api)
        assert txn.state is state
        if expected is A:
            assert info.value.txn_requires_abort and not info.value.fatal
        if expected is F:
            assert info.value.fatal
    elif expected == SAME:
        assert call(txn, api) is pending
        assert txn.state is state
    else:
        call(txn, api)
        assert txn.state is expected


def test_ready_after_commit_and_new_transaction_starts_clean():
    txn = in_state(S.IN_TRANSACTION)
    txn.maybe_add_partition(TP)
    answer(txn, K.ADD_PARTITIONS_TO_TXN)
    assert txn.partitions_in_transaction == {TP}
    result = txn.begin_commit()
    answer(txn, K.END_TXN)
    result.wait(0)
    assert txn.state is S.READY and not txn.partitions_in_transaction
    txn.begin_transaction()
    assert txn.state is S.IN_TRANSACTION


def test_priority_order_and_end_txn_waits_for_batches():
    txn = in_state(S.IN_TRANSACTION)
    txn.send_offsets({("in", 0): OffsetAndMetadata(5)}, GROUP_META)
    txn.maybe_add_partition(TP)
    txn.begin_commit()
    kinds = []
    # AddOffsetsToTxn, AddPartitionsToTxn (same priority: queue order), then TxnOffsetCommit
    # needs the group coordinator: FindCoordinator(GROUP) jumps ahead of it
    for kind in (K.ADD_OFFSETS_TO_TXN, K.ADD_PARTITIONS_TO_TXN, K.FIND_COORDINATOR):
        kinds.append(answer(txn, kind).kind)
    assert txn.coordinators[(GROUP, "g")] == (0, "127.0.0.1", 9092)
    answer(txn, K.TXN_OFFSET_COMMIT)
    request, _ = txn.next_request(NOW, has_incomplete_batches=True)
    assert request is None, "EndTxn must wait until every batch is resolved"
    assert answer(txn, K.END_TXN).committed is True
    assert txn.state is S.READY


def test_not_coordinator_finds_the_coordinator_again_first():
    txn = in_state(S.IN_TRANSACTION)
    txn.maybe_add_partition(TP)
    answer(txn, K.ADD_PARTITIONS_TO_TXN, ErrorCode.NOT_COORDINATOR)
    assert (TRANSACTION, "tid") not in txn.coordinators
    request, _ = txn.next_request(NOW + 1, False)
    assert request.kind is K.FIND_COORDINATOR and request.key == (TRANSACTION, "tid")
    txn.on_response(request, NOW + 1, {None: 0}, **COORDINATOR)
    answer(txn, K.ADD_PARTITIONS_TO_TXN, now=NOW + 1)
    assert txn.partitions_in_transaction == {TP}


def test_concurrent_transactions_is_retried_after_a_short_backoff():
    txn = in_state(S.INITIALIZING)
    answer(txn, K.FIND_COORDINATOR)
    answer(txn, K.INIT_PRODUCER_ID, ErrorCode.CONCURRENT_TRANSACTIONS)
    request, delay = txn.next_request(NOW, False)
    assert request is None and 0 < delay <= 0.02
    answer(txn, K.INIT_PRODUCER_ID, now=NOW + delay)
    assert txn.state is S.READY and (txn.producer_id, txn.producer_epoch) == (7, 2)


def test_transport_error_retries_after_a_new_lookup():
    txn = in_state(S.INITIALIZING)
    answer(txn, K.FIND_COORDINATOR)
    request, _ = txn.next_request(NOW, False)
    txn.on_transport_error(request, NOW)
    assert txn.next_request(NOW, False)[0] is None  # backoff
    assert answer(txn, K.FIND_COORDINATOR, now=NOW + 1).kind is K.FIND_COORDINATOR
    answer(txn, K.INIT_PRODUCER_ID, now=NOW + 1)
    assert txn.state is S.READY


def test_commit_that_timed_out_is_resumed_not_aborted():
    txn = in_state(S.IN_TRANSACTION)
    txn.maybe_add_partition(TP)
    answer(txn, K.ADD_PARTITIONS_TO_TXN)
    result = txn.begin_commit()
    with pytest.raises(KafkaTimeoutError):
        result.wait(0.01)
    with pytest.raises(IllegalStateError, match="timed out and must be retried"):
        txn.begin_abort()
    assert txn.begin_commit() is result
    answer(txn, K.END_TXN)
    assert txn.begin_commit() is result  # done but not yet acknowledged by a wait
    result.wait(0)
    assert txn.state is S.READY
    txn.begin_transaction()


def test_abort_without_coordinator_work_needs_no_end_txn():
    txn = in_state(S.IN_TRANSACTION)
    result = txn.begin_abort()
    request, _ = txn.next_request(NOW, False)
    assert request is None and result.done and txn.state is S.READY


def test_abortable_error_fails_the_pending_commit():
    txn = in_state(S.IN_TRANSACTION)
    txn.maybe_add_partition(TP)
    answer(txn, K.ADD_PARTITIONS_TO_TXN)
    result = txn.begin_commit()
    txn.handle_failed_batch(None, KafkaTimeoutError("batch expired"))
    assert txn.state is S.ABORTABLE_ERROR
    assert txn.next_request(NOW, False)[0] is None
    with pytest.raises(TransactionAbortableError) as info:
        result.wait(0)
    assert info.value.txn_requires_abort
    abort = txn.begin_abort()
    answer(txn, K.END_TXN)
    abort.wait(0)
    assert txn.state is S.READY


def test_group_metadata_mismatch_is_abortable():
    txn = in_state(S.IN_TRANSACTION)
    result = txn.send_offsets({("in", 0): OffsetAndMetadata(5)}, GROUP_META)
    answer(txn, K.ADD_OFFSETS_TO_TXN)
    answer(txn, K.FIND_COORDINATOR)
    answer(txn, K.TXN_OFFSET_COMMIT, ErrorCode.ILLEGAL_GENERATION)
    assert txn.state is S.ABORTABLE_ERROR
    with pytest.raises(TransactionAbortableError, match="consumer group metadata mismatch"):
        result.wait(0)


def test_fenced_on_init_is_fatal_and_fails_every_later_call():
    txn = in_state(S.INITIALIZING)
    answer(txn, K.FIND_COORDINATOR)
    answer(txn, K.INIT_PRODUCER_ID, ErrorCode.PRODUCER_FENCED)
    assert txn.state is S.FATAL_ERROR
    with pytest.raises(ProducerFencedError):
        txn.begin_init()


@pytest.mark.parametrize(
    ("kind", "code", "action"),
    [
        (K.INIT_PRODUCER_ID, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, TxnAction.RETRY),
        (K.INIT_PRODUCER_ID, ErrorCode.NOT_COORDINATOR, TxnAction.LOOKUP),
        (K.INIT_PRODUCER_ID, ErrorCode.INVALID_PRODUCER_EPOCH, TxnAction.FENCED),
        (K.INIT_PRODUCER_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, TxnAction.FATAL),
        (K.ADD_PARTITIONS_TO_TXN, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, TxnAction.RETRY),
        (K.ADD_OFFSETS_TO_TXN, ErrorCode.UNKNOWN_PRODUCER_ID, TxnAction.ABORTABLE),
        (K.TXN_OFFSET_COMMIT, ErrorCode.FENCED_INSTANCE_ID, TxnAction.ABORTABLE),
        (K.END_TXN, ErrorCode.INVALID_TXN_STATE, TxnAction.FATAL),
        (K.END_TXN, ErrorCode.UNSUPPORTED_VERSION, TxnAction.FATAL),
        (K.END_TXN, ErrorCode.CONCURRENT_TRANSACTIONS, TxnAction.RETRY),
        (K.END_TXN, 9999, TxnAction.FATAL),
    ],
)
def test_error_action_table(kind, code, action):
    assert REQUEST_TYPES[kind].action(code) is action


def test_result_wait_raises_the_error_once_done():
    result = TransactionalRequestResult("commit_transaction")
    result.complete(ProducerFencedError("fenced"))
    result.complete(None)  # the first outcome wins
    with pytest.raises(ProducerFencedError):
        result.wait(0)
    assert result.acked


@pytest.mark.parametrize(
    "kind, code, raised",
    [
        (K.ADD_PARTITIONS_TO_TXN, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None),
        (K.TXN_OFFSET_COMMIT, ErrorCode.ILLEGAL_GENERATION, CommitFailedError),
    ],
)
def test_abortable_answer_while_aborting_is_ignored(kind, code, raised):
    """Kafka skips the move to ABORTABLE_ERROR when the transaction is already being aborted:
    the late answer fails its own request, and the abort goes on (issue 8)."""
    txn = in_state(S.IN_TRANSACTION)
    txn.maybe_add_partition(TP)
    answer(txn, K.ADD_PARTITIONS_TO_TXN)  # the transaction has started on the coordinator
    offsets_result = None
    if kind is K.ADD_PARTITIONS_TO_TXN:
        txn.maybe_add_partition(("out", 1))
    else:
        offsets_result = txn.send_offsets({("in", 0): OffsetAndMetadata(5)}, GROUP_META)
        answer(txn, K.ADD_OFFSETS_TO_TXN)
        answer(txn, K.FIND_COORDINATOR)
    request, _ = txn.next_request(NOW, False)
    assert request.kind is kind
    abort = txn.begin_abort()
    partitions = request.partitions if kind is K.ADD_PARTITIONS_TO_TXN else request.offsets
    txn.on_response(request, NOW, dict.fromkeys(partitions, int(code)))
    assert txn.state is S.ABORTING_TRANSACTION
    if raised is not None:
        with pytest.raises(raised):
            offsets_result.wait(0)
    answer(txn, K.END_TXN)
    abort.wait(0)
    assert txn.state is S.READY
    txn.begin_transaction()  # usable again


def test_abortable_answer_to_the_abort_itself_is_fatal():
    """The abort's own EndTxn failing with an abortable error leaves nothing to retry."""
    txn = in_state(S.IN_TRANSACTION)
    txn.maybe_add_partition(TP)
    answer(txn, K.ADD_PARTITIONS_TO_TXN)
    abort = txn.begin_abort()
    answer(txn, K.END_TXN, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    assert txn.state is S.FATAL_ERROR
    with pytest.raises(KafkaError):
        abort.wait(0)
