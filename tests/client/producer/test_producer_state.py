"""TransactionManager (pure idempotence state) and the state transition table, table-driven."""

from __future__ import annotations

import itertools

import pytest

from onceflow.client.producer.accumulator import ProducerBatch
from onceflow.client.producer.idempotence import (
    MAX_IN_FLIGHT_PER_PARTITION,
    PRODUCE_ERROR_ACTIONS,
    InitProducerIdPlan,
    ProduceAction,
    TransactionManager,
)
from onceflow.client.producer.states import (
    VALID_PREVIOUS,
    InvalidStateTransitionError,
    ProducerState,
    check_transition,
)
from onceflow.protocol.errors import ErrorCode

TP = ("t", 0)
S = ProducerState


def batch(records: int = 1, tp: tuple[str, int] = TP) -> ProducerBatch:
    b = ProducerBatch(tp, 0, 0)
    for i in range(records):
        b.builder.append(1000 + i, None, b"v")
        b.record_count += 1
    return b


def ready_manager(producer_id: int = 7, epoch: int = 0) -> TransactionManager:
    tm = TransactionManager()
    assert tm.prepare_init_producer_id() == InitProducerIdPlan(-1, -1)
    assert tm.complete_init_producer_id(ErrorCode.NONE, producer_id, epoch) is False
    return tm


def send(tm: TransactionManager, *batches: ProducerBatch) -> None:
    for b in batches:
        assert tm.may_send(b)
        tm.mark_sent(b)


def answer(tm: TransactionManager, b: ProducerBatch, code: ErrorCode):
    tm.mark_answered(b)
    return tm.handle_produce_error(b, code)


def warm(tm: TransactionManager, tp: tuple[str, int] = TP) -> None:
    """Send one 1-record batch to `tp` and acknowledge it (sequence 0), so that the
    partition's next batches may be pipelined."""
    first = batch(1, tp)
    send(tm, first)
    assert answer(tm, first, ErrorCode.NONE).action is ProduceAction.COMPLETE


# ---------------------------------------------------------------- transition table

KAFKA_TABLE = {
    S.UNINITIALIZED: {S.READY, S.ABORTABLE_ERROR},
    S.INITIALIZING: {S.UNINITIALIZED, S.ABORTING_TRANSACTION},
    S.READY: {S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION},
    S.IN_TRANSACTION: {S.READY},
    S.COMMITTING_TRANSACTION: {S.IN_TRANSACTION},
    S.ABORTING_TRANSACTION: {S.IN_TRANSACTION, S.ABORTABLE_ERROR},
    S.ABORTABLE_ERROR: {
        S.IN_TRANSACTION,
        S.COMMITTING_TRANSACTION,
        S.ABORTABLE_ERROR,
        S.INITIALIZING,
    },
    S.FATAL_ERROR: set(S),
}
# onceflow's one addition: a flushed transaction handed over to another instance that ends it
# (`hand_over_transaction`, two-phase commit; Kafka's KIP-939 adds a PREPARED_TRANSACTION
# state for the same purpose), after which the producer initialises again
ONCEFLOW_ADDED = {S.UNINITIALIZED: {S.IN_TRANSACTION}}


@pytest.mark.parametrize(("source", "target"), list(itertools.product(S, S)))
def test_every_transition_pair(source: ProducerState, target: ProducerState) -> None:
    if source in KAFKA_TABLE[target] | ONCEFLOW_ADDED.get(target, set()):
        check_transition(source, target)
    else:
        with pytest.raises(InvalidStateTransitionError, match=f"from state {source.name} to"):
            check_transition(source, target)


def test_table_covers_every_state() -> None:
    assert set(VALID_PREVIOUS) == set(S)


# ---------------------------------------------------------------- InitProducerId


def test_init_producer_id_lifecycle() -> None:
    tm = TransactionManager()
    assert tm.state is S.UNINITIALIZED and not tm.has_producer_id
    assert tm.prepare_init_producer_id() == InitProducerIdPlan(-1, -1)
    assert tm.state is S.INITIALIZING
    assert tm.prepare_init_producer_id() is None  # one request at a time
    assert tm.complete_init_producer_id(ErrorCode.NONE, 42, 3) is False
    assert (tm.state, tm.producer_id, tm.producer_epoch) == (S.READY, 42, 3)
    assert tm.prepare_init_producer_id() is None


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ],
)
def test_init_producer_id_retriable_errors(code: ErrorCode) -> None:
    tm = TransactionManager()
    tm.prepare_init_producer_id()
    assert tm.complete_init_producer_id(code) is True
    assert tm.state is S.INITIALIZING
    assert tm.prepare_init_producer_id() == InitProducerIdPlan(-1, -1)


@pytest.mark.parametrize(
    "code", [ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.UNSUPPORTED_VERSION]
)
def test_init_producer_id_fatal_errors(code: ErrorCode) -> None:
    tm = TransactionManager()
    tm.prepare_init_producer_id()
    assert tm.complete_init_producer_id(code) is False
    assert tm.is_fatal and tm.last_error.code == code


def test_no_send_before_producer_id() -> None:
    tm = TransactionManager()
    assert not tm.may_send(batch())
    tm.prepare_init_producer_id()
    assert not tm.may_send(batch())


# ---------------------------------------------------------------- sequences


def test_sequences_count_records_per_partition() -> None:
    tm = ready_manager()
    a, b, c = batch(3), batch(2), batch(1, ("t", 1))
    send(tm, a, c)
    answer(tm, a, ErrorCode.NONE)
    send(tm, b)
    assert (a.base_sequence, b.base_sequence, c.base_sequence) == (0, 3, 0)
    assert (a.producer_id, a.producer_epoch) == (7, 0)


def test_sequence_wraps_to_zero_never_negative() -> None:
    tm = ready_manager()
    tm.entry(TP).next_sequence = 2**31 - 2
    a, b = batch(3), batch(1)
    send(tm, a)
    assert a.base_sequence == 2**31 - 2
    assert a.last_sequence == 0
    assert answer(tm, a, ErrorCode.NONE).action is ProduceAction.COMPLETE
    send(tm, b)
    assert b.base_sequence == 1
    assert answer(tm, b, ErrorCode.NONE).action is ProduceAction.COMPLETE


def test_at_most_five_batches_in_flight_per_partition() -> None:
    tm = ready_manager()
    warm(tm)
    batches = [batch() for _ in range(MAX_IN_FLIGHT_PER_PARTITION)]
    send(tm, *batches)
    assert not tm.may_send(batch())
    assert tm.may_send(batch(1, ("t", 1)))  # other partitions are independent
    answer(tm, batches[0], ErrorCode.NONE)
    assert tm.may_send(batch())


def test_first_batch_of_a_partition_and_epoch_goes_alone() -> None:
    """A Kafka broker takes any sequence as a producer's first on a partition: a second batch
    pipelined behind an unacknowledged first could be written before the first's retry."""
    tm = ready_manager()
    first, second = batch(2), batch(1)
    send(tm, first)
    assert not tm.may_send(second)
    assert tm.may_send(batch(1, ("t", 1)))  # other partitions are independent
    assert answer(tm, first, ErrorCode.NOT_LEADER_OR_FOLLOWER).action is ProduceAction.RETRY
    assert not tm.may_send(second)
    assert tm.may_send(first)  # the retry goes, still alone
    tm.mark_sent(first)
    assert not tm.may_send(second)
    assert answer(tm, first, ErrorCode.NONE).action is ProduceAction.COMPLETE
    send(tm, second, batch(1), batch(1))  # acknowledged: pipelining resumes
    assert second.base_sequence == 2
    for b in tm.unresolved(TP):
        answer(tm, b, ErrorCode.NONE)
    # after an epoch bump the broker meets the new epoch first: alone again
    failing = batch(1)
    send(tm, failing)
    answer(tm, failing, ErrorCode.UNKNOWN_PRODUCER_ID)
    assert tm.prepare_init_producer_id() == InitProducerIdPlan(7, 0)
    tm.complete_init_producer_id(ErrorCode.NONE, 7, 1)
    assert tm.may_send(failing) and failing.base_sequence == 0
    tm.mark_sent(failing)
    assert not tm.may_send(batch(1))


# ---------------------------------------------------------------- produce error table


@pytest.mark.parametrize(
    ("code", "action"),
    [
        (ErrorCode.NONE, ProduceAction.COMPLETE),
        (ErrorCode.DUPLICATE_SEQUENCE_NUMBER, ProduceAction.COMPLETE),
        (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ProduceAction.FAIL_WITH_FOLLOWERS),
        (ErrorCode.UNKNOWN_PRODUCER_ID, ProduceAction.RETRY_AFTER_BUMP),
        (ErrorCode.INVALID_PRODUCER_EPOCH, ProduceAction.RETRY_AFTER_BUMP),
        (ErrorCode.PRODUCER_FENCED, ProduceAction.FATAL),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, ProduceAction.RETRY),
        (ErrorCode.REQUEST_TIMED_OUT, ProduceAction.RETRY),
        (ErrorCode.NOT_ENOUGH_REPLICAS, ProduceAction.RETRY),
        (ErrorCode.MESSAGE_TOO_LARGE, ProduceAction.FAIL),
        (ErrorCode.INVALID_RECORD, ProduceAction.FAIL),
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ProduceAction.FAIL),
    ],
)
def test_first_batch_error_actions(code: ErrorCode, action: ProduceAction) -> None:
    tm = ready_manager()
    b = batch()
    send(tm, b)
    decision = answer(tm, b, code)
    assert decision.action is action
    expect_bump = action in (
        ProduceAction.RETRY_AFTER_BUMP,
        ProduceAction.FAIL_WITH_FOLLOWERS,
        ProduceAction.FAIL,
    )
    assert tm.epoch_bump_required is expect_bump


def test_table_keys_are_error_codes() -> None:
    assert all(isinstance(code, ErrorCode) for code in PRODUCE_ERROR_ACTIONS)


def test_retry_keeps_order_and_sequence() -> None:
    tm = ready_manager()
    warm(tm)
    batches = [batch(2) for _ in range(3)]
    send(tm, *batches)
    first, second, third = batches
    # the first fails retriably; those behind it see a gap at the broker
    assert answer(tm, first, ErrorCode.NOT_LEADER_OR_FOLLOWER).action is ProduceAction.RETRY
    assert answer(tm, second, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER).action is ProduceAction.RETRY
    assert answer(tm, third, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER).action is ProduceAction.RETRY
    assert not tm.epoch_bump_required
    # new batches must not overtake the retries; the retries go one by one, lowest first
    assert not tm.may_send(batch())
    assert not tm.may_send(second)
    assert tm.may_send(first)
    tm.mark_sent(first)
    assert not tm.may_send(second)
    assert answer(tm, first, ErrorCode.NONE).action is ProduceAction.COMPLETE
    assert tm.may_send(second)
    tm.mark_sent(second)
    assert answer(tm, second, ErrorCode.NONE).action is ProduceAction.COMPLETE
    assert [b.base_sequence for b in batches] == [1, 3, 5]


def test_out_of_order_in_sequence_fails_batch_and_followers() -> None:
    tm = ready_manager()
    batches = [batch() for _ in range(4)]
    send(tm, batches[0])
    assert answer(tm, batches[0], ErrorCode.NONE).action is ProduceAction.COMPLETE
    send(tm, *batches[1:])
    decision = answer(tm, batches[1], ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert decision.action is ProduceAction.FAIL_WITH_FOLLOWERS
    assert decision.failed == tuple(batches[1:])
    assert tm.epoch_bump_required
    for b in batches[1:]:
        b.result.complete(-1, -1, RuntimeError("failed"))
    # late answers for the followers are ignored
    assert (
        answer(tm, batches[2], ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER).action
        is ProduceAction.IGNORE
    )
    assert tm.unresolved(TP) == ()


def test_duplicate_sequence_is_success() -> None:
    tm = ready_manager()
    b = batch(3)
    send(tm, b)
    assert answer(tm, b, ErrorCode.DUPLICATE_SEQUENCE_NUMBER).action is ProduceAction.COMPLETE
    assert tm.entry(TP).last_acked_sequence == 2


# ---------------------------------------------------------------- epoch bump (KIP-360)


def test_epoch_bump_waits_until_nothing_is_outstanding() -> None:
    tm = ready_manager(producer_id=7, epoch=4)
    warm(tm)
    a, b, other = batch(2), batch(3), batch(1, ("t", 1))
    send(tm, a, b, other)
    assert answer(tm, a, ErrorCode.UNKNOWN_PRODUCER_ID).action is ProduceAction.RETRY_AFTER_BUMP
    assert tm.prepare_init_producer_id() is None  # b and other still outstanding
    assert not tm.may_send(batch(1, ("t", 2)))  # nothing new goes out meanwhile
    assert answer(tm, b, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER).action is ProduceAction.RETRY
    assert tm.prepare_init_producer_id() is None
    assert answer(tm, other, ErrorCode.NONE).action is ProduceAction.COMPLETE
    assert tm.prepare_init_producer_id() == InitProducerIdPlan(7, 4)
    assert tm.state is S.INITIALIZING
    assert tm.complete_init_producer_id(ErrorCode.NONE, 7, 5) is False
    # sequences restart at 0 under the new epoch, the waiting batches in their old order
    assert (a.base_sequence, a.producer_epoch) == (0, 5)
    assert (b.base_sequence, b.producer_epoch) == (2, 5)
    assert not tm.epoch_bump_required
    assert tm.may_send(a)
    nxt = batch(1, ("t", 1))
    tm.mark_sent(a)
    assert tm.may_send(nxt) and nxt.base_sequence == 0


def test_epoch_bump_at_max_epoch_asks_for_a_new_id() -> None:
    tm = ready_manager(epoch=32767)
    b = batch()
    send(tm, b)
    answer(tm, b, ErrorCode.INVALID_PRODUCER_EPOCH)
    assert tm.prepare_init_producer_id() == InitProducerIdPlan(-1, -1)


def test_failed_batch_requests_bump_and_followers_are_resequenced() -> None:
    tm = ready_manager()
    warm(tm)
    a, b = batch(2), batch(2)
    send(tm, a, b)
    assert answer(tm, a, ErrorCode.INVALID_RECORD).action is ProduceAction.FAIL
    assert answer(tm, b, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER).action is ProduceAction.RETRY
    assert tm.prepare_init_producer_id() == InitProducerIdPlan(7, 0)
    tm.complete_init_producer_id(ErrorCode.NONE, 8, 0)
    assert (b.producer_id, b.base_sequence) == (8, 0)


def test_fatal_blocks_everything() -> None:
    tm = ready_manager()
    tm.transition_to_fatal(RuntimeError("fenced"))
    assert tm.is_fatal
    assert not tm.may_send(batch())
    assert tm.prepare_init_producer_id() is None
